#!/usr/bin/env python3
"""Writes the checkpoint-loader fixtures into tests/fixtures/checkpoint/.

Run with the reference environment (torch, segment_anything, transformers, safetensors):
    /work/pyref/bin/python scripts/make_checkpoint_fixtures.py

Valid files (their expected contents go to expected.json):
  tensors.pth              torch.save, pickle protocol 2, many dtypes, a transposed view, a strided
                           slice, two tensors sharing one storage, a Parameter, 0-d and empty tensors
  tensors_p4.pth           the same dict with pickle protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL)
  tensors_zip64.pth        the same archive re-written with zip64 records everywhere
  tensors_misaligned.pth   the same archive with storages at odd offsets (loader must copy)
  tensors.safetensors      safetensors twin (contiguous copies)
  unaligned.safetensors    an f32 tensor that starts at an odd offset
  wrapped_model.pth, wrapped_state_dict.pth   {"model"/"state_dict": sd, "epoch": ..., "optimizer": ...}
  sam_tiny_official.pth    a tiny segment_anything Sam state_dict
  sam_tiny_hf.safetensors  the same weights as transformers' SamModel writes them (save_pretrained)

Malicious or corrupt files (the loader must refuse them; the evil ones would create MARKER if
unpickled by a naive loader, which this script checks with torch.load(weights_only=False)).
"""
import collections
import io
import json
import os
import pickle
import random
import re
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "checkpoint"
MARKER = "/tmp/vitrt_checkpoint_pwned"


# ---------------------------------------------------------------------------------------------
# A small zip writer (stored entries only) so archives can be re-laid out: zip64 records,
# misaligned data, corrupt offsets.
def write_zip(path, entries, zip64=False, align=64, misalign=0, bad_local_offset=False):
    out, central = bytearray(), bytearray()
    for name, data in entries:
        nameb, local_off, crc = name.encode(), len(out), zlib.crc32(data)
        size32 = 0xFFFFFFFF if zip64 else len(data)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(data)) if zip64 else b""
        # Pad with an unknown extra field (as torch does with "FB") so the data lands where wanted.
        start = local_off + 30 + len(nameb) + len(extra) + 4
        pad = (misalign - start) % align
        extra += struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, size32, size32, len(nameb), len(extra))
        out += nameb + extra + data
        cextra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), local_off) if zip64 else b""
        off32 = 0xFFFFFFFF if zip64 else local_off
        if bad_local_offset and not central:
            off32 = 0x7FFFFFF0
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, size32, size32,
                               len(nameb), len(cextra), 0, 0, 0, 0, off32) + nameb + cextra
    n, cd_off = len(entries), len(out)
    out += central
    if zip64:
        z64 = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(central), cd_off)
        out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_off, 0)
    Path(path).write_bytes(bytes(out))


def zip_entries(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


# ---------------------------------------------------------------------------------------------
# Hand-made torch-style pickles: the same persistent ids and rebuild calls torch.save writes,
# with whatever storage sizes and views a test needs.
class FakeStorage:
    def __init__(self, cls, key, numel):
        self.cls, self.key, self.numel = cls, key, numel


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class StoragePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, FakeStorage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def torch_like_archive(path, obj, storages, byteorder="little", prefix="archive", compress=False):
    buf = io.BytesIO()
    StoragePickler(buf, protocol=2).dump(obj)
    entries = [(f"{prefix}/data.pkl", buf.getvalue()), (f"{prefix}/byteorder", byteorder.encode())]
    entries += [(f"{prefix}/data/{k}", v) for k, v in storages.items()]
    entries += [(f"{prefix}/version", b"3\n")]
    if compress:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in entries:
                z.writestr(name, data)
    else:
        write_zip(path, entries)


def pickle_archive(path, pkl, prefix="archive"):
    """A torch-shaped archive around raw data.pkl bytes."""
    write_zip(path, [(f"{prefix}/data.pkl", pkl), (f"{prefix}/byteorder", b"little"), (f"{prefix}/version", b"3\n")])


def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def short_binunicode(s):
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


# ---------------------------------------------------------------------------------------------
def describe(t):
    flat = t.detach().reshape(-1).to(torch.float64)
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "values": flat.tolist(), "sum": float(flat.sum())}


def make_tensor_dict():
    g = torch.Generator().manual_seed(1234)
    rnd = lambda *s: torch.randn(*s, generator=g)
    base = rnd(20)
    sd = collections.OrderedDict()
    sd["f32"] = rnd(4, 6)
    sd["f16"] = rnd(3, 5).half()
    sd["bf16"] = rnd(7).bfloat16()
    sd["f64"] = rnd(2, 3).double()
    sd["i64"] = torch.arange(-5, 7, dtype=torch.int64) * 1000003
    sd["i32"] = torch.tensor([-2147483648, -1, 0, 7, 2147483647], dtype=torch.int32)
    sd["i16"] = torch.tensor([-32768, 12, 32767], dtype=torch.int16)
    sd["i8"] = torch.tensor([-128, -3, 0, 127], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True, True])
    sd["transposed"] = rnd(3, 5).t()            # strides (1, 5): saved as the view
    sd["strided_slice"] = rnd(4, 6)[1:, ::2]    # offset 6, strides (6, 2)
    sd["shared_head"] = base[:8].view(2, 4)     # these two share one storage,
    sd["shared_tail"] = base[8:].view(3, 4)     # the second at offset 8
    sd["scalar"] = torch.tensor(3.25)
    sd["param"] = torch.nn.Parameter(rnd(3))
    sd["empty"] = torch.zeros(0, 4)
    assert not sd["transposed"].is_contiguous() and not sd["strided_slice"].is_contiguous()
    # What a module's state_dict carries; saved through OrderedDict's BUILD.
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    return sd


def tiny_sam():
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    torch.manual_seed(0)
    enc = ImageEncoderViT(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2, out_chans=32,
                          window_size=2, global_attn_indexes=[1], use_rel_pos=True, qkv_bias=True,
                          norm_layer=partial(torch.nn.LayerNorm, eps=1e-6))
    pe = PromptEncoder(embed_dim=32, image_embedding_size=(4, 4), input_image_size=(32, 32), mask_in_chans=4)
    md = MaskDecoder(num_multimask_outputs=3, transformer_dim=32, iou_head_depth=3, iou_head_hidden_dim=32,
                     transformer=TwoWayTransformer(depth=2, embedding_dim=32, mlp_dim=64, num_heads=4))
    sam = Sam(enc, pe, md).eval()
    # Distinct random values everywhere (LayerNorms start as ones/zeros, which would hide a swap).
    with torch.no_grad():
        for v in sam.state_dict().values():
            v.copy_(torch.randn_like(v) * 0.2 + (1.0 if v.dim() == 1 else 0.0))
    return sam


def hf_config():
    from transformers import SamConfig, SamMaskDecoderConfig, SamPromptEncoderConfig, SamVisionConfig

    return SamConfig(
        vision_config=SamVisionConfig(hidden_size=32, output_channels=32, num_hidden_layers=2, num_attention_heads=2,
                                      image_size=32, patch_size=8, mlp_ratio=2.0, window_size=2,
                                      global_attn_indexes=[1], num_pos_feats=16),
        prompt_encoder_config=SamPromptEncoderConfig(hidden_size=32, image_size=32, patch_size=8, mask_input_channels=4),
        mask_decoder_config=SamMaskDecoderConfig(hidden_size=32, mlp_dim=64, num_hidden_layers=2, num_attention_heads=4,
                                                 iou_head_hidden_dim=32, iou_head_depth=3))


# Official segment-anything name -> transformers SamModel name: the first matching rule applies.
def _mlp(m):  # segment-anything MLP layers.0..n-1 -> SamFeedForward proj_in, layers.0..n-3, proj_out
    i, n = int(m.group(2)), 3
    new = "proj_in" if i == 0 else ("proj_out" if i == n - 1 else f"layers.{i - 1}")
    return f"{m.group(1)}.{new}."


HF_RULES = [
    (r"^image_encoder\.patch_embed\.proj\.", "vision_encoder.patch_embed.projection."),
    (r"^image_encoder\.neck\.0\.", "vision_encoder.neck.conv1."),
    (r"^image_encoder\.neck\.1\.", "vision_encoder.neck.layer_norm1."),
    (r"^image_encoder\.neck\.2\.", "vision_encoder.neck.conv2."),
    (r"^image_encoder\.neck\.3\.", "vision_encoder.neck.layer_norm2."),
    (r"^image_encoder\.blocks\.(\d+)\.norm(\d)\.", r"vision_encoder.layers.\1.layer_norm\2."),
    (r"^image_encoder\.blocks\.", "vision_encoder.layers."),
    (r"^image_encoder\.", "vision_encoder."),
    (r"^prompt_encoder\.pe_layer\.positional_encoding_gaussian_matrix$",
     "prompt_encoder.shared_embedding.positional_embedding"),
    (r"^prompt_encoder\.point_embeddings\.", "prompt_encoder.point_embed."),
    (r"^prompt_encoder\.mask_downscaling\.0\.", "prompt_encoder.mask_embed.conv1."),
    (r"^prompt_encoder\.mask_downscaling\.1\.", "prompt_encoder.mask_embed.layer_norm1."),
    (r"^prompt_encoder\.mask_downscaling\.3\.", "prompt_encoder.mask_embed.conv2."),
    (r"^prompt_encoder\.mask_downscaling\.4\.", "prompt_encoder.mask_embed.layer_norm2."),
    (r"^prompt_encoder\.mask_downscaling\.6\.", "prompt_encoder.mask_embed.conv3."),
    (r"^mask_decoder\.output_upscaling\.0\.", "mask_decoder.upscale_conv1."),
    (r"^mask_decoder\.output_upscaling\.1\.", "mask_decoder.upscale_layer_norm."),
    (r"^mask_decoder\.output_upscaling\.3\.", "mask_decoder.upscale_conv2."),
    (r"^mask_decoder\.transformer\.layers\.(\d+)\.norm(\d)\.", r"mask_decoder.transformer.layers.\1.layer_norm\2."),
    (r"^mask_decoder\.transformer\.norm_final_attn\.", "mask_decoder.transformer.layer_norm_final_attn."),
    (r"^(mask_decoder\.(?:iou_prediction_head|output_hypernetworks_mlps\.\d+))\.layers\.(\d+)\.", _mlp),
]


def to_hf(sd):
    out = {}
    for k, v in sd.items():
        for pattern, repl in HF_RULES:
            if re.match(pattern, k):
                k = re.sub(pattern, repl, k, count=1)
                break
        out[k] = v
    out["shared_image_embedding.positional_embedding"] = out["prompt_encoder.shared_embedding.positional_embedding"]
    return out


def check_hf_matches_official(sam, hf):
    """The renamed weights must make transformers' SamModel compute what segment_anything does."""
    torch.manual_seed(1)
    x = torch.randn(1, 3, 32, 32)
    coords = torch.tensor([[[5.0, 9.0], [20.0, 14.0]]])
    labels = torch.tensor([[1, 0]])
    mask = torch.randn(1, 1, 16, 16)
    with torch.no_grad():
        emb = sam.image_encoder(x)
        hf_emb = hf.get_image_embeddings(x)
        assert torch.allclose(emb, hf_emb, atol=1e-5), (emb - hf_emb).abs().max()
        for with_mask in (False, True):
            sparse, dense = sam.prompt_encoder(points=(coords, labels), boxes=None, masks=mask if with_mask else None)
            low, iou = sam.mask_decoder(image_embeddings=emb, image_pe=sam.prompt_encoder.get_dense_pe(),
                                        sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                        multimask_output=True)
            out = hf(image_embeddings=emb, input_points=coords[None], input_labels=labels[None],
                     input_masks=mask if with_mask else None, multimask_output=True)
            assert torch.allclose(low, out.pred_masks[:, 0], atol=1e-4), (low - out.pred_masks[:, 0]).abs().max()
            assert torch.allclose(iou, out.iou_scores[:, 0], atol=1e-5)


def write_sam_pair(expected):
    from safetensors.torch import load_file
    from transformers import SamModel

    sam = tiny_sam()
    sd = sam.state_dict()
    torch.save(sd, OUT / "sam_tiny_official.pth")

    hf = SamModel(hf_config()).eval()
    hf.load_state_dict(to_hf(sd), strict=True)
    check_hf_matches_official(sam, hf)
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        data = (Path(tmp) / "model.safetensors").read_bytes()
    (OUT / "sam_tiny_hf.safetensors").write_bytes(data)
    hf_keys = sorted(load_file(OUT / "sam_tiny_hf.safetensors"))
    expected["sam_tiny"] = {"num_official_keys": len(sd), "hf_keys": hf_keys,
                            "sum": sum(float(v.double().sum()) for v in sd.values())}


def evil_files():
    cmd = f"touch {MARKER}"
    # GLOBAL posix.system + REDUCE inside a dict, as a naive torch.load would run it.
    head, tail = b"\x80\x02}" + binunicode("weight"), b"s."
    call = lambda glob, arg: glob + binunicode(arg) + b"\x85R"
    pickle_archive(OUT / "evil_posix_system.pth", head + call(b"cposix\nsystem\n", cmd) + tail)
    pickle_archive(OUT / "evil_builtins_eval.pth",
                   head + call(b"cbuiltins\neval\n", f"open({MARKER!r}, 'w')") + tail)
    # Protocol 4 STACK_GLOBAL spelling of os.system.
    pickle_archive(OUT / "evil_stack_global.pth",
                   b"\x80\x04}" + short_binunicode("w") + short_binunicode("os") + short_binunicode("system") +
                   b"\x93" + binunicode(cmd) + b"\x85Rs.")
    # Old-style INST opcode: builds os.system(cmd) without GLOBAL.
    pickle_archive(OUT / "evil_inst.pth", b"\x80\x02(" + binunicode(cmd) + b"ios\nsystem\n.")
    # A real torch.save of a state_dict with a payload among the tensors.

    class Evil:
        def __reduce__(self):
            return (os.system, (cmd,))

    torch.save({"weight": torch.ones(2), "bias": Evil()}, OUT / "evil_in_state_dict.pth")

    # Each must really be an exploit against an unrestricted loader; prove it in a child process.
    for name in ["evil_posix_system.pth", "evil_builtins_eval.pth", "evil_stack_global.pth", "evil_inst.pth",
                 "evil_in_state_dict.pth"]:
        if os.path.exists(MARKER):
            os.remove(MARKER)
        subprocess.run([sys.executable, "-c", f"import torch; torch.load({str(OUT / name)!r}, weights_only=False)"],
                       stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        assert os.path.exists(MARKER), f"{name}: the payload did not run under torch.load(weights_only=False)"
        os.remove(MARKER)


def corrupt_files(expected):
    f32 = FakeStorage(torch.FloatStorage, "0", 4)
    four = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    ok = {"w": FakeTensor(f32, 0, [2, 2], [2, 1])}
    torch_like_archive(OUT / "handmade.pth", ok, {"0": four})  # the valid baseline of the ones below
    expected["handmade"] = {"w": {"dtype": "float32", "shape": [2, 2], "values": [1, 2, 3, 4], "sum": 10.0}}
    torch_like_archive(OUT / "missing_storage.pth", ok, {})
    torch_like_archive(OUT / "short_storage.pth", ok, {"0": four[:8]})
    torch_like_archive(OUT / "view_out_of_bounds.pth", {"w": FakeTensor(f32, 2, [1000], [1])}, {"0": four})
    torch_like_archive(OUT / "big_endian.pth", ok, {"0": four}, byteorder="big")
    torch_like_archive(OUT / "compressed.pth", ok, {"0": four}, compress=True)
    torch_like_archive(OUT / "not_a_state_dict.pth", {"w": FakeTensor(f32, 0, [4], [1]), "step": 7}, {"0": four})
    write_zip(OUT / "bad_local_offset.pth", zip_entries(OUT / "handmade.pth"), bad_local_offset=True)
    # LONG_BINGET of a memo slot that was never stored.
    pickle_archive(OUT / "absurd_memo.pth", b"\x80\x02j" + struct.pack("<I", 0xFFFFFFF0) + b".")

    whole = (OUT / "tensors.pth").read_bytes()
    (OUT / "truncated.pth").write_bytes(whole[: len(whole) * 3 // 5])
    (OUT / "empty.pth").write_bytes(b"")
    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(4096))
    (OUT / "garbage.bin").write_bytes(b"\x13\x37" + garbage[2:8] + b"\x00" + garbage[9:])
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=False)
    (OUT / "legacy.pth").write_bytes(buf.getvalue())

    def st(header, data):
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h + data

    (OUT / "st_offsets_past_end.safetensors").write_bytes(
        st({"w": {"dtype": "F32", "shape": [100], "data_offsets": [0, 400]}}, four))
    (OUT / "st_size_mismatch.safetensors").write_bytes(
        st({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, four))
    (OUT / "st_bad_dtype.safetensors").write_bytes(
        st({"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}}, four))
    (OUT / "st_huge_header.safetensors").write_bytes(struct.pack("<Q", 1 << 62) + b'{"w": {}}' + four)
    (OUT / "st_bad_json.safetensors").write_bytes(struct.pack("<Q", 12) + b'{"w": [1, 2' + four)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.iterdir():
        f.unlink()
    expected = {}

    sd = make_tensor_dict()
    torch.save(sd, OUT / "tensors.pth")
    buf = io.BytesIO()
    torch.save(sd, buf, pickle_protocol=4)
    (OUT / "tensors_p4.pth").write_bytes(buf.getvalue())
    entries = zip_entries(OUT / "tensors.pth")
    write_zip(OUT / "tensors_zip64.pth", entries, zip64=True)
    write_zip(OUT / "tensors_misaligned.pth", entries, misalign=3)
    save_file({k: v.detach().contiguous().clone() for k, v in sd.items()}, OUT / "tensors.safetensors")
    expected["tensors"] = {k: describe(v) for k, v in sd.items()}
    for name in ["tensors_p4.pth", "tensors_zip64.pth", "tensors_misaligned.pth"]:  # torch agrees they are valid
        loaded = torch.load(OUT / name, weights_only=False)  # our own file; torch refuses FRAME otherwise
        assert all(torch.equal(loaded[k], sd[k]) for k in sd), name

    # unaligned.safetensors: 3 bytes of u8, then f32 data at an odd address (8 + 8 + 3).
    x = torch.tensor([1.5, -2.25, 3.0, 1e-3])
    header = json.dumps({"pad": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
                         "x": {"dtype": "F32", "shape": [4], "data_offsets": [3, 19]}}).encode()
    header += b" " * (-len(header) % 8)
    (OUT / "unaligned.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + bytes([9, 8, 7]) + x.numpy().tobytes())
    expected["unaligned"] = {"x": describe(x), "pad": describe(torch.tensor([9, 8, 7], dtype=torch.uint8))}

    small = collections.OrderedDict(a=torch.arange(6, dtype=torch.float32).view(2, 3), b=torch.tensor([7, 8]))
    torch.save({"model": small, "epoch": 3, "optimizer": {"lr": 0.1, "state": {0: {"step": 5}}}},
               OUT / "wrapped_model.pth")
    torch.save({"state_dict": small, "config": {"name": "tiny", "sizes": [1, 2]}}, OUT / "wrapped_state_dict.pth")
    expected["wrapped"] = {k: describe(v) for k, v in small.items()}

    write_sam_pair(expected)
    evil_files()
    corrupt_files(expected)

    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, into {OUT}")
    assert total < 1 << 20, "fixtures must stay under 1 MB"


if __name__ == "__main__":
    main()
