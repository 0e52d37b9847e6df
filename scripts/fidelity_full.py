#!/usr/bin/env python3
"""Full-size SAM fidelity: official vit_b / vit_l / vit_h vs. vitrt, on seeded weights.

No real checkpoint needed: each model is built by the OFFICIAL builder
(segment_anything.sam_model_registry[<model>](checkpoint=None)) right after
torch.manual_seed(0), then perturbed exactly like the small fixtures of
scripts/make_sam_fixtures.py (pos_embed, rel_pos_h/rel_pos_w ~ N(0, 0.02); every LayerNorm
weight 1 + N(0, 0.1), bias N(0, 0.1); last hypernetwork layer of the mask decoder x80 so mask
logits are O(1)). The state dict is saved as a real .pth (what vitrt's loader reads), the official
SamPredictor is run on skimage sample photos with a set of prompt cases, and its outputs are saved
in the same out_*.pth format as tests/fixtures/sam (see tests/fixtures/sam/README.md).
If a vitrt CLI is given, it then runs, for every reference file,

    <vitrt> fidelity-check --checkpoint <dir>/sam_<model>.pth --reference <dir>/out_<model>_<image>.pth \\
            --image <dir>/images/<image>.png [--vitrt-arg ...]

which prints one JSON object of error metrics on stdout, and prints a table of them. Any nesting
works: every numeric or boolean leaf becomes one row, list items are labelled by their "case" or
"name" field, e.g. {"resized_identical": true, "embedding_rel": 1e-6, "cases": [{"case": "box",
"iou_rel": 1e-6, "low_res_rel": 3e-6, "mask_mismatch": 0, ...}], "pass": true} gives rows
resized_identical, embedding_rel, cases.box.iou_rel, ... A non-zero exit of the CLI is reported
(its JSON is still shown).

Usage (needs torch, numpy, Pillow, torchvision, segment-anything==1.0, e.g. /work/pyref):

    # references only, on the GPU (fp32, TF32 off), all three models
    python scripts/fidelity_full.py --out /tmp/samfid --device cuda
    # one model on the CPU (vit_b: ~1 min per image on 2 cores; vit_h is ~8x slower)
    python scripts/fidelity_full.py --out /tmp/samfid --models vit_b --device cpu
    # segment_anything not installed (e.g. the GPU box): point at a folder holding the package
    python scripts/fidelity_full.py --out /tmp/samfid --device cuda --sam-src /path/to/site-packages \\
        --skimage-data /folder/holding/astronaut.png,chelsea.png,coffee.png
    # then (or in one go) compare vitrt against the saved references
    python scripts/fidelity_full.py --out /tmp/samfid --models vit_b --check-only \\
        --vitrt build/bin/vitrt [--vitrt-arg=--tol --vitrt-arg=1e-3] [--max-rel-err 1e-3]

Files written to --out:
    sam_<model>.pth                official-format state dict (vit_h: ~2.5 GB)
    images/<image>.png             the photos used (copied from skimage's data folder)
    out_<model>_<image>.pth        the reference outputs: the keys of tests/fixtures/sam/out_*.pth
                                   (embedding, input_size, original_size, resized_fnv1a64,
                                   resized_image, <case>.*) plus "image", the original RGB image
                                   uint8 [H, W, 3], so the reference file alone is enough
    fidelity_<model>.json          the CLI's JSON per image (only with --vitrt)

Exit status: 0; 1 if the CLI failed or a metric whose name contains "rel" exceeds --max-rel-err.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import numpy as np  # noqa: E402
import torch  # noqa: E402

def _pre_parse_sam_src() -> None:
    """--sam-src DIR: a folder holding the segment_anything package (when it is not installed)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--sam-src")
    known, _ = pre.parse_known_args()
    if known.sam_src:
        sys.path.insert(0, os.path.abspath(known.sam_src))


_pre_parse_sam_src()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_sam_fixtures as fx  # noqa: E402
from segment_anything import SamPredictor, sam_model_registry  # noqa: E402

MODELS = ["vit_b", "vit_l", "vit_h"]
IMAGES = ["astronaut", "chelsea", "coffee"]
CASES = fx.ALL_CASES  # one_point, points_neg, box, box_points, mask_input, *_single


def default_skimage_dir() -> str:
    try:
        import skimage.data  # type: ignore

        return os.path.dirname(skimage.data.__file__)
    except Exception:
        return "/usr/lib/python3/dist-packages/skimage/data"


def build_reference(model: str, out_dir: str, device: str, images: Dict[str, np.ndarray],
                    save_checkpoint: bool = True) -> None:
    torch.manual_seed(0)
    sam = sam_model_registry[model](checkpoint=None)
    fx.perturb_parameters(sam)
    sam.eval()
    ckpt = os.path.join(out_dir, f"sam_{model}.pth")
    if save_checkpoint:
        t = time.time()
        torch.save(sam.state_dict(), ckpt)
        print(f"[{model}] saved {ckpt} ({os.path.getsize(ckpt) / 2**20:.0f} MiB, "
              f"{time.time() - t:.1f}s)")
    sam.to(device)
    predictor = SamPredictor(sam)
    for name, img in images.items():
        t = time.time()
        cases = fx.prompt_cases(img.shape[0], img.shape[1], CASES)
        out = fx.run_predictor_cases(predictor, img, cases, store_resized_image=True,
                                     verbose=True, tag=f"{model}/{name} ")
        out["image"] = torch.from_numpy(np.ascontiguousarray(img).copy())
        path = os.path.join(out_dir, f"out_{model}_{name}.pth")
        torch.save(out, path)
        print(f"[{model}] {name}: {path} ({time.time() - t:.1f}s)")
    del predictor, sam
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def flatten(obj, prefix: str = "") -> List[Tuple[str, float]]:
    rows: List[Tuple[str, float]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            rows += flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            label = f"[{i}]"
            if isinstance(v, dict):
                tag = v.get("case", v.get("name"))
                if isinstance(tag, str):
                    label = f".{tag}"
                    v = {k: x for k, x in v.items() if k not in ("case", "name")}
            rows += flatten(v, f"{prefix}{label}")
    elif isinstance(obj, bool):
        rows.append((prefix, float(obj)))
    elif isinstance(obj, (int, float)):
        rows.append((prefix, float(obj)))
    return rows


def run_check(vitrt: str, extra: List[str], model: str, out_dir: str, image_names: List[str],
              max_rel: Optional[float], timeout: int) -> bool:
    ckpt = os.path.join(out_dir, f"sam_{model}.pth")
    ok = True
    results = {}
    for name in image_names:
        ref = os.path.join(out_dir, f"out_{model}_{name}.pth")
        image = os.path.join(out_dir, "images", f"{name}.png")
        cmd = [vitrt, "fidelity-check", "--checkpoint", ckpt, "--reference", ref,
               "--image", image] + extra
        t = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"  {model}/{name}: could not run {' '.join(cmd)}: {e}")
            ok = False
            continue
        dt = time.time() - t
        if p.returncode != 0:
            print(f"  {model}/{name}: exit {p.returncode} after {dt:.1f}s\n{p.stderr.strip()[-2000:]}")
            ok = False
        try:
            data = json.loads(p.stdout)
        except json.JSONDecodeError:
            print(f"  {model}/{name}: no JSON on stdout:\n{p.stdout.strip()[-2000:]}")
            ok = False
            continue
        results[name] = data
        rows = flatten(data)
        print(f"\n== {model} / {name}  ({dt:.1f}s)")
        width = max([len(k) for k, _ in rows] + [6])
        print(f"  {'metric':<{width}}  value")
        for k, v in rows:
            flag = ""
            if max_rel is not None and "rel" in k.lower() and not (v <= max_rel):
                flag = f"   > {max_rel:g}"
                ok = False
            print(f"  {k:<{width}}  {v:.3e}{flag}" if v != int(v) or abs(v) >= 1e6 else
                  f"  {k:<{width}}  {int(v)}{flag}")
    with open(os.path.join(out_dir, f"fidelity_{model}.json"), "w") as f:
        json.dump(results, f, indent=2)
    # summary: worst value of each metric over the images
    worst: Dict[str, float] = {}
    for data in results.values():
        for k, v in flatten(data):
            worst[k] = max(worst.get(k, -np.inf), v)
    if worst:
        print(f"\n== {model}: worst over {len(results)} image(s)")
        width = max(len(k) for k in worst)
        for k, v in worst.items():
            print(f"  {k:<{width}}  {v:.3e}" if v != int(v) or abs(v) >= 1e6 else
                  f"  {k:<{width}}  {int(v)}")
    return ok


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (checkpoints, references)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of vit_b,vit_l,vit_h")
    ap.add_argument("--images", default=",".join(IMAGES),
                    help="comma list of skimage sample names (astronaut,chelsea,coffee)")
    ap.add_argument("--skimage-data", default=default_skimage_dir(),
                    help="folder holding the skimage sample PNGs")
    ap.add_argument("--device", default="cpu", help="torch device of the reference: cpu | cuda")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: default)")
    ap.add_argument("--check-only", action="store_true",
                    help="skip the reference; use the files already in --out")
    ap.add_argument("--no-save-checkpoint", action="store_true",
                    help="do not (re)write sam_<model>.pth (it must exist for --vitrt)")
    ap.add_argument("--vitrt", help="path of the vitrt CLI; runs its fidelity-check per reference")
    ap.add_argument("--vitrt-arg", action="append", default=[],
                    help="extra argument appended to the fidelity-check command (repeatable)")
    ap.add_argument("--max-rel-err", type=float, default=None,
                    help="fail when a metric named *rel* exceeds this")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per CLI call")
    ap.add_argument("--sam-src", help="folder that holds the segment_anything package, when it "
                    "is not installed (put on sys.path before importing it)")
    args = ap.parse_args(argv)

    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    image_names = [i for i in args.images.split(",") if i]
    out_dir = os.path.abspath(args.out)
    os.makedirs(os.path.join(out_dir, "images"), exist_ok=True)

    if not args.check_only:
        fx.setup_determinism(args.threads if args.threads > 0 else torch.get_num_threads())
        torch.use_deterministic_algorithms(True, warn_only=True)
        if args.device.startswith("cuda"):
            assert torch.cuda.is_available(), "--device cuda but torch sees no GPU"
            print(f"reference on {torch.cuda.get_device_name()} fp32, TF32 off")
        images = {}
        for name in image_names:
            src = os.path.join(args.skimage_data, f"{name}.png")
            dst = os.path.join(out_dir, "images", f"{name}.png")
            shutil.copyfile(src, dst)
            images[name] = fx.load_rgb(dst)
        print("torch", torch.__version__, "| images:",
              ", ".join(f"{n} {im.shape[1]}x{im.shape[0]}" for n, im in images.items()))
        for m in models:
            build_reference(m, out_dir, args.device, images,
                            save_checkpoint=not args.no_save_checkpoint)

    ok = True
    if args.vitrt:
        for m in models:
            ok = run_check(args.vitrt, args.vitrt_arg, m, out_dir, image_names,
                           args.max_rel_err, args.timeout) and ok
    else:
        print("\n(no --vitrt given: references only. To compare, rerun with --check-only "
              "--vitrt <path to vitrt>)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
