"""scripts/ncu_source_top.py on a small source page in ncu's CSV form (the real ones need a GPU)."""
import csv
import importlib.util
import io
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "ncu_source_top", os.path.join(os.path.dirname(__file__), "..", "ncu_source_top.py"))
top = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(top)

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "stall_long_sb", "stall_barrier", "stall_wait", "stall_long_sb (Not Issued)"]


def write_page(path, kernels):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        for name, rows in kernels:
            w.writerow(["Kernel Name", name])
            w.writerow(HEADER)
            for r in rows:
                w.writerow(r)


def row(addr, src, samples, executed, long_sb=0, barrier=0, wait=0):
    return [addr, src, str(samples), str(samples), str(executed), str(long_sb), str(barrier), str(wait), "999"]


def test_totals_shares_and_ranking(tmp_path):
    page = tmp_path / "ncu_source.csv"
    write_page(page, [("k1", [row("0x0", "LDC R1, c[0x0][0x28]", 0, 10),
                              row("0x10", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R4+URZ], R5", 10, 50, wait=10),
                              row("0x20", "@!P0  BRA 0x100", 60, 400, long_sb=60),
                              row("0x30", "WARPGROUP.DEPBAR.LE gsb0, 0x0", 30, 40, barrier=25, wait=5)])])
    (name, header, rows), = list(top.read_kernels(str(page)))
    out = io.StringIO()
    top.summarise(name, header, rows, 2, out)
    text = out.getvalue()
    assert "100 warp samples, 500 warp instructions executed, 4 SASS lines" in text
    # The Not-issued column is not a stall reason of its own; long_sb 60 + barrier 25 + wait 15.
    assert "stalls: long_sb 60.0%, barrier 25.0%, wait 15.0%" in text
    listed = [l for l in text.splitlines() if "%" in l and "stalls" not in l]
    assert len(listed) == 2  # --top 2: the two instructions with the most samples, in address order
    assert "BRA 0x100" in listed[0] and "60.0%" in listed[0] and "long_sb 60" in listed[0]
    assert "DEPBAR" in listed[1] and "barrier 25, wait 5" in listed[1]


def test_several_kernels_and_the_filter(tmp_path, capsys, monkeypatch):
    page = tmp_path / "ncu_source.csv"
    write_page(page, [("alpha_kernel", [row("0x0", "NOP", 4, 4, wait=4)]),
                      ("beta_kernel", [row("0x0", "NOP", 6, 6, long_sb=6)])])
    assert [k for k, _, _ in top.read_kernels(str(page))] == ["alpha_kernel", "beta_kernel"]
    monkeypatch.setattr("sys.argv", ["ncu_source_top.py", str(page), "--kernel", "beta"])
    top.main()
    text = capsys.readouterr().out
    assert "beta_kernel" in text and "alpha_kernel" not in text
    monkeypatch.setattr("sys.argv", ["ncu_source_top.py", str(page), "--kernel", "gamma"])
    with pytest.raises(SystemExit):
        top.main()
