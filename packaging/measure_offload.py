#!/usr/bin/env python3
"""The offloading, bound and serving tables of a MoE model, measured in one sitting
(a manual run, not a CI test; the README's tables come from it):

    python3 packaging/measure_offload.py [MODEL] [--rounds 2] [--cli build/app/cli/strata-cli]
                                         [--prompts FILE] [--json OUT.json]

1. Offloading: `bench` decode with the expert cache at 25/50/75% of the experts
   under LRU, LFU and ARC, prefetch on and off, beside the resident run. Every
   configuration runs --rounds times, the rounds interleaved (round-robin over
   the configurations), and each figure is reported as the range over rounds.
   Decode is sampled (T = 0.8) so the text routes as real use does.
2. Bounds: a routing trace of the prompts (each prompt, then 64 greedy tokens)
   replayed by `simulate` under lru, lfu, arc and opt (Belady's MIN, the bound no
   eviction policy passes) at the same cache sizes, without and with the
   lookahead predictor.
3. Serving: `bench --concurrency C` for C = 1, 4, 8, 16 (requests max(2C, 8),
   prompt 32, 64 generated tokens), resident and at a 50% LFU cache.

Prints Markdown tables and, with --json, writes every raw figure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FRACTIONS = [0.25, 0.5, 0.75]
POLICIES = ["lru", "lfu", "arc"]
CONCURRENCY = [1, 4, 8, 16]


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr.strip()}")
    return json.loads(out.stdout)


def span(values, fmt):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "–" + fmt.format(hi)


def offloading(cli, model, rounds):
    configs = [("resident", None, None)]
    configs += [(p, f, pf) for p in POLICIES for f in FRACTIONS for pf in ("on", "off")]
    runs = {c: [] for c in configs}
    for r in range(rounds):
        for c in configs:
            policy, frac, prefetch = c
            cmd = [cli, "bench", model, "-n", "128", "--warmup", "32", "--temp", "0.8", "--seed", str(7 + r), "--json"]
            if frac is not None:
                cmd += ["--expert-cache-fraction", str(frac), "--policy", policy, "--prefetch", prefetch]
            runs[c].append(run_json(cmd))
            print(f"  round {r + 1}/{rounds}: {policy} {frac or ''} {prefetch or ''}", file=sys.stderr)
    resident = [j["decode_tok_s"] for j in runs[configs[0]]]
    base = sorted(resident)[len(resident) // 2]
    lines = ["| policy | cache | prefetch | hit rate | expert KiB/token | stall | decode tok/s | × resident |",
             "|---|---|---|---|---|---|---|---|",
             f"| resident | 100% | – | 1.00 | 0 | 0 | {span(resident, '{:.0f}')} | 1.00 |"]
    for c in configs[1:]:
        js = runs[c]
        lines.append("| {} | {:.0%} | {} | {} | {} | {} | {} | {} |".format(
            c[0], c[1], c[2],
            span([j["expert_hit_rate"] for j in js], "{:.2f}"),
            span([j["expert_bytes_loaded_per_token"] / 1024 for j in js], "{:.0f}"),
            span([j["stall_fraction"] for j in js], "{:.2f}"),
            span([j["decode_tok_s"] for j in js], "{:.0f}"),
            span([j["decode_tok_s"] / base for j in js], "{:.2f}")))
    return lines, {f"{c[0]}/{c[1]}/{c[2]}": runs[c] for c in configs}


def bounds(cli, model, prompts):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "routing.trace")
        subprocess.run([cli, "trace", model, "--prompts", prompts, "--greedy", "64", "--out", trace],
                       check=True, capture_output=True)
        slots = ",".join(f"{int(f * 100)}%" for f in FRACTIONS)
        j = run_json([cli, "simulate", trace, "--policy", "lru,lfu,arc,opt", "--slots", slots,
                      "--predictor", "none,lookahead", "--json"])
    rows = j["runs"]
    lines = ["| policy | predictor | " + " | ".join(f"{int(f * 100)}% cache" for f in FRACTIONS) + " |",
             "|---|---|" + "---|" * len(FRACTIONS)]
    table = {}
    for r in rows:
        table.setdefault((r["policy"], r["predictor"]), {})[r["cache_fraction"]] = r["hit_rate"]
    for (policy, predictor), by_slots in table.items():
        cells = [f"{by_slots[s]:.3f}" for s in sorted(by_slots)]
        lines.append(f"| {policy} | {predictor} | " + " | ".join(cells) + " |")
    return lines, j


def serving(cli, model):
    lines = ["| cache | " + " | ".join(f"C={c}" for c in CONCURRENCY) + " | TTFT p50/p99 at C=16 | expert KiB per token, C=1 → 16 |",
             "|---|" + "---|" * len(CONCURRENCY) + "---|---|"]
    raw = {}
    for label, extra in (("resident", []), ("50% LFU", ["--expert-cache-fraction", "0.5", "--policy", "lfu"])):
        js = []
        for c in CONCURRENCY:
            js.append(run_json([cli, "bench", model, "--concurrency", str(c), "--requests", str(max(2 * c, 8)),
                                "--prompt-len", "32", "--gen-len", "64", "--json"] + extra))
            print(f"  serving {label} C={c}", file=sys.stderr)
        raw[label] = js
        tps = [f"{j['throughput_tok_s']:.0f}" for j in js]
        ttft = f"{js[-1]['ttft_ms_p50']:.0f}/{js[-1]['ttft_ms_p99']:.0f} ms"
        kib = "—" if not extra else f"{js[0]['expert_bytes_loaded_per_token'] / 1024:.0f} → {js[-1]['expert_bytes_loaded_per_token'] / 1024:.0f}"
        lines.append(f"| {label} | " + " | ".join(tps) + f" | {ttft} | {kib} |")
    return lines, raw


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=os.path.join(ROOT, "resources", "models", "strata-demo-moe.gguf"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "cli", "strata-cli"))
    ap.add_argument("--prompts", default=os.path.join(ROOT, "resources", "models", "strata-demo-moe.prompts.txt"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", help="write every raw figure here")
    a = ap.parse_args()
    for path in (a.model, a.cli, a.prompts):
        if not os.path.exists(path):
            sys.exit(f"not found: {path}")
    off, off_raw = offloading(a.cli, a.model, a.rounds)
    bnd, bnd_raw = bounds(a.cli, a.model, a.prompts)
    srv, srv_raw = serving(a.cli, a.model)
    print("## Offloading (bench -n 128 --temp 0.8, ranges over rounds)\n")
    print("\n".join(off))
    print("\n## Hit-rate bounds (simulate on a trace of the prompts + 64 greedy tokens each)\n")
    print("\n".join(bnd))
    print("\n## Serving (bench --concurrency C, prompt 32, 64 generated; throughput in tok/s)\n")
    print("\n".join(srv))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(offloading=off_raw, bounds=bnd_raw, serving=srv_raw), f, indent=1)


if __name__ == "__main__":
    main()
