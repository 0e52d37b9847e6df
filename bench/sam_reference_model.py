"""segment-anything-fast's SAM with random weights, as ../shared/anchor/bench_sam_pytorch.py builds it
(rel-pos and pos-embed ~ N(0, 0.02) like a trained model's; everything else as the builder leaves it),
on the GPU in the given dtype. Shared by bench/amg_gpu_reference.py and bench/decoder_reference.py.

The packages come from ANCHOR_DIR (default .anchors): segment_anything_fast/ and orig/segment_anything/,
exported from fetched snapshots of pytorch-labs/segment-anything-fast and facebookresearch/segment-anything
(never committed).
"""
import os
import sys

import torch

ROOT = os.environ.get("ANCHOR_DIR", ".anchors")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "orig"))


def build_sam_fast(model: str, dtype: str, seed: int = 0):
    from segment_anything_fast import sam_model_registry

    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    sam = sam_model_registry[model](checkpoint=None)
    with torch.no_grad():
        for n, prm in sam.named_parameters():
            if "rel_pos" in n or "pos_embed" in n:
                prm.normal_(0, 0.02)
    return sam.to(dt).cuda().eval()
