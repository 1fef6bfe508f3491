// Run-time selection of the CPU kernel implementation.
//
// Every kernel exists as a scalar reference (kernels/ref/) and, on x86-64,
// as SIMD versions (kernels/cpu/) compiled with per-file -m flags. The
// library itself is built for the baseline ISA, so it runs on any x86-64 CPU;
// which implementation the front doors (kernels/quant.h, kernels/ops.h) call
// is decided once, at first use, from cpuid:
//
//   ref       scalar reference kernels (every CPU, every architecture)
//   avx2      AVX2 + FMA + F16C, Q4_0 repacked as it loads (Haswell, Zen 1 and later)
//   avx2vnni  avx2 plus AVX-VNNI: avx2's dot kernels with the 256-bit
//             vpdpbusd for the int8 dot products  (Alder Lake and later
//             Intel cores without AVX-512, Zen 5)
//   avx512    avx2 plus AVX512F/BW/VL + AVX512_VNNI: 512-bit kernels with
//             vpdpbusd, Q4_0 and Q8_0 repacked for them, and the K-quants'
//             own (dot_k_zmm.inc) (Ice Lake, Zen 4 and later)
// Every level gives the reference's results (bit for bit where the kernels
// say so); a level needs what the ones below it need, except that avx512
// does not need AVX-VNNI (Zen 4 and Ice Lake have AVX512_VNNI only).
//
// The environment variable STRATA_KERNELS=ref|avx2|avx2vnni|avx512 caps the level (for
// tests and benchmarks): a level the CPU lacks falls back to the best one it
// has below it. set_kernel_level() changes it at run time (process-wide);
// kernels/tuning.h holds the knobs measured per machine (prefetch distance,
// read-once loops, a type's 256-bit kernels at the avx512 level).
//
// Kernels only: no engine headers, no allocation on the kernel paths.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"
#include "kernels/ref/ops_ref.h"

namespace strata::kernels {

enum class KernelLevel : int { Ref = 0, Avx2 = 1, Avx2Vnni = 2, Avx512 = 3 };
inline constexpr int kKernelLevels = 4;

// "ref", "avx2", "avx2vnni", "avx512".
const char* kernel_level_name(KernelLevel level);
// Parses the names above (case-insensitive); false for anything else.
bool parse_kernel_level(const char* name, KernelLevel* out);

// True when this build has the level and this CPU can run it (Ref: always).
bool kernel_level_supported(KernelLevel level);
// The highest supported level.
KernelLevel best_kernel_level();
// The level the front doors use now: best_kernel_level(), capped by
// STRATA_KERNELS when set, or what set_kernel_level() chose.
KernelLevel kernel_level();
// Switches the front doors to `level`. Returns false (and changes nothing)
// when the level is not supported. Safe to call while other threads run
// kernels (they pick the new table up on their next call).
bool set_kernel_level(KernelLevel level);
// The CPU features the choice was made from, e.g. "avx2 fma f16c avx512f ...".
const char* kernel_cpu_features();

// One implementation of every dispatched kernel. Entries are never null for
// the types has_kernels() accepts (a level without a fast kernel for a type
// holds the reference one; gemm_q_once_pair excepted, see there); other
// slots are null.
struct KernelTable {
    static constexpr int kTypes = 64;  // WeightType ids are < 64 (the in-memory layouts from 63 down)

    // x (n floats) -> one activation row of type `a` (indexed by the
    // ACTIVATION type: F32, F16, BF16, Q8_0, Q8_1, Q8_K).
    using QuantizeActFn = void (*)(const float* x, void* xq, int64_t n);
    // One weight row (type w, the index) . one activation row of activation_type(w).
    using DotQFn = float (*)(const void* w, const void* xq, int64_t n);
    // One weight row . float activations (dot_row).
    using DotFn = float (*)(const void* w, const float* x, int64_t n);
    // See gemm_q in kernels/quant.h.
    using GemmQFn = void (*)(const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq, int64_t act_row_bytes,
                             int64_t n_tokens, int64_t cols, float* Y, int64_t ldy);

    KernelLevel level = KernelLevel::Ref;
    QuantizeActFn quantize_act[kTypes] = {};
    DotQFn dot_q[kTypes] = {};
    DotFn dot[kTypes] = {};
    GemmQFn gemm_q[kTypes] = {};
    // gemm_q for weights read once (quant.h: gemm_q_once); the same results.
    // A level without its own version holds its gemm_q (filled by dispatch).
    GemmQFn gemm_q_once[kTypes] = {};
    // quant.h: gemm_q_once_pair. Null where a level has no kernel of its own
    // for the type: the front door then calls gemm_q_once on each matrix.
    using GemmQPairFn = void (*)(const void* Wa, const void* Wb, uint64_t w_row_bytes, int64_t rows, const void* xq,
                                 int64_t cols, float* Ya, float* Yb);
    GemmQPairFn gemm_q_once_pair[kTypes] = {};
    // Per file type: the in-memory layout this level's gemm_q runs fastest,
    // for rows of at most max_cols elements (max_cols 0: keep the file's).
    struct PackedLayout {
        WeightType type = WeightType::F32;
        int64_t max_cols = 0;
    };
    PackedLayout packed[kTypes] = {};

    // Float ops (kernels/ops.h).
    float (*dot_f32)(const float* a, const float* b, int64_t n) = nullptr;
    void (*axpy)(float a, const float* x, float* y, int64_t n) = nullptr;
    void (*scale_i8)(const int8_t* x, float s, float* y, int64_t n) = nullptr;
    void (*rmsnorm)(const float* x, const float* w, float* y, int64_t n, float eps) = nullptr;
    void (*softmax)(float* x, int64_t n) = nullptr;
    void (*swiglu)(const float* g, const float* u, float* y, int64_t n) = nullptr;
    void (*rope_apply)(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, bool neox) = nullptr;
    void (*attn_scores)(const float* q, int64_t n_q, const float* k, int64_t m, int64_t hd, float scale, float* out,
                        int64_t out_stride, const void* ask, int64_t ask_bytes) = nullptr;
    void (*attn_accumulate)(const float* p, int64_t p_stride, int64_t n_q, const float* v, int64_t m, int64_t hd,
                            float* out, const void* ask, int64_t ask_bytes) = nullptr;
    void (*router_topk)(float* logits, int64_t n_expert, int64_t k, const uint8_t* allowed, int32_t* ids, float* w) = nullptr;
    // The bandwidth probe's read loops (ref::read_sum, ref::read_sum2; core/bandwidth.cpp
    // calls the best level's directly, not through a front door).
    uint64_t (*read_sum)(const uint64_t* p, int64_t n, ref::ReadAhead ahead, int64_t ahead_bytes) = nullptr;
    uint64_t (*read_sum2)(const uint64_t* a, const uint64_t* b, int64_t n, ref::ReadAhead ahead, int64_t ahead_bytes) = nullptr;
};

// The table of one level, or nullptr when it is not supported. Tests use this
// to run every level side by side without touching the process-wide choice.
const KernelTable* kernel_table(KernelLevel level);

// The table the front doors use now (never null).
const KernelTable& active_kernels();

}  // namespace strata::kernels
