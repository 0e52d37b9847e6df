#!/usr/bin/env python3
"""Where ptxas put a Hopper kernel's wgmma issues, waits and exps: the order in the SASS, compactly.

    scripts/sass_schedule.py src/ops/cuda/attention_wgmma.cu 'ILi64ELi64ELb0ELi3ELb0ELi0ELi0E'
    scripts/sass_schedule.py --sass dump.sass 'bsr_xres_kernel'        # an existing cuobjdump -sass text

Compiles the .cu for sm_90a alone (the build's include flags, from build/src/CMakeFiles/vitrt_cuda.dir),
disassembles it with cuobjdump and prints, for every kernel whose mangled name contains PATTERN, its
instruction stream as runs of tokens, each with the index of its first instruction:

    Gq  wgmma (HGMMA) with a K-major B operand (Q K^T, fc1, ...)   Gv  wgmma with tnspB (P V)
    W0 / W1 ...  WARPGROUP.DEPBAR.LE gsb0, N (wgmma.wait_group N)  D   DEPBAR.LE SB (cp.async wait)
    e  MUFU (ex2, tanh, rcp)   p  F2FP (packing to bf16)   A  mbarrier arrive   T  mbarrier try-wait
    ^  a backward branch (a loop's end)

e.g. "Gq4@2120 Gv4@2149 A@2158 W1@2159 e34@2248 W02@2366": Q K^T and P V issued, the wait for
Q K^T, then 34 exps, and only then the waits for P V (one per arm of a branch). ptxas moves waits:
the PTX order says little about where a wait ends up (BENCHMARKS.md, 2026-12-05). The --loops flag
also lists each loop (backward branch) that contains wgmmas, as instruction index ranges.

    scripts/sass_schedule.py FILE.cu PATTERN --save-sass before.sass       # then edit FILE.cu ...
    scripts/sass_schedule.py FILE.cu PATTERN --compare before.sass         # same SASS as before?

--compare says, per kernel, whether its instructions (addresses and encodings aside) are those of
the same kernel in an earlier dump: how to show that a change leaves a measured default untouched.
Kernels are matched by name with the anonymous namespace's per-file hash taken out.

cuobjdump: not in the CUDA toolkit on the build machine; `pip download --no-deps
nvidia-cuda-cuobjdump` and unpack the wheel (its bin/cuobjdump), or pass --cuobjdump PATH.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOKENS = (
    ("HGMMA", lambda t: "Gv" if "tnspB" in t else "Gq"),
    ("WARPGROUP.DEPBAR", lambda t: "W" + t.rstrip(";").split()[-1].replace("0x", "")),
    ("DEPBAR", lambda t: "D"),
    ("MUFU", lambda t: "e"),
    ("F2FP", lambda t: "p"),
    ("SYNCS.ARRIVE", lambda t: "A"),
    ("SYNCS.PHASECHK", lambda t: "T"),
)


def parse_functions(sass):
    """{mangled name: [(address, opcode, text)]} from cuobjdump -sass output."""
    funcs = {}
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name = part.split("\n", 1)[0].strip()
        ins = []
        for line in part.splitlines()[1:]:
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
            if m:
                text = m.group(2).strip()
                toks = text.split()
                op = toks[1] if toks[0].startswith("@") else toks[0]
                ins.append((int(m.group(1), 16), op, text))
        funcs[name] = ins
    return funcs


def stable_name(name):
    """The mangled name without the anonymous namespace's per-file hash (_GLOBAL__N__<hash>_...)."""
    # (<length>_GLOBAL__N__<hash>_<n>_<file>_cu_<8 hex digits>, then the next name's length)
    return re.sub(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_[A-Za-z0-9_]+?_cu_[0-9a-f]{8}", "_GLOBAL__N_", name)


def compare(old, new):
    """{stable name: 'identical' | 'different (n vs m instructions)' | 'new'} for the kernels of new."""
    before = {stable_name(n): [t for _, _, t in ins] for n, ins in old.items()}
    out = {}
    for n, ins in new.items():
        key, now = stable_name(n), [t for _, _, t in ins]
        if key not in before:
            out[key] = "new"
        elif before[key] == now:
            out[key] = "identical"
        else:
            out[key] = f"different ({len(before[key])} vs {len(now)} instructions)"
    return out


def backward_target(addr, op, text):
    """The target address of a branch back to an earlier instruction (a loop's end), else None."""
    m = re.search(r"0x([0-9a-f]+)", text) if op == "BRA" else None
    target = int(m.group(1), 16) if m else None
    return target if target is not None and target < addr else None


def token(addr, op, text):
    for prefix, make in TOKENS:
        if op.startswith(prefix):
            return make(text)
    return "^" if backward_target(addr, op, text) is not None else None


def schedule(ins):
    """The runs of tokens: 'Gq4@2120 W1@2159 ...'."""
    out, run = [], None
    for i, (addr, op, text) in enumerate(ins):
        key = token(addr, op, text)
        if key is None:
            continue
        if run and run[0] == key:
            run[1] += 1
        else:
            if run:
                out.append(f"{run[0]}{run[1] if run[1] > 1 else ''}@{run[2]}")
            run = [key, 1, i]
    if run:
        out.append(f"{run[0]}{run[1] if run[1] > 1 else ''}@{run[2]}")
    return " ".join(out)


def loops(ins):
    """(first, last, wgmma count) of each backward branch's range that holds wgmmas."""
    index = {addr: i for i, (addr, _, _) in enumerate(ins)}
    found = []
    for i, (addr, op, text) in enumerate(ins):
        target = backward_target(addr, op, text)
        if target is not None and target in index:
            j = index[target]
            n = sum(1 for _, o, _ in ins[j:i + 1] if o.startswith("HGMMA"))
            if n:
                found.append((j, i, n))
    return found


def compile_sass(source, cuobjdump):
    rsp = os.path.join("build", "src", "CMakeFiles", "vitrt_cuda.dir", "includes_CUDA.rsp")
    if not os.path.exists(rsp):
        sys.exit(f"{rsp} not found: configure the CUDA build first (scripts/build.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        cmd = ["nvcc", "--options-file=" + os.path.relpath(rsp, os.path.join("build", "src")), "-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a",
               "--expt-relaxed-constexpr", "-std=c++17", "-cubin", "-x", "cu", os.path.abspath(source), "-o", cubin]
        subprocess.run(cmd, check=True, cwd=os.path.join("build", "src"))
        return subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True, text=True).stdout


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", nargs="?", help=".cu file to compile (omit with --sass)")
    ap.add_argument("pattern", help="substring of the kernels' mangled names")
    ap.add_argument("--sass", help="read this cuobjdump -sass text instead of compiling")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    ap.add_argument("--loops", action="store_true", help="also list the loops that hold wgmmas")
    ap.add_argument("--save-sass", help="also write the cuobjdump -sass text here")
    ap.add_argument("--compare", help="an earlier dump: say per kernel whether its SASS is unchanged")
    a = ap.parse_args(argv)
    if a.sass:
        sass = open(a.sass).read()
    elif a.source:
        sass = compile_sass(a.source, a.cuobjdump)
    else:
        ap.error("give a .cu file or --sass")
    if a.save_sass:
        with open(a.save_sass, "w") as f:
            f.write(sass)
    hits = {n: ins for n, ins in parse_functions(sass).items() if a.pattern in n}
    if not hits:
        sys.exit(f"no kernel matches {a.pattern!r}")
    if a.compare:
        for name, verdict in compare(parse_functions(open(a.compare).read()), hits).items():
            print(f"{verdict}: {name}")
        return 0
    for name, ins in hits.items():
        print(f"{name}: {len(ins)} instructions")
        print("  " + schedule(ins))
        if a.loops:
            for j, i, n in loops(ins):
                print(f"  loop {j}..{i}: {n} wgmma")
    return 0


if __name__ == "__main__":
    sys.exit(main())
