#!/usr/bin/env python3
"""Load test of `vitrt serve`: N concurrent clients clicking on one cached embedding.

Starts `vitrt serve` (or uses --url), embeds one image, then every client thread posts
/v1/segment with random clicks (1-3 points, mixed labels, sometimes feeding back the previous
answer's mask_input_id, as an annotation tool does) for --duration seconds after a --warmup.
Reports throughput, latency percentiles, errors by status, and the server's resident memory
after warm-up and at the end (sampled every second in between, to see that it stays flat).

Only loopback servers are accepted, every loop is bounded in time and count, and the script stops
by itself. Standard library only.

Examples:
  # one click at a time on a cached vit_b embedding (latency)
  python3 bench/load_test.py --vitrt build/bin/vitrt --random-weights vit_b --clients 1 --duration 20
  # the 64-client soak
  python3 bench/load_test.py --vitrt build/bin/vitrt --random-weights vit_b --clients 64 --duration 60
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def start_server(args):
    cmd = [args.vitrt, "serve", "--host", "127.0.0.1", "--port", "0"]
    if args.checkpoint:
        cmd += ["--checkpoint", args.checkpoint] + (["--config", args.config] if args.config else [])
    else:
        cmd += ["--random-weights", args.random_weights]
    cmd += args.server_arg
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    sys.exit("vitrt serve did not start: " + " ".join(cmd))


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="an already running server on loopback (else one is started)")
    ap.add_argument("--pid", type=int, help="pid of that server, for its resident memory")
    ap.add_argument("--vitrt", default=os.path.join(ROOT, "build", "bin", "vitrt"))
    ap.add_argument("--checkpoint")
    ap.add_argument("--config")
    ap.add_argument("--random-weights", default="vit_b")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `vitrt serve` argument (repeatable)")
    ap.add_argument("--image", default=os.path.join(ROOT, "tests", "fixtures", "sam", "images", "large.png"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds (at most 600)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--max-requests", type=int, default=1_000_000, help="stop after this many measured requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the summary here")
    args = ap.parse_args()
    if not (1 <= args.clients <= 512 and 0 < args.duration <= 600 and 0 <= args.warmup <= 120):
        sys.exit("clients must be 1..512, duration 0..600 s, warmup 0..120 s")

    proc = None
    if args.url:
        url = args.url.rstrip("/")
        pid = args.pid
    else:
        proc, url = start_server(args)
        pid = proc.pid
    parsed = urllib.parse.urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") and not parsed.hostname.startswith("127."):
        sys.exit(f"refusing to load {parsed.hostname}: loopback only")
    host, port = parsed.hostname, parsed.port or 80

    try:
        with open(args.image, "rb") as f:
            image = f.read()
        c = http.client.HTTPConnection(host, port, timeout=600)
        t0 = time.time()
        c.request("POST", "/v1/embed", body=image, headers={"Content-Type": "image/png"})
        r = c.getresponse()
        emb = json.loads(r.read())
        if r.status != 200:
            sys.exit(f"embed failed: {r.status} {emb}")
        embed_s = time.time() - t0
        W, H = emb["width"], emb["height"]
        print(f"embedded {os.path.basename(args.image)} ({W}x{H}) in {embed_s:.2f} s, id {emb['embedding_id']}")

        lock = threading.Lock()
        latencies, errors = [], {}
        by_kind = {"multimask": [], "single": []}  # 1 point: 3 masks; 2-3 points: 1 mask
        state = {"measuring": False, "stop": False, "count": 0}
        warm_end = time.time() + args.warmup
        end = warm_end + args.duration

        def client(idx):
            rng = random.Random(args.seed * 1000 + idx)
            conn = http.client.HTTPConnection(host, port, timeout=60)
            last_mask = None
            while not state["stop"] and time.time() < end:
                n = rng.choice((1, 1, 2, 3))
                points = [[rng.uniform(0, W), rng.uniform(0, H)] for _ in range(n)]
                req = {"embedding_id": emb["embedding_id"], "points": points,
                       "labels": [1] + [rng.choice((0, 1)) for _ in range(n - 1)], "multimask": n == 1}
                if last_mask and n > 1:
                    req["mask_input_id"] = last_mask
                body = json.dumps(req)
                t = time.perf_counter()
                try:
                    conn.request("POST", "/v1/segment", body=body, headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    data = resp.read()
                    status = resp.status
                except (OSError, http.client.HTTPException) as e:
                    status = type(e).__name__
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=60)
                dt = time.perf_counter() - t
                if status == 200:
                    answer = json.loads(data)
                    last_mask = answer["masks"][answer["best"]]["mask_input_id"]
                with lock:
                    if state["measuring"]:
                        if status == 200:
                            latencies.append(dt)
                            by_kind["multimask" if n == 1 else "single"].append(dt)
                        else:
                            errors[str(status)] = errors.get(str(status), 0) + 1
                        state["count"] += 1
                        if state["count"] >= args.max_requests:
                            state["stop"] = True
            conn.close()

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(max(0.0, warm_end - time.time()))
        rss_warm = rss_bytes(pid) if pid else None
        with lock:
            state["measuring"] = True
        t_start = time.time()
        rss_samples = []
        while time.time() < end and not state["stop"]:
            time.sleep(min(1.0, max(0.0, end - time.time())))
            if pid:
                rss_samples.append(rss_bytes(pid))
        with lock:
            state["measuring"] = False
            state["stop"] = True
        elapsed = time.time() - t_start
        for t in threads:
            t.join(timeout=90)
        rss_end = rss_bytes(pid) if pid else None

        lat = sorted(latencies)
        ms = lambda v: round(v * 1000, 1)
        summary = {
            "clients": args.clients, "seconds": round(elapsed, 1), "image": f"{W}x{H}",
            "requests_ok": len(lat), "errors": errors,
            "throughput_rps": round(len(lat) / elapsed, 2) if elapsed > 0 else 0,
            "latency_ms": {"p50": ms(percentile(lat, 0.5)), "p90": ms(percentile(lat, 0.9)),
                           "p99": ms(percentile(lat, 0.99)), "max": ms(lat[-1]) if lat else None,
                           "mean": ms(statistics.fmean(lat)) if lat else None},
            "latency_ms_p50_by_kind": {k: ms(percentile(sorted(v), 0.5)) for k, v in by_kind.items()},
            "latency_ms_p99_by_kind": {k: ms(percentile(sorted(v), 0.99)) for k, v in by_kind.items()},
            "rss_mib": {"after_warmup": rss_warm and round(rss_warm / 2**20, 1),
                        "end": rss_end and round(rss_end / 2**20, 1),
                        "min_during": min(filter(None, rss_samples), default=None) and round(min(filter(None, rss_samples)) / 2**20, 1),
                        "max_during": max(filter(None, rss_samples), default=None) and round(max(filter(None, rss_samples)) / 2**20, 1),
                        "every_10s": [round(v / 2**20) for v in rss_samples[9::10] if v]},
        }
        print(json.dumps(summary, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
        if proc and proc.poll() is not None:
            sys.exit(f"the server exited during the test (code {proc.returncode})")
        return 1 if errors else 0
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
