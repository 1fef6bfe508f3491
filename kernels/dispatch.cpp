#include "kernels/dispatch.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/levels.h"
#include "kernels/ref/gemm_ref.h"
#include "kernels/ref/ops_ref.h"
#include "kernels/tuning.h"

namespace strata::kernels {

namespace {

// Reference entries, one instantiation per type (the switch inside the
// *_ref function folds away).
template <WeightType W>
float ref_dot_q(const void* w, const void* xq, int64_t n) {
    return dot_row_q_ref(W, w, xq, n);
}
template <WeightType W>
float ref_dot(const void* w, const float* x, int64_t n) {
    return dot_row_ref(W, w, x, n);
}
template <WeightType W>
void ref_gemm_q(const void* Wm, uint64_t wrb, int64_t rows, const void* xq, int64_t arb, int64_t nt, int64_t cols, float* Y,
                int64_t ldy) {
    gemm_q_ref(W, Wm, wrb, rows, xq, arb, nt, cols, Y, ldy);
}
// quantize_activation_ref is keyed by weight type; pick a weight type of each activation type.
template <WeightType W>
void ref_quantize(const float* x, void* xq, int64_t n) {
    quantize_activation_ref(W, x, xq, n);
}

template <WeightType W>
void set_ref_row(KernelTable& t) {
    t.dot_q[static_cast<int>(W)] = &ref_dot_q<W>;
    t.dot[static_cast<int>(W)] = &ref_dot<W>;
    t.gemm_q[static_cast<int>(W)] = &ref_gemm_q<W>;
}

KernelTable make_ref_table() {
    KernelTable t;
    t.level = KernelLevel::Ref;
    set_ref_row<WeightType::F32>(t);
    set_ref_row<WeightType::F16>(t);
    set_ref_row<WeightType::BF16>(t);
    set_ref_row<WeightType::Q4_0>(t);
    set_ref_row<WeightType::Q4_0_R4>(t);
    set_ref_row<WeightType::Q8_0_R2>(t);
    set_ref_row<WeightType::Q4_1>(t);
    set_ref_row<WeightType::Q5_0>(t);
    set_ref_row<WeightType::Q5_1>(t);
    set_ref_row<WeightType::Q8_0>(t);
    set_ref_row<WeightType::Q2_K>(t);
    set_ref_row<WeightType::Q3_K>(t);
    set_ref_row<WeightType::Q4_K>(t);
    set_ref_row<WeightType::Q5_K>(t);
    set_ref_row<WeightType::Q6_K>(t);
    set_ref_row<WeightType::Q8_K>(t);
    set_ref_row<WeightType::MXFP4>(t);
    t.quantize_act[static_cast<int>(WeightType::F32)] = &ref_quantize<WeightType::F32>;
    t.quantize_act[static_cast<int>(WeightType::F16)] = &ref_quantize<WeightType::F16>;
    t.quantize_act[static_cast<int>(WeightType::BF16)] = &ref_quantize<WeightType::BF16>;
    t.quantize_act[static_cast<int>(WeightType::Q8_0)] = &ref_quantize<WeightType::Q8_0>;
    t.quantize_act[static_cast<int>(WeightType::Q8_1)] = &ref_quantize<WeightType::Q4_1>;
    t.quantize_act[static_cast<int>(WeightType::Q8_K)] = &ref_quantize<WeightType::Q8_K>;
    t.dot_f32 = &ref::dot_f32;
    t.axpy = &ref::axpy;
    t.scale_i8 = &ref::scale_i8;
    t.rmsnorm = &ref::rmsnorm;
    t.softmax = &ref::softmax;
    t.swiglu = &ref::swiglu;
    t.rope_apply = &ref::rope_apply;
    t.attn_scores = &ref::attn_scores;
    t.attn_accumulate = &ref::attn_accumulate;
    t.router_topk = &ref::router_topk;
    t.read_sum = &ref::read_sum;
    t.read_sum2 = &ref::read_sum2;
    return t;
}

bool cpu_has(KernelLevel level) {
    const cpu::CpuFeatures& f = cpu::cpu_features();
    const bool avx2 = f.avx2 && f.fma && f.f16c;
    switch (level) {
        case KernelLevel::Ref: return true;
        case KernelLevel::Avx2: return avx2;
        case KernelLevel::Avx2Vnni: return avx2 && f.avxvnni;
        case KernelLevel::Avx512: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
    }
    return false;
}

// Every type without its own once-version reads once as it reads always.
void fill_once_from_gemm(KernelTable& t) {
    for (int i = 0; i < KernelTable::kTypes; ++i)
        if (!t.gemm_q_once[i]) t.gemm_q_once[i] = t.gemm_q[i];
}

// One level's table: the reference's, overridden by the level's SIMD units.
struct LevelFills {
    bool (*dot)(KernelTable&);
    bool (*quantize)(KernelTable&);
    bool (*ops)(KernelTable&);
};

struct Tables {
    KernelTable table[kKernelLevels];
    bool supported[kKernelLevels] = {};

    Tables() {
        const KernelTable ref = make_ref_table();  // no once-versions yet: each level fills its own
        table[0] = ref;
        fill_once_from_gemm(table[0]);
        supported[0] = true;
        add(ref, KernelLevel::Avx2, {&cpu::avx2::fill_dot, &cpu::avx2::fill_quantize, &cpu::avx2::fill_ops});
        // avx2's quantize and ops kernels (they have no int8 dot products),
        // its dot kernels rebuilt with the VEX vpdpbusd.
        add(ref, KernelLevel::Avx2Vnni, {&cpu::avx2vnni::fill_dot, &cpu::avx2::fill_quantize, &cpu::avx2::fill_ops});
        add(ref, KernelLevel::Avx512, {&cpu::avx512::fill_dot, &cpu::avx512::fill_quantize, &cpu::avx512::fill_ops});
    }

    void add(const KernelTable& ref, KernelLevel level, LevelFills fills) {
        KernelTable t = ref;
        t.level = level;
        bool built = fills.dot(t);
        built = fills.quantize(t) && built;
        built = fills.ops(t) && built;
        fill_once_from_gemm(t);
        const int l = static_cast<int>(level);
        table[l] = t;
        supported[l] = built && cpu_has(level);
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

KernelLevel best_supported_at_most(KernelLevel cap) {
    const Tables& t = tables();
    for (int l = static_cast<int>(cap); l > 0; --l)
        if (t.supported[l]) return static_cast<KernelLevel>(l);
    return KernelLevel::Ref;
}

KernelLevel initial_level() {
    KernelLevel level = best_kernel_level();
    if (const char* env = std::getenv("STRATA_KERNELS"); env && *env) {
        KernelLevel want;
        if (parse_kernel_level(env, &want)) {
            level = best_supported_at_most(want);
        } else if (std::strcmp(env, "auto") != 0) {
            std::fprintf(stderr, "strata: STRATA_KERNELS=%s is not ref, avx2, avx2vnni or avx512; using %s\n", env,
                         kernel_level_name(level));
        }
    }
    return level;
}

std::atomic<const KernelTable*>& active_slot() {
    static std::atomic<const KernelTable*> slot{&tables().table[static_cast<int>(initial_level())]};
    return slot;
}

// The tuning in force, and the tables built for it (kept for the process:
// a thread may still be running a kernel it took from one).
struct TuningState {
    std::mutex mu;
    KernelTuning tuning;
    bool read_once = true;
    std::vector<std::unique_ptr<KernelTable>> built;
};
TuningState& tuning_state() {
    static TuningState s;
    return s;
}

// The best 256-bit level's table, or null.
const KernelTable* narrow_table() {
    for (KernelLevel l : {KernelLevel::Avx2Vnni, KernelLevel::Avx2})
        if (tables().supported[static_cast<int>(l)]) return &tables().table[static_cast<int>(l)];
    return nullptr;
}

void copy_gemm(KernelTable& to, const KernelTable& from, int i) {
    to.gemm_q[i] = from.gemm_q[i];
    to.gemm_q_once[i] = from.gemm_q_once[i];
    to.gemm_q_once_pair[i] = from.gemm_q_once_pair[i];
}

// The level's table with the narrowed types' products taken from the
// 256-bit level (with that level's repacked layout, if any). Caller holds mu.
const KernelTable* table_for(KernelLevel level, uint64_t narrow, TuningState& st) {
    const KernelTable* base = &tables().table[static_cast<int>(level)];
    const KernelTable* n = narrow_table();
    if (level != KernelLevel::Avx512 || narrow == 0 || !n) return base;
    auto t = std::make_unique<KernelTable>(*base);
    for (int i = 0; i < KernelTable::kTypes; ++i) {
        if (!(narrow >> i & 1) || !base->gemm_q[i]) continue;
        copy_gemm(*t, *n, i);
        const int wide_layout = static_cast<int>(base->packed[i].type);
        const int narrow_layout = static_cast<int>(n->packed[i].type);
        if (base->packed[i].max_cols > 0) copy_gemm(*t, *n, wide_layout);
        if (n->packed[i].max_cols > 0) copy_gemm(*t, *n, narrow_layout);
        t->packed[i] = n->packed[i];
    }
    st.built.push_back(std::move(t));
    return st.built.back().get();
}

}  // namespace

const char* kernel_level_name(KernelLevel level) {
    switch (level) {
        case KernelLevel::Ref: return "ref";
        case KernelLevel::Avx2: return "avx2";
        case KernelLevel::Avx2Vnni: return "avx2vnni";
        case KernelLevel::Avx512: return "avx512";
    }
    return "?";
}

bool parse_kernel_level(const char* name, KernelLevel* out) {
    if (!name) return false;
    char buf[16] = {};
    for (size_t i = 0; name[i]; ++i) {
        if (i + 1 >= sizeof buf) return false;
        buf[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
    }
    for (int l = 0; l < kKernelLevels; ++l) {
        if (std::strcmp(buf, kernel_level_name(static_cast<KernelLevel>(l))) == 0) {
            *out = static_cast<KernelLevel>(l);
            return true;
        }
    }
    return false;
}

bool kernel_level_supported(KernelLevel level) {
    const int l = static_cast<int>(level);
    return l >= 0 && l < kKernelLevels && tables().supported[l];
}

KernelLevel best_kernel_level() { return best_supported_at_most(KernelLevel::Avx512); }

KernelLevel kernel_level() { return active_kernels().level; }

bool set_kernel_level(KernelLevel level) {
    if (!kernel_level_supported(level)) return false;
    TuningState& st = tuning_state();
    std::lock_guard<std::mutex> lock(st.mu);
    active_slot().store(table_for(level, st.tuning.narrow_types, st), std::memory_order_release);
    return true;
}

int g_kernel_prefetch_bytes = KernelTuning{}.prefetch_bytes;

KernelTuning kernel_tuning() {
    TuningState& st = tuning_state();
    std::lock_guard<std::mutex> lock(st.mu);
    return st.tuning;
}

void set_kernel_tuning(const KernelTuning& t) {
    TuningState& st = tuning_state();
    std::lock_guard<std::mutex> lock(st.mu);
    st.tuning = t;
    st.tuning.prefetch_bytes = std::clamp(t.prefetch_bytes, 0, 65536);
    st.tuning.grain_rows = std::clamp(t.grain_rows, 1, 4096);
    g_kernel_prefetch_bytes = st.tuning.prefetch_bytes;
    st.read_once = st.tuning.read_once_nta;
    active_slot().store(table_for(active_kernels().level, st.tuning.narrow_types, st), std::memory_order_release);
}

bool kernel_read_once() { return tuning_state().read_once; }

bool has_narrow_choice(WeightType w) {
    const int i = static_cast<int>(w);
    const KernelTable* n = narrow_table();
    const KernelTable& wide = tables().table[static_cast<int>(KernelLevel::Avx512)];
    return i >= 0 && i < KernelTable::kTypes && n && active_kernels().level == KernelLevel::Avx512 && wide.gemm_q[i] &&
           (n->gemm_q[i] != wide.gemm_q[i] || n->packed[i].type != wide.packed[i].type);
}

const char* kernel_cpu_features() { return cpu::cpu_features_string(); }

const KernelTable* kernel_table(KernelLevel level) {
    return kernel_level_supported(level) ? &tables().table[static_cast<int>(level)] : nullptr;
}

const KernelTable& active_kernels() { return *active_slot().load(std::memory_order_acquire); }

}  // namespace strata::kernels
