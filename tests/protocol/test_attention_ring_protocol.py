"""Executable model of the K / V ring of src/ops/cuda/attention_wgmma.cu (flash_wgmma_relpos_kernel,
the warp-specialised schedule), with and without WgCfg::SKIPDEAD.

The protocol, for one CTA and its nkt key tiles:
- S slots (STAGES = 4 at 64-key tiles). full[s]: count P (every producer thread arrives once per
  tile; modelled as P producer agents); empty[s]: one arrival per consumer warp that takes part:
  every consumer warp, or with SKIPDEAD the live ones only (those whose 16 query rows are real:
  live_warps = 4 * min(CWG, ceil((nq - m0) / 64)), the first warpgroups of the CTA).
- Producer p, tile kt: slot kt % S; round kt // S > 0 first needs empty[slot]'s phase of parity
  (round - 1) & 1. It issues its share of the tile's copies (cp.async), then waits until its copies
  of tile kt - 1 have landed (cp.async.wait_group 1) and arrives on full[(kt - 1) % S]. After the
  last tile it waits for all of its copies and arrives on full[(nkt - 1) % S].
- A live consumer warp, tile kt: waits full[kt % S] (parity (kt // S) & 1), issues Q K^T of kt and
  P V of kt - 1; reads slot kt % S from that issue until its P V (issued in iteration kt + 1)
  retires; then (iteration kt + 1) arrives on empty[kt % S]. The last tile's slot is not released.
  A warpgroup's wgmma runs once its 4 warps have issued it, so a warp's wait also waits for the
  other 3 warps of its warpgroup.
- SKIPDEAD: a dead warp (no real query row) returns at once; the epilogue's named barrier counts
  the live warps (32 * live_warps threads).

Checked under random interleavings, copy latencies, tile counts and live-warp counts: no deadlock;
every wgmma reads the tile it expects; no copy into a slot a live warp still reads; the epilogue
barrier is reached by exactly the threads it counts. The unsafe variants must be caught (so the
model is not vacuous): empty counting every consumer warp while dead ones leave (deadlock once the
ring wraps); dead warps arriving on empty without waiting for full (overwrites); a live warp
releasing a slot before its P V retires. Keep this in step with the kernel.
"""
import collections
import random

from mbarrier_model import Bar, Deadlock, Hazard, StaleRead, check_refill, interleave, ring_slot_free


def run(nkt, S, P, cwg, live_wgs, seed, skipdead=True, empty_counts_all=False, dead_arrive_without_wait=False,
        release_before_retire=False, p2=False, p2_release_previous=False):
    """One CTA: cwg consumer warpgroups, of which the first live_wgs hold real query rows. p2: the
    kernel's P2 form (nkt even, no SKIPDEAD): tile kt - 2's slot is released in iteration kt, right
    after the wgmmas are issued (P V of kt - 2 retired at the end of iteration kt - 1); the last two
    tiles' slots are not released (nobody would wait for them). p2_release_previous (unsafe): tile
    kt - 1's slot instead, whose P V has just been issued."""
    assert not p2 or (nkt % 2 == 0 and not skipdead)
    rng = random.Random(seed)
    warps = 4 * cwg
    live = 4 * live_wgs if skipdead else warps
    full = [Bar(P) for _ in range(S)]
    empty = [Bar(warps if empty_counts_all or not skipdead else live) for _ in range(S)]
    buf = [[None] * P for _ in range(S)]  # each producer's share of a slot: the tile's tag, or None
    reading = [0] * S  # live warps whose wgmmas read the slot
    busy = [[False] * P for _ in range(S)]
    inflight = []  # [steps left, slot, producer, kt]
    landed = [[False] * nkt for _ in range(P)]
    issued = [0] * warps  # the iterations whose wgmmas each warp has issued
    epilogue = [0]  # warps at the epilogue's barrier
    stats = collections.Counter()

    def producer(p):
        for kt in range(nkt):
            slot = kt % S
            yield from ring_slot_free(kt, S, empty, stats)
            check_refill(f"producer {p}: slot {slot} (tile {kt})", reading[slot], busy[slot][p])
            buf[slot][p], busy[slot][p] = None, True
            inflight.append([rng.randint(1, 30), slot, p, kt])
            yield None
            if kt > 0:
                yield lambda kt=kt: landed[p][kt - 1]
                full[(kt - 1) % S].arrive()
        yield lambda: landed[p][nkt - 1]
        full[(nkt - 1) % S].arrive()

    def check(warp, kt):
        slot = kt % S
        if buf[slot] != [("kv", kt)] * P:
            raise StaleRead(f"warp {warp} tile {kt}: slot {slot} holds {buf[slot]}")

    def live_warp(w):
        g = w // 4
        for kt in range(nkt):
            slot = kt % S
            yield lambda kt=kt, slot=slot: full[slot].done((kt // S) & 1)
            check(w, kt)
            reading[slot] += 1
            issued[w] = kt + 1  # Q K^T of kt and P V of kt - 1
            if kt > 0 and release_before_retire:  # (unsafe) while its P V may still read the slot
                empty[(kt - 1) % S].arrive()
            if p2 and p2_release_previous and kt >= 1:  # (unsafe) P V of kt - 1 was just issued
                empty[(kt - 1) % S].arrive()
            elif p2 and kt >= 2:  # P V of kt - 2 retired at the end of the previous iteration
                empty[(kt - 2) % S].arrive()
                stats["p2 release"] += 1
            yield lambda kt=kt: min(issued[4 * g:4 * g + 4]) > kt  # the warpgroup's wgmmas ran
            if kt > 0:  # P V of kt - 1 retired: the slot is no longer read; release it
                reading[(kt - 1) % S] -= 1
                if not release_before_retire and not p2:
                    empty[(kt - 1) % S].arrive()
            yield None  # softmax
        reading[(nkt - 1) % S] -= 1  # the last P V retired (no release; P2: the last two)
        epilogue[0] += 1
        yield lambda: epilogue[0] == live  # bar.sync 1, 32 * live_warps
        stats["epilogue"] += 1

    def dead_warp(w):
        if skipdead and not dead_arrive_without_wait:
            stats["dead warp left"] += 1
            return
        if dead_arrive_without_wait:
            for kt in range(nkt - 1):
                empty[kt % S].arrive()
                yield None
            return
        # Without SKIPDEAD a dead warp runs the loop like a live one (its rows are not written).
        yield from live_warp(w)

    def land(c):  # a copy landed
        _, slot, p, kt = c
        buf[slot][p], busy[slot][p] = ("kv", kt), False
        landed[p][kt] = True

    agents = [producer(p) for p in range(P)] + [live_warp(w) if w < 4 * live_wgs else dead_warp(w) for w in range(warps)]
    interleave(agents, rng, inflight, land, f"0..{P - 1}: producers, then the consumer warps")
    return stats


def random_case(seed):
    rng = random.Random(5000 + seed)
    cwg = rng.choice((2, 3))
    return dict(nkt=rng.choice((1, 2, 3, 4, 5, 9, 16)), S=rng.choice((3, 4)), P=rng.choice((1, 2, 4)), cwg=cwg,
                live_wgs=rng.randint(1, cwg), seed=seed)


def failures(count, **variant):
    bad, stats = collections.Counter(), collections.Counter()
    for seed in range(count):
        c = random_case(seed)
        if variant.get("p2"):
            c["nkt"] += c["nkt"] % 2  # the P2 form needs an even tile count
            c["S"] = 4  # ... and 4 slots (test_p2_with_three_slots_deadlocks)
        try:
            stats.update(run(**c, **variant))
        except Hazard as e:
            bad[type(e).__name__] += 1
    return bad, stats


def test_skipdead_ring_has_no_deadlock_or_hazard():
    bad, stats = failures(400)
    assert bad == {}, bad
    assert stats["dead warp left"] > 0 and stats["producer waited for a slot"] > 0, stats


def test_ring_without_skipdead_has_no_deadlock_or_hazard():
    bad, _ = failures(300, skipdead=False)
    assert bad == {}, bad


def test_directed_cases():
    for c in [dict(nkt=64, S=4, P=4, cwg=3, live_wgs=1),  # vit_b's last query tile: 64 rows of 192
              dict(nkt=64, S=4, P=4, cwg=3, live_wgs=3),
              dict(nkt=1, S=4, P=4, cwg=3, live_wgs=1),
              dict(nkt=5, S=4, P=4, cwg=2, live_wgs=1),
              dict(nkt=32, S=3, P=4, cwg=3, live_wgs=3),  # bn128wg3 on a 64 x 64 grid: 32 tiles, 3 slots
              dict(nkt=32, S=3, P=4, cwg=2, live_wgs=2)]:  # bn128lw at head dim 80 (3 slots)
        for seed in range(10):
            run(**c, seed=seed)


def test_empty_counting_every_warp_deadlocks_once_the_ring_wraps():
    for seed in range(20):
        try:
            run(nkt=9, S=4, P=2, cwg=3, live_wgs=1, seed=seed, empty_counts_all=True)
        except Deadlock:
            continue
        raise AssertionError("not caught")


def test_dead_warps_arriving_without_waiting_are_caught():
    bad, _ = failures(300, empty_counts_all=True, dead_arrive_without_wait=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_p2_ring_has_no_deadlock_or_hazard():
    bad, stats = failures(400, skipdead=False, p2=True)
    assert bad == {}, bad
    assert stats["p2 release"] > 0 and stats["producer waited for a slot"] > 0, stats
    for seed in range(10):  # vit_b / vit_h's 64 key tiles
        run(nkt=64, S=4, P=4, cwg=3, live_wgs=3, seed=seed, skipdead=False, p2=True)
        run(nkt=64, S=4, P=4, cwg=2, live_wgs=2, seed=seed, skipdead=False, p2=True)


def test_p2_with_three_slots_deadlocks():
    # Why the P2 form needs four slots: a producer publishes tile kt - 1 only after issuing tile kt,
    # which needs tile kt - S released; with the release two tiles behind, the consumers hold tiles
    # kt - 3 .. kt - 1 while they wait for tile kt - 1.
    for seed in range(10):
        try:
            run(nkt=16, S=3, P=1, cwg=3, live_wgs=3, seed=seed, skipdead=False, p2=True)
        except Deadlock:
            continue
        raise AssertionError("not caught")


def test_p2_releasing_the_tile_just_issued_is_caught():
    bad, _ = failures(300, skipdead=False, p2=True, p2_release_previous=True)
    assert bad["Overwrite"] > 0, bad


def test_release_before_retire_is_caught():
    bad, _ = failures(300, release_before_retire=True)
    assert bad["Overwrite"] > 0, bad
