#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (labels: unit, fidelity, badinput, gpu).
# Also the labels server and browser, and then the Python package's tests (pytest).
# GPU tests report themselves as skipped on machines without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# The Python package (`pip install .`, nanobind) in build/venv, with pytest and the browser
# test's Selenium; CUDA off there to keep the second build short (the CLI build has it).
python3 -m venv build/venv
build/venv/bin/pip install -q numpy pytest selenium
build/venv/bin/pip install -q . -Ccmake.define.VITRT_WITH_CUDA=OFF
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
cd ..
VITRT_CLI="$PWD/build/bin/vitrt" build/venv/bin/python -m pytest -q python/tests bench/tests scripts/tests tests/protocol
