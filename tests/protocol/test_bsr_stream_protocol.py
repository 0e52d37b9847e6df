"""Executable model of the barrier protocol of src/ops/cuda/bsr_gemm_stream.cu (bsr_stream_kernel).

The protocol, for one CTA and the work items it takes (an item: one token tile and one block-row,
nb stored blocks, possibly none):
- Ring: one producer thread streams every item's blocks in order through S slots (n: the CTA's
  block counter, slot n % S). Per block it issues the x tile's TMA load and the W block's bulk copy
  into the slot, both counted on full[slot] (count 1: one arrive.expect_tx, completed when both
  land; modelled as one copy). Block n >= S first needs empty[slot]'s phase of parity
  ((n / S) - 1) & 1. empty[slot] counts 8 arrivals: every consumer warp, once per block.
- Consumers: 8 warps, warpgroup h = warp // 4. Per item and block: wait full[slot] (parity
  (n / S) & 1), issue the block's wgmma group (it runs once the warpgroup's 4 warps have issued it;
  its operands count as read from this warp's issue to the group's retirement); then, if a block of
  the same item was issued before, wgmma.wait_group 1 (that previous group has retired) and lane 0
  arrives on the previous block's empty slot. At the item's end wgmma.wait_group 0 and the last
  block's slot is released. An item without blocks touches no barrier.

Run under random interleavings (a seeded RNG picks the next agent, with per-run speed weights),
random copy latencies and random items (S in {4, 8} as the kernel's blocks 64 / 32, 1-12 items of
0-20 blocks, rows longer than the ring). Buffer contents are tags (item, block), so a read of
garbage or of another block's data is caught. Checked: no deadlock; every wgmma reads the block it
expects; no slot is refilled while a warp reads it or before its previous fill landed; no copy is in
flight at the end. The unsafe variants (run()'s flags) must be caught, so the model is not vacuous:
a consumer skipping the full wait, a slot released when its group is issued rather than retired,
the producer refilling a slot without its empty wait. Keep this in step with the kernel.
"""
import collections
import random

from mbarrier_model import Bar, StaleRead, check_refill, hazards, interleave, ring_slot_free


def run(S, items, seed, skip_full_wait=False, release_at_issue=False, skip_empty_wait=False):
    """One CTA; items: the stored-block count of each of its work items, in order."""
    rng = random.Random(seed)
    full, empty = [Bar(1) for _ in range(S)], [Bar(8) for _ in range(S)]
    buf, readers, busy = [None] * S, [0] * S, [False] * S
    inflight = []  # [steps left, slot, tag]
    issued = [0] * 8  # blocks whose wgmma each consumer warp has issued
    stats = collections.Counter()

    def producer():
        n = 0
        for i, nb in enumerate(items):
            for b in range(nb):
                slot = n % S
                if not skip_empty_wait:
                    yield from ring_slot_free(n, S, empty, stats)
                check_refill(f"slot {slot} (item {i} block {b})", readers[slot], busy[slot])
                buf[slot], busy[slot] = None, True
                inflight.append([rng.randint(1, 40), slot, (i, b)])
                n += 1
                yield None

    def consumer(warp):
        h, n = warp // 4, 0
        group = lambda m: min(issued[4 * h:4 * h + 4]) > m  # block m's group has run (retired)
        for i, nb in enumerate(items):
            prev = None
            for b in range(nb):
                slot = n % S
                if not skip_full_wait:
                    f, par = full[slot], (n // S) & 1
                    yield lambda f=f, par=par: f.done(par)
                if buf[slot] != (i, b):
                    raise StaleRead(f"warp {warp} item {i} block {b}: slot {slot} holds {buf[slot]}")
                readers[slot] += 1
                issued[warp] = n + 1
                if release_at_issue:
                    empty[slot].arrive()
                if prev is not None:  # wgmma.wait_group 1: the previous block's group has retired
                    pn, ps = prev
                    if not group(pn):
                        stats["consumer waited for the previous group"] += 1
                    yield lambda pn=pn: group(pn)
                    readers[ps] -= 1
                    if not release_at_issue:
                        empty[ps].arrive()
                prev = (n, slot)
                n += 1
                yield None
            if prev is not None:  # wgmma.wait_group 0 at the item's end
                pn, ps = prev
                yield lambda pn=pn: group(pn)
                readers[ps] -= 1
                if not release_at_issue:
                    empty[ps].arrive()
            yield None  # the item's epilogue (no barrier)

    def land(c):  # a copy landed
        _, slot, tag = c
        buf[slot], busy[slot] = tag, False
        full[slot].arrive()

    agents = [producer()] + [consumer(w) for w in range(8)]
    interleave(agents, rng, inflight, land, '0: producer, 1 + w: consumer warp w')
    return stats


def random_case(seed):
    rng = random.Random(2000 + seed)
    S = rng.choice((4, 8))  # the kernel: 4 slots at block 64, 8 at block 32
    items = [rng.choice((0, 1, 1, 2, 3, 5, 9, 12, 20)) for _ in range(rng.randint(1, 12))]
    while sum(items) > 60:  # keeps a run short
        items[items.index(max(items))] //= 2
    return dict(S=S, items=items, seed=seed)


def failures(count, stop_at=(), stats=None, **variant):
    return hazards(run, random_case, count, stop_at, stats, **variant)


def test_random_cases_cover_the_edge_cases():
    seen = collections.Counter()
    for seed in range(300):
        c = random_case(seed)
        seen["empty item"] += 0 in c["items"]
        seen[f"item longer than S={c['S']}"] += any(nb > c["S"] for nb in c["items"])
        seen["one item"] += len(c["items"]) == 1
        seen["many ring rounds"] += sum(c["items"]) >= 4 * c["S"]
    for key in ("empty item", "item longer than S=4", "item longer than S=8", "one item", "many ring rounds"):
        assert seen[key] >= 3, (key, seen)


def test_kernel_protocol_has_no_deadlock_or_hazard():
    stats = collections.Counter()
    assert failures(300, stats=stats) == {}
    for path in ("producer waited for a slot", "consumer waited for the previous group"):
        assert stats[path] > 0, (path, stats)


def test_kernel_protocol_directed_cases():
    for S in (4, 8):
        for items in ([], [0, 0, 0], [1], [S], [S + 1], [1] * 30, [3 * S, 0, 1, 2 * S]):
            for seed in range(25):
                run(S=S, items=items, seed=seed)


def test_consumer_skipping_the_full_wait_is_caught():
    assert failures(100, stop_at=("StaleRead",), skip_full_wait=True)["StaleRead"] > 0


def test_releasing_a_slot_when_its_group_is_issued_is_caught():
    bad = failures(200, stop_at=("Overwrite", "StaleRead"), release_at_issue=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad


def test_refilling_a_slot_without_the_empty_wait_is_caught():
    bad = failures(100, stop_at=("Overwrite", "StaleRead"), skip_empty_wait=True)
    assert bad["Overwrite"] + bad["StaleRead"] > 0, bad
