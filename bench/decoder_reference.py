#!/usr/bin/env python3
"""segment-anything-fast's batched prompt path on the GPU (issue 3's decoder comparison): one image,
N single-point prompts decoded together through SamPredictor.predict_torch (prompt encoder, mask
decoder, upscaling of the masks to the image size, thresholded), as vitrt's `bench` times
SamPredictor::predict_batch for 1, 16 and 64 prompts. The reference's masks stay on the GPU (vitrt's
are copied to the host, which only favours the reference). Random weights as
../shared/anchor/bench_sam_pytorch.py; a random 1024x1024 image; prompts at the same points vitrt's
bench uses ((97 i) mod 1024, (61 i) mod 1024). Prints `RESULT {json}` with ms per prompt.

Usage on the GPU machine: ANCHOR_DIR=.anchors python3 bench/decoder_reference.py --model vit_b
"""
import argparse
import json
import sys

import numpy as np
import torch

from sam_reference_model import build_sam_fast  # noqa: E402  (bench/, next to this script)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="vit_b", choices=["vit_b", "vit_l", "vit_h"])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    from segment_anything_fast import SamPredictor

    sam = build_sam_fast(a.model, a.dtype)
    pred = SamPredictor(sam)
    image = np.random.default_rng(7).integers(0, 256, size=(1024, 1024, 3), dtype=np.uint8)
    out = dict(impl="segment-anything-fast", model=a.model, dtype=a.dtype, decoder_ms_per_prompt={})
    with torch.no_grad():
        pred.set_image(image)
        for n in (1, 16, 64):
            pts = torch.tensor([[[float((i * 97) % 1024), float((i * 61) % 1024)]] for i in range(n)], device="cuda")
            pts = pred.transform.apply_coords_torch(pts, (1024, 1024))
            lab = torch.ones(n, 1, dtype=torch.int, device="cuda")
            times = []
            for r in range(a.iters + 1):  # the first is a warm-up
                s = torch.cuda.Event(enable_timing=True)
                e = torch.cuda.Event(enable_timing=True)
                s.record()
                masks, iou, low = pred.predict_torch(pts, lab, multimask_output=True)
                e.record()
                torch.cuda.synchronize()
                if r:
                    times.append(s.elapsed_time(e))
            times.sort()
            out["decoder_ms_per_prompt"][str(n)] = round(times[len(times) // 2] / n, 4)
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
