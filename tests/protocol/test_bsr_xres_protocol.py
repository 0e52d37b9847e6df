"""Executable model of the barrier protocol of src/ops/cuda/bsr_gemm_xres.cu.

The kernel's producer warp streams the stored W blocks through an S-slot ring (full / empty
mbarriers per slot) and refills two x halves per 128-token tile; 8 P consumer warps (P warpgroup
pairs, pair p computing the block-rows r with r % P == p) wait for every fill in order, release
the other pairs' blocks at once, and wait for their next blocks early (before each epilogue's
stores). A hang or a wrong parity there costs a GPU call, so the protocol is checked here under
random interleavings and copy latencies: no deadlock, every MMA reads the block and x tile it
expects, no slot or x half is refilled while a warp reads it. The two unsafe variants the kernel
avoids (passing another pair's block without waiting for its fill; waiting one block further
ahead than the ring allows) must be caught, so the model is not vacuous.

mbarrier semantics modelled: a phase completes when its expected arrivals have come;
try_wait.parity / test_wait.parity(P) is true iff the phase of parity P has completed, i.e. the
current (incomplete) phase's parity differs from P. A fill lands as one arrival here: the 32
producer lanes' cp.async noinc arrivals, or a W block's bulk copy completing its expect_tx
arrival. Keep this in step with the kernel.
"""
import random


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


def run(P, S, rows, tiles, seed, pass_without_wait=False, prewait_extra=0):
    rng = random.Random(seed)
    nnz = sum(rows)
    rp = [0]
    for c in rows:
        rp.append(rp[-1] + c)
    R = len(rows)
    xfull, xempty = [Bar(1), Bar(1)], [Bar(4 * P), Bar(4 * P)]
    wfull, wempty = [Bar(1) for _ in range(S)], [Bar(8 * P) for _ in range(S)]
    slot, xbuf, inflight = [None] * S, [None, None], []
    readers_slot, readers_x = [0] * S, [0, 0]

    def copy(kind, idx, value, bar):  # cp.async: garbage until it lands, then one arrival
        if kind == "w":
            if readers_slot[idx]:
                raise Hazard("W slot refilled while read")
            slot[idx] = None
        else:
            if readers_x[idx]:
                raise Hazard("x half refilled while read")
            xbuf[idx] = None
        inflight.append([rng.randint(1, 30), kind, idx, value, bar])

    def producer():
        n = 0
        for tc in range(tiles):
            xpend = [True, True]

            def try_x(block):
                for h in (0, 1):
                    if not xpend[h]:
                        continue
                    if tc > 0:
                        par = (tc - 1) & 1
                        if not xempty[h].done(par):
                            if not block:
                                continue
                            yield lambda h=h, par=par: xempty[h].done(par)
                    copy("x", h, tc, xfull[h])
                    xpend[h] = False

            yield from try_x(False)
            for k in range(nnz):
                s = n % S
                if n >= S:
                    par = ((n // S) - 1) & 1
                    while not wempty[s].done(par):
                        yield from try_x(False)
                        if not xpend[0] and not xpend[1]:
                            yield lambda s=s, par=par: wempty[s].done(par)
                            break
                        yield None  # __nanosleep
                copy("w", s, (tc, k), wfull[s])
                yield from try_x(False)
                n += 1
            yield from try_x(True)

    def consumer(warp):
        pair, h = (warp // 4) // 2, (warp // 4) % 2
        n = 0
        for tc in range(tiles):
            yield lambda: xfull[h].done(tc & 1)
            if xbuf[h] != tc:
                raise Hazard("x half read before its tile landed")
            readers_x[h] += 1
            n_base, st = n, {"waited": 0, "wrow": 0}

            def wait_through(last):
                while st["waited"] <= last:
                    nn = n_base + st["waited"]
                    mine = True
                    if P > 1:
                        while rp[st["wrow"] + 1] <= st["waited"]:
                            st["wrow"] += 1
                        mine = st["wrow"] % P == pair
                    if mine or not pass_without_wait:
                        yield lambda nn=nn: wfull[nn % S].done((nn // S) & 1)
                    if not mine:
                        wempty[nn % S].arrive()
                    st["waited"] += 1

            r = pair
            while r < R:
                for k in range(rp[r], rp[r + 1]):
                    s = (n_base + k) % S
                    yield from wait_through(k)
                    if slot[s] != (tc, k):
                        raise Hazard("W block read before it landed")
                    readers_slot[s] += 1
                    yield None  # the wgmma and its wait
                    readers_slot[s] -= 1
                    wempty[s].arrive()
                rn = r + P
                while rn < R and rp[rn] == rp[rn + 1]:
                    rn += P
                if rn < R:
                    yield from wait_through(min(rp[rn + 1] - 1, rp[rn] + S - 1 + prewait_extra))
                yield None  # the epilogue
                r += P
            if P > 1:  # the other pairs' blocks after this pair's last block-row
                yield from wait_through(nnz - 1)
            n = n_base + nnz
            readers_x[h] -= 1
            xempty[h].arrive()

    agents = [producer()] + [consumer(w) for w in range(8 * P)]
    conds, alive = [None] * len(agents), [True] * len(agents)
    while any(alive) or inflight:
        for c in inflight:
            c[0] -= 1
        for c in [c for c in inflight if c[0] <= 0]:
            inflight.remove(c)
            if c[1] == "w":
                slot[c[2]] = c[3]
            else:
                xbuf[c[2]] = c[3]
            c[4].arrive()
        runnable = [i for i in range(len(agents)) if alive[i] and (conds[i] is None or conds[i]())]
        if not runnable:
            if inflight:
                continue
            if any(alive):
                raise Hazard("deadlock")
            break
        i = rng.choice(runnable)
        try:
            conds[i] = next(agents[i])
        except StopIteration:
            alive[i], conds[i] = False, None


def cases(count):
    for seed in range(count):
        rng = random.Random(1000 + seed)
        rows = [rng.choice([0, 0, 1, 1, 2, 3, 5, 9]) for _ in range(rng.randint(1, 9))]
        yield dict(P=rng.choice([1, 2]), S=rng.choice([3, 8]), rows=rows, tiles=rng.randint(1, 4), seed=seed)


def failures(count, **variant):
    bad = 0
    for c in cases(count):
        try:
            run(**c, **variant)
        except Hazard:
            bad += 1
    return bad


def test_kernel_protocol_has_no_deadlock_or_hazard():
    assert failures(400) == 0


def test_passing_a_block_without_waiting_for_its_fill_is_caught():
    assert failures(200, pass_without_wait=True) > 0


def test_waiting_further_ahead_than_the_ring_is_caught():
    assert failures(200, prewait_extra=1) > 0
