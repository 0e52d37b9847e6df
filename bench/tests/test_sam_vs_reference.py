"""The comparison logic of bench/sam_vs_reference.py on recorded outputs (the runs need a GPU)."""
import importlib.util
import math
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "sam_vs_reference", os.path.join(os.path.dirname(__file__), "..", "sam_vs_reference.py"))
svr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(svr)


def vitrt_json(img_s, ms, peak, dec=None):
    d = {"images_per_s": img_s, "encoder_ms_per_batch": ms, "peak_device_gib": peak}
    if dec is not None:
        d["decoder_ms_per_prompt"] = dec
    return d


def ref_json(img_s, ms, peak, mode):
    return {"img_s": img_s, "batch_ms_median": ms, "peak_GiB": peak, "compile": mode}


def test_parse_configs():
    assert svr.parse_configs("vit_b:1, vit_h:32") == [("vit_b", 1), ("vit_h", 32)]
    for bad in ("vit_x:1", "vit_b:0", "vit_b", "vit_b:two"):
        with pytest.raises(ValueError):
            svr.parse_configs(bad)


def test_result_line_takes_the_last_result():
    text = "warming up\nRESULT {\"img_s\": 1}\nnoise\nRESULT {\"img_s\": 2}\n"
    assert svr.result_line(text) == {"img_s": 2}
    assert svr.result_line("Traceback ...") is None


def test_compare_ratios_and_targets():
    # Figures of the 2026-12-02 evening run (vitrt) against ANCHORS.md's compiled reference.
    dec = {"1": 1.63, "16": 0.94, "64": 0.89, "1_on_device": 0.85, "16_on_device": 0.20, "64_on_device": 0.195}
    vitrt = {("vit_b", 1): vitrt_json(284.1, 3.52, 0.25, dec), ("vit_b", 32): vitrt_json(371.1, 86.23, 1.58, dec),
             ("vit_h", 1): vitrt_json(80.3, 12.45, 1.30), ("vit_h", 32): vitrt_json(100.0, 320.0, 3.54)}
    reference = {("vit_b", 1): ref_json(68.8, 14.5, 0.65, "none"), ("vit_b", 32): ref_json(312.2, 102.5, 2.77, "default"),
                 ("vit_h", 32): ref_json(61.9, 517.0, 5.29, "default")}
    dec_ref = {"vit_b": {"decoder_ms_per_prompt": {"1": 3.6833, "16": 0.2496, "64": 0.1862}}}
    rows = svr.compare(vitrt, reference, dec_ref)
    enc = {(r["model"], r["batch"]): r for r in rows if r["kind"] == "encoder"}
    assert set(enc) == {("vit_b", 1), ("vit_b", 32), ("vit_h", 32)}  # vit_h bs1 has no reference: no row
    assert math.isclose(enc[("vit_b", 32)]["speedup"], 371.1 / 312.2)
    assert math.isclose(enc[("vit_b", 32)]["memory_ratio"], 1.58 / 2.77)
    assert enc[("vit_b", 32)]["targets"] == "1.6x: MISSED; memory <= 0.7x: met"
    assert enc[("vit_h", 32)]["targets"] == "1.6x: met; memory <= 0.7x: met"
    assert enc[("vit_b", 1)]["targets"] == "<= 5 ms: met"
    dec_rows = {r["prompts"]: r for r in rows if r["kind"] == "decoder"}
    assert set(dec_rows) == {1, 16, 64}
    assert math.isclose(dec_rows[64]["speedup"], 0.1862 / 0.195)
    assert dec_rows[64]["targets"] == "3.0x: MISSED"
    assert dec_rows[1]["targets"] == ""
    table = svr.format_table(rows)
    assert "| encoder | vit_b | 32 | 371.1 img/s (86.23 ms) | 312.2 img/s (default) | 1.19x |" in table
    assert "| decoder | vit_b | 64 | 0.195 ms/prompt (on the device; to the host 0.890) | 0.186 ms/prompt | 0.95x |" in table
