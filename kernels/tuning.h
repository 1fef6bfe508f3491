// Run-time knobs of the CPU weight kernels. Which values run fastest depends
// on the core and its memory (how far ahead to ask for weights, whether
// read-once weights bypass the outer caches, whether 512-bit loops beat the
// 256-bit ones, how many rows a thread takes at a time), so the engine
// measures them on the machine at hand (engine/core/kernel_tuning.h) rather
// than guess from the CPU's name. The prefetch, read-once and grain settings
// give the same results bit for bit; the 256-bit kernels of a type round
// differently from its 512-bit ones (both within the reference's bounds).
//
// Process-wide. Set them while no kernel runs (at load): the kernels read
// them without synchronisation.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"

namespace strata::kernels {

struct KernelTuning {
    // How far ahead of the weight block being read the loops prefetch.
    int prefetch_bytes = 8192;
    // Weights read once (decode's experts, gemm_q_once and gemm_q_once_pair):
    // the read-once loops (prefetchnta, gate and up as two streams); false:
    // the plain gemm_q loops (prefetcht0), one matrix at a time.
    bool read_once_nta = true;
    // The fewest weight rows a thread takes at a time in the engine's
    // parallel products.
    int grain_rows = 48;
    // A bit per weight type (1 << WeightType): use the best 256-bit level's
    // kernels for it even where the 512-bit level has its own.
    uint64_t narrow_types = 0;

    bool operator==(const KernelTuning&) const = default;
};

// The tuning in force (the defaults above until set).
KernelTuning kernel_tuning();
// Applies `t` (narrow_types only where the active level is avx512 and the
// CPU has a 256-bit level). Values out of range are clamped: prefetch_bytes
// to [0, 65536], grain_rows to [1, 4096].
void set_kernel_tuning(const KernelTuning& t);

// Whether narrowing `w` would change its kernels: the active level is avx512
// and a 256-bit level has different ones for it.
bool has_narrow_choice(WeightType w);

// How far ahead the SIMD loops prefetch (KernelTuning::prefetch_bytes).
extern int g_kernel_prefetch_bytes;
// KernelTuning::read_once_nta, for the front doors of kernels/quant.h.
bool kernel_read_once();

}  // namespace strata::kernels
