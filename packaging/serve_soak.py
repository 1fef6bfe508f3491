#!/usr/bin/env python3
"""Soak test of `strata-cli serve` (a manual run, not a CI test):

    python3 packaging/serve_soak.py [--minutes 15] [--clients 8] [--cli build/app/cli/strata-cli] [MODEL]

Starts the server on a free loopback port, keeps --clients streaming requests
of mixed lengths in flight for --minutes, reads /metrics?experts=1 once a
second as the app's panels do, samples the server's resident memory
every 10 s, and prints one JSON summary: requests, tokens, errors, throughput,
and resident memory after warm-up (the first 10% of the run) with its drift.
Passes (exit 0) with no error and memory flat within 5% after warm-up.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

PROMPTS = ["In the beginning", "And the LORD said unto Moses,", "Blessed are the poor in spirit:",
           "The LORD is my shepherd", "And it came to pass", "Hear, O Israel:"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--cli", default=os.path.join(os.path.dirname(__file__), "..", "build", "app", "cli", "strata-cli"))
    a = ap.parse_args()
    cmd = [a.cli, "serve", "--port", "0"] + ([a.model] if a.model else [])
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    m = re.search(r"at (http://\S+/v1) ", srv.stdout.readline())
    if not m:
        srv.kill()
        sys.exit("serve did not start: " + srv.stderr.read())
    base = m.group(1)
    stop_at = time.time() + a.minutes * 60
    lock = threading.Lock()
    stats = dict(requests=0, tokens=0, errors=0, error_samples=[])

    def client(i):
        n = 0
        while time.time() < stop_at:
            body = dict(messages=[dict(role="user", content=PROMPTS[(i + n) % len(PROMPTS)])],
                        max_tokens=16 + (i * 13 + n * 7) % 96, temperature=0.8, seed=i * 1000 + n,
                        stream=True, stream_options=dict(include_usage=True))
            n += 1
            req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            try:
                tokens, done = 0, False
                with urllib.request.urlopen(req, timeout=120) as r:
                    for raw in r:
                        line = raw.decode().strip()
                        if line == "data: [DONE]":
                            done = True
                        elif line.startswith("data: "):
                            j = json.loads(line[6:])
                            if j.get("usage"):
                                tokens = j["usage"]["completion_tokens"]
                            if "error" in j:
                                raise RuntimeError(j["error"]["message"])
                if not done:
                    raise RuntimeError("stream ended without [DONE]")
                with lock:
                    stats["requests"] += 1
                    stats["tokens"] += tokens
            except Exception as e:  # noqa: BLE001 - every failure counts
                with lock:
                    stats["errors"] += 1
                    if len(stats["error_samples"]) < 5:
                        stats["error_samples"].append(str(e))

    def metrics_reader():
        root = base[: -len("/v1")]
        while time.time() < stop_at:
            try:
                with urllib.request.urlopen(root + "/metrics?experts=1", timeout=30) as r:
                    if b"strata_expert_heat" not in r.read():
                        raise RuntimeError("/metrics without the heat map")
                with lock:
                    stats["metrics_reads"] = stats.get("metrics_reads", 0) + 1
            except Exception as e:  # noqa: BLE001
                with lock:
                    stats["errors"] += 1
                    if len(stats["error_samples"]) < 5:
                        stats["error_samples"].append("metrics: " + str(e))
            time.sleep(1)

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    threads.append(threading.Thread(target=metrics_reader))
    for t in threads:
        t.start()
    samples = []
    while any(t.is_alive() for t in threads):
        samples.append((time.time() - t0, rss_kib(srv.pid)))
        time.sleep(10)
    for t in threads:
        t.join()
    wall = time.time() - t0
    srv.terminate()
    srv.wait(timeout=30)
    warm = [kib for t, kib in samples if t >= 0.1 * wall] or [kib for _, kib in samples]
    drift = (max(warm) - min(warm)) / min(warm) if warm and min(warm) > 0 else 0.0
    out = dict(minutes=a.minutes, clients=a.clients, requests=stats["requests"], tokens=stats["tokens"],
               errors=stats["errors"], error_samples=stats["error_samples"], metrics_reads=stats.get("metrics_reads", 0),
               tokens_per_second=round(stats["tokens"] / wall, 1),
               rss_after_warmup_kib=dict(min=min(warm), max=max(warm), first=warm[0], last=warm[-1]),
               rss_drift=round(drift, 4), samples=len(samples))
    print(json.dumps(out, indent=1))
    sys.exit(0 if stats["errors"] == 0 and drift <= 0.05 else 1)


if __name__ == "__main__":
    main()
