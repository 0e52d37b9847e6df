#!/usr/bin/env python3
"""Golden Supermask fixtures made by SuperBlock's OWN code (pytorch-labs/superblock, supermask.py).

SuperBlock trains a torchvision ViT whose linears carry learned per-tile scores (`<layer>.scores`),
a binary mask from those scores' percentile, and saves checkpoints as its train.py does. These
fixtures let vitrt check that `vitrt sparsify --supermask` folds the masks exactly as SuperBlock's
model applies them, reads the checkpoint's argparse.Namespace without running it, and packs the
MLPs to BSR so that the sparse model computes what SuperBlock's model computes.

Usage (from the repository root; needs torch, torchvision, numpy and scipy, which supermask.py
imports; SuperBlock is not committed here, fetch it: github:pytorch-labs/superblock):

    /work/pyref/bin/python scripts/make_supermask_fixtures.py --superblock /path/to/superblock \
        [--out tests/fixtures/supermask]

What it writes:

  train_bf16.pth        a checkpoint as SuperBlock's train.py saves it: {"model", "optimizer",
                        "lr_scheduler", "epoch", "args" (an argparse.Namespace), "model_ema"} of a
                        small torchvision VisionTransformer (image 32, patch 16, hidden 128, 2 layers,
                        2 heads, MLP 256, 10 classes) after apply_supermask(linear_sparsity=0.9,
                        linear_sp_tilesize=16), converted to bfloat16 and trained for a few SGD steps
                        on random data (train.py's order); then layer 1's mlp.0 given scale 1.5 and
                        shift -0.004 (in bfloat16). Every nn.Linear got scores, the head
                        (10 x 128: 8 tiles, so SuperBlock lowers its sparsity to 0.875) and the
                        attention's out_proj included (whose mask nn.MultiheadAttention never applies:
                        it reads out_proj.weight directly).
  state_dict_f32.pth    a bare float32 state_dict (no args): tile 32, sparsity 0.5, the head skipped
                        (skip_last_layer_sparsity), the MLP linears' scale 1.25 and shift -0.003
                        (SuperBlock's weight transform, (weight * scale + shift) * mask).
  <name>.folded.pth     per fixture, {layer weight name: the weight SuperBlock's forward multiplies
                        by}, i.e. (weight * scale + shift) * get_mask() in the checkpoint's dtype,
                        for every layer whose forward applies its mask; for the EMA weights too
                        ("ema." prefix).
  golden.json           per fixture: sparsity and tile used, the inputs (NHWC, float32) and the
                        float32 logits of SuperBlock's model (eval mode, its masks folded by its own
                        sparsify_offline in the checkpoint's dtype, then run in float32), for the
                        trained and the EMA weights.

Deterministic: fixed seeds, one thread.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys

import torch
from torch.optim.swa_utils import AveragedModel
from torchvision.models.vision_transformer import VisionTransformer

# Heads of 64: a head size the CUDA attention kernels take, so the GPU tests run these too.
CFG = dict(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=128, mlp_dim=256, num_classes=10)


def make_vit(seed: int) -> VisionTransformer:
    torch.manual_seed(seed)
    model = VisionTransformer(**CFG)
    with torch.no_grad():  # torchvision zero-inits these; give them values so they matter
        model.class_token.normal_(0, 0.5)
        model.encoder.pos_embedding.normal_(0, 0.5)
        model.heads.head.weight.normal_(0, 0.2)
        model.heads.head.bias.normal_(0, 0.2)
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
    return model


def folded_weights(model: torch.nn.Module, sb) -> dict[str, torch.Tensor]:
    """The weight each masked layer's forward computes with: SupermaskLinear.forward's w, in the
    checkpoint's dtype. nn.MultiheadAttention's out_proj is not among them: its forward never runs."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, sb.SupermaskLinear) and not name.endswith("self_attention.out_proj"):
            with torch.no_grad():
                out[name + ".weight"] = ((m.weight * m.scale + m.shift) * m.get_mask()).clone()
    return out


def logits(model: torch.nn.Module, x_nchw: torch.Tensor, sb) -> list[float]:
    """The model's float32 logits with the weights its forward computes with: the masks folded in
    the checkpoint's dtype first (SupermaskLinear.sparsify_offline, what a bfloat16 model's forward
    computes per weight), then everything in float32 (out_proj left alone: its forward never runs)."""
    m = copy.deepcopy(model).eval()
    for name, mod in m.named_modules():
        if isinstance(mod, sb.SupermaskLinear) and not name.endswith("self_attention.out_proj"):
            mod.sparsify_offline()
    m = m.float()
    with torch.no_grad():
        return m(x_nchw).flatten().tolist()


def inputs(seed: int, n: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, CFG["image_size"], CFG["image_size"], generator=g)


def nhwc(x: torch.Tensor) -> list[float]:
    return x.permute(0, 2, 3, 1).contiguous().flatten().tolist()


def train_bf16(sb, out_dir: str) -> dict:
    """train.py's recipe, shrunk: apply_supermask, .to(bfloat16), SGD with momentum, save."""
    model = make_vit(1)
    sb.apply_supermask(model, linear_sparsity=0.9, linear_sp_tilesize=16, device="cpu")
    model = model.to(torch.bfloat16)
    ema = AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    g = torch.Generator().manual_seed(2)
    model.train()
    for step in range(6):
        x = torch.randn(8, 3, 32, 32, generator=g).to(torch.bfloat16)
        y = torch.randint(0, CFG["num_classes"], (8,), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        ema.update_parameters(model)
    with torch.no_grad():  # SuperBlock's weight transform in bfloat16 (train.py leaves it at 1 / 0)
        model.encoder.layers.encoder_layer_1.mlp[0].scale.fill_(1.5)
        model.encoder.layers.encoder_layer_1.mlp[0].shift.fill_(-0.004)
    args = argparse.Namespace(model="vit_tiny", sparsity_linear=0.9, sp_linear_tile_size=16, sparsity_conv1x1=0.0,
                              sp_conv1x1_tile_size=1, sparsity_conv=0.0, sp_conv_tile_size=1,
                              skip_last_layer_sparsity=False, skip_first_transformer_sparsity=False,
                              lr=0.5, epochs=3, weights=None, output_dir=".", amp=False, distributed=False)
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "lr_scheduler": sched.state_dict(),
            "epoch": 2, "args": args, "model_ema": ema.state_dict()}
    torch.save(ckpt, os.path.join(out_dir, "train_bf16.pth"))

    folded = folded_weights(model, sb)
    folded.update({"ema." + k: v for k, v in folded_weights(ema.module, sb).items()})
    torch.save(folded, os.path.join(out_dir, "train_bf16.folded.pth"))
    x = inputs(3)
    return {"sparsity": 0.9, "tile": 16, "head_sparsity": model.heads.head.sparsity, "batch": x.shape[0],
            "inputs_nhwc": nhwc(x), "logits": logits(model, x, sb), "ema_logits": logits(ema.module, x, sb)}


def state_dict_f32(sb, out_dir: str) -> dict:
    model = make_vit(4)
    sb.apply_supermask(model, linear_sparsity=0.5, linear_sp_tilesize=32, skip_last_layer_sparsity=True, device="cpu")
    torch.manual_seed(5)
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, sb.SupermaskLinear):
                m.scores.normal_()
                if ".mlp." in name:
                    m.scale.fill_(1.25)
                    m.shift.fill_(-0.003)
    torch.save(model.state_dict(), os.path.join(out_dir, "state_dict_f32.pth"))
    torch.save(folded_weights(model, sb), os.path.join(out_dir, "state_dict_f32.folded.pth"))
    x = inputs(6, 2)
    return {"sparsity": 0.5, "tile": 32, "batch": x.shape[0], "inputs_nhwc": nhwc(x), "logits": logits(model, x, sb)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--superblock", required=True, help="a checkout of github.com/pytorch-labs/superblock")
    p.add_argument("--out", default="tests/fixtures/supermask")
    args = p.parse_args()
    sys.path.insert(0, args.superblock)
    import supermask as sb  # SuperBlock's own module

    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    golden = {"config": CFG, "train_bf16": train_bf16(sb, args.out), "state_dict_f32": state_dict_f32(sb, args.out)}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
