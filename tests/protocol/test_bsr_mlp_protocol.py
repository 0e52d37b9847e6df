"""Executable model of the barrier protocol of src/ops/cuda/bsr_mlp_fused.cu (bsr_mlp_fused_kernel).

The protocol, for one CTA and the tiles it takes (the same schedule every tile: groups of steps, a
step = n1 fc1 blocks, each reading one x slab k, then n2 fc2 blocks; the last fc1 block of the
schedule carries the "last" flag):
- x: per half h (warpgroup h's 64 rows) and slab k (only the slabs some fc1 block reads: k_mask),
  xfull[h][k] (count 1: the TMA load) and xempty[h] (count 4: the half's warps). Per tile the
  producer first waits xempty[h]'s phase of parity (tile - 1) & 1 (from the second tile on), then
  loads half h's slabs. A schedule without fc1 blocks loads no x and never releases it.
- W ring: S = 4 slots, wfull[slot] (count 1: the bulk copy), wempty[slot] (count 8: every consumer
  warp). The producer sends the schedule's blocks (block n into slot n % S after wempty's phase of
  parity ((n / S) - 1) & 1): plain order fc1(s) then fc2(s); pipelined order fc1(s0), then fc1(s + 1)
  before fc2(s), then the group's last fc2.
- Consumers: 8 warps, warpgroup h = warp // 4, each warp running the kernel's code: take() waits
  wfull of the next slot (parity of its ring round); an fc1 block also waits xfull[h][k] (parity
  tile & 1); each block is one wgmma group (it runs once the warpgroup's 4 warps have issued it; its
  operands count as read from the issue to the group's retirement); retire_all_but_newest /
  retire_all (wgmma.wait_group 1 / 0) hand back every taken slot but the newest / all of them, in
  ring order (lane 0 arrives on wempty), and xempty[h] with the slot of the "last" block. Plain step:
  fc1 blocks (retire_all_but_newest after each), retire_all, fc2 blocks (retire_all_but_newest after
  each). Pipelined: the first step's fc1 blocks; then per step retire_all, the next step's fc1 blocks
  (retire_all_but_newest after each), the current step's fc2 blocks (no retire). retire_all at each
  group's end.

The streamed form (stream=True; MlpForm<true>; either step order, pipelined its default): no resident
x and no x barriers. S = 6 slots and 12 consumer warps (three warpgroups; wempty counts 12), or with
four warpgroups (warpgroups=4, plain order only) S = 5 and 16 warps. An fc1 block's slot is filled by
two copies, the W block and the tile's x slab k, both counted on the slot's wfull (one
arrive_expect_tx of both sizes: it completes when the second lands); the consumer reads both from the
slot. (Split rings, the x slabs in a ring of their own, were taken out of the kernel on 2026-12-06 and
of this model with them: `git show 6bd363f` has both.) Its units of work are (tile, group) pairs: a CTA takes a contiguous range of them in tile-major
order (units=(begin, end)), so it may start and end inside a tile; the resident form takes whole tiles.

Run under random interleavings (a seeded RNG picks the next agent, with per-run speed weights),
random copy latencies and random schedules (1-4 groups of 0-5 steps, n1 0-7 so longer than either ring,
n2 = 1, 1-3 tiles). Buffer contents are tags, so a read of garbage or of another block's data is
caught. Checked: no deadlock; every wgmma reads the W block and x slab it expects; no buffer is
refilled while read or before its previous fill landed; no copy in flight at the end. The unsafe
variants (run()'s flags) must be caught, so the model is not vacuous: a consumer skipping the x
wait, x released when its last block is issued rather than retired, a producer sending the plain
order to pipelined consumers, and (streamed) a producer expecting the W block's bytes only. Keep this in step with the kernel.
"""
import collections
import random

from mbarrier_model import Bar, StaleRead, check_refill, hazards, interleave, ring_slot_free

S_RESIDENT, S_STREAM, S_STREAM4 = 4, 6, 5  # the kernel's kRing per form


def run(groups, slabs, tiles, pipe, seed, skip_x_wait=False, release_x_at_issue=False, producer_plain=False,
        stream=False, expect_w_only=False, warpgroups=None, units=None):
    """groups: per group, its steps as (list of the fc1 blocks' slabs, n2). units: the CTA's range of
    units (streamed: (tile, group) pairs, tile-major; resident: tiles), all of them if None."""
    rng = random.Random(seed)
    warpgroups = warpgroups or (3 if stream else 2)
    assert warpgroups == 2 if not stream else warpgroups in (3, 4) and not (warpgroups == 4 and pipe)
    S = S_RESIDENT if not stream else S_STREAM if warpgroups == 3 else S_STREAM4
    warps = 4 * warpgroups
    # The CTA's work, as the kernel walks it: (tile, the groups of the unit).
    per_tile = len(groups) if stream else 1
    begin, end = units if units is not None else (0, tiles * per_tile)
    work = [(u // per_tile, [u % per_tile] if stream else range(len(groups))) for u in range(begin, end)]
    # The schedule as the kernel's words: per group a list of steps; word ids number the blocks.
    steps, wid, last_fc1 = [], 0, None
    for g in groups:
        gs = []
        for ks, n2 in g:
            fc1 = []
            for k in ks:
                fc1.append((wid, k))
                last_fc1 = wid
                wid += 1
            fc2 = list(range(wid, wid + n2))
            wid += n2
            gs.append((fc1, fc2))
        steps.append(gs)
    k_mask = sorted({k for g in groups for ks, _ in g for k in ks})
    slab_of = {w: k for gs in steps for fc1, _ in gs for w, k in fc1}
    wfull, wempty = [Bar(1) for _ in range(S)], [Bar(warps) for _ in range(S)]
    sxbuf, sxbusy = [None] * S, [False] * S  # streamed: the slot's x slab
    copies_left = [0] * S  # streamed: copies of the slot's fill still in flight (wfull arrives at 0)
    xfull = {(h, k): Bar(1) for h in (0, 1) for k in range(slabs)}
    xempty = [Bar(4), Bar(4)]
    wbuf, wreaders, wbusy = [None] * S, [0] * S, [False] * S
    xbuf, xreaders, xbusy = {}, collections.Counter(), collections.Counter()
    inflight = []  # [steps left, ('w', slot) | ('x', h, k), tag]
    issued = [0] * warps  # wgmma groups each consumer warp has issued
    stats = collections.Counter()

    def emission_order(gs, pipelined):
        order = []
        for gi, (fc1, fc2) in enumerate(gs):
            order += [w for w, _ in fc1]
            if not pipelined:
                order += fc2
            elif gi > 0:
                order += gs[gi - 1][1]
        if pipelined and gs:
            order += gs[-1][1]
        return order

    def producer():
        """The producer thread."""
        n = 0
        for tc, (tile, unit_groups) in enumerate(work):
            if k_mask and not stream:
                for h in (0, 1):
                    if tc > 0:
                        bar, par = xempty[h], (tc - 1) & 1
                        if not bar.done(par):
                            stats["producer waited for x"] += 1
                        yield lambda bar=bar, par=par: bar.done(par)
                    for k in k_mask:
                        check_refill(f"x half {h} slab {k} (tile {tile})", xreaders[(h, k)], xbusy[(h, k)])
                        xbuf[(h, k)], xbusy[(h, k)] = None, True
                        inflight.append([rng.randint(1, 60), ("x", h, k), (tile, h, k)])
                        yield None
            for gs in (steps[g] for g in unit_groups):
                for w in emission_order(gs, pipe and not producer_plain):
                    k = slab_of.get(w)
                    slot = n % S
                    yield from ring_slot_free(n, S, wempty, stats)
                    check_refill(f"W slot {slot} (tile {tile}, word {w})", wreaders[slot], wbusy[slot])
                    wbuf[slot], wbusy[slot] = None, True
                    with_x = stream and k is not None
                    # (expect_w_only: the barrier counts the W copy only, so it may complete before x lands)
                    copies_left[slot] = 2 if with_x and not expect_w_only else 1
                    inflight.append([rng.randint(1, 40), ("w", slot), (tile, w)])
                    if with_x:
                        check_refill(f"x of slot {slot} (tile {tile}, word {w})", wreaders[slot], sxbusy[slot])
                        sxbuf[slot], sxbusy[slot] = None, True
                        inflight.append([rng.randint(1, 60), ("sx", slot), (tile, k)])
                    n += 1
                    yield None

    def consumer(warp):
        h = warp // 4
        st = dict(n=0, rel=0)  # blocks taken; the oldest not yet handed back
        pending = collections.deque()  # per taken block not handed back: (group id, slot, x slab or None, last)
        retired = lambda m: min(issued[4 * h:4 * h + 4]) > m  # group m has run (the warpgroup issued it)

        def take_from(ring, counter, full, buf, size, want):  # the next slot of a ring, once full
            slot = st[counter] % size
            f, par = full[slot], (st[counter] // size) & 1
            yield lambda: f.done(par)
            if buf[slot] != want:
                raise StaleRead(f"warp {warp}: {ring} slot {slot} holds {buf[slot]}, expected {want}")
            st[counter] += 1
            return slot

        def take(tile, w):
            return (yield from take_from("W", "n", wfull, wbuf, S, (tile, w)))

        def issue(slot, xk, last):
            gid = issued[warp]
            wreaders[slot] += 1
            if xk is not None:
                xreaders[(h, xk)] += 1
            pending.append((gid, slot, xk, last))
            issued[warp] = gid + 1
            if last and release_x_at_issue:
                xempty[h].arrive()

        def retire(keep):  # wgmma.wait_group keep, then hand back all but the `keep` newest
            while len(pending) > keep:
                gid, slot, xk, last = pending[0]
                if not retired(gid):
                    stats["consumer waited for a group"] += 1
                yield lambda gid=gid: retired(gid)
                pending.popleft()
                wreaders[slot] -= 1
                if xk is not None:
                    xreaders[(h, xk)] -= 1
                assert slot == st["rel"] % S, "slots are handed back in ring order"
                st["rel"] += 1
                wempty[slot].arrive()
                if last and not release_x_at_issue:
                    xempty[h].arrive()

        def fc1(tile, tc, w, k):
            slot = yield from take(tile, w)
            if stream:
                if sxbuf[slot] != (tile, k):
                    raise StaleRead(f"warp {warp}: x of slot {slot} holds {sxbuf[slot]}, expected {(tile, k)}")
                issue(slot, None, False)
                return
            if not skip_x_wait:
                xf, par = xfull[(h, k)], tc & 1
                if not xf.done(par):
                    stats["consumer waited for x"] += 1
                yield lambda: xf.done(par)
            if xbuf.get((h, k)) != (tile, h, k):
                raise StaleRead(f"warp {warp}: x half {h} slab {k} holds {xbuf.get((h, k))} in tile {tile}")
            issue(slot, k, w == last_fc1)

        def fc2(tile, w):
            slot = yield from take(tile, w)
            issue(slot, None, False)

        for tc, (tile, unit_groups) in enumerate(work):
            for gs in (steps[g] for g in unit_groups):
                if not pipe:
                    for f1, f2 in gs:
                        for w, k in f1:
                            yield from fc1(tile, tc, w, k)
                            yield from retire(1)
                        yield from retire(0)
                        for w in f2:
                            yield from fc2(tile, w)
                            yield from retire(1)
                elif gs:
                    for w, k in gs[0][0]:
                        yield from fc1(tile, tc, w, k)
                        yield from retire(1)
                    for si, (_, f2) in enumerate(gs):
                        yield from retire(0)
                        if si + 1 < len(gs):
                            for w, k in gs[si + 1][0]:
                                yield from fc1(tile, tc, w, k)
                                yield from retire(1)
                        for w in f2:  # (after the GELU, no retire)
                            yield from fc2(tile, w)
                yield from retire(0)
                yield None  # the group's epilogue

    def land(c):  # a copy landed
        _, where, tag = c
        if where[0] in ("w", "sx"):
            slot = where[1]
            if where[0] == "w":
                wbuf[slot], wbusy[slot] = tag, False
            else:
                sxbuf[slot], sxbusy[slot] = tag, False
            copies_left[slot] -= 1
            if copies_left[slot] == 0:
                wfull[slot].arrive()
        else:
            xbuf[where[1:]], xbusy[where[1:]] = tag, False
            xfull[where[1:]].arrive()

    agents = [producer()] + [consumer(w) for w in range(warps)]
    interleave(agents, rng, inflight, land, "0: producer, 1 + w: consumer warp w")
    return stats


def random_case(seed, pipe, stream=False, warpgroups=None):
    rng = random.Random(3000 + seed)
    slabs = rng.choice((2, 3, 12))
    groups = []
    for _ in range(rng.randint(1, 4)):
        g = []
        for _ in range(rng.choice((0, 1, 2, 3, 5))):
            n1 = rng.choice((0, 1, 1, 2, 3, 7))
            g.append(([rng.randrange(slabs) for _ in range(n1)], 1))
        groups.append(g)
    tiles = rng.randint(1, 3)
    case = dict(groups=groups, slabs=slabs, tiles=tiles, pipe=pipe, seed=seed, stream=stream, warpgroups=warpgroups)
    if rng.random() < 0.5:  # a CTA's part of the units, which may start and end inside a tile
        total = tiles * (len(groups) if stream else 1)
        begin = rng.randrange(total)
        case["units"] = (begin, rng.randint(begin + 1, total))
    return case


def failures(count, pipe, stop_at=(), stats=None, stream=False, warpgroups=None, **variant):
    return hazards(run, lambda seed: random_case(seed, pipe, stream, warpgroups), count, stop_at, stats,
                   **variant)


def test_random_cases_cover_the_edge_cases():
    seen = collections.Counter()
    for seed in range(300):
        c = random_case(seed, False)
        steps = [s for g in c["groups"] for s in g]
        seen["no fc1 block at all"] += not any(ks for ks, _ in steps)
        seen["a step without fc1 blocks"] += any(not ks for ks, _ in steps)
        seen["a step longer than the ring"] += any(len(ks) > S_STREAM for ks, _ in steps)
        seen["an empty group"] += any(not g for g in c["groups"])
        seen["several tiles"] += c["tiles"] > 1
        cs = random_case(seed, False, stream=True)
        if "units" in cs:
            per_tile = len(cs["groups"])
            b, e = cs["units"]
            seen["units starting inside a tile"] += b % per_tile != 0
            seen["units over several tiles"] += b // per_tile != (e - 1) // per_tile
    for key in ("no fc1 block at all", "a step without fc1 blocks", "a step longer than the ring", "an empty group",
                "several tiles", "units starting inside a tile", "units over several tiles"):
        assert seen[key] >= 3, (key, seen)


def test_kernel_protocol_has_no_deadlock_or_hazard():
    for pipe in (False, True):
        stats = collections.Counter()
        assert failures(300, pipe, stats=stats) == {}, pipe
        for path in ("producer waited for a slot", "producer waited for x", "consumer waited for x",
                     "consumer waited for a group"):
            assert stats[path] > 0, (pipe, path, stats)


def test_kernel_protocol_directed_cases():
    for pipe in (False, True):
        for groups in ([[]], [[([], 1)]], [[([0] * 7, 1)]], [[([1], 1)] * 6, [], [([0, 1], 1), ([], 1)]]):
            for tiles in (1, 3):
                for seed in range(20):
                    run(groups=groups, slabs=2, tiles=tiles, pipe=pipe, seed=seed)


def test_consumer_skipping_the_x_wait_is_caught():
    for pipe in (False, True):
        assert failures(100, pipe, stop_at=("StaleRead",), skip_x_wait=True)["StaleRead"] > 0


def test_releasing_x_when_its_last_block_is_issued_is_caught():
    for pipe in (False, True):
        bad = failures(300, pipe, stop_at=("Overwrite", "StaleRead"), release_x_at_issue=True)
        assert bad["Overwrite"] + bad["StaleRead"] > 0, (pipe, bad)


def test_plain_order_to_pipelined_consumers_is_caught():
    bad = failures(100, True, stop_at=("StaleRead", "Deadlock"), producer_plain=True)
    assert bad["StaleRead"] + bad["Deadlock"] > 0, bad


def test_streamed_form_has_no_deadlock_or_hazard():
    for pipe in (False, True):  # (pipelined: the streamed form's default)
        stats = collections.Counter()
        assert failures(300, pipe, stats=stats, stream=True) == {}, pipe
        for path in ("producer waited for a slot", "consumer waited for a group"):
            assert stats[path] > 0, (pipe, path, stats)
        for groups in ([[]], [[([], 1)]], [[([0] * 7, 1)]], [[([1], 1)] * 6, [], [([0, 1], 1), ([], 1)]]):
            for tiles in (1, 3):
                for seed in range(20):
                    run(groups=groups, slabs=2, tiles=tiles, pipe=pipe, seed=seed, stream=True)


def test_streamed_four_warpgroups_have_no_deadlock_or_hazard():
    stats = collections.Counter()
    assert failures(300, False, stats=stats, stream=True, warpgroups=4) == {}
    for path in ("producer waited for a slot", "consumer waited for a group"):
        assert stats[path] > 0, (path, stats)
    bad = failures(100, False, stop_at=("StaleRead",), stream=True, warpgroups=4, expect_w_only=True)
    assert bad["StaleRead"] > 0, bad


def test_streamed_slot_counting_the_w_copy_only_is_caught():
    for pipe in (False, True):
        bad = failures(100, pipe, stop_at=("StaleRead",), stream=True, expect_w_only=True)
        assert bad["StaleRead"] > 0, (pipe, bad)


def test_streamed_plain_order_to_pipelined_consumers_is_caught():
    bad = failures(100, True, stop_at=("StaleRead", "Deadlock"), stream=True, producer_plain=True)
    assert bad["StaleRead"] + bad["Deadlock"] > 0, bad
