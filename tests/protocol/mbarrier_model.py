"""What the barrier-protocol models (test_*_protocol.py) share: an mbarrier, the hazards they look
for (and the producer's two checks before a refill: ring_slot_free, check_refill), and the scheduler
that interleaves a CTA's agents.

mbarrier semantics modelled: a phase completes when its expected arrivals have come;
try_wait.parity / test_wait.parity(P) is true iff the phase of parity P has completed, i.e. the
current (incomplete) phase's parity differs from P. A copy's arrive.expect_tx and its complete_tx
are one arrival, when the bytes land.
"""
import collections


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


class StaleRead(Hazard):  # a read of a buffer before its fill landed, or of other data
    pass


class Overwrite(Hazard):  # a copy into a buffer being read, or whose previous fill is in flight
    pass


class Deadlock(Hazard):
    pass


def ring_slot_free(n, S, empty, stats):
    """The producer's wait before filling ring position n (slot n % S), for `yield from`: the phase of
    empty[slot] that the consumers of position n - S complete (nothing for the first S positions).
    Counts the waits that had to wait in stats["producer waited for a slot"]."""
    if n >= S:
        bar, par = empty[n % S], ((n // S) - 1) & 1
        if not bar.done(par):
            stats["producer waited for a slot"] += 1
        yield lambda: bar.done(par)


def check_refill(what, reading, busy):
    """Raises Overwrite when a buffer is refilled while read (reading: its readers) or before its
    previous fill landed (busy). what: the buffer, for the message."""
    if reading:
        raise Overwrite(f"{what} refilled while {reading} warps read it")
    if busy:
        raise Overwrite(f"{what} refilled before its previous fill landed")


def interleave(agents, rng, inflight, land, who):
    """Runs the agents (generators that yield None to go on, or a condition to wait for) in a random
    order (a seeded rng picks the next runnable agent, with per-run speed weights); one step of
    time per agent step, or up to the next landing copy when every agent waits.
    inflight: the copies in flight, each a list whose first item is its steps left; land(copy) is
    called for each as it lands (taken out of inflight). who: what the agent indices are, for the
    deadlock message. Raises Deadlock, or Overwrite when copies are still in flight at the end."""

    def tick(dt):
        for c in inflight:
            c[0] -= dt
        for c in [c for c in inflight if c[0] <= 0]:
            inflight.remove(c)
            land(c)

    weight = [rng.choice((1, 1, 1, 4, 0.2)) for _ in agents]  # some agents run faster than others
    conds, alive = [None] * len(agents), [True] * len(agents)
    while any(alive):
        runnable = [i for i in range(len(agents)) if alive[i] and (conds[i] is None or conds[i]())]
        if not runnable:
            if not inflight:
                raise Deadlock(f"agents {[i for i in range(len(agents)) if alive[i]]} wait for ever ({who})")
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


def hazards(run, case, count, stop_at=(), stats=None, **variant):
    """Counter of the hazards (by class name) of run(**case(seed), **variant) over seeds 0 .. count - 1;
    stops at the first of a kind in stop_at. stats: a Counter that accumulates the runs' path counts
    (what run returns)."""
    bad = collections.Counter()
    for seed in range(count):
        try:
            st = run(**case(seed), **variant)
            if stats is not None and st:
                stats.update(st)
        except Hazard as e:
            bad[type(e).__name__] += 1
            if type(e).__name__ in stop_at:
                break
    return bad
