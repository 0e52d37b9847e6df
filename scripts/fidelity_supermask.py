#!/usr/bin/env python3
"""Full-size ViT-B/16 with SuperBlock's Supermask: SuperBlock's own model vs. `vitrt sparsify
--supermask` + `vitrt classify`, seeded weights.

The small fixtures (scripts/make_supermask_fixtures.py) check the fold bit for bit; this runs the
whole path at full size, as a user would: torchvision's vit_b_16 (seeded and perturbed like
scripts/fidelity_vit.py) given SuperBlock's Supermask linears (its own supermask.py,
apply_supermask at --sparsity in --tile tiles, random scores), converted to bfloat16 as SuperBlock's
train.py does, saved in train.py's checkpoint format (model, epoch, args as an argparse.Namespace),
packed by `vitrt sparsify --supermask` (sparsity and tile read from the args) and classified by
`vitrt classify --json --logits` on synthetic photo-like images of several sizes. The reference is
SuperBlock's model with its masks folded by its own sparsify_offline (bfloat16), run in float32
with torchvision's eval transform.

Usage (torch, torchvision, Pillow, numpy, scipy; SuperBlock fetched, not committed):

    python3 scripts/fidelity_supermask.py --superblock /path/to/superblock --out /tmp/smfid \
        --vitrt build/bin/vitrt [--images 8] [--device cpu] [--dtypes fp32]

Prints `RESULT {json}`: per dtype the logits' relative error (max / mean over images), top-1
agreement and the packed file's MLP density. Exit status 0 when fp32 is within 1e-4 relative and
bf16's top-1 agrees on 99% or more of the images, 1 otherwise (2: setup failed).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fidelity_vit import compare, make_images, perturbed_vit_b_16, run_vitrt  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--superblock", required=True, help="a checkout of github.com/pytorch-labs/superblock")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vitrt", required=True, help="path of the vitrt CLI")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--sparsity", type=float, default=0.9)
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--device", default="cpu", help="where vitrt runs: cpu or cuda (the reference runs on the CPU)")
    ap.add_argument("--dtypes", default="fp32")
    a = ap.parse_args()
    try:
        import torch
        from torchvision import transforms
        sys.path.insert(0, a.superblock)
        import supermask as sb  # SuperBlock's own module
    except ImportError as e:
        print(f"RESULT {json.dumps({'error': f'torch / torchvision / SuperBlock not available: {e}'})}")
        return 2
    os.makedirs(os.path.join(a.out, "images"), exist_ok=True)

    model = perturbed_vit_b_16(0)
    torch.manual_seed(1)
    sb.apply_supermask(model, linear_sparsity=a.sparsity, linear_sp_tilesize=a.tile, device="cpu")
    model = model.to(torch.bfloat16).eval()  # as train.py trains and saves it
    ckpt = os.path.join(a.out, "supermask_vit_b_16.pth")
    args = argparse.Namespace(model="vit_b_16", sparsity_linear=a.sparsity, sp_linear_tile_size=a.tile,
                              skip_last_layer_sparsity=False, skip_first_transformer_sparsity=False)
    torch.save({"model": model.state_dict(), "epoch": 0, "args": args}, ckpt)

    # The reference: SuperBlock's masks folded in bfloat16 by its own code, then float32.
    ref_model = copy.deepcopy(model)
    for name, m in ref_model.named_modules():
        if isinstance(m, sb.SupermaskLinear) and not name.endswith("self_attention.out_proj"):
            m.sparsify_offline()  # (out_proj: nn.MultiheadAttention never runs the module's forward)
    ref_model = ref_model.float().eval()

    paths = make_images(os.path.join(a.out, "images"), a.images, 2000)

    from PIL import Image

    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    with torch.no_grad():
        x = torch.stack([tf(Image.open(p).convert("RGB")) for p in paths])
        ref = np.concatenate([ref_model(x[i:i + 4]).double().numpy() for i in range(0, len(paths), 4)])

    packed = os.path.join(a.out, "supermask_vit_b_16.vitrt")
    p = subprocess.run([a.vitrt, "sparsify", "-q", "--supermask", "--checkpoint", ckpt, "--out", packed],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"RESULT {json.dumps({'error': 'vitrt sparsify failed: ' + p.stdout[-1500:] + p.stderr[-1500:]})}")
        return 2
    info = json.loads(subprocess.run([a.vitrt, "info", "--checkpoint", packed], capture_output=True, text=True,
                                     check=True).stdout)
    nnz = sum(v["nnz_blocks"] for v in info["bsr"].values())
    total = sum(v["nnz_blocks"] / v["density"] for v in info["bsr"].values() if v["density"] > 0)
    result = {"sparsity": a.sparsity, "tile": a.tile, "images": len(paths), "device": a.device,
              "bsr_weights": len(info["bsr"]), "mlp_density": nnz / total if total else None,
              "num_heads_recorded": info["metadata"].get("vit.num_heads")}
    ok = True
    for dtype in a.dtypes.split(","):
        got = run_vitrt(a.vitrt, packed, paths, dtype, a.device)
        c = compare(ref, got)
        result[dtype] = c
        ok &= c["logits_rel_max"] <= 1e-4 if dtype == "fp32" else c["top1_agree"] >= 0.99
    print(f"RESULT {json.dumps(result)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
