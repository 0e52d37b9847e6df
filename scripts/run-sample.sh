#!/usr/bin/env bash
# Sets up, builds and runs the main job: `vitrt segment` on a sample photo (scikit-image's
# astronaut, from Debian's python3-skimage) with one foreground point, writing to ./out/sample.
# Uses the checkpoint in $VITRT_CHECKPOINT (e.g. sam_vit_b_01ec64.pth) when set; otherwise a tiny
# model from the test fixtures whose weights are UNTRAINED (random), so its masks mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
[ -f "$photo" ] || { echo "sample photo $photo missing (python3-skimage)"; exit 1; }
if [ -n "${VITRT_CHECKPOINT:-}" ]; then
  ckpt="$VITRT_CHECKPOINT"
  echo "[vitrt] checkpoint: $ckpt"
else
  ckpt=tests/fixtures/sam/tiny1024.pth
  echo "[vitrt] VITRT_CHECKPOINT is not set: using $ckpt, a tiny test model with UNTRAINED random weights."
  echo "[vitrt] Its masks are not meaningful. Set VITRT_CHECKPOINT=/path/to/sam_vit_b_01ec64.pth for real masks."
fi
build/bin/vitrt segment --checkpoint "$ckpt" --image "$photo" --point 250,150 --out out/sample
echo "[vitrt] see out/sample/overlay.png and out/sample/result.json"
