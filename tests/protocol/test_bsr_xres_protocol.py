"""Executable model of the barrier protocol of src/ops/cuda/bsr_gemm_xres.cu (bsr_xres_kernel).

The protocol, for one CTA and its tiles of 128 tokens (tc: the CTA's local tile count):
- W ring: one producer thread streams the nnz stored blocks in storage order, tile after tile, in
  chunks of cb blocks (one bulk copy each; a tile's last chunk may be shorter, none spans two
  tiles), through S slots (n: the global chunk counter, slot n % S). wfull[slot] (count 1,
  expect_tx, completed when the bulk copy lands); wempty[slot] (count 8: every consumer warp
  arrives once per chunk). Chunk n >= S first needs wempty[slot]'s phase of parity ((n / S) - 1) & 1.
- x: ns = ceil(K / 64) slabs of 64 columns per half (2 halves of 64 tokens). Slab (h, s) has xfull
  (count 1, TMA complete_tx) and xempty (count 4: the 4 warps of warpgroup h). Only used slabs
  (some block's column maps to them: slab = col * B / 64) are loaded, waited for and released; the
  last block in storage order reading a slab carries the kLastUse flag on its column entry.
- Producer, per tile: first finish the previous tile's pending slab loads, blocking (try_x(true));
  then mark every used slab of both halves pending for this tile and try them without blocking
  (try_x(false): all of them for the CTA's first tile; later, one poll tests one pending slab, round
  robin in bit order); a load for tile tc > 0 needs xempty's phase of parity (tc - 1) & 1. While
  the next W slot is not free it polls (then __nanosleep); with none pending it blocks on the slot.
  After the last tile, try_x(true).
- Consumers: 8 warps, warp w on half h = w // 4. Per tile, block-row and stored block: at a chunk's
  first block wait wfull (the ring round's parity); at the tile's first block reading a slab wait
  xfull[h][slab] (parity tc & 1; the warp remembers the slabs it has seen land in this tile); the
  wgmma reads the W slot and the x slab; once its wgmma has retired the warp arrives on
  wempty[slot] if the block ends its chunk and, if the block is flagged, on xempty[h][slab].
  Block-rows go in groups of rg (the kernel's RG: pairs at block 32); with batched
  (Retire::kAtChunk) the blocks retire together at the end of their chunk or of their group
  (wgmma.wait_group 0), whichever comes first; otherwise (Retire::kEach) each block retires before
  the next is issued. An empty block-row touches no barrier (its epilogue writes act(bias)). (The
  kernel's Pipe form, a block retired once its group's next block was issued, is deleted, and so is
  its model.)
- Two pairs (the kernel's P = 2, VITRT_BSR_XRES_PAIRS=2; chunk by chunk, in groups): 16 consumer
  warps, warpgroup wg = warp // 4 on half wg % 2 of pair wg // 2; pair q takes groups q, q + 2, ...
  from its own ring (S slots, wempty count 8: its 8 warps) filled by its own producer thread, in
  chunks of cb blocks from each group's first block (a group's last chunk may be shorter);
  producer 0 also loads x. kLastUse marks each slab's last reader among each pair's blocks, and a
  slab's xempty counts 4 warps per pair that reads it.
- Batched (the kernel's Retire::kAtChunk, table-driven): a warp waits for a group's slabs (those not
  yet seen in the tile) before the group's first block, and arrives on the xempty of the slabs whose
  flagged block lies in the group after the group's last retirement (not at the blocks).

A hang or a wrong parity costs a GPU call, so the protocol is run here under random interleavings
(a seeded RNG picks the next agent, with per-run speed weights), random copy latencies and random
sparsity patterns (blocks 16 / 32 / 64, K up to 768, S in {3, 8, 16}, 1-4 tiles, empty rows, rows longer
than the ring, unused slabs, nnz = 0). Buffer contents are tags, ("w", tile, k) and
("x", tile, h, slab), so a read of garbage or of another tile's data is caught. Checked: no
deadlock; every MMA reads the W block and the x slab it expects; no buffer is refilled while a warp
reads it or before its previous fill landed; no copy is in flight when the CTA exits; and the runs
go through every producer path (loads from the tile start, the slot wait's poll and the blocking
flushes; loads overlapping the previous tile; chunks cut short by a group's end). The unsafe variants (run()'s flags) must be caught,
so the model is not vacuous: a consumer skipping the xfull wait, slabs released at their first use,
the producer reloading a slab without its xempty wait, the producer blocking on a W slot while slab
loads are pending (deadlocks: the block that frees the slot may need such a slab), a W slot released
before its wgmma retires, two pairs' slabs released after one pair's 4 warps.

Agents: the producer thread and the 8 consumer warps (a warp's 32 lanes move together; lane 0
arrives). A warpgroup's wgmma runs once its 4 warps have issued it, so a warp's wgmma.wait_group
also waits for the other 3; a warp's operands count as read from its own issue to its retirement.
Each round of the producer's slot wait (test the slot, poll one slab, __nanosleep) is one step.

The mbarrier semantics modelled, the hazards and the scheduler are mbarrier_model.py's. Keep this in
step with the kernel.
"""
import collections
import random

from mbarrier_model import Bar, StaleRead, check_refill, hazards, interleave


def slab_flags(B, cols, first=False, blocks=None):
    """The kernel's set-up: {slab: the block (storage index) carrying kLastUse} among `blocks` (the
    storage indices of one pair's blocks; all of them by default). first=True: the unsafe variant
    flagging each slab's first reader."""
    flag = {}
    for i in (range(len(cols)) if blocks is None else blocks):
        s = cols[i] * B // 64
        if first and s in flag:
            continue
        flag[s] = i
    return flag


def pair_chunks(rp, rg, cb, pairs):
    """Each pair's W chunks, as lists of storage indices in the order its producer copies them: with
    one pair, all blocks in chunks of cb from the first; with two, pair q's groups (q, q + 2, ...),
    chunks of cb from each group's first block (a group's last chunk may be shorter)."""
    nnz, rows = rp[-1], len(rp) - 1
    segments = [[(0, nnz)]] if pairs == 1 else [
        [(rp[g * rg], rp[(g + 1) * rg]) for g in range(q, rows // rg, 2)] for q in range(2)]
    return [[list(range(k, min(k + cb, e))) for b, e in seg for k in range(b, e, cb)] for seg in segments]


def run(B, S, K, rows, tiles, seed, rg=1, cb=1, batched=False, pairs=1, skip_xfull_wait=False, release_at_first_use=False, skip_xempty_wait=False,
        block_on_slot_with_x_pending=False, release_w_before_retire=False, release_chunk_at_every_block=False,
        xempty_counts_one_pair=False):
    """One CTA of `tiles` tiles; rows: the block-rows' column lists in storage order; rg: block-rows
    per group (the kernel's RG: 2 at block 32 with an even row count); cb: blocks per W chunk;
    pairs: the kernel's P (2: two pairs of warpgroups on alternate groups, each with its own W ring
    of S slots and producer; chunk by chunk and in groups only); batched: the kernel's
    Retire::kAtChunk (chunk by chunk, a group's slabs waited for before its first block and released
    after its last)."""
    assert rg == 1 or (rg == 64 // B and len(rows) % rg == 0)
    assert pairs == 1 or (pairs == 2 and batched and rg > 1)
    rng = random.Random(seed)
    cols = [c for row in rows for c in row]
    nnz, ns = len(cols), (K + 63) // 64
    assert all(0 <= c < K // B for c in cols) and ns <= 12
    rp = [0]
    for row in rows:
        rp.append(rp[-1] + len(row))
    slab_of = [c * B // 64 for c in cols]
    chunks = pair_chunks(rp, rg, cb, pairs)
    pair_blocks = [[k for ch in chunks[q] for k in ch] for q in range(pairs)]
    chunk_first = {ch[0] for q in range(pairs) for ch in chunks[q]}
    chunk_last = {ch[-1] for q in range(pairs) for ch in chunks[q]}
    chunk_head = {k: ch[0] for q in range(pairs) for ch in chunks[q] for k in ch}  # the W tag's block
    flags = [slab_flags(B, cols, first=release_at_first_use, blocks=pair_blocks[q]) for q in range(pairs)]
    flagged = set().union(*(f.values() for f in flags))
    used = sorted(set().union(*flags))
    readers = [4 * sum(s in f for f in flags) or 4 for s in range(ns)]  # the kernel's xempty counts
    if xempty_counts_one_pair:
        readers = [4] * ns

    xfull = [[Bar(1) for _ in range(ns)] for _ in range(2)]
    xempty = [[Bar(readers[s]) for s in range(ns)] for _ in range(2)]
    wfull = [[Bar(1) for _ in range(S)] for _ in range(pairs)]
    wempty = [[Bar(8) for _ in range(S)] for _ in range(pairs)]
    wbuf, xbuf = [[None] * S for _ in range(pairs)], [[None] * ns for _ in range(2)]  # contents (tags); None: garbage
    wread, xread = [[0] * S for _ in range(pairs)], [[0] * ns for _ in range(2)]  # warps whose wgmma reads the buffer
    wbusy, xbusy = [[False] * S for _ in range(pairs)], [[False] * ns for _ in range(2)]  # a fill in flight
    inflight = []  # [steps left, contents, busy, index, tag, full barrier]
    warps = 8 * pairs
    passed = [0] * warps  # blocks each consumer warp has passed (over all tiles)
    issued = [0] * warps  # blocks whose wgmma each consumer warp has issued
    stats = collections.Counter()  # how often the protocol's less common paths ran

    def copy(what, buf, readers, busy, i, tag, bar):
        check_refill(f"{what} ({tag})", readers[i], busy[i])
        buf[i], busy[i] = None, True  # the copy may write any part of it from now on
        inflight.append([rng.randint(1, 40), buf, busy, i, tag, bar])

    def producer(q):  # q: the pair whose W it copies (producer 0 also loads x)
        pending, pend_tc = [], 0  # pending (h, s) in the kernel's bit order (16 h + s)
        wfull_q, wempty_q, wbuf_q, wread_q, wbusy_q = wfull[q], wempty[q], wbuf[q], wread[q], wbusy[q]

        def x_ready(h, s):  # the load of slab (h, s) for tile pend_tc may be issued
            return pend_tc == 0 or skip_xempty_wait or xempty[h][s].done((pend_tc - 1) & 1)

        poll = [-1]  # the bit (16 h + s) polled last

        def issue_x(h, s, where):
            stats[f"x load from {where}"] += 1
            if any(passed[w] < pend_tc * len(pair_blocks[w // 8]) for w in range(warps) if (w // 4) % 2 == h):
                stats["x load while its half computes the previous tile"] += 1
            copy("x slab", xbuf[h], xread[h], xbusy[h], s, ("x", pend_tc, h, s), xfull[h][s])
            pending.remove((h, s))

        def try_x(block, where):
            if not block and pend_tc > 0:
                # A poll tests one pending slab, round robin in bit order, and issues it if free.
                if not pending:
                    return
                bits = [16 * h + s for h, s in pending]
                after = [b for b in bits if b > poll[0]]
                poll[0] = min(after) if after else min(bits)
                h, s = divmod(poll[0], 16)
                if x_ready(h, s):
                    issue_x(h, s, where)
                    yield None
                return
            for h, s in list(pending):
                if not x_ready(h, s):
                    if not block:
                        continue
                    stats["producer blocked on xempty"] += 1
                    yield lambda h=h, s=s: x_ready(h, s)
                issue_x(h, s, where)
                yield None

        n = 0
        for tc in range(tiles):
            yield from try_x(True, "the tile start (blocking)")
            pending[:] = [(h, s) for h in (0, 1) for s in used] if q == 0 else []
            pend_tc = tc
            yield from try_x(False, "the tile start")
            for chunk in chunks[q]:
                k = chunk[0]
                stats["chunk cut short by its group's end"] += pairs == 2 and len(chunk) < cb and chunk[-1] + 1 < nnz
                slot = n % S
                if n >= S:  # every consumer warp of the pair must have passed the slot's previous chunk
                    bar, par = wempty_q[slot], ((n // S) - 1) & 1
                    if block_on_slot_with_x_pending:
                        yield lambda: bar.done(par)
                    while not bar.done(par):
                        yield from try_x(False, "the slot wait")
                        if not pending:
                            stats["producer blocked on a slot"] += 1
                            yield lambda: bar.done(par)
                            break
                        # __nanosleep, then test the slot and poll the next slab.
                        stats["producer polled"] += 1
                        yield None
                copy("W slot", wbuf_q, wread_q, wbusy_q, slot, ("w", tc, k), wfull_q[slot])
                yield None
                n += 1
        yield from try_x(True, "the end (blocking)")

    def consumer(warp):
        wg = warp // 4  # its warpgroup: half h of pair q
        h, q, n, m = wg % 2, wg // 2, 0, 0  # n: the chunk counter; m: the block counter (over all tiles)
        wfull_q, wempty_q, wbuf_q, wread_q = wfull[q], wempty[q], wbuf[q], wread[q]

        def retire(m, slot, slab, k):  # block m's wgmma group has retired: release its buffers
            wread_q[slot] -= 1
            xread[h][slab] -= 1
            if not release_w_before_retire and chunk_ends(k):
                wempty_q[slot].arrive()
            if k in flagged and not batched:
                xempty[h][slab].arrive()
            passed[warp] = m + 1

        def chunk_ends(k):
            return release_chunk_at_every_block or k in chunk_last

        for tc in range(tiles):
            seen = set()  # the slabs this warp has waited for in this tile
            for r0 in range(q * rg, len(rows), pairs * rg):
                group = range(rp[r0], rp[min(r0 + rg, len(rows))])
                if batched and not skip_xfull_wait:  # the group's slabs not yet seen, before its first block
                    for slab in sorted({slab_of[k] for k in group} - seen):
                        xf = xfull[h][slab]
                        yield lambda xf=xf: xf.done(tc & 1)
                        seen.add(slab)
                held = []  # batched: the blocks issued and not yet retired
                for r in range(r0, min(r0 + rg, len(rows))):
                    for k in range(rp[r], rp[r + 1]):
                        slot, slab = n % S, slab_of[k]
                        wf, wpar, xf = wfull_q[slot], (n // S) & 1, xfull[h][slab]
                        if k in chunk_first:
                            yield lambda: wf.done(wpar)
                        if not skip_xfull_wait and slab not in seen:
                            yield lambda: xf.done(tc & 1)
                            seen.add(slab)
                        if wbuf_q[slot] != ("w", tc, chunk_head[k]):
                            raise StaleRead(f"warp {warp} tile {tc} block {k}: W slot {q},{slot} holds {wbuf_q[slot]}")
                        if xbuf[h][slab] != ("x", tc, h, slab):
                            raise StaleRead(f"warp {warp} tile {tc} block {k}: x slab {h},{slab} holds {xbuf[h][slab]}")
                        if release_w_before_retire and chunk_ends(k):
                            wempty_q[slot].arrive()
                        wread_q[slot] += 1
                        xread[h][slab] += 1
                        issued[warp] = m + 1
                        # The wgmma in flight until a wgmma.wait_group retires it (wait_group 0 right
                        # away, or at the chunk's end); a warpgroup's wgmma runs once its 4 warps have
                        # issued it. Its operands count as read from this
                        # warp's issue on.
                        if batched:
                            held.append((m, slot, slab, k))
                            if k in chunk_last:  # the chunk ends: wait_group 0
                                stats["blocks retired at their chunk's end"] += len(held) > 1
                                yield lambda m=m: min(issued[4 * wg:4 * wg + 4]) > m
                                for blk in held:
                                    retire(*blk)
                                held.clear()
                        else:
                            yield lambda m=m: min(issued[4 * wg:4 * wg + 4]) > m
                            retire(m, slot, slab, k)
                        if k in chunk_last:  # the chunk's last block
                            stats["chunk of several blocks passed"] += k != chunk_head[k]
                            stats["tile's last chunk shorter"] += k == nnz - 1 and k - chunk_head[k] < cb - 1
                            n += 1
                        m += 1
                if held:  # batched: the group's blocks after its last chunk end (wait_group 0)
                    stats["blocks retired at their group's end"] += 1
                    pm = held[-1][0]
                    yield lambda pm=pm: min(issued[4 * wg:4 * wg + 4]) > pm
                    for blk in held:
                        retire(*blk)
                    held.clear()
                if batched:  # after the group's last retirement: the slabs whose last use is in it
                    for slab in sorted({slab_of[k] for k in group if k in flagged}):
                        xempty[h][slab].arrive()
                yield None  # the group's epilogue (no barrier)

    def land(c):  # a copy landed
        _, buf, busy, i, tag, bar = c
        buf[i], busy[i] = tag, False
        bar.arrive()

    agents = [producer(q) for q in range(pairs)] + [consumer(w) for w in range(warps)]
    interleave(agents, rng, inflight, land, f'0..{pairs - 1}: producers, {pairs} + w: consumer warp w')
    return stats


def random_case(seed):
    rng = random.Random(1000 + seed)
    B, S = rng.choice((16, 32, 64)), rng.choice((3, 8, 16))  # the kernel: S = 3 / 8 / 16 at B = 64 / 32 / 16
    # Blocks per W chunk: the kernel's powers of two up to 8 KB per copy (xres_ring_for).
    cb = rng.choice([c for c in (1, 2, 4, 8, 16) if c * B * B * 2 <= 8192])
    K = B * rng.randint(1, 768 // B)
    pool = rng.sample(range(K // B), rng.randint(1, K // B))  # the columns in use (some slabs unused)
    rows = []
    for _ in range(rng.randint(1, 8)):
        m = min(len(pool), rng.choice((0, 0, 1, 1, 2, 3, 5, 9, 12, 24)))
        rows.append(sorted(rng.sample(pool, m)))
    if rng.random() < 0.05:
        rows = [[] for _ in rows]
    while sum(map(len, rows)) > 40:  # keeps a run short
        max(rows, key=len).pop()
    group = 64 // B  # the kernel's RG where the row count allows
    rg = group if len(rows) % group == 0 and rng.random() < 0.7 else 1
    mode = rng.choice(("each", "each", "chunk", "chunk", "chunk"))
    pairs = 2 if mode == "chunk" and rg > 1 and rng.random() < 0.6 else 1
    return dict(B=B, S=S, K=K, rows=rows, tiles=rng.randint(1, 4), seed=seed, rg=rg, cb=cb,
                batched=mode == "chunk", pairs=pairs)


def failures(count, stop_at=(), stats=None, **variant):
    return hazards(run, random_case, count, stop_at, stats, **variant)


def test_random_cases_cover_the_edge_cases():
    seen = collections.Counter()
    for seed in range(400):
        c = random_case(seed)
        cols = [col for row in c["rows"] for col in row]
        ns = (c["K"] + 63) // 64
        seen["nnz=0"] += not cols
        seen["empty row"] += any(not row for row in c["rows"]) and bool(cols)
        seen[f"row longer than S={c['S']}"] += any(len(row) > c["S"] for row in c["rows"])
        seen["unused slab"] += bool(cols) and len(slab_flags(c["B"], cols)) < ns
        seen["slab read twice"] += len(slab_flags(c["B"], cols)) < len(cols)
        seen[f"B={c['B']}"] += 1
        seen[f"tiles={c['tiles']}"] += 1
        seen["K=768"] += c["K"] == 768
        seen[f"rg={c['rg']}"] += 1
        seen[f"cb={c['cb']}"] += 1
        seen[f"batched={c['batched']}"] += 1
        seen["nnz not a multiple of cb"] += len(cols) % c["cb"] != 0
        seen[f"pairs={c['pairs']}"] += 1
        seen["pairs=2, odd group count"] += c["pairs"] == 2 and len(c["rows"]) // c["rg"] % 2 == 1
    for key in ("pairs=2", "pairs=2, odd group count", "batched=True", "cb=1", "cb=2", "cb=4", "cb=8", "cb=16", "nnz not a multiple of cb", "nnz=0", "empty row", "row longer than S=3", "row longer than S=8", "unused slab", "slab read twice",
                "B=16", "B=32", "B=64", "tiles=1", "tiles=4", "K=768", "rg=1", "rg=2", "rg=4",
                "batched=False"):
        assert seen[key] >= 3, (key, seen)


def test_kernel_protocol_has_no_deadlock_or_hazard():
    stats = collections.Counter()
    assert failures(400, stats=stats) == {}
    # The runs went through every path of the producer, and loads overlapped the previous tile.
    for path in ("x load from the tile start", "x load from the tile start (blocking)", "x load from the slot wait",
                 "x load from the end (blocking)", "x load while its half computes the previous tile",
                 "producer blocked on xempty", "producer blocked on a slot", "producer polled",
                 "chunk of several blocks passed",
                 "tile's last chunk shorter", "blocks retired at their chunk's end",
                 "blocks retired at their group's end", "chunk cut short by its group's end"):
        assert stats[path] > 0, (path, stats)


def test_kernel_protocol_directed_cases():
    cases = [
        dict(B=64, S=3, K=768, rows=[], tiles=3),  # no block-rows
        dict(B=64, S=3, K=768, rows=[[], [], []], tiles=4),  # nnz = 0
        dict(B=64, S=3, K=64, rows=[[0]], tiles=4),  # one block, one slab
        dict(B=64, S=3, K=768, rows=[list(range(12))], tiles=4),  # one row, every slab, 4 ring rounds
        dict(B=32, S=8, K=768, rows=[list(range(24)), [], [3]], tiles=4),  # a row of 3 ring rounds
        dict(B=32, S=8, K=96, rows=[[0, 1, 2], [2], [], [0]], tiles=3),  # K = 96: a half-used slab
        dict(B=64, S=3, K=768, rows=[[5]] * 9, tiles=4),  # every block reads one slab
        dict(B=32, S=3, K=512, rows=[[0, 15], [1, 14], [7], [0]], tiles=4),  # slab 0's last use at the end
        dict(B=32, S=8, K=768, rows=[list(range(24)), list(range(24))], tiles=3),  # a pair of 6 ring rounds
        dict(B=32, S=3, K=768, rows=[[], [23], [], []], tiles=4),  # pairs with empty rows
        dict(B=16, S=16, K=768, rows=[[0, 47], [5], [], [20, 21, 22]] * 2, tiles=3),  # groups of 4 rows
        dict(B=16, S=16, K=48, rows=[[0, 1, 2]] * 4, tiles=4),  # K = 48: one slab, three blocks in it
        # Chunked W (the kernel's defaults: 8 KB per copy, 3 slots): chunks across rows and groups,
        # a tile's short last chunk, a chunk longer than the tile's blocks.
        dict(B=16, S=3, cb=16, K=768, rows=[[0, 47], [5], [], [20, 21, 22]] * 2, tiles=3),
        dict(B=16, S=3, cb=16, K=768, rows=[list(range(0, 48, 2))] * 4, tiles=3),
        dict(B=16, S=3, cb=8, K=48, rows=[[0, 1, 2]] * 4, tiles=4),
        dict(B=32, S=3, cb=4, K=768, rows=[list(range(24)), [], [3], [1, 2]], tiles=4),
        dict(B=32, S=4, cb=2, K=96, rows=[[0, 1, 2], [2], [], [0]], tiles=3),
        # Two pairs (the kernel's P = 2): one group (pair 1 idle), a slab only one pair reads, groups
        # longer than the ring, an odd group count.
        dict(B=16, S=3, cb=8, K=768, rows=[[0, 47], [5], [], [20, 21, 22]], tiles=4),
        dict(B=32, S=3, cb=2, K=768, rows=[[0], [1], [23], [22]], tiles=4),
        dict(B=16, S=3, cb=8, K=768, rows=[list(range(48))] * 8, tiles=2),
        dict(B=32, S=6, cb=1, K=768, rows=[[0, 5], [], [1], [2, 3], [], [23]], tiles=4),
    ]
    for c in cases:
        group = 64 // c["B"]
        rgs = (1, group) if group > 1 and len(c["rows"]) % group == 0 else (1,)
        for batched, pairs in ((False, 1), (True, 1), (True, 2)):
            for rg in rgs:
                if pairs == 2 and rg == 1:
                    continue
                for seed in range(25):
                    run(**c, seed=seed, rg=rg, batched=batched, pairs=pairs)


def test_consumer_skipping_the_xfull_wait_is_caught():
    assert failures(100, stop_at=("StaleRead",), skip_xfull_wait=True)["StaleRead"] > 0


def test_releasing_a_slab_at_its_first_use_is_caught():
    # The producer reloads the slab for the next tile while later blocks of this tile still read it.
    bad = failures(200, stop_at=("Overwrite", "StaleRead"), release_at_first_use=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_reloading_a_slab_without_waiting_for_xempty_is_caught():
    bad = failures(100, stop_at=("Overwrite", "StaleRead"), skip_xempty_wait=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_blocking_on_a_w_slot_while_slab_loads_are_pending_deadlocks():
    # Why the producer polls x while it waits for a slot: the block that frees the slot may need a
    # slab whose load still waits for the previous tile's release.
    assert failures(300, stop_at=("Deadlock",), block_on_slot_with_x_pending=True)["Deadlock"] > 0


def test_releasing_a_w_slot_before_the_wgmma_retires_is_caught():
    bad = failures(200, stop_at=("Overwrite", "StaleRead"), release_w_before_retire=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_releasing_a_w_chunk_at_each_of_its_blocks_is_caught():
    # A chunk's slot is handed back once per chunk, after its last block: arriving at every block
    # completes the slot's phase while the chunk's later blocks are still to be read.
    bad = failures(300, stop_at=("Overwrite", "StaleRead", "Deadlock"), release_chunk_at_every_block=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_two_pairs_counting_one_pair_per_slab_is_caught():
    # With two pairs a slab both read is free for the next tile only once the 8 warps of its half
    # (4 per pair) have passed their last use of it.
    bad = failures(300, stop_at=("Overwrite", "StaleRead", "Deadlock"), xempty_counts_one_pair=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad
