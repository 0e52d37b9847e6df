#!/usr/bin/env python3
"""PyTorch's own ViT-B/16 (torchvision.models.vit_b_16, random weights) on the GPU, dense, eager and
torch.compile'd, timed the way `vitrt bench --model vit_b_16` times vitrt's (issue 4: the sparse model
must be ahead of PyTorch's dense compiled model in the same run). Median of --iters batches after
warm-up, CUDA events, TF32 off. Prints `RESULT {json}` per mode.

Usage on the GPU machine: python3 bench/vit_reference.py --batch 256 --dtype bf16 --compile default
"""
import argparse
import json
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--compile", default="default", help="torch.compile mode, or 'none' for eager only")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    try:
        from torchvision.models import vit_b_16
    except ImportError as e:  # the GPU image may lack torchvision
        print(f"RESULT {json.dumps({'error': f'torchvision not available: {e}'})}")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = vit_b_16().to(dt).cuda().eval()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=dt)
    modes = [("eager", model)]
    if a.compile != "none":
        modes.append((f"compiled-{a.compile}", torch.compile(model, mode=a.compile)))
    for name, m in modes:
        with torch.no_grad():
            t0 = time.time()
            for _ in range(3):
                m(x)
            torch.cuda.synchronize()
            warm = time.time() - t0
            ts = []
            for _ in range(a.iters):
                s = torch.cuda.Event(enable_timing=True)
                e = torch.cuda.Event(enable_timing=True)
                s.record()
                m(x)
                e.record()
                torch.cuda.synchronize()
                ts.append(s.elapsed_time(e))
        ts.sort()
        med = ts[len(ts) // 2]
        print("RESULT " + json.dumps(dict(impl="torchvision vit_b_16", mode=name, dtype=a.dtype, batch=a.batch,
                                          ms_per_batch=round(med, 3), images_per_s=round(a.batch * 1e3 / med, 1),
                                          warmup_s=round(warm, 1))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
