#!/usr/bin/env python3
"""Where a kernel's instructions go, by region: an ncu source page (SASS) grouped into runs of
consecutive lines with the same execution count (in practice basic blocks, or straight-line parts of
them), largest first, each with its share of the warp instructions and of the stall samples and its
most frequent opcodes. Complements ncu_source_top.py, which lists single lines by samples.

Input: the CSV that `ncu --import R.ncu-rep --page source --print-source sass --csv` prints, plain or
gzipped (device-queue.sh's ncu_fused writes src_m.csv.gz).

    scripts/ncu_regions.py src_m.csv.gz [--top 40]
"""
import argparse
import collections
import csv
import gzip


def read_lines(path):
    """The page's SASS lines as (source, executions, samples)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    hdr = next(r for r in rows if "Source" in r and "Instructions Executed" in r)
    isrc, iex = hdr.index("Source"), hdr.index("Instructions Executed")
    ism = hdr.index("Warp Stall Sampling (All Samples)")
    return [(r[isrc].strip(), int(r[iex] or 0), int(r[ism] or 0))
            for r in rows[rows.index(hdr) + 1:] if len(r) > ism]


def regions(lines):
    """Runs of consecutive lines with one execution count, most instructions first, each as
    (first line, last line, executions per line, instructions, samples, opcode counts)."""
    runs = []
    for i, (src, e, s) in enumerate(lines):
        if runs and runs[-1][2] == e:
            r = runs[-1]
            r[1], r[3], r[4] = i, r[3] + e, r[4] + s
            r[5].append(src)
        else:
            runs.append([i, i, e, e, s, [src]])
    out = []
    for first, last, e, ins, s, srcs in runs:
        ops = collections.Counter(x.split()[1] if x.startswith("@") else x.split()[0] for x in srcs if x)
        out.append((first, last, e, ins, s, ops))
    return sorted(out, key=lambda r: -r[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    lines = read_lines(a.csv)
    total = sum(e for _, e, _ in lines) or 1
    samples = sum(s for _, _, s in lines) or 1
    print(f"{total} warp instructions, {samples} stall samples, {len(lines)} SASS lines")
    for first, last, e, ins, s, ops in regions(lines)[:a.top]:
        common = ", ".join(f"{o} {n}" for o, n in ops.most_common(6))
        print(f"lines {first}-{last} ({last - first + 1}) x {e}: {100 * ins / total:.1f}% of the instructions, "
              f"{100 * s / samples:.1f}% of the samples; {common}")


if __name__ == "__main__":
    main()
