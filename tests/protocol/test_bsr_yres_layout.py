"""Executable model of what src/ops/cuda/bsr_gemm_yres.cu's producer puts in each slot and what its
consumers take each block in a slot to be.

The kernel's ring protocol is bsr_gemm_stream.cu's (test_bsr_stream_protocol.py models it: parts
stand for blocks there). What is particular to this kernel is the agreement between the two roles on
the contents of a slot, which no barrier checks:
- masks[group][slab]: bit q * KB + j for each stored block of block-row group * RG + q in block-column
  slab * KB + j (RG = G / B rows per group of G output columns: 256 at block 16, 384 at block 32;
  KB = 64 / B columns per slab), built from the CSR
  structure (row_ptr, col_idx; columns sorted within a row);
- both roles cut each nonzero mask into parts of at most CAP set bits (the lowest first; CAP = 8 KB of
  blocks: 16 at block 16, 4 at block 32);
- the producer warp, per part: lane q (q < RG, all at once) copies the part's popcount(bits of row
  q) blocks of that row starting at its cursor cur[q] (row_ptr[row] at the unit's start) to slot
  position popcount(the part's bits below row q's), and advances cur[q];
- a consumer, per part, for q = 0 .. RG - 1 and each set bit j of row q's bits, in increasing j, takes
  the next block of the slot as W[group * RG + q, slab * KB + j], multiplies it with x's column block
  slab * KB + j into accumulator set q.

Checked on random weights (ragged, empty, full, ~90% sparse, N not a multiple of G): every stored
block is multiplied exactly once, into the set of its row and against its own column of x; parts
never hold more than CAP blocks. The unsafe variants must be caught, so the model is not vacuous:
parts cut from the highest bits on one side, a producer that places each row's run after the rows above
it instead of below.
Keep this in step with the kernel.
"""
import random

import pytest


def group_cols(B):
    return 384 if B == 32 else 256  # YresCfg::kGroupCols


def masks_of(row_ptr, col_idx, block_rows, slabs, B):
    G = group_cols(B)
    RG, KB = G // B, 64 // B
    assert RG * KB <= 64, "a (group, slab) mask is one 64-bit word"
    groups = (block_rows * B + G - 1) // G
    masks = [[0] * slabs for _ in range(groups)]
    for r in range(block_rows):
        grp, q = divmod(r, RG)
        for k in range(row_ptr[r], row_ptr[r + 1]):
            c = col_idx[k]
            masks[grp][c // KB] |= 1 << (q * KB + c % KB)
    return masks


def next_part(rest, cap, high_first=False):
    bits = [i for i in range(64) if rest >> i & 1]
    if len(bits) <= cap:
        return rest
    chosen = bits[-cap:] if high_first else bits[:cap]
    return sum(1 << i for i in chosen)


def run(B, row_ptr, col_idx, block_rows, slabs, consumer_high_first=False, producer_offset_from_high=False):
    RG, KB = group_cols(B) // B, 64 // B
    cap = 8192 // (B * B * 2)
    masks = masks_of(row_ptr, col_idx, block_rows, slabs, B)
    used = [0] * len(col_idx)  # times each stored block was multiplied
    for grp, row_masks in enumerate(masks):
        cur = [row_ptr[grp * RG + q] if grp * RG + q < block_rows else 0 for q in range(RG)]
        for s in range(slabs):
            rest_p = rest_c = row_masks[s]
            while rest_p or rest_c:
                # producer
                part_p = next_part(rest_p, cap)
                rest_p ^= part_p
                slot = [None] * bin(part_p).count("1")  # the stored-block indices copied, in slot order
                for q in reversed(range(RG)):  # (the lanes copy at once: any order gives the same slot)
                    cnt = bin((part_p >> (q * KB)) & ((1 << KB) - 1)).count("1")
                    if producer_offset_from_high:
                        before = bin(part_p >> ((q + 1) * KB)).count("1")
                    else:
                        before = bin(part_p & ((1 << (q * KB)) - 1)).count("1")
                    assert all(v is None for v in slot[before:before + cnt]), "two rows' runs overlap"
                    slot[before:before + cnt] = range(cur[q], cur[q] + cnt)
                    cur[q] += cnt
                assert None not in slot, "a place of the slot left unfilled"
                assert len(slot) <= cap
                # consumers
                part_c = next_part(rest_c, cap, high_first=consumer_high_first)
                rest_c ^= part_c
                pos = 0
                for q in range(RG):
                    bits = (part_c >> (q * KB)) & ((1 << KB) - 1)
                    for j in range(KB):
                        if bits >> j & 1:
                            assert pos < len(slot), "the consumers take more blocks than the slot holds"
                            k = slot[pos]
                            pos += 1
                            row, col = grp * RG + q, s * KB + j
                            assert row_ptr[row] <= k < row_ptr[row + 1], f"block {k} is not row {row}'s"
                            assert col_idx[k] == col, f"block {k} is column {col_idx[k]}, taken as {col}"
                            used[k] += 1
                assert pos == len(slot), "blocks left in the slot"
            assert rest_p == 0 and rest_c == 0, "blocks of the slab left over"
    assert used == [1] * len(col_idx), "a stored block multiplied other than once"


def random_bsr(rng, block_rows, block_cols, kind):
    row_ptr, col_idx = [0], []
    for r in range(block_rows):
        if kind == "full":
            cols = list(range(block_cols))
        elif kind == "empty":
            cols = []
        elif kind == "sparse":
            cols = [c for c in range(block_cols) if rng.random() < 0.1]
        else:  # ragged: empty, full, one block, first and last, random
            cols = [[], list(range(block_cols)), [rng.randrange(block_cols)], [0, block_cols - 1],
                    [c for c in range(block_cols) if rng.random() < 0.3]][r % 5]
            cols = sorted(set(cols))
        col_idx.extend(cols)
        row_ptr.append(len(col_idx))
    return row_ptr, col_idx


CASES = [(B, N, K, kind) for B in (16, 32)
         for (N, K) in ((320, 192), (256, 3072), (768, 3072), (192, 640), (64, 64), (448, 128))
         for kind in ("ragged", "empty", "full", "sparse")]


@pytest.mark.parametrize("B,N,K,kind", CASES)
def test_every_block_once_in_its_place(B, N, K, kind):
    rng = random.Random(B * 1000003 + N * 1009 + K * 7 + ("ragged", "empty", "full", "sparse").index(kind))
    row_ptr, col_idx = random_bsr(rng, N // B, K // B, kind)
    run(B, row_ptr, col_idx, N // B, K // 64)


@pytest.mark.parametrize("B", [16, 32])
def test_unsafe_variants_are_caught(B):
    rng = random.Random(B)
    row_ptr, col_idx = random_bsr(rng, 768 // B, 3072 // B, "full")  # several parts per (group, slab)
    with pytest.raises(AssertionError):
        run(B, row_ptr, col_idx, 768 // B, 3072 // 64, consumer_high_first=True)
    row_ptr, col_idx = random_bsr(rng, 768 // B, 3072 // B, "ragged")
    with pytest.raises(AssertionError):
        run(B, row_ptr, col_idx, 768 // B, 3072 // 64, producer_offset_from_high=True)
