#!/usr/bin/env python3
"""`vitrt everything` against the reference SamAutomaticMaskGenerator (segment_anything 1.0 with
PyTorch on the CPU), same model, same image, same options, one run on this machine.

    /work/pyref/bin/python bench/amg_cpu_vs_reference.py --vitrt build/bin/vitrt \
        [--model vit_b] [--image tests/fixtures/sam/images/large.png] [--threads 2] \
        [--points-per-side 32] [--pred-iou-thresh 0.88] [--stability-score-thresh 0.95] [--repeat 1]

The model is the official architecture with seeded random weights (perturbed like the SAM
fixtures so that masks are not all noise), written once as a .pth to --work and loaded by both.
With random weights the default thresholds (0.88 / 0.95) keep almost nothing; that favours vitrt,
which never upscales a mask that fails the predicted-IoU filter, while the reference upscales
every mask. So by default both filters are OFF (0): every one of the 3 * points masks is
upscaled, scored, thresholded and encoded by both, the reference's full cost and vitrt's worst
case. Times are for generate() alone (image in, records out: the encoder is included, loading
the checkpoint is not); vitrt's comes from the timings in its JSON output.
Also checks that both give the same records (count, RLE strings, boxes).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from make_sam_fixtures import load_rgb, perturb_parameters  # noqa: E402

from segment_anything import SamAutomaticMaskGenerator, sam_model_registry  # noqa: E402


def make_checkpoint(model: str, path: str, seed: int = 5):
    torch.manual_seed(seed)
    sam = sam_model_registry[model](checkpoint=None)
    perturb_parameters(sam)
    sam.eval()
    if not os.path.exists(path):
        torch.save(sam.state_dict(), path)
    return sam


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vitrt", default=os.path.join(ROOT, "build", "bin", "vitrt"))
    ap.add_argument("--model", default="vit_b", choices=["vit_b", "vit_l", "vit_h"])
    ap.add_argument("--image", default=os.path.join(ROOT, "tests", "fixtures", "sam", "images", "large.png"))
    ap.add_argument("--work", default="/tmp/vitrt_amg_bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--points-per-side", type=int, default=32)
    ap.add_argument("--pred-iou-thresh", type=float, default=0.0)
    ap.add_argument("--stability-score-thresh", type=float, default=0.0)
    ap.add_argument("--box-nms-thresh", type=float, default=0.7)
    ap.add_argument("--crop-n-layers", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the best time is reported")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(args.threads)
    ckpt = os.path.join(args.work, f"{args.model}_random.pth")
    sam = make_checkpoint(args.model, ckpt)
    image = load_rgb(args.image)
    opts = dict(points_per_side=args.points_per_side, pred_iou_thresh=args.pred_iou_thresh,
                stability_score_thresh=args.stability_score_thresh, box_nms_thresh=args.box_nms_thresh,
                crop_n_layers=args.crop_n_layers)
    print(f"model {args.model} (random, seeded), image {args.image} {image.shape[1]}x{image.shape[0]}, "
          f"{args.threads} threads, options {opts}")

    # vitrt
    out_dir = os.path.join(args.work, "vitrt_out")
    cmd = [args.vitrt, "everything", "--checkpoint", ckpt, "--image", args.image, "--out", out_dir, "-q",
           "--no-overlay", "--points-per-side", str(args.points_per_side),
           "--pred-iou-thresh", str(args.pred_iou_thresh),
           "--stability-score-thresh", str(args.stability_score_thresh),
           "--box-nms-thresh", str(args.box_nms_thresh), "--crop-n-layers", str(args.crop_n_layers)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    vt = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        with open(os.path.join(out_dir, os.path.splitext(os.path.basename(args.image))[0] + ".json")) as f:
            res = json.load(f)
        vt.append(res["timings"]["generate_ms"] / 1000)
        print(f"vitrt:     generate {vt[-1]:.2f} s (process wall incl. checkpoint load {wall:.2f} s); "
              f"stages {json.dumps({k: round(v) for k, v in res['timings'].items()})}")
    ours = res["annotations"]

    # reference
    gen = SamAutomaticMaskGenerator(sam, output_mode="coco_rle", **opts)
    rt = []
    with torch.no_grad():
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ref = gen.generate(image)
            rt.append(time.perf_counter() - t0)
            print(f"reference: generate {rt[-1]:.2f} s")

    same = len(ours) == len(ref)
    identical = 0
    if same:
        for a, b in zip(ours, ref):
            identical += a["segmentation"]["counts"] == b["segmentation"]["counts"] and a["bbox"] == b["bbox"]
    print(f"records: vitrt {len(ours)}, reference {len(ref)}; identical (same order, RLE and bbox): {identical}")
    print(f"RESULT {args.model} pps {args.points_per_side}: vitrt {min(vt):.2f} s, reference {min(rt):.2f} s, "
          f"speed-up x{min(rt) / min(vt):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
