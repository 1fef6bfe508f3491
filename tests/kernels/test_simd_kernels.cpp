// Tests of the SIMD kernels (kernels/cpu/) against their scalar twins
// (kernels/ref/), at every dispatch level this CPU runs (kernels/dispatch.h);
// a level the CPU lacks is skipped with the missing feature named.
//
//  - dispatch: levels, names, the process-wide switch, complete tables;
//  - quantize_activation (q8_0, q8_1, q8_K, f16, bf16, f32): the reference's
//    bytes exactly, including rounding ties, zero blocks, denormals, NaN/Inf;
//  - dot_row_q for every weight type, rows of 1..9 blocks (+ long rows),
//    random-byte and quantizer-made weights, quantized and random-byte
//    activations (-128 included): within
//        |fast - ref| <= 1e-5 * sum|terms| + 1e-30
//    where sum|terms| = sum_i |w_i x_i| over the dequantized values, with the
//    offset part of q4_1/q5_1/q2_K/q4_K/q5_K (their mins) counted separately;
//  - dot_row with float activations (f32/f16/bf16 weights): bit-identical;
//  - gemm_q: rows not a multiple of anything, 1..9 tokens, padded strides:
//    each result bit-identical with gemm_q on that row and token alone (batch
//    invariance), within the bound above of gemm_q_ref, nothing written
//    outside Y's rows and columns;
//  - float ops: dot_f32, axpy and scale_i8 bit-identical; rmsnorm within 2 ulp;
//    softmax and swiglu within 1e-6 relative (+1e-37 absolute, denormals),
//    n = 1..300 and 4096, with -inf / large / tiny inputs;
//  - front doors (quant.h, ops.h) call the active level's table.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/quant_types.h"
#include "kernels/ref/gemm_ref.h"
#include "kernels/ref/ops_ref.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/repack_ref.h"
#include "kernels/ref/vec_dot_ref.h"
#include "kernels/tuning.h"

using namespace strata::kernels;

namespace {

const WeightType kWeightTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q4_0,
                                   WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                                   WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K,
                                   WeightType::Q6_K, WeightType::Q8_K, WeightType::Q4_0_R4,
                                   WeightType::Q8_0_R2, WeightType::MXFP4};

const char* type_name(WeightType t) { return type_traits(t)->name; }
int64_t block_elems(WeightType t) { return type_traits(t)->block_elems; }
int idx(WeightType t) { return static_cast<int>(t); }

// The first feature a level needs that this CPU lacks ("" when none).
QString missing_feature(KernelLevel level) {
    const cpu::CpuFeatures& f = cpu::cpu_features();
    QStringList miss;
    if (level >= KernelLevel::Avx2) {
        if (!f.avx2) miss << "avx2";
        if (!f.fma) miss << "fma";
        if (!f.f16c) miss << "f16c";
    }
    if (level == KernelLevel::Avx2Vnni && !f.avxvnni) miss << "avxvnni";
    if (level >= KernelLevel::Avx512) {
        if (!f.avx512f) miss << "avx512f";
        if (!f.avx512bw) miss << "avx512bw";
        if (!f.avx512vl) miss << "avx512vl";
        if (!f.avx512vnni) miss << "avx512vnni";
    }
    return miss.join(' ');
}

// Fetches the level of a data row; skips when this machine cannot run it.
#define FETCH_TABLE(tbl)                                                                                         \
    QFETCH(int, level_i);                                                                                        \
    const KernelLevel level_ = static_cast<KernelLevel>(level_i);                                                \
    const KernelTable* tbl = kernel_table(level_);                                                               \
    if (!tbl) {                                                                                                  \
        const QString why = missing_feature(level_);                                                             \
        QSKIP(qPrintable(QString("level %1 not available: CPU lacks %2")                                         \
                             .arg(kernel_level_name(level_), why.isEmpty() ? QString("(not built)") : why)));    \
    }

void add_level_rows(bool with_ref = false) {
    QTest::addColumn<int>("level_i");
    for (int l = with_ref ? 0 : 1; l < kKernelLevels; ++l)
        QTest::newRow(kernel_level_name(static_cast<KernelLevel>(l))) << l;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::vector<float> gaussian(std::mt19937& rng, int64_t n, float mean = 0.f, float sd = 1.f) {
    std::normal_distribution<float> dist(mean, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
}

// Activation rows: N(0,1), N(0.5,1), and 32-element chunks alternating 100x in scale.
std::vector<float> activation_row(std::mt19937& rng, int64_t n, int kind) {
    if (kind == 0) return gaussian(rng, n);
    if (kind == 1) return gaussian(rng, n, 0.5f, 1.f);
    std::vector<float> v = gaussian(rng, n);
    for (int64_t i = 0; i < n; ++i)
        if ((i / 32) % 2) v[static_cast<size_t>(i)] *= 100.f;
    return v;
}

void put_half(uint8_t* p, float f) {
    const uint16_t h = fp32_to_fp16(f);
    std::memcpy(p, &h, 2);
}

// A weight row of n elements: mode 0 from the reference quantizer, mode 1
// random bytes with sane scales (every quant bit pattern, negative and
// mixed-sign scales, q8_0's -128).
std::vector<uint8_t> weight_row(std::mt19937& rng, WeightType t, int64_t n, int mode) {
    if (file_type(t) != t) {  // an in-memory layout: a row of its file type, repacked
        std::vector<uint8_t> w = weight_row(rng, file_type(t), n, mode);
        std::vector<uint8_t> r(w.size()), scratch(w.size());
        r = w;
        if (!repack_rows(file_type(t), t, r.data(), 1, n, r.size(), scratch.data())) return {};
        return r;
    }
    std::vector<uint8_t> w(static_cast<size_t>(row_bytes(t, n)));
    if (mode == 0 || t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16) {
        const std::vector<float> x = gaussian(rng, n, 0.1f, 1.f);
        quantize_row(t, x.data(), w.data(), n);
        return w;
    }
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
    const int64_t bs = type_traits(t)->block_bytes;
    for (uint8_t* b = w.data(); b < w.data() + w.size(); b += bs) {
        switch (t) {
            case WeightType::Q4_0: put_half(b + offsetof(block_q4_0, d), scale(rng)); break;
            case WeightType::MXFP4: b[0] = static_cast<uint8_t>(110 + byte(rng) % 20); break;  // every code, sane scales
            case WeightType::Q5_0: put_half(b + offsetof(block_q5_0, d), scale(rng)); break;
            case WeightType::Q8_0: put_half(b + offsetof(block_q8_0, d), scale(rng)); break;
            case WeightType::Q4_1:
                put_half(b + offsetof(block_q4_1, d), scale(rng));
                put_half(b + offsetof(block_q4_1, m), scale(rng));
                break;
            case WeightType::Q5_1:
                put_half(b + offsetof(block_q5_1, d), scale(rng));
                put_half(b + offsetof(block_q5_1, m), scale(rng));
                break;
            case WeightType::Q2_K:
                put_half(b + offsetof(block_q2_K, d), scale(rng));
                put_half(b + offsetof(block_q2_K, dmin), scale(rng));
                break;
            case WeightType::Q3_K: put_half(b + offsetof(block_q3_K, d), scale(rng)); break;
            case WeightType::Q4_K:
                put_half(b + offsetof(block_q4_K, d), scale(rng));
                put_half(b + offsetof(block_q4_K, dmin), scale(rng));
                break;
            case WeightType::Q5_K:
                put_half(b + offsetof(block_q5_K, d), scale(rng));
                put_half(b + offsetof(block_q5_K, dmin), scale(rng));
                break;
            case WeightType::Q6_K: put_half(b + offsetof(block_q6_K, d), scale(rng)); break;
            case WeightType::Q8_K: {
                const float d = scale(rng);
                std::memcpy(b + offsetof(block_q8_K, d), &d, 4);
                break;
            }
            default: break;
        }
    }
    return w;
}

// The same row with its offset part (q4_1/q5_1 m, k-quant dmin) zeroed.
std::vector<uint8_t> without_mins(WeightType t, std::vector<uint8_t> w) {
    const int64_t bs = type_traits(t)->block_bytes;
    size_t off = SIZE_MAX;
    if (t == WeightType::Q4_1) off = offsetof(block_q4_1, m);
    if (t == WeightType::Q5_1) off = offsetof(block_q5_1, m);
    if (t == WeightType::Q2_K) off = offsetof(block_q2_K, dmin);
    if (t == WeightType::Q4_K) off = offsetof(block_q4_K, dmin);
    if (t == WeightType::Q5_K) off = offsetof(block_q5_K, dmin);
    if (off == SIZE_MAX) return w;
    for (size_t b = 0; b < w.size(); b += static_cast<size_t>(bs)) std::memset(w.data() + b + off, 0, 2);
    return w;
}

// An activation row of random bytes (q8 quants over the full int8 range,
// -128 included; q8_K bsums consistent with its quants), or, for the float
// formats, the quantized form of random floats.
std::vector<uint8_t> random_act(std::mt19937& rng, WeightType w, int64_t n);

std::vector<uint8_t> quantize_act_ref(WeightType w, const std::vector<float>& x) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(static_cast<size_t>(activation_row_bytes(w, n)));
    quantize_activation_ref(w, x.data(), q.data(), n);
    return q;
}

std::vector<uint8_t> random_act(std::mt19937& rng, WeightType w, int64_t n) {
    const WeightType a = activation_type(w);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    if (a != WeightType::Q8_0 && a != WeightType::Q8_1 && a != WeightType::Q8_K)
        return quantize_act_ref(w, gaussian(rng, n));
    std::vector<uint8_t> q(static_cast<size_t>(activation_row_bytes(w, n)));
    for (uint8_t& b : q) b = static_cast<uint8_t>(byte(rng));
    if (a == WeightType::Q8_0) {
        for (auto* b = reinterpret_cast<block_q8_0*>(q.data()); b < reinterpret_cast<block_q8_0*>(q.data() + q.size()); ++b) {
            b->d = fp32_to_fp16(scale(rng));
            b->qs[0] = -128;
        }
    } else if (a == WeightType::Q8_1) {
        for (auto* b = reinterpret_cast<block_q8_1*>(q.data()); b < reinterpret_cast<block_q8_1*>(q.data() + q.size()); ++b) {
            b->d = fp32_to_fp16(scale(rng));
            b->s = fp32_to_fp16(scale(rng) * 100.f);
            b->qs[3] = -128;
        }
    } else {
        for (auto* b = reinterpret_cast<block_q8_K*>(q.data()); b < reinterpret_cast<block_q8_K*>(q.data() + q.size()); ++b) {
            b->d = scale(rng);
            b->qs[7] = -128;
            for (int j = 0; j < QK_K / 16; ++j) {
                int sum = 0;
                for (int k = 0; k < 16; ++k) sum += b->qs[16 * j + k];
                b->bsums[j] = static_cast<int16_t>(sum);
            }
        }
    }
    return q;
}

std::vector<float> dequantize_act(WeightType w, const uint8_t* xq, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    const WeightType a = activation_type(w);
    if (a == WeightType::Q8_1)
        dequantize_row_q8_1_ref(reinterpret_cast<const block_q8_1*>(xq), y.data(), n);
    else
        dequantize_row(a, xq, y.data(), n);
    return y;
}

// sum |terms| of dot(w, x): scale part and offset part counted apart.
double abs_terms(WeightType t, const uint8_t* w, const uint8_t* xq, int64_t n) {
    const std::vector<float> x = dequantize_act(t, xq, n);
    const size_t rb = static_cast<size_t>(row_bytes(t, n));
    const std::vector<uint8_t> full(w, w + rb);
    const std::vector<uint8_t> scale_only = without_mins(t, full);
    std::vector<float> a(static_cast<size_t>(n)), s(static_cast<size_t>(n));
    dequantize_row(t, full.data(), a.data(), n);
    dequantize_row(t, scale_only.data(), s.data(), n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double xi = std::fabs(static_cast<double>(x[static_cast<size_t>(i)]));
        sum += std::fabs(static_cast<double>(s[static_cast<size_t>(i)])) * xi;
        sum += std::fabs(static_cast<double>(a[static_cast<size_t>(i)]) - s[static_cast<size_t>(i)]) * xi;
    }
    return sum;
}

constexpr double kDotRel = 1e-5;
constexpr double kDotAbs = 1e-30;

bool within(double got, double want, double bound) { return std::fabs(got - want) <= bound; }

}  // namespace

class TestSimdKernels : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();

    void dispatch_levels();
    void tables_complete_data() { add_level_rows(true); }
    void tables_complete();

    void quantize_activation_bytes_data() { add_level_rows(); }
    void quantize_activation_bytes();
    void quantize_activation_special_data() { add_level_rows(); }
    void quantize_activation_special();

    void dot_row_q_vs_ref_data() { add_level_rows(); }
    void dot_row_q_vs_ref();
    void dot_row_float_exact_data() { add_level_rows(); }
    void dot_row_float_exact();

    void gemm_q_vs_ref_data() { add_level_rows(); }
    void gemm_q_vs_ref();
    void gemm_once_pair_vs_single_data() { add_level_rows(true); }
    void gemm_once_pair_vs_single();

    void ops_vs_ref_data() { add_level_rows(); }
    void ops_vs_ref();
    void attention_and_router_vs_ref_data() { add_level_rows(); }
    void attention_and_router_vs_ref();
    void rope_vs_ref_data() { add_level_rows(); }
    void rope_vs_ref();
    void rope_yarn_table();
    void read_sum_vs_ref_data() { add_level_rows(); }
    void read_sum_vs_ref();

    void front_doors_follow_level();
    void tuning_changes_speed_not_results();
};

void TestSimdKernels::initTestCase() {
    qInfo("CPU features: %s; best level %s; active %s", kernel_cpu_features(), kernel_level_name(best_kernel_level()),
          kernel_level_name(kernel_level()));
}

void TestSimdKernels::dispatch_levels() {
    QVERIFY(kernel_level_supported(KernelLevel::Ref));
    QVERIFY(kernel_table(KernelLevel::Ref) != nullptr);
    QVERIFY(kernel_level_supported(best_kernel_level()));
    for (int l = 0; l < kKernelLevels; ++l) {
        const KernelLevel level = static_cast<KernelLevel>(l);
        KernelLevel parsed;
        QVERIFY(parse_kernel_level(kernel_level_name(level), &parsed));
        QCOMPARE(static_cast<int>(parsed), l);
        const KernelTable* t = kernel_table(level);
        QCOMPARE(t != nullptr, kernel_level_supported(level));
        if (t) QCOMPARE(static_cast<int>(t->level), l);
        // A level above the best one is never supported.
        if (l > static_cast<int>(best_kernel_level())) QVERIFY(!kernel_level_supported(level));
    }
    KernelLevel parsed;
    QVERIFY(parse_kernel_level("AVX2", &parsed));
    QCOMPARE(parsed, KernelLevel::Avx2);
    QVERIFY(!parse_kernel_level("sse9", &parsed));
    QVERIFY(!parse_kernel_level("", &parsed));
    QVERIFY(!parse_kernel_level(nullptr, &parsed));

    const KernelLevel before = kernel_level();
    QVERIFY(set_kernel_level(KernelLevel::Ref));
    QCOMPARE(kernel_level(), KernelLevel::Ref);
    QCOMPARE(&active_kernels(), kernel_table(KernelLevel::Ref));
    if (!kernel_level_supported(KernelLevel::Avx512)) QVERIFY(!set_kernel_level(KernelLevel::Avx512));
    QVERIFY(set_kernel_level(before));
    QCOMPARE(kernel_level(), before);
}

void TestSimdKernels::tables_complete() {
    FETCH_TABLE(t);
    for (WeightType w : kWeightTypes) {
        QVERIFY2(t->dot_q[idx(w)] && t->dot[idx(w)] && t->gemm_q[idx(w)] && t->gemm_q_once[idx(w)], type_name(w));
        QVERIFY2(t->quantize_act[idx(activation_type(w))], type_name(w));
    }
    QVERIFY(t->dot_f32 && t->axpy && t->scale_i8 && t->rmsnorm && t->softmax && t->swiglu);
    QVERIFY(t->attn_scores && t->attn_accumulate && t->router_topk && t->rope_apply && t->read_sum && t->read_sum2);
}

// Random rows of every activation type: the reference's bytes.
void TestSimdKernels::quantize_activation_bytes() {
    FETCH_TABLE(t);
    std::mt19937 rng(1234);
    const WeightType kinds[] = {WeightType::F32, WeightType::F16, WeightType::BF16,
                                WeightType::Q8_0, WeightType::Q4_1, WeightType::Q8_K};
    for (WeightType w : kinds) {
        const WeightType a = activation_type(w);
        const int64_t qk = block_elems(a == WeightType::Q8_1 ? WeightType::Q4_1 : w);
        for (int64_t blocks = 1; blocks <= (qk == 1 ? 300 : 9); ++blocks) {
            for (int kind = 0; kind < 3; ++kind) {
                const int64_t n = blocks * qk;
                const std::vector<float> x = activation_row(rng, n, kind);
                const std::vector<uint8_t> want = quantize_act_ref(w, x);
                std::vector<uint8_t> got(want.size() + 8, 0xAB);
                t->quantize_act[idx(a)](x.data(), got.data(), n);
                QVERIFY2(std::memcmp(got.data(), want.data(), want.size()) == 0,
                         qPrintable(QString("%1, n = %2, kind %3").arg(type_name(a)).arg(n).arg(kind)));
                for (size_t i = want.size(); i < got.size(); ++i) QCOMPARE(got[i], uint8_t{0xAB});  // no overrun
            }
        }
    }
}

// Rounding ties, zero blocks, denormals, huge values, NaN / Inf.
void TestSimdKernels::quantize_activation_special() {
    FETCH_TABLE(t);
    std::mt19937 rng(99);
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::vector<float>> rows;
    {
        // amax = 127 exactly: id = 1, and x = k + 0.5 are exact ties.
        std::vector<float> v(512);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 64) - 32) + 0.5f;
        for (size_t i = 0; i < v.size(); i += 32) v[i] = (i / 32) % 2 ? 127.f : -127.f;
        rows.push_back(v);
        // q8_K: max = -127 gives iscale = 1: ties at k + 0.5 as well.
        for (size_t i = 0; i < v.size(); i += 256) v[i] = -127.f;
        rows.push_back(v);
    }
    rows.push_back(std::vector<float>(512, 0.0f));  // all-zero blocks
    {
        std::vector<float> v = gaussian(rng, 512);
        for (size_t i = 0; i < 32; ++i) v[i] = 0.0f;      // one zero q8 block
        for (size_t i = 64; i < 96; ++i) v[i] = -0.0f;   // negative zeros
        for (size_t i = 96; i < 128; ++i) v[i] *= 1e-40f;  // denormals: scale overflows, reference path
        for (size_t i = 128; i < 160; ++i) v[i] *= 1e-37f;
        for (size_t i = 160; i < 192; ++i) v[i] *= 1e30f;
        v[200] = inf;
        v[230] = -inf;
        v[300] = nan;
        v[400] = 70000.f;  // f16 overflow
        v[401] = 65519.f;  // rounds to 65504
        v[402] = 65520.f;  // rounds to inf
        v[403] = 1e-8f;    // f16 subnormal
        v[404] = 3e-8f;
        rows.push_back(v);
    }
    {
        // Same magnitude, both signs: q8_K keeps the first one's sign.
        std::vector<float> v = gaussian(rng, 512, 0.f, 0.1f);
        v[10] = 2.0f;
        v[20] = -2.0f;
        v[256 + 5] = -3.0f;
        v[256 + 50] = 3.0f;
        rows.push_back(v);
    }
    const WeightType kinds[] = {WeightType::F32, WeightType::F16, WeightType::BF16,
                                WeightType::Q8_0, WeightType::Q4_1, WeightType::Q8_K};
    for (size_t r = 0; r < rows.size(); ++r) {
        for (WeightType w : kinds) {
            const std::vector<float>& x = rows[r];
            const int64_t n = static_cast<int64_t>(x.size());
            const std::vector<uint8_t> want = quantize_act_ref(w, x);
            std::vector<uint8_t> got(want.size(), 0xCD);
            t->quantize_act[idx(activation_type(w))](x.data(), got.data(), n);
            QVERIFY2(std::memcmp(got.data(), want.data(), want.size()) == 0,
                     qPrintable(QString("%1, special row %2").arg(type_name(activation_type(w))).arg(r)));
        }
    }
}

void TestSimdKernels::dot_row_q_vs_ref() {
    FETCH_TABLE(t);
    std::mt19937 rng(42);
    for (WeightType w : kWeightTypes) {
        const int64_t qk = w == WeightType::F32 || w == WeightType::F16 || w == WeightType::BF16 ? 32 : block_elems(w);
        std::vector<int64_t> sizes;
        for (int64_t b = 1; b <= 9; ++b) sizes.push_back(b * qk);
        sizes.push_back(qk * (4096 / qk));
        if (qk == 32) sizes.push_back(8192 + 32);
        if (block_elems(w) == 1)
            for (int64_t n : {1, 2, 7, 8, 9, 15, 17, 31, 33, 255, 257}) sizes.push_back(n);
        for (int64_t n : sizes) {
            for (int mode = 0; mode < 2; ++mode) {
                for (int kind = 0; kind < 4; ++kind) {
                    const std::vector<uint8_t> wr = weight_row(rng, w, n, mode);
                    // kinds 0..2: quantized float rows; 3: random activation bytes
                    const std::vector<uint8_t> xq =
                        kind == 3 ? random_act(rng, w, n) : quantize_act_ref(w, activation_row(rng, n, kind));
                    const float want = dot_row_q_ref(w, wr.data(), xq.data(), n);
                    const float got = t->dot_q[idx(w)](wr.data(), xq.data(), n);
                    const double bound = kDotRel * abs_terms(w, wr.data(), xq.data(), n) + kDotAbs;
                    QVERIFY2(within(got, want, bound),
                             qPrintable(QString("%1 n=%2 mode %3 kind %4: %5 vs ref %6 (|d| %7 > %8)")
                                            .arg(type_name(w))
                                            .arg(n)
                                            .arg(mode)
                                            .arg(kind)
                                            .arg(static_cast<double>(got), 0, 'g', 9)
                                            .arg(static_cast<double>(want), 0, 'g', 9)
                                            .arg(std::fabs(static_cast<double>(got) - want), 0, 'g', 3)
                                            .arg(bound, 0, 'g', 3)));
                }
            }
        }
    }
}

void TestSimdKernels::dot_row_float_exact() {
    FETCH_TABLE(t);
    std::mt19937 rng(7);
    for (WeightType w : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
        std::vector<int64_t> sizes;
        for (int64_t n = 0; n <= 300; ++n) sizes.push_back(n);
        sizes.push_back(4096);
        sizes.push_back(4099);
        for (int64_t n : sizes) {
            const std::vector<uint8_t> wr = weight_row(rng, w, n, 0);
            const std::vector<float> x = gaussian(rng, n);
            const float want = dot_row_ref(w, wr.data(), x.data(), n);
            const float got = t->dot[idx(w)](wr.data(), x.data(), n);
            QVERIFY2(bits(got) == bits(want), qPrintable(QString("%1 n=%2: %3 vs %4")
                                                             .arg(type_name(w))
                                                             .arg(n)
                                                             .arg(static_cast<double>(got), 0, 'g', 9)
                                                             .arg(static_cast<double>(want), 0, 'g', 9)));
        }
    }
}

void TestSimdKernels::gemm_q_vs_ref() {
    FETCH_TABLE(t);
    std::mt19937 rng(2024);
    const float sentinel = -12345.f;
    for (WeightType w : kWeightTypes) {
        const int64_t qk = block_elems(w) == 1 ? 32 : block_elems(w);
        for (int64_t cols : {qk, 3 * qk, 8 * qk, (block_elems(w) == 1 ? 77 : 5 * qk)}) {
            for (int64_t rows : {1, 5, 7}) {
                for (int64_t nt = 1; nt <= 9; ++nt) {
                    const int mode = static_cast<int>((rows + nt) % 2);
                    const int64_t rb = row_bytes(w, cols);
                    const uint64_t wstride = static_cast<uint64_t>(rb + 8);  // padded weight rows (aligned for f32)
                    std::vector<uint8_t> W(wstride * static_cast<uint64_t>(rows), 0xEE);
                    for (int64_t r = 0; r < rows; ++r) {
                        const std::vector<uint8_t> row = weight_row(rng, w, cols, mode);
                        std::memcpy(W.data() + static_cast<uint64_t>(r) * wstride, row.data(), row.size());
                    }
                    const int64_t ab = activation_row_bytes(w, cols);
                    const int64_t astride = (ab + 3) / 4 * 4 + 8;  // padded, 4-aligned activation rows
                    std::vector<uint8_t> X(static_cast<size_t>(astride * nt), 0x77);
                    for (int64_t k = 0; k < nt; ++k) {
                        const std::vector<uint8_t> xq = k % 4 == 3 ? random_act(rng, w, cols)
                                                                   : quantize_act_ref(w, activation_row(rng, cols, static_cast<int>(k % 4)));
                        std::memcpy(X.data() + k * astride, xq.data(), xq.size());
                    }
                    const int64_t ldy = rows + 3;
                    std::vector<float> Y(static_cast<size_t>(ldy * nt + 5), sentinel);
                    std::vector<float> R(Y.size(), sentinel);
                    t->gemm_q[idx(w)](W.data(), wstride, rows, X.data(), astride, nt, cols, Y.data(), ldy);
                    gemm_q_ref(w, W.data(), wstride, rows, X.data(), astride, nt, cols, R.data(), ldy);
                    // Read-once weights (gemm_q_once: other prefetch hints only): gemm_q's bits.
                    std::vector<float> O(Y.size(), sentinel);
                    t->gemm_q_once[idx(w)](W.data(), wstride, rows, X.data(), astride, nt, cols, O.data(), ldy);
                    QVERIFY2(std::memcmp(O.data(), Y.data(), Y.size() * sizeof(float)) == 0,
                             qPrintable(QString("%1 rows %2 tokens %3: gemm_q_once != gemm_q").arg(type_name(w)).arg(rows).arg(nt)));
                    for (int64_t k = 0; k < nt; ++k) {
                        for (int64_t r = 0; r < ldy; ++r) {
                            const size_t i = static_cast<size_t>(k * ldy + r);
                            if (r >= rows) {
                                QCOMPARE(bits(Y[i]), bits(sentinel));
                                continue;
                            }
                            const uint8_t* wr = W.data() + static_cast<uint64_t>(r) * wstride;
                            const uint8_t* xr = X.data() + k * astride;
                            // Batch invariance: the same as this row and token alone.
                            float one = 0;
                            t->gemm_q[idx(w)](wr, wstride, 1, xr, astride, 1, cols, &one, 1);
                            QVERIFY2(bits(Y[i]) == bits(one),
                                     qPrintable(QString("%1 rows %2 tokens %3: gemm %4 != gemm alone %5 at r=%6 t=%7")
                                                    .arg(type_name(w))
                                                    .arg(rows)
                                                    .arg(nt)
                                                    .arg(static_cast<double>(Y[i]), 0, 'g', 9)
                                                    .arg(static_cast<double>(one), 0, 'g', 9)
                                                    .arg(r)
                                                    .arg(k)));
                            const double bound = kDotRel * abs_terms(w, wr, xr, cols) + kDotAbs;
                            QVERIFY2(within(Y[i], R[i], bound),
                                     qPrintable(QString("%1 rows %2 tokens %3 r=%4 t=%5: %6 vs ref %7")
                                                    .arg(type_name(w))
                                                    .arg(rows)
                                                    .arg(nt)
                                                    .arg(r)
                                                    .arg(k)
                                                    .arg(static_cast<double>(Y[i]), 0, 'g', 9)
                                                    .arg(static_cast<double>(R[i]), 0, 'g', 9)));
                        }
                    }
                    for (size_t i = static_cast<size_t>(ldy * nt); i < Y.size(); ++i) QCOMPARE(bits(Y[i]), bits(sentinel));
                }
            }
        }
    }
}

void TestSimdKernels::ops_vs_ref() {
    FETCH_TABLE(t);
    std::mt19937 rng(77);
    std::vector<int64_t> sizes;
    for (int64_t n = 1; n <= 300; ++n) sizes.push_back(n);
    sizes.push_back(4096);
    sizes.push_back(4101);
    auto rel_ok = [](float got, float want, double rel) {
        if (std::isnan(want)) return std::isnan(got);
        if (std::isinf(want)) return got == want;
        return std::fabs(static_cast<double>(got) - want) <= rel * std::fabs(static_cast<double>(want)) + 1e-37;
    };
    for (int64_t n : sizes) {
        const size_t un = static_cast<size_t>(n);
        const std::vector<float> a = gaussian(rng, n);
        const std::vector<float> b = gaussian(rng, n, 0.3f, 2.f);

        // dot_f32, axpy: bit-identical.
        QCOMPARE(bits(t->dot_f32(a.data(), b.data(), n)), bits(ref::dot_f32(a.data(), b.data(), n)));
        std::vector<float> y1 = b, y2 = b;
        t->axpy(0.37f, a.data(), y1.data(), n);
        ref::axpy(0.37f, a.data(), y2.data(), n);
        QVERIFY2(std::memcmp(y1.data(), y2.data(), un * sizeof(float)) == 0, qPrintable(QString("axpy n=%1").arg(n)));

        // scale_i8: bit-identical, every int8 value (-128 included), ordinary and tiny scales.
        std::vector<int8_t> xi(un);
        for (size_t i = 0; i < un; ++i) xi[i] = static_cast<int8_t>(static_cast<int>(i * 37 + rng()) % 256 - 128);
        for (float s : {0.0173f, -3.5f, 1e-39f}) {
            std::vector<float> z1(un + 1, -7.f), z2(un + 1, -7.f);
            t->scale_i8(xi.data(), s, z1.data(), n);
            ref::scale_i8(xi.data(), s, z2.data(), n);
            QVERIFY2(std::memcmp(z1.data(), z2.data(), (un + 1) * sizeof(float)) == 0, qPrintable(QString("scale_i8 n=%1").arg(n)));
        }

        // rmsnorm, with and without weights, in place too: within 2 ulp.
        for (int with_w = 0; with_w < 2; ++with_w) {
            std::vector<float> g(un), r(un);
            t->rmsnorm(a.data(), with_w ? b.data() : nullptr, g.data(), n, 1e-6f);
            ref::rmsnorm(a.data(), with_w ? b.data() : nullptr, r.data(), n, 1e-6f);
            for (size_t i = 0; i < un; ++i)
                QVERIFY2(rel_ok(g[i], r[i], 2.4e-7), qPrintable(QString("rmsnorm n=%1 i=%2").arg(n).arg(i)));
            std::vector<float> in = a;
            t->rmsnorm(in.data(), with_w ? b.data() : nullptr, in.data(), n, 1e-6f);
            QVERIFY(std::memcmp(in.data(), g.data(), un * sizeof(float)) == 0);
        }

        // softmax: logits of three kinds (plain, spread wide, masked with -inf).
        for (int kind = 0; kind < 3; ++kind) {
            std::vector<float> x = gaussian(rng, n, 0.f, kind == 1 ? 30.f : 3.f);
            if (kind == 2)
                for (size_t i = 1; i < un; i += 3) x[i] = -std::numeric_limits<float>::infinity();
            std::vector<float> r = x;
            t->softmax(x.data(), n);
            ref::softmax(r.data(), n);
            for (size_t i = 0; i < un; ++i)
                QVERIFY2(rel_ok(x[i], r[i], 1e-6), qPrintable(QString("softmax n=%1 kind %2 i=%3: %4 vs %5")
                                                                  .arg(n)
                                                                  .arg(kind)
                                                                  .arg(i)
                                                                  .arg(static_cast<double>(x[i]), 0, 'g', 9)
                                                                  .arg(static_cast<double>(r[i]), 0, 'g', 9)));
        }

        // swiglu: gates over the whole range of exp (overflow, denormal results), in place.
        {
            std::vector<float> g = gaussian(rng, n, 0.f, n % 3 == 0 ? 40.f : 3.f);
            std::vector<float> y(un), r(un);
            t->swiglu(g.data(), b.data(), y.data(), n);
            ref::swiglu(g.data(), b.data(), r.data(), n);
            for (size_t i = 0; i < un; ++i)
                QVERIFY2(rel_ok(y[i], r[i], 1e-6), qPrintable(QString("swiglu n=%1 g=%2: %3 vs %4")
                                                                  .arg(n)
                                                                  .arg(static_cast<double>(g[i]), 0, 'g', 9)
                                                                  .arg(static_cast<double>(y[i]), 0, 'g', 9)
                                                                  .arg(static_cast<double>(r[i]), 0, 'g', 9)));
            t->swiglu(g.data(), b.data(), g.data(), n);
            QVERIFY(std::memcmp(g.data(), y.data(), un * sizeof(float)) == 0);
        }
    }
    // exp over its whole domain, through swiglu with u = 1: g in [-120, 120].
    {
        std::vector<float> g;
        for (float v = -120.f; v <= 120.f; v += 0.0137f) g.push_back(v);
        g.push_back(std::numeric_limits<float>::infinity());
        g.push_back(-std::numeric_limits<float>::infinity());
        g.push_back(0.0f);
        g.push_back(-0.0f);
        const int64_t n = static_cast<int64_t>(g.size());
        const std::vector<float> u(g.size(), 1.0f);
        std::vector<float> y(g.size()), r(g.size());
        t->swiglu(g.data(), u.data(), y.data(), n);
        ref::swiglu(g.data(), u.data(), r.data(), n);
        for (size_t i = 0; i < g.size(); ++i)
            QVERIFY2(rel_ok(y[i], r[i], 1e-6), qPrintable(QString("swiglu g=%1: %2 vs %3")
                                                              .arg(static_cast<double>(g[i]), 0, 'g', 9)
                                                              .arg(static_cast<double>(y[i]), 0, 'g', 9)
                                                              .arg(static_cast<double>(r[i]), 0, 'g', 9)));
    }
}

// gemm_q_once_pair: where a level has a kernel for the type, each matrix's
// results equal gemm_q_once's on it alone, bit for bit (and so the
// reference's within gemm_q_vs_ref's bound): whole and partial quads/pairs,
// rows held in registers (Q4_0_R4 up to 8 quads) and not, rows too long for
// the prepared buffers, odd row counts; nothing past the last row written.
void TestSimdKernels::gemm_once_pair_vs_single() {
    FETCH_TABLE(t);
    std::mt19937 rng(77);
    const float sentinel = -12345.f;
    int paired = 0;
    for (WeightType w : kWeightTypes) {
        const KernelTable::GemmQPairFn pair = t->gemm_q_once_pair[idx(w)];
        if (!pair) continue;
        ++paired;
        const int64_t qk = block_elems(w);
        std::vector<int64_t> widths = {qk, 2 * qk, 3 * qk, 4 * qk, 5 * qk, 8 * qk, 12 * qk, 16 * qk, 24 * qk, 32 * qk, 33 * qk, 36 * qk};
        if (file_type(w) != w) widths.push_back(34 * 1024);  // past the 64 KiB prepared buffer of the 512-bit kernels
        for (int64_t cols : widths) {
            for (int64_t rows : {1, 2, 5, 17}) {
                if (cols > 4096 && rows > 2) continue;
                const int64_t rb = row_bytes(w, cols);
                const uint64_t wstride = static_cast<uint64_t>(rb + 8);
                std::vector<uint8_t> A(wstride * static_cast<uint64_t>(rows), 0xEE), B(A.size(), 0xDD);
                for (int64_t r = 0; r < rows; ++r) {
                    const std::vector<uint8_t> ra = weight_row(rng, w, cols, static_cast<int>(r % 2));
                    const std::vector<uint8_t> rb2 = weight_row(rng, w, cols, static_cast<int>((r + 1) % 2));
                    QVERIFY(!ra.empty() && !rb2.empty());
                    std::memcpy(A.data() + static_cast<uint64_t>(r) * wstride, ra.data(), ra.size());
                    std::memcpy(B.data() + static_cast<uint64_t>(r) * wstride, rb2.data(), rb2.size());
                }
                const std::vector<uint8_t> xq = cols % 64 ? random_act(rng, w, cols) : quantize_act_ref(w, activation_row(rng, cols, 2));
                std::vector<float> Ya(static_cast<size_t>(rows + 3), sentinel), Yb(Ya), Sa(Ya), Sb(Ya);
                pair(A.data(), B.data(), wstride, rows, xq.data(), cols, Ya.data(), Yb.data());
                t->gemm_q_once[idx(w)](A.data(), wstride, rows, xq.data(), 0, 1, cols, Sa.data(), rows);
                t->gemm_q_once[idx(w)](B.data(), wstride, rows, xq.data(), 0, 1, cols, Sb.data(), rows);
                for (size_t i = 0; i < Ya.size(); ++i) {
                    QVERIFY2(bits(Ya[i]) == bits(Sa[i]) && bits(Yb[i]) == bits(Sb[i]),
                             qPrintable(QString("%1 cols %2 rows %3, row %4: pair %5 / %6, alone %7 / %8")
                                            .arg(type_name(w))
                                            .arg(cols)
                                            .arg(rows)
                                            .arg(i)
                                            .arg(static_cast<double>(Ya[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(Yb[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(Sa[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(Sb[i]), 0, 'g', 9)));
                }
                // The reference twin (two reference products) within gemm_q_vs_ref's bound.
                std::vector<float> Ra(Ya.size(), sentinel), Rb(Ya.size(), sentinel);
                gemm_q_pair_ref(w, A.data(), B.data(), wstride, rows, xq.data(), cols, Ra.data(), Rb.data());
                for (int64_t r = 0; r < rows; ++r) {
                    const size_t i = static_cast<size_t>(r);
                    const uint64_t o = static_cast<uint64_t>(r) * wstride;
                    QVERIFY(within(Ya[i], Ra[i], kDotRel * abs_terms(w, A.data() + o, xq.data(), cols) + kDotAbs));
                    QVERIFY(within(Yb[i], Rb[i], kDotRel * abs_terms(w, B.data() + o, xq.data(), cols) + kDotAbs));
                }
            }
        }
    }
    // The 512-bit level pairs its repacked layouts, avx2vnni the formats
    // with a prepared form (Q8_0 among them); avx2 and the reference none.
    if (level_ == KernelLevel::Avx512)
        QVERIFY(t->gemm_q_once_pair[idx(WeightType::Q4_0_R4)] && t->gemm_q_once_pair[idx(WeightType::Q8_0_R2)]);
    if (level_ == KernelLevel::Avx2Vnni) QVERIFY(t->gemm_q_once_pair[idx(WeightType::Q8_0)]);
    // At avx2, mxfp4 alone: its prepared form needs no VNNI (weights u <= 24 never saturate maddubs).
    if (level_ == KernelLevel::Ref) QCOMPARE(paired, 0);
    if (level_ == KernelLevel::Avx2) {
        QCOMPARE(paired, 1);
        QVERIFY(t->gemm_q_once_pair[idx(WeightType::MXFP4)]);
    }
}

// quant.h and ops.h call the active level's table.
void TestSimdKernels::front_doors_follow_level() {
    const KernelLevel before = kernel_level();
    std::mt19937 rng(5);
    for (int l = 0; l < kKernelLevels; ++l) {
        const KernelLevel level = static_cast<KernelLevel>(l);
        const KernelTable* t = kernel_table(level);
        if (!t) continue;
        QVERIFY(set_kernel_level(level));
        for (WeightType w : kWeightTypes) {
            const int64_t cols = block_elems(w) == 1 ? 96 : 2 * block_elems(w);
            const std::vector<float> x = activation_row(rng, cols, 1);
            const int64_t ab = activation_row_bytes(w, cols);
            std::vector<uint8_t> q1(static_cast<size_t>(ab)), q2(static_cast<size_t>(ab));
            quantize_activation(w, x.data(), q1.data(), cols);
            t->quantize_act[idx(activation_type(w))](x.data(), q2.data(), cols);
            QVERIFY(q1 == q2);
            const std::vector<uint8_t> wr = weight_row(rng, w, cols, 1);
            QCOMPARE(bits(dot_row_q(w, wr.data(), q1.data(), cols)), bits(t->dot_q[idx(w)](wr.data(), q1.data(), cols)));
            float y[2] = {0, 0}, yt[2] = {0, 0};
            gemm_q(w, wr.data(), static_cast<uint64_t>(wr.size()), 1, q1.data(), (ab + 3) / 4 * 4, 1, cols, y, 1);
            t->gemm_q[idx(w)](wr.data(), static_cast<uint64_t>(wr.size()), 1, q1.data(), (ab + 3) / 4 * 4, 1, cols, yt, 1);
            QCOMPARE(bits(y[0]), bits(yt[0]));
            float yo = 0;
            gemm_q_once(w, wr.data(), static_cast<uint64_t>(wr.size()), 1, q1.data(), (ab + 3) / 4 * 4, 1, cols, &yo, 1);
            QCOMPARE(bits(yo), bits(yt[0]));
            // Two matrices at once: each as gemm_q_once alone (paired by the level or not).
            const std::vector<uint8_t> wr2 = weight_row(rng, w, cols, 0);
            float ya = 0, yb = 0, yb1 = 0;
            gemm_q_once_pair(w, wr.data(), wr2.data(), static_cast<uint64_t>(wr.size()), 1, q1.data(), cols, &ya, &yb);
            gemm_q_once(w, wr2.data(), static_cast<uint64_t>(wr2.size()), 1, q1.data(), (ab + 3) / 4 * 4, 1, cols, &yb1, 1);
            QCOMPARE(bits(ya), bits(yt[0]));
            QCOMPARE(bits(yb), bits(yb1));
            QCOMPARE(bits(dot_row(w, wr.data(), x.data(), cols)), bits(t->dot[idx(w)](wr.data(), x.data(), cols)));
        }
        const std::vector<float> a = gaussian(rng, 133), b = gaussian(rng, 133);
        QCOMPARE(bits(ops::dot_f32(a.data(), b.data(), 133)), bits(t->dot_f32(a.data(), b.data(), 133)));
        std::vector<float> s1 = a, s2 = a;
        ops::softmax(s1.data(), 133);
        t->softmax(s2.data(), 133);
        QVERIFY(s1 == s2);
    }
    QVERIFY(set_kernel_level(before));
    // A type without kernels: NaN from both front doors, as documented.
    std::vector<uint8_t> none(64, 0);
    float y[2] = {0, 0};
    gemm_q(WeightType::Q8_1, none.data(), 36, 1, none.data(), 36, 1, 32, y, 1);
    gemm_q_once(WeightType::Q8_1, none.data(), 36, 1, none.data(), 36, 1, 32, y + 1, 1);
    QVERIFY(std::isnan(y[0]) && std::isnan(y[1]));
}

// RoPE from a position's table: bit-identical to the reference, normal and
// NeoX, whole and partial rotation (n_rot < head_dim), tails of every length.
void TestSimdKernels::rope_vs_ref() {
    FETCH_TABLE(t);
    QVERIFY(t->rope_apply);
    std::mt19937 rng(7);
    for (bool neox : {false, true})
        for (int64_t hd : {2, 6, 8, 16, 34, 64, 80, 128})
            for (int64_t n_rot : {hd, hd / 4 * 2, int64_t{2}})
                for (int64_t heads : {1, 3}) {
                    if (n_rot % 2 || n_rot > hd || n_rot < 2) continue;
                    std::vector<float> cs(static_cast<size_t>(n_rot));
                    ref::rope_table(n_rot, 1 + static_cast<int64_t>(rng() % 5000), 10000.0f, 1.0f, cs.data());
                    const std::vector<float> x = gaussian(rng, heads * hd);
                    std::vector<float> a = x, b = x;
                    t->rope_apply(a.data(), heads, hd, n_rot, cs.data(), neox);
                    ref::rope_apply(b.data(), heads, hd, n_rot, cs.data(), neox);
                    QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
                             qPrintable(QString("rope neox=%1 hd=%2 n_rot=%3 heads=%4").arg(neox).arg(hd).arg(n_rot).arg(heads)));
                    QVERIFY(a != x);  // it did rotate
                }
}

// YaRN's table: the correction dims of ggml's formula, pairs below the first
// extrapolate (unscaled angles), above the second interpolate (angles /
// factor), a linear blend between; cos/sin times mscale. Without YaRN it is
// rope_table.
void TestSimdKernels::rope_yarn_table() {
    float dims[2];
    ref::rope_yarn_corr_dims(64, 4096, 10000.0f, 32.0f, 1.0f, dims);
    // 64 ln(4096 / (32 * 2 pi)) / (2 ln 10000) = 10.47 -> 10; with 1 rotation 22.5 -> 23.
    QCOMPARE(dims[0], 10.0f);
    QCOMPARE(dims[1], 23.0f);
    const int64_t pos = 3000;
    const float factor = 8.0f, mscale = 1.25f;
    std::vector<float> cs(64), plain(64);
    ref::rope_table_yarn(64, pos, 10000.0f, 1.0f / factor, 1.0f, dims, mscale, cs.data());
    for (int64_t i = 0; i < 32; ++i) {
        const double extrap = pos * std::pow(10000.0, -2.0 * i / 64.0);
        const double ramp = std::clamp((i - 10.0) / 13.0, 0.0, 1.0);  // 0 at dim 10, 1 at dim 23
        const double theta = extrap * ramp / factor + extrap * (1.0 - ramp);
        QVERIFY2(std::fabs(cs[2 * i] - mscale * std::cos(theta)) < 1e-5 && std::fabs(cs[2 * i + 1] - mscale * std::sin(theta)) < 1e-5,
                 qPrintable(QString("pair %1").arg(i)));
    }
    ref::rope_table_yarn(64, pos, 10000.0f, 0.5f, 0.0f, dims, 1.0f, cs.data());
    ref::rope_table(64, pos, 10000.0f, 0.5f, plain.data());
    for (size_t i = 0; i < cs.size(); ++i) QVERIFY(std::fabs(cs[i] - plain[i]) < 1e-6f);
}

// Attention of a group of query heads over a block of keys: bit-identical to
// the reference (per head and key the same dot product and axpy), for group
// sizes that fill, split and pad the 512-bit kernels' head pairs and passes,
// strided score rows, and head sizes with and without a specialised kernel;
// with and without a prefetch hint (ask), of a size that is not a multiple of
// a line or of the keys, which must not change a bit.
// The router: the same experts in the same order
// (probabilities within the softmax's few-ulp bound), with ties, masks and
// fewer allowed experts than asked for.
void TestSimdKernels::attention_and_router_vs_ref() {
    FETCH_TABLE(t);
    std::mt19937 rng(91);
    for (int64_t hd : {8, 16, 32, 60, 64, 80, 96, 128, 136, 200, 256, 272})
        for (int64_t m : {1, 2, 7, 12, 16, 33})
            for (int64_t n_q : {1, 2, 3, 4, 5, 8}) {
                const int64_t stride = m + 3;  // score rows with a gap between heads
                const std::vector<float> q = gaussian(rng, n_q * hd), k = gaussian(rng, m * hd), v = gaussian(rng, m * hd);
                std::vector<float> s1(static_cast<size_t>(n_q * stride), -7.0f), s2(s1);
                const bool hint = (m + n_q) % 2 == 0;
                const std::vector<uint8_t> next(static_cast<size_t>(m * hd * 4 + 100), 1);  // "the next piece"
                const void* ask = hint ? next.data() : nullptr;
                const int64_t ask_bytes = hint ? static_cast<int64_t>(next.size()) - 37 : 0;
                t->attn_scores(q.data(), n_q, k.data(), m, hd, 0.125f, s1.data(), stride, ask, ask_bytes);
                ref::attn_scores(q.data(), n_q, k.data(), m, hd, 0.125f, s2.data(), stride);
                const QString what = QString("hd=%1 m=%2 n_q=%3 ask=%4").arg(hd).arg(m).arg(n_q).arg(ask_bytes);
                QVERIFY2(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0, qPrintable("attn_scores " + what));
                QCOMPARE(s1.back(), -7.0f);  // the gaps stay untouched
                std::vector<float> o1 = gaussian(rng, n_q * hd), o2 = o1;
                t->attn_accumulate(s1.data(), stride, n_q, v.data(), m, hd, o1.data(), ask, ask_bytes);
                ref::attn_accumulate(s1.data(), stride, n_q, v.data(), m, hd, o2.data());
                QVERIFY2(std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)) == 0,
                         qPrintable("attn_accumulate " + what));
            }
    for (int64_t E : {4, 8, 16, 60, 64, 128})
        for (int64_t k : {1, 2, 4, 8}) {
            if (k > E) continue;
            for (int variant = 0; variant < 5; ++variant) {
                std::vector<float> l1 = gaussian(rng, E);
                if (variant == 1)
                    for (int64_t e = 0; e < E; e += 3) l1[static_cast<size_t>(e)] = 1.5f;  // ties
                if (variant == 3) std::fill(l1.begin(), l1.end(), 0.25f);                   // all tied
                if (variant == 4) l1[static_cast<size_t>(E / 2)] = std::nanf("");           // NaN: all NaN after softmax
                std::vector<uint8_t> mask(static_cast<size_t>(E), 1);
                if (variant == 2)
                    for (int64_t e = 0; e < E; ++e) mask[static_cast<size_t>(e)] = e % 5 == 0;  // few allowed
                const uint8_t* allowed = variant == 2 ? mask.data() : nullptr;
                std::vector<float> l2 = l1, w1(static_cast<size_t>(k)), w2(w1.size());
                std::vector<int32_t> i1(static_cast<size_t>(k)), i2(i1.size());
                t->router_topk(l1.data(), E, k, allowed, i1.data(), w1.data());
                ref::router_topk(l2.data(), E, k, allowed, i2.data(), w2.data());
                QCOMPARE(i1, i2);
                for (size_t r = 0; r < w1.size(); ++r)
                    QVERIFY(std::fabs(w1[r] - w2[r]) <= 1e-6f * std::fabs(w2[r]) + 1e-37f ||
                            (variant == 4 && std::isnan(w1[r]) && std::isnan(w2[r])));
                if (variant == 2) {
                    int64_t n_allowed = 0;
                    for (uint8_t b : mask) n_allowed += b;
                    for (int64_t r = n_allowed; r < k; ++r) QCOMPARE(i1[static_cast<size_t>(r)], -1);
                }
            }
        }
}

// The bandwidth probe's read loop: the reference's sum for every length
// around the SIMD steps (32 and 16 words), start offsets that are not
// line-aligned, and each way of reading ahead (the prefetches may run past
// the end: they are hints and never fault).
void TestSimdKernels::read_sum_vs_ref() {
    FETCH_TABLE(t);
    std::mt19937_64 rng(99);
    std::vector<uint64_t> words(2 * 4096 + 128);  // room for a second run past the first
    for (uint64_t& w : words) w = rng();
    using ref::ReadAhead;
    for (ReadAhead ahead : {ReadAhead::None, ReadAhead::T0, ReadAhead::Nta})
        for (int64_t offset : {0, 1, 3, 7})
            for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 1000, 4096}) {
                const uint64_t* p = words.data() + offset;
                const uint64_t want = ref::read_sum(p, n, ahead, 4096);
                QCOMPARE(t->read_sum(p, n, ahead, 4096), want);
                uint64_t plain = 0;
                for (int64_t i = 0; i < n; ++i) plain += p[i];
                QCOMPARE(want, plain);  // the reference is the plain sum
                // Two runs at once: the plain sum of both (b overlapping a or not).
                for (int64_t b_at : {int64_t{0}, n / 2 + 5, int64_t{64 - offset}}) {
                    const uint64_t* b = words.data() + b_at;
                    uint64_t plain2 = plain;
                    for (int64_t i = 0; i < n; ++i) plain2 += b[i];
                    QCOMPARE(ref::read_sum2(p, b, n, ahead, 4096), plain2);
                    QCOMPARE(t->read_sum2(p, b, n, ahead, 4096), plain2);
                }
            }
}

QTEST_APPLESS_MAIN(TestSimdKernels)
// kernels/tuning.h: the prefetch distance and the read-once switch change
// no bit; a narrowed type computes what the 256-bit level computes (its
// repacked layout included); other types keep their kernels.
void TestSimdKernels::tuning_changes_speed_not_results() {
    std::mt19937 rng(11);
    const KernelTuning before = kernel_tuning();
    for (WeightType w : {WeightType::Q4_0, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K, WeightType::Q3_K}) {
        const int64_t cols = 1024, rows = 6;
        const int64_t rb = row_bytes(w, cols), ab = activation_row_bytes(w, cols);
        std::vector<uint8_t> file(static_cast<size_t>(rb * rows));
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<uint8_t> row = weight_row(rng, w, cols, static_cast<int>(r % 2));
            std::memcpy(file.data() + r * rb, row.data(), row.size());
        }
        const std::vector<float> x = activation_row(rng, cols, 1);
        std::vector<uint8_t> xq(static_cast<size_t>(ab));
        quantize_activation(w, x.data(), xq.data(), cols);
        // Every front door on the rows as the active kernels lay them out.
        auto run = [&](const KernelTuning& t) {
            set_kernel_tuning(t);
            std::vector<uint8_t> m = file, scratch(static_cast<size_t>(rb));
            const WeightType layout = fast_layout(w, cols);
            repack_rows(w, layout, m.data(), rows, cols, static_cast<uint64_t>(rb), scratch.data());
            std::vector<float> y(3 * rows);
            gemm_q(layout, m.data(), rb, rows, xq.data(), ab, 1, cols, y.data(), rows);
            gemm_q_once(layout, m.data(), rb, rows, xq.data(), ab, 1, cols, y.data() + rows, rows);
            gemm_q_once_pair(layout, m.data(), m.data() + 3 * rb, rb, 3, xq.data(), cols, y.data() + 2 * rows,
                             y.data() + 2 * rows + 3);
            return y;
        };
        const std::vector<float> base = run(KernelTuning{});
        for (int64_t i = 0; i < rows; ++i) {
            QCOMPARE(bits(base[rows + i]), bits(base[i]));
            QCOMPARE(bits(base[2 * rows + i]), bits(base[i]));
        }
        for (int ahead : {0, 2048, 65536}) {
            KernelTuning t;
            t.prefetch_bytes = ahead;
            QVERIFY2(run(t) == base, qPrintable(QString("%1 prefetch %2").arg(type_name(w)).arg(ahead)));
        }
        KernelTuning plain;
        plain.read_once_nta = false;
        plain.grain_rows = 7;
        QVERIFY2(run(plain) == base, type_name(w));
        QCOMPARE(kernel_tuning().grain_rows, 7);
        if (!has_narrow_choice(w)) continue;  // not at the avx512 level
        KernelTuning narrow;
        narrow.narrow_types = uint64_t{1} << static_cast<int>(w);
        const std::vector<float> got = run(narrow);
        const KernelTable* t256 = kernel_table(KernelLevel::Avx2Vnni) ? kernel_table(KernelLevel::Avx2Vnni) : kernel_table(KernelLevel::Avx2);
        QVERIFY(t256);
        QCOMPARE(static_cast<int>(fast_layout(w, cols)), static_cast<int>(t256->packed[idx(w)].max_cols >= cols ? t256->packed[idx(w)].type : w));
        std::vector<uint8_t> m = file, scratch(static_cast<size_t>(rb));
        const WeightType layout = fast_layout(w, cols);
        repack_rows(w, layout, m.data(), rows, cols, static_cast<uint64_t>(rb), scratch.data());
        std::vector<float> want(rows);
        t256->gemm_q[idx(layout)](m.data(), rb, rows, xq.data(), ab, 1, cols, want.data(), rows);
        for (int64_t i = 0; i < rows; ++i) QCOMPARE(bits(got[i]), bits(want[i]));
        // Narrowing one type leaves the others on their 512-bit kernels.
        const WeightType other = w == WeightType::Q4_K ? WeightType::Q6_K : WeightType::Q4_K;
        QVERIFY(active_kernels().gemm_q[idx(other)] == kernel_table(KernelLevel::Avx512)->gemm_q[idx(other)]);
        QVERIFY(active_kernels().gemm_q[idx(w)] != kernel_table(KernelLevel::Avx512)->gemm_q[idx(w)]);
    }
    set_kernel_tuning(before);
    QVERIFY(kernel_tuning() == before);
}

#include "test_simd_kernels.moc"
