"""Executable model of the K / V ring of src/ops/cuda/attention_wgmma.cu (flash_wgmma_relpos_kernel,
the warp-specialised schedule).

The protocol, for one CTA and its nkt key tiles:
- S slots (STAGES = 4). full[s]: count P (every producer thread arrives once per tile; modelled as
  P producer agents); empty[s]: one arrival per consumer warp (every consumer warp takes part, also
  one whose 16 query rows are past the sequence: its rows are not written).
- Producer p, tile kt: slot kt % S; round kt // S > 0 first needs empty[slot]'s phase of parity
  (round - 1) & 1. It issues its share of the tile's copies (cp.async), then waits until its copies
  of tile kt - 1 have landed (cp.async.wait_group 1) and arrives on full[(kt - 1) % S]. After the
  last tile it waits for all of its copies and arrives on full[(nkt - 1) % S].
- A consumer warp, tile kt: waits full[kt % S] (parity (kt // S) & 1), issues Q K^T of kt and
  P V of kt - 1; reads slot kt % S from that issue until its P V (issued in iteration kt + 1)
  retires; then (iteration kt + 1) arrives on empty[kt % S]. The last tile's slot is not released.
  A warpgroup's wgmma runs once its 4 warps have issued it, so a warp's wait also waits for the
  other 3 warps of its warpgroup.
- The epilogue's named barrier counts every consumer warp.

Checked under random interleavings, copy latencies and tile counts: no deadlock; every wgmma reads
the tile it expects; no copy into a slot a warp still reads; the epilogue barrier is reached by
exactly the threads it counts. The unsafe variant must be caught (so the model is not vacuous): a
warp releasing a slot before its P V retires. Keep this in step with the kernel.
"""
import collections
import random

from mbarrier_model import Bar, Hazard, StaleRead, check_refill, interleave, ring_slot_free


def run(nkt, S, P, cwg, seed, release_before_retire=False):
    """One CTA: cwg consumer warpgroups."""
    rng = random.Random(seed)
    warps = 4 * cwg
    full = [Bar(P) for _ in range(S)]
    empty = [Bar(warps) for _ in range(S)]
    buf = [[None] * P for _ in range(S)]  # each producer's share of a slot: the tile's tag, or None
    reading = [0] * S  # warps whose wgmmas read the slot
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

    def consumer_warp(w):
        g = w // 4
        for kt in range(nkt):
            slot = kt % S
            yield lambda kt=kt, slot=slot: full[slot].done((kt // S) & 1)
            check(w, kt)
            reading[slot] += 1
            issued[w] = kt + 1  # Q K^T of kt and P V of kt - 1
            if kt > 0 and release_before_retire:  # (unsafe) while its P V may still read the slot
                empty[(kt - 1) % S].arrive()
            yield lambda kt=kt: min(issued[4 * g:4 * g + 4]) > kt  # the warpgroup's wgmmas ran
            if kt > 0:  # P V of kt - 1 retired: the slot is no longer read; release it
                reading[(kt - 1) % S] -= 1
                if not release_before_retire:
                    empty[(kt - 1) % S].arrive()
            yield None  # softmax
        reading[(nkt - 1) % S] -= 1  # the last P V retired (no release)
        epilogue[0] += 1
        yield lambda: epilogue[0] == warps  # bar.sync 1, 32 * CONSUMER_WARPS
        stats["epilogue"] += 1

    def land(c):  # a copy landed
        _, slot, p, kt = c
        buf[slot][p], busy[slot][p] = ("kv", kt), False
        landed[p][kt] = True

    agents = [producer(p) for p in range(P)] + [consumer_warp(w) for w in range(warps)]
    interleave(agents, rng, inflight, land, f"0..{P - 1}: producers, then the consumer warps")
    return stats


def random_case(seed):
    rng = random.Random(5000 + seed)
    return dict(nkt=rng.choice((1, 2, 3, 4, 5, 9, 16)), S=rng.choice((3, 4)), P=rng.choice((1, 2, 4)),
                cwg=rng.choice((2, 3)), seed=seed)


def failures(count, **variant):
    bad, stats = collections.Counter(), collections.Counter()
    for seed in range(count):
        try:
            stats.update(run(**random_case(seed), **variant))
        except Hazard as e:
            bad[type(e).__name__] += 1
    return bad, stats


def test_ring_has_no_deadlock_or_hazard():
    bad, stats = failures(400)
    assert bad == {}, bad
    assert stats["producer waited for a slot"] > 0, stats


def test_directed_cases():
    for c in [dict(nkt=64, S=4, P=4, cwg=3),  # vit_b's 64 x 64 grid: 64 key tiles
              dict(nkt=64, S=4, P=4, cwg=2),  # vit_h's (head dim 80)
              dict(nkt=1, S=4, P=4, cwg=3),
              dict(nkt=5, S=4, P=4, cwg=2)]:
        for seed in range(10):
            run(**c, seed=seed)


def test_release_before_retire_is_caught():
    bad, _ = failures(300, release_before_retire=True)
    assert bad["Overwrite"] > 0, bad
