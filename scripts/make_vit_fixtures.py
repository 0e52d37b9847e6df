#!/usr/bin/env python3
"""Golden ViT classifier fixtures produced by torchvision's OWN VisionTransformer and transforms.

Usage (from the repository root; needs torch, torchvision, numpy and Pillow, e.g. the reference
environment /work/pyref):

    /work/pyref/bin/python scripts/make_vit_fixtures.py [--out tests/fixtures/vit]

What it writes:

  vit_tiny.pth              torch.save(model.state_dict()) of a small torchvision
                            VisionTransformer (image 224, patch 16, hidden 48, 3 layers, 3 heads,
                            mlp 96, 10 classes) with seeded weights; class_token, pos_embedding,
                            the head and every LayerNorm perturbed away from their init values
  vit_tiny.pth.json         {"num_heads": 3}: the head count is not in the tensors
  vit_tiny_p14.pth(.json)   another size: image 112, patch 14, hidden 32, 2 layers, 2 heads, 1000 classes
  images/<name>.png         synthetic RGB test images of different sizes and aspect ratios
  golden.json               per image: the uint8 centre crop's size and FNV-1a 64 hash (what
                            Resize(256) + CenterCrop(224) made of the PIL image), the FNV-1a hash of the
                            normalised float32 input (NHWC) and its sum, and per model the float32 logits of torchvision's model
                            run on torchvision's eval preprocessing (Resize(256), CenterCrop(224),
                            ToTensor, Normalize(ImageNet mean/std))
  imagenet_classes.txt      the ILSVRC2012 class list from Debian's opencv-doc package (the installed
                            file if present, else extracted from `apt-get download opencv-doc`)

Deterministic: fixed seeds, one thread, float32.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch
from PIL import Image
from torchvision import transforms
from torchvision.models.vision_transformer import VisionTransformer

OPENCV_DOC_CLASSES = "/usr/share/doc/opencv-doc/examples/data/dnn/classification_classes_ILSVRC2012.txt"

MODELS = {
    "vit_tiny": dict(image_size=224, patch_size=16, num_layers=3, num_heads=3, hidden_dim=48, mlp_dim=96,
                     num_classes=10),
    "vit_tiny_p14": dict(image_size=112, patch_size=14, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                         num_classes=1000),  # 1000 classes: the CLI test prints ImageNet names
}

# (name, width, height): landscape, portrait, square, already 256 on the short side (no resize),
# upscaling (short side < 256), and odd offsets where the centre-crop rounding matters.
IMAGES = [
    ("landscape_512x384", 512, 384),
    ("portrait_300x517", 300, 517),
    ("square_224", 224, 224),
    ("short256_256x341", 256, 341),
    ("small_150x97", 150, 97),
    ("wide_800x241", 800, 241),
]


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def make_image(w: int, h: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h) + 64 * np.sin(x / 7.0)], axis=-1)
    noise = rng.integers(0, 24, size=(h, w, 3))
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8), "RGB")


def perturb_(model: VisionTransformer, linear_biases: bool = True) -> VisionTransformer:
    """torchvision initialises class_token and the head to zeros and LayerNorms to (1, 0): make
    every one of them matter (in place; also used by scripts/fidelity_vit.py, with linear_biases=False)."""
    with torch.no_grad():
        model.class_token.normal_(std=0.5)
        model.encoder.pos_embedding.normal_(std=0.5)
        model.conv_proj.bias.normal_(std=0.1)
        model.heads.head.weight.normal_(std=1.0 / model.hidden_dim ** 0.5)
        model.heads.head.bias.normal_(std=0.1)
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.add_(torch.randn_like(m.weight) * 0.2)
                m.bias.add_(torch.randn_like(m.bias) * 0.2)
            if isinstance(m, torch.nn.MultiheadAttention):
                m.in_proj_bias.normal_(std=0.1)
                m.out_proj.bias.normal_(std=0.1)
            if linear_biases and isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.add_(torch.randn_like(m.bias) * 0.05)
    return model


def make_model(cfg: dict, seed: int) -> VisionTransformer:
    torch.manual_seed(seed)
    return perturb_(VisionTransformer(**cfg).eval())


def copy_class_names(dst: str) -> str:
    if os.path.exists(dst):  # already made: no 95 MB download
        return dst
    if os.path.exists(OPENCV_DOC_CLASSES):
        shutil.copyfile(OPENCV_DOC_CLASSES, dst)
        return OPENCV_DOC_CLASSES
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", "opencv-doc"], cwd=tmp, check=True)
        deb = glob.glob(os.path.join(tmp, "opencv-doc_*.deb"))[0]
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(tmp, "x")], check=True)
        shutil.copyfile(os.path.join(tmp, "x", OPENCV_DOC_CLASSES.lstrip("/")), dst)
        return os.path.basename(deb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/vit")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)

    source = copy_class_names(os.path.join(args.out, "imagenet_classes.txt"))
    print("class names from", source)

    models = {}
    for i, (name, cfg) in enumerate(MODELS.items()):
        model = make_model(cfg, seed=100 + i)
        torch.save(model.state_dict(), os.path.join(args.out, name + ".pth"))
        with open(os.path.join(args.out, name + ".pth.json"), "w") as f:
            json.dump({"num_heads": cfg["num_heads"]}, f)
        models[name] = model

    golden = {"models": {k: v for k, v in MODELS.items()}, "images": {}}
    for j, (name, w, h) in enumerate(IMAGES):
        img = make_image(w, h, seed=j)
        img.save(os.path.join(args.out, "images", name + ".png"))
        img = Image.open(os.path.join(args.out, "images", name + ".png")).convert("RGB")
        entry = {"width": w, "height": h, "models": {}}
        for mname, model in models.items():
            S = MODELS[mname]["image_size"]
            resize = 256 if S == 224 else S * 8 // 7  # the 256/224 ratio for the small model
            crop_pil = transforms.Compose([transforms.Resize(resize), transforms.CenterCrop(S)])(img)
            crop = np.asarray(crop_pil, dtype=np.uint8)
            x = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])(crop_pil)
            full = transforms.Compose([transforms.Resize(resize), transforms.CenterCrop(S), transforms.ToTensor(),
                                       transforms.Normalize([0.485, 0.456, 0.406],
                                                            [0.229, 0.224, 0.225])])(img)
            assert torch.equal(full, x)
            with torch.no_grad():
                logits = model(x.unsqueeze(0))[0]
            entry["models"][mname] = {
                "resize": resize, "crop": S,
                "crop_fnv1a64": fnv1a64(crop.tobytes()),
                "input_sum": float(x.double().sum()),
                # the normalised input as vitrt lays it out (NHWC float32): equal bit for bit
                "input_f32_nhwc_fnv1a64": fnv1a64(x.permute(1, 2, 0).contiguous().numpy().tobytes()),
                "input_first": [float(v) for v in x.permute(1, 2, 0).reshape(-1)[:6]],
                "logits": [float(v) for v in logits],
            }
        golden["images"][name] = entry
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
