"""vitrt against segment-anything-fast on the same GPU, in one run, with the ratios (issue 3).

For every configuration (model, batch) it runs `vitrt bench --device cuda --dtype bf16 --json` and
segment-anything-fast's image encoder through ../shared/anchor/bench_sam_pytorch.py (a copy travels in
.anchors/, with the fetched sources; same random-weight set-up: rel-pos and pos-embed from N(0, 0.02),
TF32 off), eager at batch 1 (the issue's batch-1 references are eager) and torch.compile (mode
"default") at larger batches, as ANCHORS.md. For each model it also runs the reference's batched
decoder path (bench/decoder_reference.py: predict_torch with 1, 16 and 64 prompts, masks left on the
GPU) and sets it against vitrt's decoder with the answers left on the device (`<n>_on_device` in the
bench JSON; the host-delivered figures are printed too).

Prints one table with the ratios and the issue's targets (encoder img/s >= 1.6x at batch 32, batch-1
latency <= 5 ms vit_b / 12 ms vit_h, peak memory <= 0.7x at batch 32, decoder at 64 prompts >= 3x);
--json writes everything measured.

Usage on the GPU machine (vitrt built there, .anchors/ carried along):
    python3 bench/sam_vs_reference.py --vitrt build-dev/bin/vitrt --anchor-dir .anchors \
        [--configs vit_b:1,vit_b:32,vit_h:1,vit_h:32] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))

THROUGHPUT_TARGET = 1.6  # vitrt img/s over the reference's, batch 32
MEMORY_TARGET = 0.7  # vitrt peak over the reference's, batch 32
DECODER_TARGET = 3.0  # reference ms per prompt over vitrt's, 64 prompts per image
LATENCY_TARGET_MS = {"vit_b": 5.0, "vit_h": 12.0}  # batch 1


def parse_configs(text: str) -> List[tuple]:
    out = []
    for item in text.split(","):
        model, _, batch = item.strip().partition(":")
        if model not in ("vit_b", "vit_l", "vit_h") or not batch.isdigit() or int(batch) < 1:
            raise ValueError(f"bad configuration '{item}': expected vit_b|vit_l|vit_h:<batch>")
        out.append((model, int(batch)))
    return out


def result_line(text: str) -> Optional[dict]:
    """The JSON of the last `RESULT {...}` line of a reference script's output."""
    found = None
    for line in text.splitlines():
        if line.startswith("RESULT "):
            found = json.loads(line[len("RESULT "):])
    return found


def run(cmd: List[str], timeout: int, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def run_vitrt(vitrt: str, model: str, batch: int, iters: int) -> dict:
    p = run([vitrt, "bench", "--device", "cuda", "--model", model, "--batch", str(batch), "--dtype", "bf16",
             "--iters", str(iters), "--json"], timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"vitrt bench {model} bs{batch} failed: {p.stderr[-500:]}")
    return json.loads(p.stdout)


def run_reference_encoder(anchor_dir: str, model: str, batch: int, compile_mode: str, iters: int) -> dict:
    env = dict(os.environ, ANCHOR_DIR=anchor_dir)
    p = run([sys.executable, os.path.join(anchor_dir, "bench_sam_pytorch.py"), "--impl", "fast", "--model", model,
             "--bs", str(batch), "--dtype", "bf16", "--compile", compile_mode, "--iters", str(iters)],
            timeout=900, env=env)
    r = result_line(p.stdout)
    if r is None:
        raise RuntimeError(f"reference {model} bs{batch} ({compile_mode}) failed: {(p.stdout + p.stderr)[-500:]}")
    return r


def run_reference_decoder(anchor_dir: str, model: str) -> dict:
    env = dict(os.environ, ANCHOR_DIR=anchor_dir)
    p = run([sys.executable, os.path.join(HERE, "decoder_reference.py"), "--model", model], timeout=600, env=env)
    r = result_line(p.stdout)
    if r is None:
        raise RuntimeError(f"reference decoder {model} failed: {(p.stdout + p.stderr)[-500:]}")
    return r


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def compare(vitrt: Dict[tuple, dict], reference: Dict[tuple, dict], decoder_reference: Dict[str, dict]) -> List[dict]:
    """Rows of the comparison: one per (model, batch) measured on both sides, then one per decoder model.

    vitrt[(model, batch)]: vitrt bench JSON; reference[(model, batch)]: bench_sam_pytorch.py RESULT;
    decoder_reference[model]: decoder_reference.py RESULT."""
    rows = []
    for key in sorted(vitrt):
        if key not in reference:
            continue
        model, batch = key
        v, r = vitrt[key], reference[key]
        row = dict(kind="encoder", model=model, batch=batch, vitrt_img_s=v["images_per_s"], ref_img_s=r["img_s"],
                   ref_mode=r.get("compile", "none"), vitrt_ms=v["encoder_ms_per_batch"], ref_ms=r["batch_ms_median"],
                   vitrt_peak_gib=v["peak_device_gib"], ref_peak_gib=r["peak_GiB"])
        row["speedup"] = v["images_per_s"] / r["img_s"]
        row["memory_ratio"] = v["peak_device_gib"] / r["peak_GiB"] if r["peak_GiB"] > 0 else float("nan")
        targets = []
        if batch == 32:
            targets.append(f"{THROUGHPUT_TARGET}x: {verdict(row['speedup'] >= THROUGHPUT_TARGET)}")
            targets.append(f"memory <= {MEMORY_TARGET}x: {verdict(row['memory_ratio'] <= MEMORY_TARGET)}")
        if batch == 1 and model in LATENCY_TARGET_MS:
            limit = LATENCY_TARGET_MS[model]
            targets.append(f"<= {limit:g} ms: {verdict(row['vitrt_ms'] <= limit)}")
        row["targets"] = "; ".join(targets)
        rows.append(row)
    for model in sorted(decoder_reference):
        # vitrt's decoder figures from its smallest-batch bench of that model (they do not depend on it).
        mine = [vitrt[k] for k in sorted(vitrt) if k[0] == model and "decoder_ms_per_prompt" in vitrt[k]]
        if not mine:
            continue
        dec = mine[0]["decoder_ms_per_prompt"]
        ref = decoder_reference[model]["decoder_ms_per_prompt"]
        for n in ("1", "16", "64"):
            if n not in ref or f"{n}_on_device" not in dec:
                continue
            row = dict(kind="decoder", model=model, prompts=int(n), vitrt_ms_per_prompt=dec[f"{n}_on_device"],
                       vitrt_host_ms_per_prompt=dec.get(n), ref_ms_per_prompt=ref[n])
            row["speedup"] = ref[n] / dec[f"{n}_on_device"]
            row["targets"] = f"{DECODER_TARGET}x: {verdict(row['speedup'] >= DECODER_TARGET)}" if n == "64" else ""
            rows.append(row)
    return rows


def format_table(rows: List[dict]) -> str:
    lines = ["| part | model | batch / prompts | vitrt | segment-anything-fast | ratio | memory (vitrt / ref) | targets |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "encoder":
            lines.append(f"| encoder | {r['model']} | {r['batch']} | {r['vitrt_img_s']:.1f} img/s ({r['vitrt_ms']:.2f} ms)"
                         f" | {r['ref_img_s']:.1f} img/s ({r['ref_mode']}) | {r['speedup']:.2f}x"
                         f" | {r['vitrt_peak_gib']:.2f} / {r['ref_peak_gib']:.2f} GiB = {r['memory_ratio']:.2f}x"
                         f" | {r['targets']} |")
        else:
            host = r["vitrt_host_ms_per_prompt"]
            host_text = f"; to the host {host:.3f}" if host is not None else ""
            lines.append(f"| decoder | {r['model']} | {r['prompts']} | {r['vitrt_ms_per_prompt']:.3f} ms/prompt"
                         f" (on the device{host_text}) | {r['ref_ms_per_prompt']:.3f} ms/prompt | {r['speedup']:.2f}x"
                         f" | | {r['targets']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vitrt", required=True, help="path of the vitrt CLI (built with CUDA)")
    ap.add_argument("--anchor-dir", default=".anchors", help="segment-anything-fast sources + bench_sam_pytorch.py")
    ap.add_argument("--configs", default="vit_b:1,vit_b:32,vit_h:1,vit_h:32", help="model:batch,...")
    ap.add_argument("--ref-compile", default="auto", choices=["auto", "none", "default"],
                    help="the reference's torch.compile mode (auto: none at batch 1, default above)")
    ap.add_argument("--decoder-models", default="vit_b", help="models for the decoder comparison ('' for none)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", help="write every measurement and the comparison rows here")
    a = ap.parse_args()
    try:
        configs = parse_configs(a.configs)
    except ValueError as e:
        ap.error(str(e))
    vitrt, reference, decoder_reference = {}, {}, {}
    for model, batch in configs:
        print(f"[vitrt] {model} bs{batch}", file=sys.stderr, flush=True)
        vitrt[(model, batch)] = run_vitrt(a.vitrt, model, batch, a.iters)
        mode = a.ref_compile if a.ref_compile != "auto" else ("none" if batch == 1 else "default")
        print(f"[segment-anything-fast] {model} bs{batch} compile={mode}", file=sys.stderr, flush=True)
        try:
            reference[(model, batch)] = run_reference_encoder(a.anchor_dir, model, batch, mode, a.iters)
        except (RuntimeError, subprocess.TimeoutExpired) as e:  # report, keep the other configurations
            print(f"  {e}", file=sys.stderr)
    for model in [m for m in a.decoder_models.split(",") if m]:
        print(f"[segment-anything-fast] batched decoder {model}", file=sys.stderr, flush=True)
        try:
            decoder_reference[model] = run_reference_decoder(a.anchor_dir, model)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"  {e}", file=sys.stderr)
    rows = compare(vitrt, reference, decoder_reference)
    print(format_table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(vitrt={f"{m}:{b}": v for (m, b), v in vitrt.items()},
                           reference={f"{m}:{b}": v for (m, b), v in reference.items()},
                           decoder_reference=decoder_reference, rows=rows), f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
