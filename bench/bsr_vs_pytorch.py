#!/usr/bin/env python3
"""PyTorch's block-sparse linear against its dense linear on the GPU, for the same configurations
as bench/bsr_gemm_bench.cpp, so vitrt's figures have a reference measured on the same machine.

Method as the reference figures (the anchor's bench_gemm_pytorch.py): TF32 off, CUDA events around
each call, 3 warm-up calls, median of the timed calls; dense is F.linear(x, w), sparse is
F.linear(x, (w * mask).to_sparse_bsr((b, b))) (torch dispatches bf16/fp32 BSR x dense to its Triton
bsr_dense_mm kernel when Triton is present). The mask keeps exactly round((1 - s) * blocks) blocks
at uniformly random positions, as bsr_gemm_bench does. Each sparse result is checked against the
dense product on the masked weight (first/last 128 rows).

  python3 bench/bsr_vs_pytorch.py [--quick] [--json FILE] [--compare bsr_gemm_bench.json] ...

--quick: ViT-B MLP shapes, M = 50432, sparsity 0.8 / 0.9, blocks 32 / 64, bf16 and fp32.
--compare: also prints vitrt's speed-ups (from bsr_gemm_bench's JSON) next to PyTorch's.
Runs offline (no downloads). Prints RESULT {json} lines as it goes, then a table.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

ALL_SHAPES = [(3072, 768), (768, 3072), (5120, 1280), (1280, 5120)]  # (N, K): ViT-B and ViT-H MLPs
QUICK_SHAPES = [(3072, 768), (768, 3072)]


def bench(fn, warmup=3, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def emit(**k):
    print("RESULT " + json.dumps(k), flush=True)


def block_mask(N, K, b, sparsity, seed):
    """Exactly round((1 - sparsity) * blocks) blocks kept, uniformly at random; expanded to [N, K]."""
    br, bc = N // b, K // b
    total = br * bc
    keep = min(max(int(round((1.0 - sparsity) * total)), 0), total)
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randperm(total, generator=g)[:keep]
    m = torch.zeros(total, dtype=torch.bool)
    m[ids] = True
    m = m.view(br, bc).cuda()
    return m.repeat_interleave(b, 0).repeat_interleave(b, 1), keep / total


def rel_err(got, want):
    got, want = got.float(), want.float()
    return (torch.linalg.norm(got - want) / torch.linalg.norm(want).clamp_min(1e-30)).item()


def break_even(curve):
    """Sparsity where the speed-up crosses 1 (linear interpolation), or a bound outside the range."""
    curve = sorted((s, v) for s, v in curve if v is not None)
    if not curve:
        return None
    if curve[0][1] >= 1.0:
        return "<= %g" % curve[0][0]
    for (s0, v0), (s1, v1) in zip(curve, curve[1:]):
        if v1 >= 1.0:
            return s0 + (s1 - s0) * (1.0 - v0) / (v1 - v0)
    return "> %g" % curve[-1][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="bsr_vs_pytorch.json")
    ap.add_argument("--compare", help="bsr_gemm_bench JSON to print vitrt's speed-ups next to torch's")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--blocks", default=None, help="default 16,32,64 (--quick: 32,64)")
    ap.add_argument("--sparsities", default=None, help="default 0.5,0.7,0.8,0.9,0.95 (--quick: 0.8,0.9)")
    ap.add_argument("--tokens", default=None, help="default 50432,65792 (--quick: 50432)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bsr_vs_pytorch: no CUDA device", file=sys.stderr)
        return 2
    shapes = QUICK_SHAPES if a.quick else ALL_SHAPES
    blocks = [int(v) for v in (a.blocks or ("32,64" if a.quick else "16,32,64")).split(",")]
    sparsities = sorted(float(v) for v in (a.sparsities or ("0.8,0.9" if a.quick else "0.5,0.7,0.8,0.9,0.95")).split(","))
    tokens = [int(v) for v in (a.tokens or ("50432" if a.quick else "50432,65792")).split(",")]
    iters = min(a.iters, 10) if a.quick else a.iters
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    gpu = torch.cuda.get_device_name(0)
    print("torch %s on %s: warm-up %d, median of %d" % (torch.__version__, gpu, a.warmup, iters), flush=True)

    rows = []
    for dname in a.dtypes.split(","):
        dt = dtypes[dname]
        for (N, K) in shapes:
            for M in tokens:
                torch.manual_seed(0)
                x = torch.randn(M, K, device="cuda", dtype=dt)
                w = torch.randn(N, K, device="cuda", dtype=dt) / math.sqrt(K)
                dense = bench(lambda: F.linear(x, w), a.warmup, iters)
                flop = 2.0 * M * N * K
                for b in blocks:
                    for s in sparsities:
                        mask, density = block_mask(N, K, b, s, seed=int(1000 * s) + b)
                        wm = w * mask
                        row = dict(dtype=dname, N=N, K=K, M=M, block=b, sparsity=s, density=density,
                                   dense_ms=round(dense, 4), dense_tflops=round(flop / dense / 1e9, 1))
                        try:
                            wb = wm.to_sparse_bsr((b, b))
                            sp = bench(lambda: F.linear(x, wb), a.warmup, iters)
                            row.update(bsr_ms=round(sp, 4), speedup=round(dense / sp, 3))
                            y = F.linear(x, wb)
                            err = max(rel_err(y[:128], F.linear(x[:128], wm)), rel_err(y[-128:], F.linear(x[-128:], wm)))
                            row["check_rel_err"] = err
                            del y, wb
                        except Exception as ex:  # an unsupported dtype/block in this torch build
                            row["bsr_error"] = str(ex)[:300]
                        emit(what="linear_bsr_torch", **row)
                        rows.append(row)
                        del wm, mask
                del x, w
                torch.cuda.empty_cache()

    print("\n%-5s %5s %5s %6s %3s %5s %9s %9s %8s" % ("dtype", "N", "K", "M", "b", "spars", "dense_ms", "bsr_ms", "speedup"))
    for r in rows:
        print("%-5s %5d %5d %6d %3d %5.2f %9.4f %9s %8s" % (
            r["dtype"], r["N"], r["K"], r["M"], r["block"], r["sparsity"], r["dense_ms"],
            "%.4f" % r["bsr_ms"] if "bsr_ms" in r else "error", "%.2fx" % r["speedup"] if "speedup" in r else "-"))

    curves = {}
    for r in rows:
        curves.setdefault((r["dtype"], r["block"], r["N"], r["K"], r["M"]), []).append((r["sparsity"], r.get("speedup")))
    be = [dict(dtype=k[0], block=k[1], N=k[2], K=k[3], M=k[4], break_even_sparsity=break_even(v)) for k, v in sorted(curves.items())]
    print("\nbreak-even sparsity (torch BSR vs torch dense):")
    for e in be:
        print("  %-5s block %2d  %5dx%-5d M %6d: %s" % (e["dtype"], e["block"], e["N"], e["K"], e["M"], e["break_even_sparsity"]))

    if a.compare:
        with open(a.compare) as f:
            vit = {(r["dtype"], r["N"], r["K"], r["M"], r["block"], round(r["sparsity"], 6)): r for r in json.load(f)["rows"]}
        print("\nvitrt vs torch (speed-up over each one's own dense; bsr ms side by side):")
        print("%-5s %5s %5s %6s %3s %5s %10s %10s %10s %10s %11s" % ("dtype", "N", "K", "M", "b", "spars", "vitrt_x", "torch_x",
                                                                   "vitrt_ms", "torch_ms", "dense_ratio"))
        for r in rows:
            v = vit.get((r["dtype"], r["N"], r["K"], r["M"], r["block"], round(r["sparsity"], 6)))
            if not v:
                continue
            print("%-5s %5d %5d %6d %3d %5.2f %9.2fx %10s %10.4f %10s %11.3f" % (
                r["dtype"], r["N"], r["K"], r["M"], r["block"], r["sparsity"], v["speedup"],
                "%.2fx" % r["speedup"] if "speedup" in r else "error", v["bsr_ms"],
                "%.4f" % r["bsr_ms"] if "bsr_ms" in r else "-", v["dense_ms"] / r["dense_ms"]))

    with open(a.json, "w") as f:
        json.dump(dict(gpu=gpu, torch=torch.__version__, quick=a.quick, iters=iters, warmup=a.warmup, rows=rows,
                       break_even=be), f, indent=2)
    print("\nwrote " + a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
