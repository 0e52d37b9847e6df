#!/usr/bin/env python3
"""Writes tests/fixtures/image/*: decode, resize and RLE references produced by the Python stack
that vitrt must match byte for byte (Pillow for decoding and resizing, pycocotools and
segment_anything for RLE and boxes).

Run with the reference interpreter (numpy, Pillow, torch, torchvision, segment_anything,
pycocotools):  /work/pyref/bin/python scripts/make_image_fixtures.py

Resize sources are not stored: both this script and the C++ test generate them with
`pattern()` (integer arithmetic only, so the two agree exactly). Small resize outputs are stored
as PNG; outputs with a side >= 512 are stored only as an FNV-1a-64 hash of the raw bytes to keep
the fixtures small.
"""
import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from pycocotools import mask as mask_utils
from segment_anything.utils.amg import batched_mask_to_box, mask_to_rle_pytorch
from segment_anything.utils.transforms import ResizeLongestSide

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "image"


def pattern(w, h, ch, seed):
    """Gradient + hashed noise + inverted checker blocks; mirrored by pattern() in test_image.cpp."""
    y, x, c = np.meshgrid(np.arange(h, dtype=np.uint32), np.arange(w, dtype=np.uint32),
                          np.arange(ch, dtype=np.uint32), indexing="ij")
    with np.errstate(over="ignore"):
        v = (x * np.uint32(73856093)) ^ (y * np.uint32(19349663)) ^ (c * np.uint32(83492791)) \
            ^ np.uint32(seed)
        v ^= v >> np.uint32(13)
        v *= np.uint32(0x5BD1E995)
        v ^= v >> np.uint32(15)
    noise = (v & 63).astype(np.int64) - 32
    xi, yi, ci = x.astype(np.int64), y.astype(np.int64), c.astype(np.int64)
    base = np.where(ci == 0, xi * 255 // max(w - 1, 1),
                    np.where(ci == 1, yi * 255 // max(h - 1, 1),
                             (xi + yi) * 255 // max(w + h - 2, 1)))
    val = np.clip(base + noise, 0, 255)
    flip = ((xi // 8 + yi // 8) % 5) == 0
    val = np.where(flip, 255 - val, val)
    return val.astype(np.uint8)


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def raw_png(w, h, bit_depth, color_type, rows, plte=None, trns=None):
    """A PNG written by hand, for formats Pillow cannot save (16-bit RGB, 2/4-bit, ...)."""
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth,
                                                               color_type, 0, 0, 0))
    if plte is not None:
        out += png_chunk(b"PLTE", plte)
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    out += png_chunk(b"IDAT", zlib.compress(b"".join(b"\x00" + r for r in rows)))
    return out + png_chunk(b"IEND", b"")


def pack_bits(values, bits):
    """Packs one row of small integers MSB first, as PNG stores sub-byte samples."""
    out, acc, n = bytearray(), 0, 0
    for v in values:
        acc = (acc << bits) | int(v)
        n += bits
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def write_decode_fixtures():
    cases = []

    def add(name, data, expected=None):
        (OUT / name).write_bytes(data)
        if expected is None:  # what Pillow decodes
            expected = np.array(Image.open(io.BytesIO(data)).convert("RGB"))
        h, w, _ = expected.shape
        (OUT / (name + ".rgb")).write_bytes(expected.tobytes())
        cases.append({"file": name, "width": w, "height": h, "expected_rgb": name + ".rgb"})

    def pil_bytes(im, fmt, **kw):
        buf = io.BytesIO()
        im.save(buf, fmt, **kw)
        return buf.getvalue()

    rgb = pattern(37, 23, 3, 1)
    add("rgb_37x23.png", pil_bytes(Image.fromarray(rgb), "PNG"))
    add("gray_31x17.png", pil_bytes(Image.fromarray(pattern(31, 17, 1, 2)[..., 0]), "PNG"))
    add("la_19x13.png", pil_bytes(Image.fromarray(pattern(19, 13, 2, 3), "LA"), "PNG"))
    add("rgba_29x19.png", pil_bytes(Image.fromarray(pattern(29, 19, 4, 4), "RGBA"), "PNG"))
    pal = Image.fromarray(pattern(33, 21, 3, 5)).quantize(200)
    add("palette_33x21.png", pil_bytes(pal, "PNG"))
    add("palette_trns_33x21.png", pil_bytes(pal, "PNG", transparency=7))

    # Hand-written PNGs. 16-bit RGB(A): Pillow keeps the high byte, as vitrt does.
    p16 = pattern(27, 15, 6, 6).astype(np.uint16)
    rgb16 = (p16[..., :3] << 8) | p16[..., 3:]
    add("rgb16_27x15.png", raw_png(27, 15, 16, 2, [r.astype(">u2").tobytes() for r in rgb16]))
    p16 = pattern(21, 9, 8, 7).astype(np.uint16)
    rgba16 = (p16[..., :4] << 8) | p16[..., 4:]
    add("rgba16_21x9.png", raw_png(21, 9, 16, 6, [r.astype(">u2").tobytes() for r in rgba16]))
    # 16-bit gray: Pillow clamps I;16 to 255 on conversion (a quirk); vitrt keeps the high byte,
    # so the expected pixels are written here rather than taken from Pillow.
    g = pattern(23, 11, 2, 8).astype(np.uint16)
    g16 = (g[..., 0] << 8) | g[..., 1]
    add("gray16_23x11.png", raw_png(23, 11, 16, 0, [r.astype(">u2").tobytes() for r in g16]),
        np.repeat((g16 >> 8).astype(np.uint8)[..., None], 3, axis=2))
    bits1 = pattern(13, 7, 1, 9)[..., 0] >> 7
    add("gray1_13x7.png", raw_png(13, 7, 1, 0, [pack_bits(r, 1) for r in bits1]))
    bits4 = pattern(11, 5, 1, 10)[..., 0] >> 4
    add("gray4_11x5.png", raw_png(11, 5, 4, 0, [pack_bits(r, 4) for r in bits4]))
    idx2 = pattern(9, 6, 1, 11)[..., 0] >> 6
    add("palette2_9x6.png", raw_png(9, 6, 2, 3, [pack_bits(r, 2) for r in idx2],
                                    plte=bytes([250, 10, 20, 30, 200, 40, 50, 60, 190, 9, 9, 9])))
    gt = pattern(15, 8, 1, 12)[..., 0]
    add("gray_trns_15x8.png", raw_png(15, 8, 8, 0, [r.tobytes() for r in gt], trns=b"\x00\x40"))

    # JPEGs as Pillow writes them (libjpeg-turbo), decoded by Pillow as the reference.
    add("rgb420_37x23.jpg", pil_bytes(Image.fromarray(rgb), "JPEG", quality=90, subsampling=2))
    add("rgb444_37x23.jpg", pil_bytes(Image.fromarray(rgb), "JPEG", quality=95, subsampling=0))
    add("rgb422_41x27.jpg", pil_bytes(Image.fromarray(pattern(41, 27, 3, 13)), "JPEG",
                                      quality=80, subsampling=1))
    add("gray_31x17.jpg", pil_bytes(Image.fromarray(pattern(31, 17, 1, 14)[..., 0]), "JPEG"))
    add("progressive_45x29.jpg", pil_bytes(Image.fromarray(pattern(45, 29, 3, 15)), "JPEG",
                                           quality=85, progressive=True))
    add("cmyk_21x15.jpg", pil_bytes(Image.fromarray(pattern(21, 15, 4, 16), "CMYK"), "JPEG"))
    add("rgb420_173x131.jpg", pil_bytes(Image.fromarray(pattern(173, 131, 3, 17)), "JPEG",
                                        quality=75))
    return cases


def write_bad_fixtures():
    """Valid-looking files whose headers claim 20000 x 20000 pixels, or an empty size."""
    def png_claiming(w, h):
        row = b"\x00" * (min(w, 20000) * 3)
        return (b"\x89PNG\r\n\x1a\n"
                + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + png_chunk(b"IDAT", zlib.compress(b"\x00" + row)) + png_chunk(b"IEND", b""))

    def jpeg_claiming(w, h):
        buf = io.BytesIO()
        Image.fromarray(pattern(16, 16, 3, 18)).save(buf, "JPEG")
        data = bytearray(buf.getvalue())
        sof = data.index(b"\xff\xc0")  # SOF0: FFC0 length(2) precision(1) height(2) width(2)
        data[sof + 5:sof + 9] = struct.pack(">HH", h, w)
        return bytes(data)

    (OUT / "huge_20000.png").write_bytes(png_claiming(20000, 20000))
    (OUT / "huge_20000.jpg").write_bytes(jpeg_claiming(20000, 20000))
    (OUT / "zero_width.png").write_bytes(png_claiming(0, 16))
    (OUT / "zero_height.jpg").write_bytes(jpeg_claiming(16, 0))


def write_resize_fixtures():
    def pil_resize(src, dst_w, dst_h):
        mode = {1: "L", 3: "RGB", 4: "CMYK"}[src.shape[2]]
        im = Image.fromarray(src[..., 0] if mode == "L" else src, mode)
        out = np.array(im.resize((dst_w, dst_h), Image.BILINEAR))
        return out.reshape(dst_h, dst_w, src.shape[2])

    cases = []

    def add(src_w, src_h, dst_w, dst_h, ch=3, seed=100, via_sam=None):
        src = pattern(src_w, src_h, ch, seed)
        out = pil_resize(src, dst_w, dst_h)
        if via_sam is not None:  # the path SAM's preprocessing takes must give the same bytes
            sam = ResizeLongestSide(via_sam).apply_image(src)
            assert sam.shape == out.shape and np.array_equal(sam, out), (src_w, src_h, via_sam)
        case = {"src": [src_w, src_h], "dst": [dst_w, dst_h], "channels": ch, "seed": seed,
                "longest_side": via_sam}
        if max(dst_w, dst_h) >= 512:
            case["fnv1a64"] = fnv1a64(out.tobytes())
        elif ch == 3:
            name = f"resize_{src_w}x{src_h}_to_{dst_w}x{dst_h}.png"
            Image.fromarray(out).save(OUT / name)
            case["expected_png"] = name
        else:  # read_image always gives RGB, so other channel counts are stored raw
            name = f"resize_{src_w}x{src_h}_to_{dst_w}x{dst_h}_c{ch}.bin"
            (OUT / name).write_bytes(out.tobytes())
            case["expected_raw"] = name
        cases.append(case)

    add(50, 40, 17, 13)     # downscale by non-integer factors
    add(50, 40, 25, 20)     # exact halving
    add(50, 40, 50, 13)     # width unchanged: horizontal pass skipped
    add(50, 40, 17, 40)     # height unchanged: vertical pass skipped
    add(50, 40, 50, 40)     # identity copy
    add(13, 11, 40, 29)     # upscale
    add(13, 11, 40, 7)      # up in x, down in y
    add(200, 3, 17, 9)      # extreme aspect ratios
    add(3, 200, 1, 50)
    add(1, 1, 5, 7)
    add(7, 5, 1, 1)
    add(100, 1, 7, 1)
    add(41, 29, 19, 61, ch=1)  # gray
    add(97, 61, 33, 20, ch=4)  # 4 independent channels (Pillow's RGBX / CMYK path)
    add(97, 61, 33, 20, ch=1)
    # Pillow 13 runs the vertical pass first when the height loses more than twice as many
    # pixels as the width: just over and exactly at that boundary.
    add(53, 54, 37, 20)     # 34 > 2 * 16: vertical first
    add(46, 50, 39, 36)     # 14 == 2 * 7: horizontal first
    add(640, 1000, 600, 300)
    # ResizeLongestSide targets, checked against segment_anything itself (480x1500 goes
    # vertical first).
    for (w, h) in [(640, 480), (1100, 700), (37, 23), (300, 500), (480, 1500)]:
        for target in (1024, 256):
            nh, nw = ResizeLongestSide.get_preprocess_shape(h, w, target)
            add(w, h, nw, nh, via_sam=target)
    # Random small sizes, hashes only: covers both pass orders and many rounding paths.
    rng = np.random.default_rng(7)
    for i in range(300):
        sw, sh, dw, dh = (int(v) for v in rng.integers(1, 90, size=4))
        ch = int(rng.choice([1, 3, 4]))
        src = pattern(sw, sh, ch, 1000 + i)
        cases.append({"src": [sw, sh], "dst": [dw, dh], "channels": ch, "seed": 1000 + i,
                      "longest_side": None,
                      "fnv1a64": fnv1a64(pil_resize(src, dw, dh).tobytes())})
    return cases


def longest_side_shapes():
    rows = []
    sizes = [1, 2, 3, 7, 23, 37, 100, 255, 256, 257, 300, 333, 480, 500, 511, 512, 513, 640, 700,
             768, 999, 1000, 1023, 1024, 1025, 1100, 1365, 1366, 1500, 2047, 2048, 3000, 4095]
    for target in (1024, 256):
        for h in sizes:
            for w in sizes:
                nh, nw = ResizeLongestSide.get_preprocess_shape(h, w, target)
                rows.append([w, h, target, nw, nh])
    return rows


def write_rle_fixtures():
    rng = np.random.default_rng(1234)
    masks = {
        "zeros_5x4": np.zeros((5, 4), np.uint8),
        "ones_5x4": np.ones((5, 4), np.uint8),
        "first_pixel_6x3": np.eye(1, 18, 0, dtype=np.uint8).reshape(6, 3),
        "last_pixel_6x3": np.eye(1, 18, 17, dtype=np.uint8).reshape(6, 3),
        "single_pixel_9x7": np.eye(1, 63, 40, dtype=np.uint8).reshape(9, 7),
        "one_by_one_0": np.zeros((1, 1), np.uint8),
        "one_by_one_1": np.ones((1, 1), np.uint8),
        "random_20x30": (rng.random((20, 30)) < 0.5).astype(np.uint8),
        "sparse_33x17": (rng.random((33, 17)) < 0.05).astype(np.uint8),
        "ones_300x200": np.ones((300, 200), np.uint8),
    }
    yy, xx = np.mgrid[0:64, 0:48]
    masks["blobs_64x48"] = (((yy - 20) ** 2 + (xx - 15) ** 2 < 150)
                            | ((yy - 45) ** 2 + (xx - 35) ** 2 < 60)).astype(np.uint8)
    yy, xx = np.mgrid[0:300, 0:400]
    masks["big_disc_300x400"] = ((yy - 140) ** 2 + (xx - 210) ** 2 < 120 ** 2).astype(np.uint8)
    masks["column_band_40x60"] = np.zeros((40, 60), np.uint8)
    masks["column_band_40x60"][:, 10:50] = 1

    out = []
    for name, m in masks.items():
        h, w = m.shape
        rle = mask_utils.encode(np.asfortranarray(m))
        sam = mask_to_rle_pytorch(torch.from_numpy(m[None].astype(bool)))[0]
        decoded = mask_utils.decode(rle)
        assert np.array_equal(decoded, m)
        counts = []
        flat = m.flatten(order="F")
        prev, run = 0, 0
        for v in flat:
            if v != prev:
                counts.append(run)
                run, prev = 0, v
            run += 1
        counts.append(run)
        assert counts == sam["counts"], name
        # SAM's coco_encode_rle path (uncompressed counts -> pycocotools) gives the same string
        assert mask_utils.frPyObjects({"size": [h, w], "counts": counts}, h, w)["counts"] \
            == rle["counts"], name
        box = batched_mask_to_box(torch.from_numpy(m[None].astype(bool)))[0].tolist()
        out.append({
            "name": name, "height": h, "width": w,
            "mask": "".join(map(str, m.flatten())) if m.size <= 4096 else None,
            "counts": counts, "string": rle["counts"].decode(),
            "area": int(mask_utils.area(rle)),
            "bbox_xywh": [float(v) for v in mask_utils.toBbox(rle)],
            "sam_box_xyxy": [int(v) for v in box],
        })
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    manifest = {
        "decode": write_decode_fixtures(),
        "resize": write_resize_fixtures(),
        "longest_side_shapes": longest_side_shapes(),
    }
    write_bad_fixtures()
    (OUT / "manifest.json").write_text(json.dumps(manifest))
    (OUT / "rle.json").write_text(json.dumps(write_rle_fixtures()))
    total = sum(f.stat().st_size for f in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total / 1024:.0f} KiB, to {OUT}")


if __name__ == "__main__":
    main()
