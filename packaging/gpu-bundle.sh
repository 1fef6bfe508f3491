#!/usr/bin/env bash
# Packs what packaging/gpu-check.sh needs to run on a GPU machine that has a
# driver but none of the build dependencies (no Qt, spdlog, ICU): the CUDA
# build of strata-cli and the gpu test binaries, the shared libraries they
# load from this machine (glibc's own excepted), the fixture models, and the
# script. Builds with CUDA into build-gpu/ first (nvcc must be here; no GPU
# needed). Writes build-gpu/gpu-bundle/ and build-gpu/gpu-bundle.tar.xz.
#
# Then, on the GPU machine: tar xf gpu-bundle.tar.xz && bash gpu-bundle/gpu-check.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
out="$build/gpu-bundle"
fixtures="${STRATA_FIXTURES:-$root/../shared/fixtures}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DSTRATA_BUILD_APP=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target strata-cli test_cuda_kernels test_cuda_forward

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/fixtures/models"
bins=("$build/app/cli/strata-cli" "$build/tests/kernels/test_cuda_kernels" "$build/tests/backend/test_cuda_forward")
cp "${bins[@]}" "$out/bin/"
# Their libraries, but not glibc's (the machine's own loader must match it).
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        *) cp -L "$lib" "$out/lib/" ;;
    esac
done
cp "$root/packaging/gpu-check.sh" "$out/"
if [ -f "$fixtures/README.md" ]; then
    cp "$fixtures/README.md" "$out/fixtures/"
    # The device tool carries 64 MiB with the repository: the quantized
    # fixtures and the small F32 one (the large F32 files' paths are covered
    # there by stories260K and the make-model families against the CPU).
    for m in stories260K moe-tiny-q8_0 moe-tiny-q4_0 moe-small-q4_k_m; do
        cp "$fixtures/models/$m".* "$out/fixtures/models/"
    done
    cp "$fixtures/models/prompts.txt" "$out/fixtures/models/"
else
    echo "gpu-bundle: no fixtures at $fixtures (set STRATA_FIXTURES): the fixture checks will skip" >&2
fi
tar -C "$build" -cJf "$build/gpu-bundle.tar.xz" gpu-bundle
du -sh "$out" "$build/gpu-bundle.tar.xz"
