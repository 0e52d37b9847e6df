#!/usr/bin/env python3
"""Golden SAM fixtures produced by the OFFICIAL segment-anything code.

Usage (from the repository root; needs torch, numpy, Pillow, torchvision and
segment-anything==1.0, e.g. the reference environment /work/pyref):

    /work/pyref/bin/python scripts/make_sam_fixtures.py [--out tests/fixtures/sam]

What it writes (see tests/fixtures/sam/README.md for the full description):

  <model>.pth                 torch.save(sam.state_dict()) of a small official `Sam`
  <model>.json                the vitrt::SamConfig fields of that model
  images/<image>.png          synthetic RGB test images
  out_<model>_<image>.pth     torch.save of a plain dict of tensors: the image embedding,
                              sizes, resize hash and, per prompt case, the official
                              SamPredictor.predict outputs

Everything is deterministic: fixed seeds, torch.use_deterministic_algorithms(True),
float32, one CPU thread. Running it twice gives byte-identical tensors.

The helpers in this file (perturb_parameters, fnv1a64, run_predictor_cases, ...) are also
used by scripts/fidelity_full.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from typing import Dict, List, Optional

import numpy as np
import torch
from PIL import Image

from segment_anything import SamPredictor
from segment_anything.modeling import (
    ImageEncoderViT,
    MaskDecoder,
    PromptEncoder,
    Sam,
    TwoWayTransformer,
)
from segment_anything.modeling.common import LayerNorm2d

PIXEL_MEAN = [123.675, 116.28, 103.53]
PIXEL_STD = [58.395, 57.12, 57.375]

# --------------------------------------------------------------------------------------------
# Model configurations (vitrt::SamConfig field names)
# --------------------------------------------------------------------------------------------

MODEL_CONFIGS: Dict[str, dict] = {
    "tiny1024": dict(
        name="custom",
        img_size=1024,
        patch_size=16,
        embed_dim=48,
        depth=3,
        num_heads=3,
        mlp_dim=192,
        window_size=14,
        global_attn_indexes=[1],
        use_rel_pos=True,
        use_abs_pos=True,
        out_chans=32,
        mask_in_chans=16,
        decoder_depth=2,
        decoder_heads=4,
        decoder_mlp_dim=64,
        attention_downsample_rate=2,
        num_multimask_outputs=3,
        iou_head_depth=3,
        iou_head_hidden_dim=32,
    ),
    "interp256": dict(
        name="custom",
        img_size=256,
        patch_size=16,
        embed_dim=32,
        depth=4,
        num_heads=2,
        mlp_dim=128,
        window_size=14,
        global_attn_indexes=[1, 3],
        use_rel_pos=True,
        use_abs_pos=True,
        out_chans=32,
        mask_in_chans=16,
        decoder_depth=2,
        decoder_heads=4,
        decoder_mlp_dim=64,
        attention_downsample_rate=2,
        num_multimask_outputs=3,
        iou_head_depth=3,
        iou_head_hidden_dim=32,
    ),
}

# interp256: rel-pos tables whose length differs from 2*size-1, so that get_rel_pos takes the
# F.interpolate(mode="linear") path. block index -> (len rel_pos_h, len rel_pos_w).
# Block 0 is windowed (needs 2*14-1 = 27), block 3 is global (needs 2*16-1 = 31).
INTERP256_REL_POS_LENGTHS = {0: (20, 40), 3: (45, 23)}

# Gain on the last hypernetwork layer (see perturb_parameters).
LOGIT_GAIN = 80.0

MODEL_SEEDS = {"tiny1024": 1234, "interp256": 4321}


def build_custom_sam(cfg: dict) -> Sam:
    """Same construction as segment_anything.build_sam._build_sam, with the sizes of `cfg`."""
    grid = cfg["img_size"] // cfg["patch_size"]
    assert cfg["mlp_dim"] % cfg["embed_dim"] == 0
    sam = Sam(
        image_encoder=ImageEncoderViT(
            depth=cfg["depth"],
            embed_dim=cfg["embed_dim"],
            img_size=cfg["img_size"],
            mlp_ratio=cfg["mlp_dim"] // cfg["embed_dim"],
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
            num_heads=cfg["num_heads"],
            patch_size=cfg["patch_size"],
            qkv_bias=True,
            use_rel_pos=cfg["use_rel_pos"],
            use_abs_pos=cfg["use_abs_pos"],
            global_attn_indexes=cfg["global_attn_indexes"],
            window_size=cfg["window_size"],
            out_chans=cfg["out_chans"],
        ),
        prompt_encoder=PromptEncoder(
            embed_dim=cfg["out_chans"],
            image_embedding_size=(grid, grid),
            input_image_size=(cfg["img_size"], cfg["img_size"]),
            mask_in_chans=cfg["mask_in_chans"],
        ),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=cfg["num_multimask_outputs"],
            transformer=TwoWayTransformer(
                depth=cfg["decoder_depth"],
                embedding_dim=cfg["out_chans"],
                mlp_dim=cfg["decoder_mlp_dim"],
                num_heads=cfg["decoder_heads"],
                attention_downsample_rate=cfg["attention_downsample_rate"],
            ),
            transformer_dim=cfg["out_chans"],
            iou_head_depth=cfg["iou_head_depth"],
            iou_head_hidden_dim=cfg["iou_head_hidden_dim"],
        ),
        pixel_mean=PIXEL_MEAN,
        pixel_std=PIXEL_STD,
    )
    sam.eval()
    return sam


@torch.no_grad()
def perturb_parameters(sam: Sam, std_pos: float = 0.02, std_ln: float = 0.1,
                       logit_gain: float = LOGIT_GAIN) -> None:
    """Makes every parameter matter: the zero-initialised pos_embed and rel_pos_h/rel_pos_w get
    N(0, std_pos); every LayerNorm / LayerNorm2d gets weight 1 + N(0, std_ln), bias N(0, std_ln).
    The last layer of each mask-decoder hypernetwork MLP is multiplied by `logit_gain`: with the
    default init the mask logits are only ~0.05 in size, so a large share of the pixels would sit
    next to the 0 threshold; scaled, the logits are O(1) and masks are a meaningful comparison.
    Uses the global torch RNG (seed it first)."""
    enc = sam.image_encoder
    if enc.pos_embed is not None:
        enc.pos_embed.normal_(0.0, std_pos)
    for blk in enc.blocks:
        if blk.attn.use_rel_pos:
            blk.attn.rel_pos_h.normal_(0.0, std_pos)
            blk.attn.rel_pos_w.normal_(0.0, std_pos)
    for m in sam.modules():
        if isinstance(m, (torch.nn.LayerNorm, LayerNorm2d)):
            m.weight.copy_(1.0 + std_ln * torch.randn_like(m.weight))
            m.bias.copy_(std_ln * torch.randn_like(m.bias))
    for mlp in sam.mask_decoder.output_hypernetworks_mlps:
        mlp.layers[-1].weight.mul_(logit_gain)
        mlp.layers[-1].bias.mul_(logit_gain)


@torch.no_grad()
def replace_rel_pos(sam: Sam, lengths: Dict[int, tuple], std: float = 0.02) -> None:
    for idx, (lh, lw) in lengths.items():
        attn = sam.image_encoder.blocks[idx].attn
        head_dim = attn.rel_pos_h.shape[1]
        attn.rel_pos_h = torch.nn.Parameter(std * torch.randn(lh, head_dim))
        attn.rel_pos_w = torch.nn.Parameter(std * torch.randn(lw, head_dim))


def make_model(name: str) -> Sam:
    cfg = MODEL_CONFIGS[name]
    torch.manual_seed(MODEL_SEEDS[name])
    sam = build_custom_sam(cfg)
    perturb_parameters(sam)
    if name == "interp256":
        replace_rel_pos(sam, INTERP256_REL_POS_LENGTHS)
    sam.eval()
    return sam


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

# name -> (height, width, seed)
IMAGE_SPECS = {
    "tiny": (23, 37, 11),  # upscaled by the resize
    "portrait": (500, 300, 12),
    "landscape": (360, 640, 13),
    "exact1024": (768, 1024, 14),  # long side already 1024
    "large": (720, 1280, 15),  # long side above 1024
    "exact256": (192, 256, 16),  # long side already 256 (the interp256 model's img_size)
}


def synth_image(h: int, w: int, seed: int) -> np.ndarray:
    """Deterministic structured RGB image: smooth gradient background, soft-edged ellipses and
    rectangles, a high-frequency stripe patch (stresses the antialiased resize) and mild noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    u = xx / max(w - 1, 1)
    v = yy / max(h - 1, 1)
    img = np.stack(
        [30 + 150 * u + 20 * v, 60 + 100 * v + 30 * np.sin(3.0 * u), 170 - 90 * u * v], axis=-1
    )
    s = float(min(h, w))
    for k in range(7):
        cx, cy = rng.uniform(0.1, 0.9) * w, rng.uniform(0.1, 0.9) * h
        rx, ry = rng.uniform(0.08, 0.3) * s, rng.uniform(0.08, 0.3) * s
        color = rng.uniform(0, 255, 3)
        if k % 3 == 2:  # soft rectangle
            d = np.maximum(np.abs(xx - cx) / rx, np.abs(yy - cy) / ry)
        else:  # rotated soft ellipse
            t = rng.uniform(0, np.pi)
            dx, dy = xx - cx, yy - cy
            a = (dx * np.cos(t) + dy * np.sin(t)) / rx
            b = (-dx * np.sin(t) + dy * np.cos(t)) / ry
            d = np.sqrt(a * a + b * b)
        alpha = 1.0 / (1.0 + np.exp(np.clip((d - 1.0) * 12.0, -50, 50)))
        shade = 1.0 + 0.25 * np.cos(2.5 * (xx - cx) / rx)  # inner shading
        img = img * (1 - alpha[..., None]) + (color * shade[..., None]) * alpha[..., None]
    # high-frequency stripes inside one soft disc
    cx, cy, r = 0.7 * w, 0.3 * h, 0.18 * s
    disc = np.clip(r - np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2), 0, 1)
    stripes = 60.0 * np.sign(np.sin(xx * 1.3 + yy * 0.7))
    img = img + (disc * stripes)[..., None] * np.array([1.0, -0.5, 0.3])
    # mild noise: everywhere on small images, inside one soft region on large ones (PNG size)
    noise = rng.integers(-3, 4, size=img.shape).astype(np.float64)
    if h * w > 200_000:
        d = np.sqrt(((xx - 0.35 * w) / (0.2 * w)) ** 2 + ((yy - 0.6 * h) / (0.25 * h)) ** 2)
        noise *= (d < 1.0)[..., None]
    img = img + noise
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def load_rgb(path: str) -> np.ndarray:
    """Exactly as a user would: PIL -> RGB -> np.array uint8 HWC."""
    return np.array(Image.open(path).convert("RGB"))


# --------------------------------------------------------------------------------------------
# Prompt cases
# --------------------------------------------------------------------------------------------


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def prompt_cases(h: int, w: int, names: List[str]) -> List[dict]:
    """Prompt sets in ORIGINAL image pixel coordinates (float32), deterministic in (h, w).
    'mask_input' takes its mask from the best (highest IoU) mask of 'one_point' (filled in by
    run_predictor_cases), so 'one_point' must come first when 'mask_input' is asked for."""
    p1 = f32([[0.43 * w + 0.3, 0.56 * h + 0.7]])
    box = f32([0.18 * w + 0.4, 0.22 * h + 0.1, 0.77 * w - 0.3, 0.81 * h + 0.2])
    all_cases = {
        "one_point": dict(point_coords=p1, point_labels=np.array([1]), multimask=True),
        "points_neg": dict(
            point_coords=f32([[0.30 * w + 0.5, 0.35 * h + 0.25],
                              [0.62 * w + 0.1, 0.48 * h + 0.6],
                              [0.52 * w + 0.75, 0.71 * h + 0.4]]),
            point_labels=np.array([1, 0, 1]),
            multimask=True,
        ),
        "box": dict(box=box, multimask=True),
        "box_points": dict(
            box=f32([0.10 * w + 0.2, 0.15 * h + 0.6, 0.66 * w + 0.9, 0.70 * h + 0.3]),
            point_coords=f32([[0.35 * w + 0.2, 0.40 * h + 0.8], [0.58 * w + 0.4, 0.61 * h + 0.1]]),
            point_labels=np.array([1, 0]),
            multimask=True,
        ),
        "mask_input": dict(
            point_coords=f32([[0.50 * w + 0.6, 0.47 * h + 0.3]]),
            point_labels=np.array([1]),
            mask_from="one_point",
            multimask=True,
        ),
        "one_point_single": dict(point_coords=p1, point_labels=np.array([1]), multimask=False),
        "box_single": dict(box=box, multimask=False),
    }
    out = []
    for n in names:
        c = dict(all_cases[n])
        c["name"] = n
        out.append(c)
    return out


ALL_CASES = ["one_point", "points_neg", "box", "box_points", "mask_input",
             "one_point_single", "box_single"]


# --------------------------------------------------------------------------------------------
# Running the official predictor and recording its outputs
# --------------------------------------------------------------------------------------------


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64-bit, returned as the signed int64 reinterpretation."""
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    mask = 0xFFFFFFFFFFFFFFFF
    for b in data:
        h = ((h ^ b) * prime) & mask
    return h - (1 << 64) if h >= (1 << 63) else h


def _packbits(m: np.ndarray) -> torch.Tensor:
    k = m.shape[0]
    return torch.from_numpy(np.packbits(m.reshape(k, -1).astype(bool), axis=1))


def run_predictor_cases(
    predictor: SamPredictor,
    image: np.ndarray,
    cases: List[dict],
    store_resized_image: bool = False,
    verbose: bool = True,
    tag: str = "",
) -> Dict[str, torch.Tensor]:
    """set_image + predict for each case, exactly as a user would. Returns the out_*.pth dict.
    A case: name, multimask, optional point_coords [N,2] / point_labels [N] / box [4] (original
    image pixels), optional mask_input [1,4g,4g] or mask_from=<earlier case name> (its best mask)."""
    predictor.set_image(image, "RGB")
    resized = predictor.transform.apply_image(image)  # the uint8 HWC image the model saw
    assert tuple(resized.shape[:2]) == tuple(predictor.input_size)
    out: Dict[str, torch.Tensor] = {
        "embedding": predictor.features.detach().to("cpu", torch.float32).contiguous().clone(),
        "input_size": torch.tensor(list(predictor.input_size), dtype=torch.int64),
        "original_size": torch.tensor(list(predictor.original_size), dtype=torch.int64),
        "resized_fnv1a64": torch.tensor(
            [fnv1a64(np.ascontiguousarray(resized).tobytes())], dtype=torch.int64
        ),
    }
    if store_resized_image:
        out["resized_image"] = torch.from_numpy(np.ascontiguousarray(resized).copy())

    best_low_res: Dict[str, np.ndarray] = {}
    for c in cases:
        n = c["name"]
        pc = c.get("point_coords")
        pl = c.get("point_labels")
        box = c.get("box")
        mask_input = None
        if c.get("mask_input") is not None:  # given literally, [1, 4g, 4g]
            mask_input = np.asarray(c["mask_input"], dtype=np.float32)
        elif "mask_from" in c:
            mask_input = best_low_res[c["mask_from"]][None, :, :].astype(np.float32)
        mm = bool(c["multimask"])
        masks, iou, low_res = predictor.predict(
            point_coords=pc, point_labels=pl, box=box, mask_input=mask_input,
            multimask_output=mm, return_logits=False,
        )
        logits, iou2, low_res2 = predictor.predict(
            point_coords=pc, point_labels=pl, box=box, mask_input=mask_input,
            multimask_output=mm, return_logits=True,
        )
        assert np.array_equal(iou, iou2) and np.array_equal(low_res, low_res2)
        assert np.array_equal(masks, logits > 0.0), "threshold mismatch"
        best_low_res[n] = low_res[int(np.argmax(iou))]
        if pc is not None:
            out[f"{n}.point_coords"] = torch.from_numpy(f32(pc).reshape(-1, 2).copy())
            out[f"{n}.point_labels"] = torch.from_numpy(np.asarray(pl, dtype=np.int64).copy())
        if box is not None:
            out[f"{n}.box"] = torch.from_numpy(f32(box).reshape(4).copy())
        if mask_input is not None:
            out[f"{n}.mask_input"] = torch.from_numpy(mask_input.copy())
        out[f"{n}.multimask"] = torch.tensor([1 if mm else 0], dtype=torch.int64)
        out[f"{n}.iou"] = torch.from_numpy(iou.astype(np.float32).copy())
        out[f"{n}.low_res"] = torch.from_numpy(low_res.astype(np.float32).copy())
        out[f"{n}.masks_packed"] = _packbits(masks)
        near_zero = np.abs(logits) < 1e-3
        out[f"{n}.near_zero_packed"] = _packbits(near_zero)
        if verbose:
            frac = masks.reshape(masks.shape[0], -1).mean(axis=1)
            print(f"  {tag}{n:17s} K={masks.shape[0]} iou={np.round(iou, 3).tolist()} "
                  f"fg={np.round(frac, 3).tolist()} near0={int(near_zero.sum())} "
                  f"logit_range=[{logits.min():.2f},{logits.max():.2f}]")
    return out


def setup_determinism(threads: int = 1) -> None:
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


# (model, image) -> the prompt cases run on it, kept within the 15 MB budget for the folder.
# One low-res mask of tiny1024 is 256 KiB of float32 (its embedding 512 KiB), so tiny1024 runs
# the five multimask cases on the small image only and one single-mask case on each other image;
# interp256 (64x64 low-res masks) runs every case on two images.
MULTIMASK_CASES = ["one_point", "points_neg", "box", "box_points", "mask_input"]
PLAN = {
    "tiny1024": {
        "tiny": MULTIMASK_CASES,
        "portrait": ["one_point_single"],
        "landscape": ["box_single"],
        "exact1024": ["one_point_single"],
        "large": ["box_single"],
    },
    "interp256": {
        "tiny": ALL_CASES,
        "portrait": ALL_CASES,
        "landscape": ["one_point", "box_single"],
        "exact256": ["one_point", "box"],
        "large": ["one_point_single"],
    },
}


def load_fixture_model(pth: str, cfg: dict) -> Sam:
    """Rebuilds an official Sam from <model>.json + <model>.pth alone (rel-pos tables take the
    checkpoint's shapes, as in interp256), strict load."""
    sd = torch.load(pth, map_location="cpu", weights_only=True)
    sam = build_custom_sam(cfg)
    for i, blk in enumerate(sam.image_encoder.blocks):
        for t in ("rel_pos_h", "rel_pos_w"):
            key = f"image_encoder.blocks.{i}.attn.{t}"
            if key in sd and tuple(sd[key].shape) != tuple(getattr(blk.attn, t).shape):
                setattr(blk.attn, t, torch.nn.Parameter(torch.zeros_like(sd[key])))
    sam.load_state_dict(sd, strict=True)
    sam.eval()
    return sam


def cases_from_outputs(out: Dict[str, torch.Tensor]) -> List[dict]:
    """The prompt cases recorded in an out_*.pth dict, in a form run_predictor_cases takes
    (mask_input given literally)."""
    names = []
    for k in out:
        if "." in k and k.split(".")[0] not in names:
            names.append(k.split(".")[0])
    cases = []
    for n in names:
        c = {"name": n, "multimask": bool(out[f"{n}.multimask"].item())}
        if f"{n}.point_coords" in out:
            c["point_coords"] = out[f"{n}.point_coords"].numpy()
            c["point_labels"] = out[f"{n}.point_labels"].numpy()
        if f"{n}.box" in out:
            c["box"] = out[f"{n}.box"].numpy()
        if f"{n}.mask_input" in out:
            c["mask_input"] = out[f"{n}.mask_input"].numpy()
        cases.append(c)
    return cases


def verify(out_dir: str) -> bool:
    """Re-runs every recorded case from the files alone (JSON config, checkpoint, PNG, prompts
    stored in out_*.pth) and checks that the official code reproduces every tensor exactly."""
    ok = True
    for mname in MODEL_CONFIGS:
        cfg_path = os.path.join(out_dir, f"{mname}.json")
        if not os.path.exists(cfg_path):
            continue
        with open(cfg_path) as f:
            cfg = json.load(f)
        predictor = SamPredictor(load_fixture_model(os.path.join(out_dir, f"{mname}.pth"), cfg))
        for iname in PLAN[mname]:
            ref = torch.load(os.path.join(out_dir, f"out_{mname}_{iname}.pth"), weights_only=True)
            img = load_rgb(os.path.join(out_dir, "images", f"{iname}.png"))
            got = run_predictor_cases(predictor, img, cases_from_outputs(ref),
                                      store_resized_image="resized_image" in ref, verbose=False)
            bad = [k for k in ref if k not in got or not torch.equal(ref[k], got[k])]
            bad += [k for k in got if k not in ref]
            print(f"verify {mname}/{iname}: {'OK' if not bad else 'MISMATCH ' + str(bad)}")
            ok = ok and not bad
    return ok


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "fixtures", "sam"))
    ap.add_argument("--models", default=",".join(PLAN.keys()))
    ap.add_argument("--verify", action="store_true",
                    help="only re-run the recorded cases from the files and compare exactly")
    args = ap.parse_args(argv)

    setup_determinism(1)
    if args.verify:
        return 0 if verify(os.path.normpath(args.out)) else 1
    out_dir = os.path.normpath(args.out)
    img_dir = os.path.join(out_dir, "images")
    os.makedirs(img_dir, exist_ok=True)

    # Images: generate, write as PNG, then read back as a user would.
    needed = sorted({img for m in args.models.split(",") for img in PLAN[m]})
    images = {}
    for name in needed:
        h, w, seed = IMAGE_SPECS[name]
        path = os.path.join(img_dir, f"{name}.png")
        Image.fromarray(synth_image(h, w, seed), "RGB").save(path, optimize=True)
        images[name] = load_rgb(path)
        assert images[name].shape == (h, w, 3)

    for mname in args.models.split(","):
        cfg = MODEL_CONFIGS[mname]
        sam = make_model(mname)
        torch.save(sam.state_dict(), os.path.join(out_dir, f"{mname}.pth"))
        with open(os.path.join(out_dir, f"{mname}.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        predictor = SamPredictor(sam)
        for iname, case_names in PLAN[mname].items():
            img = images[iname]
            print(f"[{mname}] {iname} {img.shape[1]}x{img.shape[0]}")
            cases = prompt_cases(img.shape[0], img.shape[1], case_names)
            out = run_predictor_cases(predictor, img, cases,
                                      store_resized_image=(mname == "interp256"), tag="")
            torch.save(out, os.path.join(out_dir, f"out_{mname}_{iname}.pth"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
