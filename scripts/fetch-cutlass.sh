#!/usr/bin/env bash
# CUTLASS / CuTe headers for the CUDA build (src/ops/cuda/gemm_cutlass.cu), from PyPI's
# nvidia-cutlass wheel (header-only use, no Python dependencies): the wheel goes to .deps/ (so that
# it travels to the GPU machine, which has no internet) and its headers to .cutlass/, where
# CMake looks (VITRT_CUTLASS_DIR). Idempotent; offline once the wheel is in .deps/. The wheel's
# sha256 is pinned here and checked before anything is extracted.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=4.2.0.0
SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
WHEEL=.deps/nvidia_cutlass-$VERSION-py3-none-any.whl
mkdir -p .deps
[ -f .cutlass/include/cutlass/cutlass.h ] && [ -f .cutlass/util/include/cutlass/util/packed_stride.hpp ] && exit 0
if [ ! -f "$WHEEL" ]; then
  # pip (with the sha256 pinned) from the system Python, or from a throwaway venv where Debian's
  # Python has no pip module.
  PIP="python3 -m pip"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv .deps/pip-venv && PIP=.deps/pip-venv/bin/pip
  fi
  echo "nvidia-cutlass==$VERSION --hash=sha256:$SHA256" > .deps/cutlass-requirement.txt
  $PIP download -q --no-deps --require-hashes -r .deps/cutlass-requirement.txt -d .deps
fi
echo "$SHA256  $WHEEL" | sha256sum -c --quiet
python3 - "$WHEEL" <<'PY'
import os, sys, zipfile
wheel = sys.argv[1]
parts = {"cutlass_library/source/include/": ".cutlass/include/",
         "cutlass_library/source/tools/util/include/": ".cutlass/util/include/"}
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        for src, dst in parts.items():
            if name.startswith(src) and not name.endswith("/"):
                rel = name[len(src):]
                if rel.startswith("/") or ".." in rel.split("/"):
                    sys.exit("fetch-cutlass: unexpected path in the wheel: " + name)
                out = os.path.join(dst, rel)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with z.open(name) as fi, open(out, "wb") as fo:
                    fo.write(fi.read())
print("[vitrt] CUTLASS headers in .cutlass")
PY
