#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets that have no fixture to start from
(tests/fuzz/corpus/<target>/seed_*): pickles taken out of the checkpoint fixtures, a small vitrt model
file with BSR weights, .npy arrays and COCO RLE strings. Standard library only; deterministic.

    python3 scripts/make_fuzz_seeds.py            # (re)writes the seeds in place
"""
import json
import pathlib
import random
import struct
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures" / "checkpoint"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed_{name}").write_bytes(data)


def pickle_seeds():
    for pth in sorted(FIXTURES.glob("*.pth")):
        try:
            with zipfile.ZipFile(pth) as z:
                for n in z.namelist():
                    if n.endswith("data.pkl"):
                        write("pickle", pth.stem + ".pkl", z.read(n))
        except (zipfile.BadZipFile, OSError):
            continue


def safetensors_bytes(tensors, metadata):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def model_file_seeds():
    rng = random.Random(3)
    # A 32 x 48 weight in 16-blocks: block-rows with 2, 0 and 3 blocks (an empty row included).
    rows, cols, block = 48, 32, 16
    row_ptr = [0, 2, 2, 3]
    col_idx = [0, 1, 1]
    nnz = len(col_idx)
    values = struct.pack(f"<{nnz * block * block}f", *(rng.uniform(-1, 1) for _ in range(nnz * block * block)))
    bias = struct.pack("<48f", *(rng.uniform(-1, 1) for _ in range(48)))
    tensors = {
        "fc.weight.bsr_values": ("F32", [nnz, block, block], values),
        "fc.bias": ("F32", [48], bias),
        "fc.weight.bsr_col_idx": ("I32", [nnz], struct.pack(f"<{nnz}i", *col_idx)),
        "fc.weight.bsr_row_ptr": ("I32", [len(row_ptr)], struct.pack(f"<{len(row_ptr)}i", *row_ptr)),
    }
    meta = {"format": "vitrt-model-1", "fc.weight.bsr": json.dumps({"rows": rows, "cols": cols, "block": block})}
    write("model_file", "bsr_f32.vitrt", safetensors_bytes(tensors, meta))
    # The same structure in BF16 (the upper halves of the F32 values).
    bf = b"".join(values[i + 2:i + 4] for i in range(0, len(values), 4))
    tensors["fc.weight.bsr_values"] = ("BF16", [nnz, block, block], bf)
    write("model_file", "bsr_bf16.vitrt", safetensors_bytes(tensors, meta))


def npy_bytes(descr, shape, raw):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + raw


def npy_seeds():
    write("npy", "f32_1x16x16.npy", npy_bytes("<f4", [1, 16, 16], struct.pack("<256f", *([0.5] * 256))))
    write("npy", "f64_3x4.npy", npy_bytes("<f8", [3, 4], struct.pack("<12d", *range(12))))
    write("npy", "f32_scalar.npy", npy_bytes("<f4", [], struct.pack("<f", 1.0)))


def rle_seeds():
    # First byte: the mask height (1 + byte % 64); the rest: pycocotools' compact string.
    write("rle", "4x4.txt", bytes([3]) + b"0123")
    write("rle", "empty.txt", bytes([0]))
    write("rle", "negative.txt", bytes([9]) + b"R1N0c1`0V1")  # a count that decodes below zero
    write("rle", "7x80.txt", bytes([6]) + b"5:3n5U1jIl1")  # counts 5 10 3 200 40 2 100


if __name__ == "__main__":
    pickle_seeds()
    model_file_seeds()
    npy_seeds()
    rle_seeds()
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())))
