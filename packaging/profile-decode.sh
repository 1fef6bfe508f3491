#!/bin/sh
# Where a decode's CPU time goes, by function: samples `strata-cli bench`
# with perf (cpu-clock, so it works in VMs without hardware counters) and
# prints the share of samples per function over the decode alone: after the
# model has loaded (the last weight repack) and before the closing bandwidth
# probe allocates its buffer, skipping the first quarter of that span
# (warm-up and prompt).
#
#   packaging/profile-decode.sh MODEL [bench options...]
#   e.g. packaging/profile-decode.sh m.gguf -n 160 --prompt-len 64 --warmup 8 --threads 2
#
# Needs perf (Debian: apt-get install linux-perf) and a build (packaging/build.sh).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 MODEL [bench options...]" >&2; exit 2; }
command -v perf >/dev/null || { echo "$0: perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
cli="$here/build/app/cli/strata-cli"
[ -x "$cli" ] || { echo "$0: $cli is missing: run packaging/build.sh first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
perf record -q -e cpu-clock -F 10000 -o "$work/perf.data" "$cli" bench "$@" --json > "$work/bench.json"
perf script -i "$work/perf.data" -F tid,time,ip,sym 2>/dev/null > "$work/samples.txt"
python3 - "$work/samples.txt" "$work/bench.json" <<'PY'
import collections, json, re, sys
samples = []
for line in open(sys.argv[1], errors="ignore"):
    m = re.match(r"\s*(\d+)\s+([\d.]+):\s*\S+\s*(.*)", line)
    if m:
        samples.append((float(m.group(2)), m.group(3).strip()))
def span(pred, after, before):
    return [t for t, f in samples if after < t < before and pred(f)]
probe = sorted(t for t, f in samples if "read_pass" in f)
if len(probe) < 2:
    sys.exit("no bandwidth-probe samples: is this strata-cli bench?")
gap = max(range(len(probe) - 1), key=lambda i: probe[i + 1] - probe[i])
a, b = probe[gap], probe[gap + 1]                      # the probes before and after the decode
loaded = max(span(lambda f: "repack_row" in f, a, b) or [a])  # the last weights repacked on load
# The closing probe's buffer being faulted in (loading's own page clearing
# ends before the first forward pass, well within 0.2 s of the last repack).
ends = [t for t in span(lambda f: "clear_page" in f, loaded, b) if t > loaded + 0.2]
end = min(ends) if ends else b
start = loaded + 0.25 * (end - loaded)
window = [f for t, f in samples if start <= t <= end]
if not window:
    sys.exit("no samples in the decode window")
def name(f):
    f = re.sub(r"\+0x[0-9a-f]+$", "", f).replace("(anonymous namespace)::", "")
    if "FunctionRef" in f:  # a parallel region's lambda: name the function it is in
        m = re.search(r"FunctionRef<[^>]*>::FunctionRef<([\w:]+)", f)
        f = (m.group(1) + " (region body)") if m else f
    return re.sub(r"\(.*", "", f)[:90] or "?"
d = json.load(open(sys.argv[2]))
print(f"decode {d['decode_tok_s']:.1f} tok/s, roofline {d['roofline_fraction']:.3f} "
      f"(read bandwidth {d['machine_read_gbs']:.1f} GB/s); {len(window)} samples over {end - start:.3f} s of decode")
for f, n in collections.Counter(name(f) for f in window).most_common(20):
    print(f"{100 * n / len(window):6.2f}%  {f}")
PY
