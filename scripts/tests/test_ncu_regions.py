"""scripts/ncu_regions.py on a small source page in ncu's CSV form (the real ones need a GPU)."""
import csv
import gzip
import importlib.util
import os
import subprocess
import sys

_path = os.path.join(os.path.dirname(__file__), "..", "ncu_regions.py")
_spec = importlib.util.spec_from_file_location("ncu_regions", _path)
nr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nr)

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"]
ROWS = [["0x0", "LDC R1, c[0x0][0x28]", "1", "10"],           # set-up: executed 10 times
        ["0x10", "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24", "5", "100"],   # a loop body of 3 lines
        ["0x20", "@!P0  BRA 0x10", "20", "100"],
        ["0x30", "MUFU.TANH.BF16 R2, R3", "3", "100"],
        ["0x40", "EXIT", "0", "10"]]


def write_page(path, compress):
    opener = gzip.open if compress else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["Kernel Name", "k"])
        w.writerow(HEADER)
        w.writerows(ROWS)


def test_regions_group_runs_of_one_execution_count(tmp_path):
    for compress in (False, True):
        page = str(tmp_path / ("p.csv.gz" if compress else "p.csv"))
        write_page(page, compress)
        lines = nr.read_lines(page)
        assert [e for _, e, _ in lines] == [10, 100, 100, 100, 10]
        regs = nr.regions(lines)
        first, last, e, ins, s, ops = regs[0]
        assert (first, last, e, ins, s) == (1, 3, 100, 300, 28)
        assert ops["HGMMA.64x64x16.F32.BF16"] == 1 and ops["BRA"] == 1 and ops["MUFU.TANH.BF16"] == 1
        # the two 10-count lines are not adjacent: two regions, not one
        assert sorted((r[0], r[1]) for r in regs[1:]) == [(0, 0), (4, 4)]


def test_command_line_prints_shares(tmp_path):
    page = str(tmp_path / "p.csv.gz")
    write_page(page, True)
    out = subprocess.run([sys.executable, _path, page, "--top", "1"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "320 warp instructions, 29 stall samples, 5 SASS lines"
    assert "lines 1-3 (3) x 100: 93.8% of the instructions, 96.6% of the samples" in out.splitlines()[1]
