#!/usr/bin/env bash
# The CUDA backend's checks, for a machine with an NVIDIA GPU; well under 8
# minutes on one H200. Prints what it runs and every figure as it goes.
#
#   packaging/gpu-check.sh            on a machine with the build dependencies
#                                      (packaging/setup.sh): builds with CUDA
#                                      into build-gpu/, then runs the checks
#   bash gpu-check.sh                 inside a bundle from packaging/gpu-bundle.sh
#                                      (a GPU machine without the dependencies:
#                                      binaries, their libraries and the
#                                      fixtures travel with it)
#
# It runs:
#  1. the gpu tests: test_cuda_kernels (every kernel against its kernels/ref
#     twin) and test_cuda_forward (every fixture model on the GPU within the
#     fixtures README's tolerances, the VRAM expert cache's text equal to
#     fully resident, batches, the engine's self-check against the CPU);
#  2. bench --device cuda --json on the 1.2B make-model MoE (12 layers, dim
#     1024, 32 experts top-4, expert FFN 1024) in Q4_0, Q8_0 and Q4_K: fully
#     resident, with the VRAM expert cache at 50% and 25% (every miss copied:
#     --placement transfer), and with every layer's experts on the CPU (--cpu-moe);
#  3. hybrid placement (issue: hybrid expert execution) on the Q4_K file with
#     25% of the experts in VRAM: transfer-only, CPU-only (--cpu-moe) and
#     hybrid (--placement auto) in alternating rounds, each with its
#     miss_fraction_* figures; then three tiers (--slow-budget 256M: host RAM
#     a cache over the file) under hybrid placement;
#  4. batched decode: bench --concurrency 1 and 8 on the Q4_0 file.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fail=0
step() { printf '\n=== %s\n' "$*"; }

if [ -x "$here/bin/strata-cli" ]; then
    # A bundle: binaries in bin/, their libraries in lib/, fixtures in fixtures/.
    bin="$here/bin"
    export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export STRATA_FIXTURES="$here/fixtures"
    tests=("$bin/test_cuda_kernels" "$bin/test_cuda_forward")
    cli="$bin/strata-cli"
else
    root="$(cd "$here/.." && pwd)"
    step "build with CUDA (build-gpu/)"
    cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DSTRATA_BUILD_APP=OFF \
        || exit 1
    cmake --build "$root/build-gpu" -j "$(nproc)" --target strata-cli test_cuda_kernels test_cuda_forward || exit 1
    tests=("$root/build-gpu/tests/kernels/test_cuda_kernels" "$root/build-gpu/tests/backend/test_cuda_forward")
    cli="$root/build-gpu/app/cli/strata-cli"
fi

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv 2>/dev/null || true
lscpu 2>/dev/null | grep -m1 'Model name' || true
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$cli" make-model "$work/tiny.gguf" --layers 2 --dim 64 --heads 4 --kv-heads 2 --experts 4 --used 2 --expert-ff 64 >/dev/null
"$cli" inspect "$work/tiny.gguf" --no-tensors | sed -n '/^machine/,/^$/p'

step "gpu tests"
for t in "${tests[@]}"; do
    echo "--- $(basename "$t")"
    if ! timeout 240 "$t"; then fail=1; fi
done

step "bench: the 1.2B make-model MoE on the GPU (JSON lines)"
for type in q4_0 q8_0 q4_k; do
    "$cli" make-model "$work/moe-$type.gguf" --layers 12 --dim 1024 --heads 16 --kv-heads 4 --experts 32 --used 4 \
        --expert-ff 1024 --vocab 512 --type "$type" >/dev/null || { fail=1; continue; }
    for cache in resident 0.5 0.25 cpu-moe; do
        opts=()
        case "$cache" in
            resident) ;;
            cpu-moe) opts=(--cpu-moe) ;;
            *) opts=(--expert-cache-fraction "$cache" --placement transfer) ;;
        esac
        echo "--- $type, expert cache $cache"
        timeout 120 "$cli" bench "$work/moe-$type.gguf" --device cuda -n 128 --prompt-len 64 --warmup 8 \
            "${opts[@]}" --json || fail=1
    done
done

step "hybrid placement: q4_k, 25% of the experts in VRAM, alternating rounds (JSON lines)"
for round in 1 2 3; do
    for mode in transfer cpu-only auto; do
        case "$mode" in
            cpu-only) opts=(--cpu-moe) ;;
            *) opts=(--expert-cache-fraction 0.25 --placement "$mode") ;;
        esac
        echo "--- round $round, $mode"
        timeout 120 "$cli" bench "$work/moe-q4_k.gguf" --device cuda -n 128 --prompt-len 64 --warmup 8 \
            "${opts[@]}" --json || fail=1
    done
done
echo "--- three tiers: host RAM a 256 MiB cache over the file, hybrid placement"
timeout 120 "$cli" bench "$work/moe-q4_k.gguf" --device cuda -n 128 --prompt-len 64 --warmup 8 \
    --expert-cache-fraction 0.25 --placement auto --slow-budget 256M --json || fail=1

step "batched decode: 1 and 8 sequences (q4_0)"
for c in 1 8; do
    echo "--- concurrency $c"
    timeout 120 "$cli" bench "$work/moe-q4_0.gguf" --device cuda --concurrency "$c" --requests "$((c * 2))" \
        --prompt-len 64 --gen-len 64 --json || fail=1
done

step "result"
if [ "$fail" -eq 0 ]; then echo "gpu-check: all passed"; else echo "gpu-check: FAILED (see above)"; fi
exit "$fail"
