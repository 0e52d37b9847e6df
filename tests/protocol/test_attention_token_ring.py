"""Executable model of the ORDER token ring of src/ops/cuda/attention_wgmma.cu (WgCfg::ORDER): the
consumer warpgroups of a CTA issue their wgmmas in turn.

The protocol, for CWG consumer warpgroups and nkt key tiles:
- named barrier 2 + w belongs to warpgroup w; its expected count is 256 threads: warpgroup w's 128
  (bar.sync: arrive, then wait for the barrier to complete) and warpgroup w - 1's 128 (bar.arrive:
  arrive, no wait), w - 1 taken round the ring;
- before its first issue, warpgroup CWG - 1 arrives on warpgroup 0's barrier (opens the ring);
- every warpgroup issues nkt + 1 times (Q K^T of tile 0; Q K^T of kt with P V of kt - 1 for kt =
  1..nkt-1; P V of nkt - 1), each time: wait on its own barrier, issue, arrive on the next one's;
- after its last issue, warpgroup 0 waits on its barrier once more (the last pass of warpgroup
  CWG - 1), so that no arrival is left pending when the CTA exits.
Between issues a warpgroup does other work (softmax, waits) of random length.

Checked under random interleavings for CWG 2 and 3 and several tile counts: no deadlock; the issues
happen strictly in ring order (w0, w1, ..., w0, ...); no barrier ever holds more arrivals than it
expects (a hardware barrier would then complete early, at the wrong phase); none has arrivals pending
at the end. The unsafe variants must be caught: without the opening pass (deadlock), without
warpgroup 0's last wait (an arrival left pending), with the pass before the issue instead of after
it (the order breaks). Keep this in step with the kernel.
"""
import random


class Hazard(Exception):
    pass


class NamedBarrier:
    def __init__(self, expected):
        self.expected, self.arrived, self.generation = expected, 0, 0

    def arrive(self, n):
        self.arrived += n
        if self.arrived > self.expected:
            raise Hazard("more arrivals than the barrier expects")
        if self.arrived == self.expected:
            self.arrived = 0
            self.generation += 1


def run(cwg, nkt, seed, open_ring=True, last_wait=True, pass_first=False):
    rng = random.Random(seed)
    bars = [NamedBarrier(256) for _ in range(cwg)]
    issues_per_wg = nkt + 1
    order = []
    # Each warpgroup is a generator of steps; a step that must wait yields a predicate.
    def warpgroup(w):
        nxt = (w + 1) % cwg
        if open_ring and w == cwg - 1:
            bars[0].arrive(128)
        for i in range(issues_per_wg):
            for _ in range(rng.randrange(3)):
                yield None  # softmax, mbarrier waits, ...
            gen = bars[w].generation
            bars[w].arrive(128)
            if pass_first:
                bars[nxt].arrive(128)
            yield lambda b=bars[w], g=gen: b.generation > g
            order.append((w, i))
            if not pass_first:
                bars[nxt].arrive(128)
        if last_wait and w == 0:
            gen = bars[0].generation
            bars[0].arrive(128)
            yield lambda b=bars[0], g=gen: b.generation > g

    agents = {w: warpgroup(w) for w in range(cwg)}
    blocked = {}
    while agents:
        ready = [w for w in agents if w not in blocked or blocked[w]()]
        if not ready:
            raise Hazard("deadlock")
        w = rng.choice(ready)
        blocked.pop(w, None)
        try:
            cond = next(agents[w])
            if cond is not None:
                blocked[w] = cond
        except StopIteration:
            del agents[w]
    expected = [(i % cwg, i // cwg) for i in range(cwg * issues_per_wg)]
    if order != expected:
        raise Hazard("issues out of ring order")
    if any(b.arrived for b in bars):
        raise Hazard("arrivals left pending")


def sweep(**kw):
    for cwg in (2, 3):
        for nkt in (1, 2, 5, 64):
            for seed in range(60):
                run(cwg, nkt, seed, **kw)


def caught(**kw):
    try:
        sweep(**kw)
    except Hazard:
        return True
    return False


def test_token_ring_is_safe_and_ordered():
    sweep()


def test_unsafe_variants_are_caught():
    assert caught(open_ring=False)
    assert caught(last_wait=False)
    assert caught(pass_first=True)
