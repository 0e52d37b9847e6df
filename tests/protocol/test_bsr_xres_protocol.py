"""Executable model of the barrier protocol of src/ops/cuda/bsr_gemm_xres.cu (bsr_xres_kernel<B, Gelu, Split>).

Two forms (XresCfg<B, Split>). Default: tiles of 128 tokens, x in 2 halves of 64 tokens, warpgroup
h (warps 4h .. 4h + 3) reads half h and computes every block-row. Split: tiles of 64 tokens, one x
half (hx = 0) that both warpgroups read, warpgroup h computing the block-rows r with r % 2 == h.
The protocol, for one CTA and its tiles (tc: the CTA's local tile count):
- W ring: one producer thread streams all nnz stored blocks in storage order, tile after tile (both
  forms), through S slots (n: the global block counter, slot n % S; the kernel's S is 3 / 8 at
  block 64 / 32, Split 14 / 48). wfull[slot] (count 1, expect_tx, completed when the bulk copy
  lands); wempty[slot] (count kBlockPassers: 8, every consumer warp passes every block; Split 4,
  the warps of the warpgroup owning the block's row). Block n >= S first needs wempty[slot]'s phase
  of parity ((n / S) - 1) & 1. A consumer warp waits on wfull[slot] with parity (n / S) & 1 for
  each block it computes; with Split it steps its ring position over the other warpgroup's blocks
  (advance_to: no wait, no arrival; at the tile's end up to nnz).
- x: ns = ceil(K / 64) slabs of 64 columns per half. Slab (h, s) has xfull (count 1, TMA
  complete_tx) and xempty (count 4 * readers, readers = the warpgroups reading the slab: 1 without
  Split, 1 or 2 with it; the kernel takes max(1, readers), unused slabs are never loaded or waited
  on). Only used slabs (some block's column maps to them: slab = col * B / 64) are loaded, waited
  for and released; for each warpgroup, the last block of its block-rows in storage order reading a
  slab carries the kLastUse flag on its column entry (Split: up to two flags per slab, even rows and
  odd rows), and the warpgroup's 4 warps arrive on xempty there.
- Producer, per tile: first finish the previous tile's pending slab loads, blocking (try_x(true));
  then mark every used slab of every half pending for this tile (Split: half 0 only) and try them
  without blocking (try_x(false): all of them for the CTA's first tile; later, one poll tests one
  pending slab, round robin in bit order 16 h + s); a load for tile tc > 0 needs xempty's phase of
  parity (tc - 1) & 1. While the next W slot is not free it polls (then __nanosleep); with none
  pending it blocks on the slot. After the last tile, try_x(true).
- Consumers: 8 warps. Per tile, for each of its block-rows and stored block: wait wfull (the ring
  round's parity), wait xfull[hx][slab] (parity tc & 1), the wgmma reads the W slot and the x slab
  and retires, then the warp arrives on wempty[slot] and, if the block is flagged, on
  xempty[hx][slab]. An empty block-row touches no barrier (its epilogue writes act(bias)).

A hang or a wrong parity costs a GPU call, so the protocol is run here under random interleavings
(a seeded RNG picks the next agent, with per-run speed weights), random copy latencies and random
sparsity patterns (block 32 / 64, K up to 768, S in {3, 8}; Split: S in {2, 3, 5, 8} and the
kernel's; 1-4 tiles, empty rows, rows longer than the ring, unused slabs, nnz = 0, slabs read by
one or both warpgroups, runs of more than S blocks of one warpgroup's rows). Buffer contents are
tags, ("w", tile, k) and ("x", tile, h, slab), so a read of garbage or of another tile's data is
caught. Checked: no deadlock (nor a producer polling for ever); every MMA reads the W block and the
x slab it expects; no buffer is refilled while a warp reads it or before its previous fill landed;
no copy is in flight when the CTA exits; and the runs go through every producer path (loads from
the tile start, the slot wait's poll and the blocking flushes; loads overlapping the previous tile;
Split: the warpgroups more than S blocks apart). The unsafe variants (run()'s flags) must be
caught, so the model is not vacuous: a consumer skipping the xfull wait, slabs released at their
first use, the producer reloading a slab without its xempty wait, the producer blocking on a W slot
while slab loads are pending (deadlocks: the block that frees the slot may need such a slab), a W
slot released before its wgmma retires; Split: xempty counting one warpgroup for a slab both read,
one kLastUse per slab instead of one per warpgroup, a warp waiting on the fills of the blocks it
steps over without releasing them.

Split with ONE set of W full barriers is NOT safe (test_split_with_one_wfull_set_passes_a_w_slot_early,
found by this model in the kernel's first Split form): a warp that stepped over the other
warpgroup's blocks can wait for block n while the slot's fill of block n - S has not landed;
wfull[slot] then shows the parity the wait asks for, and it passes. The kernel now has one set per
warpgroup (XresCfg::kFullSets, w_fix "wfull_per_warpgroup", the Split form checked here by
default); "pass_every_block" is a second repair, also checked safe, that the kernel does not use.

Agents: the producer thread and the 8 consumer warps (a warp's 32 lanes move together; lane 0
arrives). A warpgroup's wgmma runs once its 4 warps have issued it, so a warp's wgmma.wait_group
also waits for the other 3; a warp's operands count as read from its own issue to its retirement.
Each round of the producer's slot wait (test the slot, poll one slab, __nanosleep) is one step.

mbarrier semantics modelled: a phase completes when its expected arrivals have come;
try_wait.parity / test_wait.parity(P) is true iff the phase of parity P has completed, i.e. the
current (incomplete) phase's parity differs from P. A copy's arrive.expect_tx and its complete_tx
are one arrival here, when the bytes land. Keep this in step with the kernel.
"""
import collections
import random

import pytest


class Bar:
    def __init__(self, count):
        self.count, self.pending, self.phase = count, count, 0

    def arrive(self):
        self.pending -= 1
        assert self.pending >= 0
        if self.pending == 0:
            self.phase += 1
            self.pending = self.count

    def done(self, parity):
        return (self.phase & 1) != parity


class Hazard(Exception):
    pass


class StaleRead(Hazard):  # an MMA read a buffer before its fill landed, or another tile's data
    pass


class Overwrite(Hazard):  # a copy into a buffer a warp reads, or whose previous fill is in flight
    pass


class Deadlock(Hazard):
    pass


# Split with one shared wfull set (w_fix "one_wfull_set", the kernel's first Split form) lets a
# warp wait for a slot's fill while the slot's previous fill, of the other warpgroup's block, has
# not landed: see test_split_with_one_wfull_set_passes_a_w_slot_early. Two repairs, modelled and
# checked safe:
# - "wfull_per_warpgroup" (the kernel's): wfull[2][S]; the producer completes block k's copy on
#   wfull[owner(k)][slot], and a consumer warp waits with the parity of its own warpgroup's fills of
#   that slot (one bit per slot, flipped after each of its blocks there);
# - "pass_every_block": every consumer warp waits for the fill of each block it steps over and
#   arrives on its wempty (count 8, as without Split); the ring couples the warpgroups again.
W_FIXES = ("wfull_per_warpgroup", "pass_every_block")
KERNEL_W_FIX = "wfull_per_warpgroup"
KERNEL_S = {(64, False): 3, (32, False): 8, (64, True): 14, (32, True): 48}  # XresCfg<B, Split>::S


def slab_flags(B, rows, split=False, first=False):
    """The kernel's set-up: {(slab, g): the block (storage index) carrying kLastUse}, g the warpgroup
    computing the block's row (row % 2 with Split, else 0: every warpgroup computes every row).
    first=True: the unsafe variant flagging each slab's first reader."""
    flag, i = {}, 0
    for r, row in enumerate(rows):
        for c in row:
            key = (c * B // 64, r % 2 if split else 0)
            if not (first and key in flag):
                flag[key] = i
            i += 1
    return flag


def run(B, S, K, rows, tiles, seed, split=False, w_fix=None, skip_xfull_wait=False, release_at_first_use=False,
        skip_xempty_wait=False, block_on_slot_with_x_pending=False, release_w_before_retire=False,
        xempty_count_one_warpgroup=False, one_flag_per_slab=False, wait_on_skipped_blocks=False):
    """One CTA of `tiles` tiles; rows: the block-rows' column lists in storage order. split: the
    Split form; w_fix (Split only): one of W_FIXES (None: the kernel's, KERNEL_W_FIX), or
    "one_wfull_set", the unsafe first form."""
    if split and w_fix is None:
        w_fix = KERNEL_W_FIX
    assert w_fix in ("one_wfull_set",) + W_FIXES and split or w_fix is None
    rng = random.Random(seed)
    cols = [c for row in rows for c in row]
    nnz, ns = len(cols), (K + 63) // 64
    assert all(0 <= c < K // B for c in cols) and ns <= 12
    rp, owner = [0], []  # owner[k]: the warpgroup computing block k's row (Split), else 0
    for r, row in enumerate(rows):
        rp.append(rp[-1] + len(row))
        owner += [r % 2 if split else 0] * len(row)
    slab_of = [c * B // 64 for c in cols]
    flag = slab_flags(B, rows, split and not one_flag_per_slab, first=release_at_first_use)
    flagged = set(flag.values())
    readers = collections.Counter(s for s, _ in slab_flags(B, rows, split))  # warpgroups reading slab s
    used = sorted(readers)
    halves = (0,) if split else (0, 1)  # x halves; Split: one, read by both warpgroups
    passers = 8 if not split or w_fix == "pass_every_block" else 4  # C::kBlockPassers

    xfull = [[Bar(1) for _ in range(ns)] for _ in halves]
    xempty = [[Bar(4 * (1 if xempty_count_one_warpgroup else max(1, readers[s]))) for s in range(ns)]
              for _ in halves]
    wempty = [Bar(passers) for _ in range(S)]
    if w_fix == "wfull_per_warpgroup":  # wfull[g][slot]: the fills of warpgroup g's blocks only
        wfull = [[Bar(1) for _ in range(S)] for _ in (0, 1)]
    else:
        wfull = [Bar(1) for _ in range(S)]
    wbuf, xbuf = [None] * S, [[None] * ns for _ in halves]  # contents (tags); None: garbage
    wread, xread = [0] * S, [[0] * ns for _ in halves]  # warps whose wgmma reads the buffer
    wbusy, xbusy = [False] * S, [[False] * ns for _ in halves]  # a fill in flight
    inflight = []  # [steps left, contents, busy, index, tag, full barrier]
    passed = [0] * 8  # ring positions (blocks of the stream) each consumer warp is past, over all tiles
    issued = [0] * 8  # 1 + the stream position of the last block whose wgmma each warp has issued
    stats = collections.Counter()  # how often the protocol's less common paths ran
    if split:
        stats["slab read by both warpgroups"] += sum(readers[s] == 2 for s in used)
        stats["slab read by one warpgroup"] += sum(readers[s] == 1 for s in used)

    def copy(what, buf, readers, busy, i, tag, bar):
        if readers[i]:
            raise Overwrite(f"{what} refilled while a warp reads it ({tag})")
        if busy[i]:
            raise Overwrite(f"{what} refilled before its previous fill landed ({tag})")
        buf[i], busy[i] = None, True  # the copy may write any part of it from now on
        inflight.append([rng.randint(1, 40), buf, busy, i, tag, bar])

    def producer():
        pending, pend_tc = [], 0  # pending (h, s) in the kernel's bit order (16 h + s)

        def x_ready(h, s):  # the load of slab (h, s) for tile pend_tc may be issued
            return pend_tc == 0 or skip_xempty_wait or xempty[h][s].done((pend_tc - 1) & 1)

        poll = [-1]  # the bit (16 h + s) polled last

        def issue_x(h, s, where):
            stats[f"x load from {where}"] += 1
            if min(passed[w] for w in range(8) if split or w // 4 == h) < pend_tc * nnz:
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
            pending[:] = [(h, s) for h in halves for s in used]
            pend_tc = tc
            yield from try_x(False, "the tile start")
            for k in range(nnz):
                slot = n % S
                if n >= S:  # every warp passing the slot's previous block must have passed it
                    bar, par = wempty[slot], ((n // S) - 1) & 1
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
                full = wfull[owner[k]][slot] if w_fix == "wfull_per_warpgroup" else wfull[slot]
                copy("W slot", wbuf, wread, wbusy, slot, ("w", tc, k), full)
                yield None
                n += 1
        yield from try_x(True, "the end (blocking)")

    def consumer(warp):
        h = warp // 4
        hx = 0 if split else h  # its x half
        mine = range(h, len(rows), 2) if split else range(len(rows))  # its block-rows
        others = [w for w in range(8) if w // 4 != h]
        wpar = [0] * S  # w_fix "wfull_per_warpgroup": the parity of its warpgroup's next fill per slot

        def step_over(base, lo, hi):
            # advance_to: the ring positions lo .. hi - 1 of the tile (the other warpgroup's blocks).
            for k in range(lo, hi):
                n = base + k
                if w_fix == "pass_every_block" or wait_on_skipped_blocks:
                    wf, par = wfull[n % S], (n // S) & 1
                    yield lambda: wf.done(par)
                    if w_fix == "pass_every_block":
                        wempty[n % S].arrive()
                passed[warp] = n + 1

        for tc in range(tiles):
            base, pos = tc * nnz, 0
            for r in mine:
                for k in range(rp[r], rp[r + 1]):
                    yield from step_over(base, pos, k)
                    pos, n = k + 1, base + k
                    slot, slab = n % S, slab_of[k]
                    if w_fix == "wfull_per_warpgroup":
                        wf, wp = wfull[h][slot], wpar[slot]
                        wpar[slot] ^= 1
                    else:
                        wf, wp = wfull[slot], (n // S) & 1
                    xf = xfull[hx][slab]
                    yield lambda: wf.done(wp)
                    if not skip_xfull_wait:
                        yield lambda: xf.done(tc & 1)
                    if wbuf[slot] != ("w", tc, k):
                        raise StaleRead(f"warp {warp} tile {tc} block {k}: W slot {slot} holds {wbuf[slot]}")
                    if xbuf[hx][slab] != ("x", tc, hx, slab):
                        raise StaleRead(f"warp {warp} tile {tc} block {k}: x slab {hx},{slab} holds {xbuf[hx][slab]}")
                    if release_w_before_retire:
                        wempty[slot].arrive()
                    wread[slot] += 1
                    xread[hx][slab] += 1
                    issued[warp] = n + 1
                    # The wgmma in flight, until wgmma.wait_group 0; a warpgroup's wgmma runs once its 4
                    # warps have issued it. Its operands count as read from this warp's issue on.
                    yield lambda: min(issued[4 * h:4 * h + 4]) > n
                    wread[slot] -= 1
                    xread[hx][slab] -= 1
                    if not release_w_before_retire:
                        wempty[slot].arrive()
                    if k in flagged:
                        xempty[hx][slab].arrive()
                    passed[warp] = n + 1
                    if split and n + 1 - min(passed[w] for w in others) > S:
                        stats["warpgroups more than S blocks apart"] += 1
                yield None  # the block-row's epilogue (no barrier)
            yield from step_over(base, pos, nnz)

    def tick(dt):
        for c in inflight:
            c[0] -= dt
        for c in [c for c in inflight if c[0] <= 0]:
            inflight.remove(c)
            _, buf, busy, i, tag, bar = c
            buf[i], busy[i] = tag, False
            bar.arrive()

    agents = [producer()] + [consumer(w) for w in range(8)]
    weight = [rng.choice((1, 1, 1, 4, 0.2)) for _ in agents]  # some agents run faster than others
    conds, alive = [None] * len(agents), [True] * len(agents)
    idle = 0  # steps in which only the producer ran, with no copy in flight
    while any(alive):
        runnable = [i for i in range(len(agents)) if alive[i] and (conds[i] is None or conds[i]())]
        idle = idle + 1 if runnable == [0] and not inflight else 0
        if idle > 1000:  # it polls slabs that are never released, for a slot that is never freed
            raise Deadlock("the producer polls for ever")
        if not runnable:
            if not inflight:
                blocked = [i for i in range(len(agents)) if alive[i]]
                raise Deadlock(f"agents {blocked} wait for ever (0: producer, 1 + w: consumer warp w)")
            tick(min(c[0] for c in inflight))  # nothing runs until the next copy lands
            continue
        i = rng.choices(runnable, [weight[j] for j in runnable])[0]
        try:
            conds[i] = next(agents[i])
        except StopIteration:
            alive[i], conds[i] = False, None
        tick(1)
    if inflight:
        raise Overwrite(f"{len(inflight)} copies in flight when the CTA exits")
    return stats


def random_case(seed, split=False):
    rng = random.Random(1000 + seed)
    B, S = rng.choice((32, 64)), rng.choice((3, 8))  # the kernel: S = 3 at B = 64, 8 at B = 32
    if split:  # small rings stress it; the kernel's (14 at B = 64, 48 at B = 32) too
        S = rng.choice((2, 3, 5, 8, KERNEL_S[B, True]))
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
    return dict(B=B, S=S, K=K, rows=rows, tiles=rng.randint(1, 4), seed=seed, split=split)


def failures(count, stop_at=(), stats=None, split=False, **variant):
    """Counter of the hazards over `count` random cases; stops at the first of a kind in stop_at.
    stats: a Counter that accumulates the runs' path counts."""
    bad = collections.Counter()
    for seed in range(count):
        try:
            st = run(**random_case(seed, split), **variant)
            if stats is not None:
                stats.update(st)
        except Hazard as e:
            bad[type(e).__name__] += 1
            if type(e).__name__ in stop_at:
                break
    return bad


# The forms checked safe: the default one, and Split with each repair of its W ring.
SPLIT_FIXED = [pytest.param(dict(split=True, w_fix=f), id=f"split-{f}") for f in W_FIXES]
SAFE_FORMS = [pytest.param(dict(), id="default")] + SPLIT_FIXED


@pytest.mark.parametrize("split", [False, True], ids=["default", "split"])
def test_random_cases_cover_the_edge_cases(split):
    seen = collections.Counter()
    for seed in range(400):
        c = random_case(seed, split)
        rows, S = c["rows"], c["S"]
        cols = [col for row in rows for col in row]
        ns = (c["K"] + 63) // 64
        used = {s for s, _ in slab_flags(c["B"], rows, split)}
        seen["nnz=0"] += not cols
        seen["empty row"] += any(not row for row in rows) and bool(cols)
        seen["row longer than S"] += any(len(row) > S for row in rows)
        seen["unused slab"] += bool(cols) and len(used) < ns
        seen["slab read twice"] += len(used) < len(cols)
        seen[f"B={c['B']}"] += 1
        seen[f"tiles={c['tiles']}"] += 1
        seen["K=768"] += c["K"] == 768
        seen["the kernel's S"] += S == KERNEL_S[c["B"], split]
        seen["nnz > S"] += len(cols) > S
        if split:
            # One warpgroup's blocks only (the other one steps over every block); a run of more than
            # S blocks of one warpgroup's rows (the other one may get S blocks ahead of the fills).
            seen["one warpgroup's rows only"] += bool(cols) and (not any(rows[1::2]) or not any(rows[::2]))
            owners = "".join(str(r % 2) * len(row) for r, row in enumerate(rows))
            seen["a run of more than S blocks of one warpgroup"] += "0" * (S + 1) in owners or "1" * (S + 1) in owners
            fl = slab_flags(c["B"], rows, True)
            seen["slab read by both warpgroups"] += any((s, 0) in fl and (s, 1) in fl for s, _ in fl)
    keys = ["nnz=0", "empty row", "row longer than S", "unused slab", "slab read twice", "B=32", "B=64", "tiles=1",
            "tiles=4", "K=768", "the kernel's S", "nnz > S"]
    if split:
        keys += ["one warpgroup's rows only", "a run of more than S blocks of one warpgroup",
                 "slab read by both warpgroups"]
    for key in keys:
        assert seen[key] >= 3, (key, seen)


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_kernel_protocol_has_no_deadlock_or_hazard(form):
    stats = collections.Counter()
    assert failures(400, stats=stats, **form) == {}
    # The runs went through every path of the producer, and loads overlapped the previous tile.
    paths = ["x load from the tile start", "x load from the tile start (blocking)", "x load from the slot wait",
             "x load from the end (blocking)", "x load while its half computes the previous tile",
             "producer blocked on xempty", "producer blocked on a slot", "producer polled"]
    if form.get("split"):
        paths += ["slab read by both warpgroups", "slab read by one warpgroup"]
    if form.get("w_fix") == "wfull_per_warpgroup":  # (passing every block keeps them within S blocks)
        paths.append("warpgroups more than S blocks apart")
    for path in paths:
        assert stats[path] > 0, (path, stats)


DIRECTED = [
    dict(B=64, S=3, K=768, rows=[], tiles=3),  # no block-rows
    dict(B=64, S=3, K=768, rows=[[], [], []], tiles=4),  # nnz = 0
    dict(B=64, S=3, K=64, rows=[[0]], tiles=4),  # one block, one slab
    dict(B=64, S=3, K=768, rows=[list(range(12))], tiles=4),  # one row, every slab, 4 ring rounds
    dict(B=32, S=8, K=768, rows=[list(range(24)), [], [3]], tiles=4),  # a row of 3 ring rounds
    dict(B=32, S=8, K=96, rows=[[0, 1, 2], [2], [], [0]], tiles=3),  # K = 96: a half-used slab
    dict(B=64, S=3, K=768, rows=[[5]] * 9, tiles=4),  # every block reads one slab
    dict(B=32, S=3, K=512, rows=[[0, 15], [1, 14], [7], [0]], tiles=4),  # slab 0's last use at the end
]
# Split: a run of S blocks of the odd rows, then one of an even row (at the kernel's S), with
# block 64 and block 32. As the kernel has it, warpgroup 0 steps over the run at once and takes
# slot 0's first fill (block 0, warpgroup 1's) for block S.
SPLIT_RUNS = [
    dict(B=64, S=14, K=768, rows=[[], list(range(12)), [], [0, 1], [0]], tiles=3),
    dict(B=32, S=48, K=768, rows=[[], list(range(24)), [], list(range(24)), [0]], tiles=2),
]
SPLIT_DIRECTED = SPLIT_RUNS + [
    dict(B=64, S=14, K=768, rows=[[0, 1, 2]], tiles=4),  # warpgroup 1 has no block-row
    dict(B=64, S=2, K=768, rows=[[], [3, 4], [], [5]], tiles=4),  # warpgroup 0's rows all empty
    dict(B=64, S=3, K=768, rows=[[5]] * 9, tiles=4),  # both warpgroups read one slab, 9 blocks
    dict(B=64, S=2, K=768, rows=[[0, 11], [11], [0], [6, 11]], tiles=4),  # slabs 0 and 11: both
    dict(B=32, S=5, K=512, rows=[[0, 15], [1, 14], [7], [0], [], [15]], tiles=4),
    dict(B=64, S=3, K=768, rows=[list(range(12)), [], [], [0]], tiles=4),  # rows longer than S
]


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_kernel_protocol_directed_cases(form):
    for c in DIRECTED + (SPLIT_DIRECTED if form.get("split") else []):
        for seed in range(25):
            run(**c, seed=seed, **form)


def test_split_with_one_wfull_set_passes_a_w_slot_early():
    """The kernel's first Split form (one set of W full barriers) had this bug. A consumer warp steps over the
    other warpgroup's blocks without waiting on their wfull, so it may wait for block n's fill while
    the slot's previous fill (block n - S, the other warpgroup's) has not landed, or not been issued:
    wfull[slot] then stands at phase (n / S) - 1, whose parity differs from the awaited one, and the
    wait passes at once. The warpgroup reads the slot before block n is in it and its 4 arrivals
    complete wempty's phase of block n - S (or earlier), so the producer refills the slot under the
    other warpgroup. It takes S consecutive stored blocks of one warpgroup's rows (in the stream,
    across tiles) before a block of the other's, or bulk copies landing out of issue order."""
    for c in SPLIT_RUNS:  # at the kernel's S
        bad = collections.Counter()
        for seed in range(25):
            try:
                run(**c, seed=seed, split=True, w_fix="one_wfull_set")
            except StaleRead as e:
                bad[str(e).split(": ")[1].split(" holds")[0]] += 1  # e.g. "W slot 0"
            except Hazard as e:
                bad[type(e).__name__] += 1
        assert bad["W slot 0"] > 0, (c, bad)  # block S read from slot 0 before its fill
    assert failures(100, stop_at=("StaleRead",), split=True, w_fix="one_wfull_set")["StaleRead"] > 0


def assert_overwrite_or_stale_read(runs, **variant):
    """The unsafe variant shows as a buffer refilled while read, or read before its fill."""
    bad = failures(runs, stop_at=("Overwrite", "StaleRead"), **variant)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_consumer_skipping_the_xfull_wait_is_caught(form):
    assert failures(100, stop_at=("StaleRead",), skip_xfull_wait=True, **form)["StaleRead"] > 0


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_releasing_a_slab_at_its_first_use_is_caught(form):
    # The producer reloads the slab for the next tile while later blocks of this tile still read it.
    assert_overwrite_or_stale_read(200, release_at_first_use=True, **form)


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_reloading_a_slab_without_waiting_for_xempty_is_caught(form):
    assert_overwrite_or_stale_read(100, skip_xempty_wait=True, **form)


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_blocking_on_a_w_slot_while_slab_loads_are_pending_deadlocks(form):
    # Why the producer polls x while it waits for a slot: the block that frees the slot may need a
    # slab whose load still waits for the previous tile's release.
    assert failures(300, stop_at=("Deadlock",), block_on_slot_with_x_pending=True, **form)["Deadlock"] > 0


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_releasing_a_w_slot_before_the_wgmma_retires_is_caught(form):
    assert_overwrite_or_stale_read(200, release_w_before_retire=True, **form)


@pytest.mark.parametrize("form", SPLIT_FIXED)
def test_split_xempty_counting_one_warpgroup_is_caught(form):
    # A slab both warpgroups read is reloaded once one of them has released it.
    assert_overwrite_or_stale_read(200, xempty_count_one_warpgroup=True, **form)


def test_split_flagging_only_a_slab_s_last_reader_deadlocks():
    # One kLastUse per slab (its last reader over all block-rows) while xempty counts both
    # warpgroups: a slab both read is never released, and its next tile's load waits for ever.
    for form in (dict(split=True, w_fix=f) for f in W_FIXES):
        assert failures(100, stop_at=("Deadlock",), one_flag_per_slab=True, **form)["Deadlock"] > 0


def test_split_waiting_on_the_other_warpgroup_s_fills_without_releasing_them_deadlocks():
    # One shared wfull set, and a warp also waits on wfull of each block it steps over (no arrival):
    # the other warpgroup may have taken that block and the slot's next one already (wfull two phases
    # on, the awaited parity not complete), and the fill after that waits for a block of its own.
    assert failures(100, stop_at=("Deadlock",), split=True, w_fix="one_wfull_set",
                    wait_on_skipped_blocks=True)["Deadlock"] > 0
