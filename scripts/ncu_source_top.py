#!/usr/bin/env python3
"""Summarises an ncu source page (SASS with warp-stall samples) into what a kernel's warps wait on.

Input: the CSV that `ncu --import R.ncu-rep --page source --print-source sass --csv` prints (the
device-check stage ncu-src writes it to ncu_source.csv). Output: the sample and instruction totals,
the stall reasons over the whole kernel, and the instructions with the most samples, each with its
execution count and its two main stall reasons. A spin loop on an mbarrier shows up as a branch
after a SYNCS.PHASECHK with long_sb samples; a wgmma wait as WARPGROUP.DEPBAR with barrier samples.

    scripts/ncu_source_top.py ncu_source.csv [--top 25] [--kernel SUBSTRING]
"""
import argparse
import collections
import csv
import sys


def read_kernels(path):
    """Yields (kernel name, header, rows) per kernel section of the CSV."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if rec[0] == "Kernel Name":
                if header is not None:
                    yield name, header, rows
                name, header, rows = (rec[1] if len(rec) > 1 else "?"), None, []
            elif header is None and "Source" in rec and "Address" in rec:
                header = rec
            elif header is not None:
                rows.append(rec)
    if header is not None:
        yield name, header, rows


def as_int(s):
    try:
        return int(s)
    except ValueError:
        return 0


def summarise(name, header, rows, top, out):
    col = {h: i for i, h in enumerate(header)}
    samples_col = col.get("Warp Stall Sampling (All Samples)")
    exec_col = col.get("Instructions Executed")
    if samples_col is None or exec_col is None:
        out.write(f"{name}: no stall-sampling columns (profile with --section SourceCounters)\n")
        return
    reasons = [(h[len("stall_"):], i) for h, i in col.items() if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(as_int(r[samples_col]) for r in rows)
    executed = sum(as_int(r[exec_col]) for r in rows)
    out.write(f"{name}\n  {total} warp samples, {executed} warp instructions executed, {len(rows)} SASS lines\n")
    if total == 0:
        return
    by_reason = collections.Counter()
    for r in rows:
        for reason, i in reasons:
            by_reason[reason] += as_int(r[i])
    out.write("  stalls: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_reason.most_common(8) if v) + "\n")
    ranked = sorted(range(len(rows)), key=lambda i: -as_int(rows[i][samples_col]))[:top]
    out.write(f"  {'line':>5} {'samples':>8} {'share':>6} {'executed':>10}  instruction  [main stalls]\n")
    for i in sorted(ranked):
        r = rows[i]
        s = as_int(r[samples_col])
        if s == 0:
            continue
        main = sorted(((as_int(r[j]), reason) for reason, j in reasons), reverse=True)[:2]
        stalls = ", ".join(f"{reason} {n}" for n, reason in main if n)
        out.write(f"  {i:5d} {s:8d} {100 * s / total:5.1f}% {as_int(r[exec_col]):10d}  "
                  f"{r[col['Source']].strip()[:64]}  [{stalls}]\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25, help="instructions listed (default 25)")
    ap.add_argument("--kernel", default="", help="only kernels whose name contains this")
    a = ap.parse_args()
    found = False
    for name, header, rows in read_kernels(a.csv):
        if a.kernel in name:
            found = True
            summarise(name, header, rows, a.top, sys.stdout)
    if not found:
        sys.exit(f"{a.csv}: no kernel section{' matching ' + repr(a.kernel) if a.kernel else ''}")


if __name__ == "__main__":
    main()
