#!/usr/bin/env python3
"""segment-anything-fast's SamAutomaticMaskGenerator on the GPU, timed the way `vitrt everything
--bench` times vitrt's (issue 5: vitrt must be 5x faster in the same run).

Random weights (rel-pos and pos-embed ~ N(0, 0.02), as ../shared/anchor/bench_sam_pytorch.py does),
the whole model in bf16 (the predictor casts its input to the model's dtype), a random uint8 image of
the given size, default generator settings (32x32 grid, no crops, points_per_batch 64), one warm-up
run then --runs timed runs with the GPU synchronised. Prints one line `RESULT {json}`.

The packages come from ANCHOR_DIR (default .anchors): segment_anything_fast/ and orig/segment_anything/,
exported from fetched snapshots of pytorch-labs/segment-anything-fast and facebookresearch/segment-anything
(never committed). Usage on the GPU machine:
    python3 bench/amg_gpu_reference.py --model vit_h --size 640x480 --runs 5
"""
import argparse
import json
import sys
import time

import numpy as np
import torch

from sam_reference_model import build_sam_fast  # noqa: E402  (bench/, next to this script)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="vit_h", choices=["vit_b", "vit_l", "vit_h"])
    ap.add_argument("--size", default="640x480", help="WIDTHxHEIGHT of the random image")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--points-per-batch", type=int, default=64)
    a = ap.parse_args()
    from segment_anything_fast import SamAutomaticMaskGenerator

    sam = build_sam_fast(a.model, a.dtype)
    gen = SamAutomaticMaskGenerator(sam, points_per_batch=a.points_per_batch)
    w, h = (int(v) for v in a.size.lower().split("x"))
    image = np.random.default_rng(7).integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    with torch.no_grad():
        t0 = time.time()
        masks = gen.generate(image)
        torch.cuda.synchronize()
        warm = time.time() - t0
        times = []
        for _ in range(a.runs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            masks = gen.generate(image)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print("RESULT " + json.dumps(dict(impl="segment-anything-fast", model=a.model, dtype=a.dtype, size=a.size,
                                      points_per_side=32, masks=len(masks), median_ms=round(times[len(times) // 2], 2),
                                      min_ms=round(times[0], 2), warmup_s=round(warm, 1))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
