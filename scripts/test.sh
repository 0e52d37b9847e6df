#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (labels: unit, fidelity, badinput, gpu).
# GPU tests report themselves as skipped on machines without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
