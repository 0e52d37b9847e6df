#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds vitrt into ./build (Release).
# The CUDA backend is compiled too when nvcc is found (on PATH or in /usr/local/cuda/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${VITRT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
echo "[vitrt] built build/bin/vitrt"
