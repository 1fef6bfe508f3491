// Tests of the quantized-activation path (kernels/quant.h: activation_type,
// activation_row_bytes, quantize_activation, dot_row_q; kernels/ref/vec_dot_ref.h).
//
//  - the vec_dot_type table and row sizes, unsupported types;
//  - every weight type, random rows of 1, 3 and 7 blocks: dot_row_q is within
//    the 8-bit (or f16/bf16) activation-rounding bound of the float dot_row,
//    and within float rounding of a float64 dot of the dequantized weights
//    with the dequantized activations (which pins the integer arithmetic);
//  - hand-built blocks whose integer sums are worked out here independently
//    of the kernels, with power-of-two scales so that the exact result is a
//    float: q4_0, q4_1, q5_0, q5_1, q8_0 x q8_0/q8_1; q4_K, q6_K x q8_K;
//  - the activation formats themselves: q8_K bsums and sign convention, q8_1's
//    s = fp16(d * sum(qs)), q8_0 ties rounding to even (x86 ggml), f16/bf16
//    activations rounded before the product, zero rows.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_types.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/vec_dot_ref.h"

using namespace strata::kernels;

namespace {

const WeightType kWeightTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q4_0,
                                   WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                                   WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K,
                                   WeightType::Q6_K, WeightType::Q8_K, WeightType::MXFP4};

int64_t block_elems(WeightType t) { return type_traits(t)->block_elems; }

std::vector<float> gaussian_row(std::mt19937& rng, int64_t n, float mean, float sd) {
    std::normal_distribution<float> dist(mean, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
}

// Activation rows of three kinds: N(0,1); N(0.5,1) (a mean, so that q4_1/q5_1's
// min term and q8_1's s matter); 32-element chunks alternating in scale 100x.
std::vector<float> activation_row(std::mt19937& rng, int64_t n, int kind) {
    if (kind == 0) return gaussian_row(rng, n, 0.f, 1.f);
    if (kind == 1) return gaussian_row(rng, n, 0.5f, 1.f);
    std::vector<float> v = gaussian_row(rng, n, 0.f, 1.f);
    for (int64_t i = 0; i < n; ++i)
        if ((i / 32) % 2) v[static_cast<size_t>(i)] *= 100.f;
    return v;
}

std::vector<uint8_t> quantize_weights(WeightType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, static_cast<int64_t>(x.size()))));
    quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
    return q;
}

std::vector<uint8_t> quantize_act(WeightType w, const std::vector<float>& x) {
    const int64_t n = static_cast<int64_t>(x.size());
    // (operator new's alignment covers q8_K's float.)
    std::vector<uint8_t> q(static_cast<size_t>(activation_row_bytes(w, n)));
    quantize_activation(w, x.data(), q.data(), n);
    return q;
}

// The activation values the quantized row stands for (d * q, or the rounded floats).
std::vector<float> dequantize_act(WeightType w, const std::vector<uint8_t>& xq, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    const WeightType a = activation_type(w);
    if (a == WeightType::Q8_1)
        dequantize_row_q8_1_ref(reinterpret_cast<const block_q8_1*>(xq.data()), y.data(), n);
    else
        dequantize_row(a, xq.data(), y.data(), n);
    return y;
}

float amax_of(const float* x, int64_t n) {
    float a = 0;
    for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
    return a;
}

uint16_t h(float f) { return fp32_to_fp16(f); }

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// QCOMPARE on floats is fuzzy; these checks are about exact bits.
#define COMPARE_BITS(got, expect)                                                                       \
    QVERIFY2(bits(got) == bits(expect), qPrintable(QString("%1 != %2 (bits %3 vs %4)")                   \
                                                       .arg(static_cast<double>(got), 0, 'g', 9)          \
                                                       .arg(static_cast<double>(expect), 0, 'g', 9)       \
                                                       .arg(bits(got), 8, 16, QChar('0'))                 \
                                                       .arg(bits(expect), 8, 16, QChar('0'))))

}  // namespace

class TestVecDot : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void activation_type_table();
    void unsupported_types();

    void dot_q_within_activation_rounding_bound_data();
    void dot_q_within_activation_rounding_bound();

    void exact_q4_0_q8_0();
    void exact_q8_0_q8_0();
    void exact_q4_1_q8_1();
    void exact_q5_0_q8_0();
    void exact_q5_1_q8_1();
    void exact_q4_k_q8_k();
    void exact_q6_k_q8_k();

    void q8_k_bsums_and_scale();
    void q8_1_s_is_fp16_of_d_times_sum();
    void q8_0_rounds_ties_to_even();
    void q8_activation_matches_portable_quantizer_off_ties();
    void f16_activations_rounded_before_product();
    void bf16_and_f32_activations();
    void zero_activation_rows();
};

// ---------------------------------------------------------------------------

void TestVecDot::activation_type_table() {
    // ggml-cpu.c type_traits_cpu[].vec_dot_type.
    QCOMPARE(activation_type(WeightType::F32), WeightType::F32);
    QCOMPARE(activation_type(WeightType::F16), WeightType::F16);
    QCOMPARE(activation_type(WeightType::BF16), WeightType::BF16);
    QCOMPARE(activation_type(WeightType::Q4_0), WeightType::Q8_0);
    QCOMPARE(activation_type(WeightType::Q5_0), WeightType::Q8_0);
    QCOMPARE(activation_type(WeightType::Q8_0), WeightType::Q8_0);
    QCOMPARE(activation_type(WeightType::Q4_1), WeightType::Q8_1);
    QCOMPARE(activation_type(WeightType::Q5_1), WeightType::Q8_1);
    for (WeightType t : {WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K,
                         WeightType::Q8_K})
        QCOMPARE(activation_type(t), WeightType::Q8_K);

    QCOMPARE(activation_row_bytes(WeightType::F32, 7), int64_t{28});
    QCOMPARE(activation_row_bytes(WeightType::F16, 7), int64_t{14});
    QCOMPARE(activation_row_bytes(WeightType::BF16, 7), int64_t{14});
    QCOMPARE(activation_row_bytes(WeightType::Q4_0, 64), int64_t{2 * 34});
    QCOMPARE(activation_row_bytes(WeightType::Q4_1, 64), int64_t{2 * 36});
    QCOMPARE(activation_row_bytes(WeightType::Q4_K, 512), int64_t{2 * 292});
    QCOMPARE(activation_row_bytes(WeightType::Q8_0, 0), int64_t{0});
    QCOMPARE(activation_row_bytes(WeightType::Q4_0, 48), int64_t{-1});  // not a multiple of 32
    QCOMPARE(activation_row_bytes(WeightType::Q6_K, 128), int64_t{-1});
    QCOMPARE(sizeof(block_q8_1), size_t{36});
    QCOMPARE(type_traits(WeightType::Q8_1)->block_bytes, int64_t{36});
}

void TestVecDot::unsupported_types() {
    const WeightType bad[] = {WeightType::Q8_1, static_cast<WeightType>(16), static_cast<WeightType>(23),
                              static_cast<WeightType>(99)};
    std::vector<float> x(256, 1.f);
    std::vector<uint8_t> buf(2048, 0xAB);
    for (WeightType t : bad) {
        QCOMPARE(activation_row_bytes(t, 256), int64_t{-1});
        quantize_activation(t, x.data(), buf.data(), 256);
        for (uint8_t b : buf) QCOMPARE(b, uint8_t{0xAB});
        QVERIFY(std::isnan(dot_row_q(t, buf.data(), buf.data(), 256)));
    }
}

// ---------------------------------------------------------------------------
// Random rows, every weight type.
//
// The bound. Write the activation row the kernel actually uses as xa (d*q, or
// the rounded floats) and the dequantized weight row as w. Then
//     dot_row_q ~ sum w_i xa_i   and   dot_row ~ sum w_i x_i,
// so |dot_row_q - dot_row| <= sum |w_i| |x_i - xa_i| + (float rounding), with
// per element:
//   q8_0, q8_1: |x - D q| <= (0.5 + 127 * 2^-11) * amax/127 = 0.562 * amax/127
//               (half a step, plus the fp16 rounding of D = fp16(amax/127)
//               times |q| <= 127); amax of the element's 32-block.
//   q8_K:       |x - d q| <= 0.5 * amax/127 (d is a float), amax of its 256-block.
//   f16:        |x - fp16(x)| <= 2^-11 |x|;   bf16: 2^-8 |x|;   f32: 0.
// q4_1/q5_1 x q8_1 add the min term m * S with S = fp16(d32 * sum q) instead of
// m * D * sum q: |S - D sum q| <= 2^-10 * (amax/127) * |sum q| per block.
// Float rounding: 2e-5 * sum |w_i x_i| (both dots accumulate in float).
// Observed errors are a fraction of the bound (printed per type).

void TestVecDot::dot_q_within_activation_rounding_bound_data() {
    QTest::addColumn<int>("type");
    for (WeightType t : kWeightTypes) QTest::newRow(type_traits(t)->name) << static_cast<int>(t);
}

void TestVecDot::dot_q_within_activation_rounding_bound() {
    QFETCH(int, type);
    const WeightType t = static_cast<WeightType>(type);
    const int64_t b = block_elems(t);
    const std::vector<int64_t> lengths = b == 1 ? std::vector<int64_t>{1, 3, 7, 31, 64, 1000}
                                                : std::vector<int64_t>{b, 3 * b, 7 * b};
    const WeightType a = activation_type(t);
    const int64_t ab = a == WeightType::Q8_K ? QK_K : (a == WeightType::Q8_0 || a == WeightType::Q8_1) ? 32 : 1;
    std::mt19937 rng(static_cast<uint32_t>(1000 + type));
    double worst_ratio = 0;   // |dot_row_q - dot_row| / bound
    double worst_tight = 0;   // |dot_row_q - exact| / (sum |w xa|)
    int differs = 0, trials = 0;
    for (int64_t n : lengths) {
        for (int trial = 0; trial < 12; ++trial) {
            const std::vector<float> wf = gaussian_row(rng, n, trial % 4 == 3 ? 0.3f : 0.f, 1.f);
            const std::vector<float> x = activation_row(rng, n, trial % 3);
            const std::vector<uint8_t> wq = quantize_weights(t, wf);
            std::vector<float> w(static_cast<size_t>(n));
            dequantize_row(t, wq.data(), w.data(), n);
            const std::vector<uint8_t> xq = quantize_act(t, x);
            const std::vector<float> xa = dequantize_act(t, xq, n);

            const float got = dot_row_q(t, wq.data(), xq.data(), n);
            const float flt = dot_row(t, wq.data(), x.data(), n);
            QVERIFY(std::isfinite(got));

            // The per-element bound and the q8_1 min term.
            double bound = 0, abs_wx = 0, abs_wxa = 0, exact = 0, s_term = 0;
            for (int64_t i0 = 0; i0 < n; i0 += ab) {
                const int64_t len = std::min(ab, n - i0);
                const double step = static_cast<double>(amax_of(x.data() + i0, len)) / 127.0;
                for (int64_t i = i0; i < i0 + len; ++i) {
                    double delta = 0;
                    if (a == WeightType::Q8_0 || a == WeightType::Q8_1)
                        delta = step * (0.5 + 1e-4 + 127.0 * 0x1p-11);
                    else if (a == WeightType::Q8_K)
                        delta = step * (0.5 + 1e-4);
                    else if (a == WeightType::F16)
                        delta = std::fabs(x[i]) * 0x1p-11 + 0x1p-25;
                    else if (a == WeightType::BF16)
                        delta = std::fabs(x[i]) * 0x1p-8;
                    bound += std::fabs(w[i]) * delta;
                    abs_wx += std::fabs(static_cast<double>(w[i]) * x[i]);
                    abs_wxa += std::fabs(static_cast<double>(w[i]) * xa[i]);
                    exact += static_cast<double>(w[i]) * xa[i];
                }
                if (a == WeightType::Q8_1) {
                    const auto* yb = reinterpret_cast<const block_q8_1*>(xq.data()) + i0 / 32;
                    // the weight block's min m (q4_1 and q5_1 both start with d, m)
                    uint16_t mbits;
                    std::memcpy(&mbits, wq.data() + (i0 / 32) * type_traits(t)->block_bytes + 2, 2);
                    const double m = fp16_to_fp32(mbits);
                    long sum_q = 0;
                    for (int j = 0; j < 32; ++j) sum_q += yb->qs[j];
                    s_term += std::fabs(m) * 0x1p-10 * step * std::fabs(static_cast<double>(sum_q)) * 1.001;
                    // what the kernel computes exactly: m * S instead of m * D * sum q
                    exact += m * (static_cast<double>(fp16_to_fp32(yb->s)) -
                                  static_cast<double>(fp16_to_fp32(yb->d)) * static_cast<double>(sum_q));
                }
            }
            bound += s_term + 2e-5 * abs_wx + 1e-30;
            const double err = std::fabs(static_cast<double>(got) - flt);
            QVERIFY2(err <= bound, qPrintable(QString("%1 n=%2 trial %3: |dot_row_q - dot_row| = %4 > bound %5")
                                                  .arg(type_traits(t)->name)
                                                  .arg(n)
                                                  .arg(trial)
                                                  .arg(err)
                                                  .arg(bound)));
            worst_ratio = std::max(worst_ratio, err / bound);
            // Tight: the kernel's sum equals the float64 dot of what it multiplies,
            // up to float accumulation.
            const double tight = std::fabs(static_cast<double>(got) - exact);
            QVERIFY2(tight <= 2e-5 * abs_wxa + 1e-30,
                     qPrintable(QString("%1 n=%2 trial %3: |dot_row_q - exact| = %4, sum|w xa| = %5")
                                    .arg(type_traits(t)->name)
                                    .arg(n)
                                    .arg(trial)
                                    .arg(tight)
                                    .arg(abs_wxa)));
            worst_tight = std::max(worst_tight, tight / (abs_wxa + 1e-30));
            differs += got != flt;
            ++trials;
        }
    }
    if (t != WeightType::F32) QVERIFY2(differs > trials / 2, "activations do not look quantized");
    qInfo("%s: worst |dot_row_q - dot_row| / bound = %.3f; worst relative float error %.2e",
          type_traits(t)->name, worst_ratio, worst_tight);
}

// ---------------------------------------------------------------------------
// Hand-built blocks. Each test lays out weight quants by hand from ggml's
// block description, picks activation quants, computes the integer sums here
// and checks dot_row_q against them. Scales are powers of two and the sums
// small, so every float operation in the kernel is exact and the comparison is
// equality.

namespace {

struct Rand {
    std::mt19937 rng;
    explicit Rand(uint32_t seed) : rng(seed) {}
    int operator()(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
};

// Pack 32 4-bit quants ggml's way: element j < 16 in the low nibble of qs[j],
// element j + 16 in the high nibble.
void pack_nibbles32(const int* q, uint8_t* qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
}
// Bit 4 of the 32 5-bit quants into the little-endian uint32 qh.
void pack_qh32(const int* q, uint8_t* qh) {
    uint32_t bits = 0;
    for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

block_q8_0 make_q8_0(float d, const int* q) {
    block_q8_0 b;
    b.d = h(d);
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(q[j]);
    return b;
}

void check_exact(float got, double expect) {
    QVERIFY(static_cast<double>(static_cast<float>(expect)) == expect);  // the test's own premise
    COMPARE_BITS(got, static_cast<float>(expect));
}

}  // namespace

void TestVecDot::exact_q4_0_q8_0() {
    Rand r(1);
    const float dw[3] = {0.5f, 0.125f, 0.5f}, dy[3] = {0.25f, 1.f / 64, 0.5f};
    block_q4_0 w[3];
    block_q8_0 y[3];
    double expect = 0;
    for (int b = 0; b < 3; ++b) {
        int q[32], v[32];
        for (int j = 0; j < 32; ++j) q[j] = r(0, 15), v[j] = r(-128, 127);
        if (b == 0) q[0] = 0, v[0] = -128, q[31] = 15, v[31] = 127;  // extremes
        w[b].d = h(dw[b]);
        pack_nibbles32(q, w[b].qs);
        y[b] = make_q8_0(dy[b], v);
        long sumi = 0;
        for (int j = 0; j < 32; ++j) sumi += static_cast<long>(q[j] - 8) * v[j];
        expect += static_cast<double>(sumi) * dw[b] * dy[b];
        // one block on its own as well
        check_exact(dot_row_q(WeightType::Q4_0, &w[b], &y[b], 32), static_cast<double>(sumi) * dw[b] * dy[b]);
    }
    check_exact(dot_row_q(WeightType::Q4_0, w, y, 96), expect);
}

void TestVecDot::exact_q8_0_q8_0() {
    Rand r(2);
    const float dw[3] = {1.f / 16, 4.f, 0.5f}, dy[3] = {0.5f, 1.f / 128, 1.f / 4};
    block_q8_0 w[3], y[3];
    double expect = 0;
    for (int b = 0; b < 3; ++b) {
        int q[32], v[32];
        for (int j = 0; j < 32; ++j) q[j] = r(-127, 127), v[j] = r(-128, 127);
        if (b == 1) q[5] = -128, v[5] = -128;
        w[b] = make_q8_0(dw[b], q);
        y[b] = make_q8_0(dy[b], v);
        long sumi = 0;
        for (int j = 0; j < 32; ++j) sumi += static_cast<long>(q[j]) * v[j];
        expect += static_cast<double>(sumi) * dw[b] * dy[b];
    }
    check_exact(dot_row_q(WeightType::Q8_0, w, y, 96), expect);
}

void TestVecDot::exact_q4_1_q8_1() {
    Rand r(3);
    const float dw[2] = {0.25f, 1.f / 32}, mw[2] = {-1.5f, 0.75f}, dy[2] = {1.f / 8, 0.5f};
    block_q4_1 w[2];
    block_q8_1 y[2];
    double expect = 0;
    for (int b = 0; b < 2; ++b) {
        int q[32], v[32];
        long sumy = 0;
        // |sum v| <= 640 keeps s = sum * dy (and s + 4) exact in fp16
        for (int j = 0; j < 32; ++j) q[j] = r(0, 15), v[j] = r(-20, 20), sumy += v[j];
        w[b].d = h(dw[b]);
        w[b].m = h(mw[b]);
        pack_nibbles32(q, w[b].qs);
        y[b].d = h(dy[b]);
        for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(v[j]);
        // s as ggml stores it; chosen exactly representable here, so S = d * sum.
        const float s = static_cast<float>(sumy) * dy[b];
        y[b].s = h(s);
        QVERIFY(static_cast<double>(fp16_to_fp32(y[b].s)) == static_cast<double>(sumy) * dy[b]);
        long sumi = 0;
        for (int j = 0; j < 32; ++j) sumi += static_cast<long>(q[j]) * v[j];
        // x = d*q + m  =>  sum x*y = d*dy*sum(q v) + m * dy*sum(v)
        expect += static_cast<double>(sumi) * dw[b] * dy[b] + static_cast<double>(mw[b]) * s;
    }
    check_exact(dot_row_q(WeightType::Q4_1, w, y, 64), expect);

    // The min term uses the stored s, not d * sum(qs): change s alone and the
    // result moves by m * (s' - s).
    const float s0 = fp16_to_fp32(y[0].s);
    y[0].s = h(s0 + 4.f);
    check_exact(dot_row_q(WeightType::Q4_1, w, y, 64), expect + static_cast<double>(mw[0]) * 4.0);
}

void TestVecDot::exact_q5_0_q8_0() {
    Rand r(4);
    block_q5_0 w[2];
    block_q8_0 y[2];
    const float dw[2] = {0.5f, 1.f / 8}, dy[2] = {1.f / 4, 2.f};
    double expect = 0;
    for (int b = 0; b < 2; ++b) {
        int q[32], v[32];
        for (int j = 0; j < 32; ++j) q[j] = r(0, 31), v[j] = r(-128, 127);
        q[3] = 0, q[20] = 31;  // both ends of the 5-bit range, in both halves
        w[b].d = h(dw[b]);
        pack_nibbles32(q, w[b].qs);
        pack_qh32(q, w[b].qh);
        y[b] = make_q8_0(dy[b], v);
        long sumi = 0;
        for (int j = 0; j < 32; ++j) sumi += static_cast<long>(q[j] - 16) * v[j];
        expect += static_cast<double>(sumi) * dw[b] * dy[b];
    }
    check_exact(dot_row_q(WeightType::Q5_0, w, y, 64), expect);
}

void TestVecDot::exact_q5_1_q8_1() {
    Rand r(5);
    block_q5_1 w;
    block_q8_1 y;
    int q[32], v[32];
    long sumy = 0;
    for (int j = 0; j < 32; ++j) q[j] = r(0, 31), v[j] = r(-20, 20), sumy += v[j];
    w.d = h(0.125f);
    w.m = h(-2.f);
    pack_nibbles32(q, w.qs);
    pack_qh32(q, w.qh);
    y.d = h(0.25f);
    y.s = h(static_cast<float>(sumy) * 0.25f);
    for (int j = 0; j < 32; ++j) y.qs[j] = static_cast<int8_t>(v[j]);
    long sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += static_cast<long>(q[j]) * v[j];
    check_exact(dot_row_q(WeightType::Q5_1, &w, &y, 32),
                static_cast<double>(sumi) * 0.125 * 0.25 + -2.0 * static_cast<double>(sumy) * 0.25);
}

namespace {

// A q8_K activation block from chosen quants, with bsums computed here.
block_q8_K make_q8_K(float d, const int* v) {
    block_q8_K y;
    y.d = d;
    for (int j = 0; j < QK_K; ++j) y.qs[j] = static_cast<int8_t>(v[j]);
    for (int g = 0; g < QK_K / 16; ++g) {
        int s = 0;
        for (int k = 0; k < 16; ++k) s += v[16 * g + k];
        y.bsums[g] = static_cast<int16_t>(s);
    }
    return y;
}

// q4_K's 12 scale bytes from 8 6-bit scales and 8 6-bit mins: sub-blocks 0-3
// in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 as
// nibbles in bytes 8-11 (scale low, min high) with their top 2 bits in the
// top 2 bits of bytes 0-3 (scales) and 4-7 (mins).
void pack_k4_scales(const int* sc, const int* mn, uint8_t* p) {
    for (int j = 0; j < 4; ++j) {
        p[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        p[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        p[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
}

}  // namespace

void TestVecDot::exact_q4_k_q8_k() {
    Rand r(6);
    block_q4_K w[2];
    block_q8_K y[2];
    const float dw[2] = {0.25f, 1.f / 16}, dm[2] = {0.125f, 0.5f}, dy[2] = {1.f / 16, 1.f / 4};
    double expect = 0;
    for (int b = 0; b < 2; ++b) {
        int q[QK_K], v[QK_K], sc[8], mn[8];
        for (int j = 0; j < QK_K; ++j) q[j] = r(0, 15), v[j] = r(-8, 8);
        for (int j = 0; j < 8; ++j) sc[j] = r(0, 63), mn[j] = r(0, 63);
        sc[7] = 63, mn[4] = 63;  // top bits of the high sub-blocks in use
        w[b].d = h(dw[b]);
        w[b].dmin = h(dm[b]);
        pack_k4_scales(sc, mn, w[b].scales);
        // Element e: 64-element chunk c = e / 64; the first 32 in the low nibbles
        // of qs[32c .. 32c+31], the next 32 in their high nibbles.
        std::memset(w[b].qs, 0, sizeof w[b].qs);
        for (int e = 0; e < QK_K; ++e) {
            const int c = e / 64, r64 = e % 64;
            if (r64 < 32)
                w[b].qs[32 * c + r64] |= static_cast<uint8_t>(q[e]);
            else
                w[b].qs[32 * c + r64 - 32] |= static_cast<uint8_t>(q[e] << 4);
        }
        y[b] = make_q8_K(dy[b], v);
        // x_e = dw * sc[e/32] * q_e - dmin * mn[e/32]
        long sum_sq = 0, sum_m = 0;
        for (int e = 0; e < QK_K; ++e) {
            sum_sq += static_cast<long>(sc[e / 32]) * q[e] * v[e];
            sum_m += static_cast<long>(mn[e / 32]) * v[e];
        }
        const double one = static_cast<double>(dw[b]) * dy[b] * static_cast<double>(sum_sq) -
                           static_cast<double>(dm[b]) * dy[b] * static_cast<double>(sum_m);
        check_exact(dot_row_q(WeightType::Q4_K, &w[b], &y[b], QK_K), one);
        expect += one;
    }
    check_exact(dot_row_q(WeightType::Q4_K, w, y, 2 * QK_K), expect);
}

void TestVecDot::exact_q6_k_q8_k() {
    Rand r(7);
    block_q6_K w[2];
    block_q8_K y[2];
    const float dw[2] = {0.5f, 1.f / 32}, dy[2] = {1.f / 8, 1.f};
    double expect = 0;
    for (int b = 0; b < 2; ++b) {
        int q[QK_K], v[QK_K], sc[16];
        for (int j = 0; j < QK_K; ++j) q[j] = r(0, 63), v[j] = r(-8, 8);
        for (int j = 0; j < 16; ++j) sc[j] = r(-40, 40);
        q[0] = 0, q[255] = 63, sc[15] = -128 + 90;
        w[b].d = h(dw[b]);
        for (int j = 0; j < 16; ++j) w[b].scales[j] = static_cast<int8_t>(sc[j]);
        // Element e: half hh = e / 128; l = e % 32; group g = (e % 128) / 32.
        // Low 4 bits: g 0 -> low nibble of ql[64hh + l], g 1 -> low nibble of
        // ql[64hh + l + 32], g 2 / 3 -> the high nibbles of the same bytes.
        // High 2 bits: bits 2g..2g+1 of qh[32hh + l].
        std::memset(w[b].ql, 0, sizeof w[b].ql);
        std::memset(w[b].qh, 0, sizeof w[b].qh);
        for (int e = 0; e < QK_K; ++e) {
            const int hh = e / 128, l = e % 32, g = (e % 128) / 32;
            const int lo = q[e] & 15, hi = q[e] >> 4;
            uint8_t& qlb = w[b].ql[64 * hh + l + (g % 2) * 32];
            qlb |= static_cast<uint8_t>(g < 2 ? lo : lo << 4);
            w[b].qh[32 * hh + l] |= static_cast<uint8_t>(hi << (2 * g));
        }
        y[b] = make_q8_K(dy[b], v);
        long sumi = 0;
        for (int e = 0; e < QK_K; ++e) sumi += static_cast<long>(sc[e / 16]) * (q[e] - 32) * v[e];
        const double one = static_cast<double>(dw[b]) * dy[b] * static_cast<double>(sumi);
        check_exact(dot_row_q(WeightType::Q6_K, &w[b], &y[b], QK_K), one);
        expect += one;
    }
    check_exact(dot_row_q(WeightType::Q6_K, w, y, 2 * QK_K), expect);
}

// ---------------------------------------------------------------------------
// Activation formats.

void TestVecDot::q8_k_bsums_and_scale() {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 20; ++trial) {
        const int64_t n = QK_K * (1 + trial % 3);
        std::vector<float> x = activation_row(rng, n, trial % 3);
        const std::vector<uint8_t> xq = quantize_act(WeightType::Q4_K, x);
        const auto* y = reinterpret_cast<const block_q8_K*>(xq.data());
        for (int64_t b = 0; b < n / QK_K; ++b) {
            const float* xb = x.data() + b * QK_K;
            // the element of largest magnitude (first one on ties), with its sign
            float mx = 0, amax = 0;
            for (int j = 0; j < QK_K; ++j)
                if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), mx = xb[j];
            const float iscale = -127.f / mx;
            COMPARE_BITS(y[b].d, 1 / iscale);
            for (int j = 0; j < QK_K; ++j) {
                QVERIFY(y[b].qs[j] >= -127 && y[b].qs[j] <= 127);
                QVERIFY(std::fabs(iscale * xb[j] - y[b].qs[j]) <= 0.5f);
                if (xb[j] == mx) QCOMPARE(int{y[b].qs[j]}, -127);  // ggml maps the extreme to -127
            }
            for (int g = 0; g < QK_K / 16; ++g) {
                int s = 0;
                for (int k = 0; k < 16; ++k) s += y[b].qs[16 * g + k];
                QCOMPARE(int{y[b].bsums[g]}, s);
            }
        }
    }
}

void TestVecDot::q8_1_s_is_fp16_of_d_times_sum() {
    // ggml: y.d = fp16(d), y.s = fp16(sum * d) with d = amax / 127 the float
    // (not the fp16-rounded one), sum the int sum of the 32 quants.
    std::mt19937 rng(12);
    int s_differs_from_rounded_d = 0;
    for (int trial = 0; trial < 50; ++trial) {
        const std::vector<float> x = activation_row(rng, 96, trial % 3);
        for (WeightType w : {WeightType::Q4_1, WeightType::Q5_1}) {
            const std::vector<uint8_t> xq = quantize_act(w, x);
            const auto* y = reinterpret_cast<const block_q8_1*>(xq.data());
            for (int b = 0; b < 3; ++b) {
                const float d = amax_of(x.data() + 32 * b, 32) / 127.f;
                int sum = 0;
                for (int j = 0; j < 32; ++j) sum += y[b].qs[j];
                QCOMPARE(y[b].d, h(d));
                QCOMPARE(y[b].s, h(static_cast<float>(sum) * d));
                s_differs_from_rounded_d += y[b].s != h(static_cast<float>(sum) * fp16_to_fp32(y[b].d));
                // the quants are those of q8_0 for the same block
                const std::vector<uint8_t> x0 = quantize_act(WeightType::Q8_0, x);
                const auto* y0 = reinterpret_cast<const block_q8_0*>(x0.data());
                QCOMPARE(y0[b].d, y[b].d);
                QVERIFY(std::memcmp(y0[b].qs, y[b].qs, 32) == 0);
            }
        }
    }
    qInfo("s != fp16(fp16(d) * sum) in %d of 300 blocks (so the unrounded d matters)", s_differs_from_rounded_d);
}

void TestVecDot::q8_0_rounds_ties_to_even() {
    // amax = 127 makes id = 127 / amax = 1 exactly, so x * id = x: half-integer
    // inputs are ties. x86 ggml (_mm256_round_ps, nearest) rounds them to even;
    // ggml's portable quantize_row_q8_0_ref (roundf) away from zero.
    float x[32] = {};
    x[0] = 127.f;
    const float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, -3.5f};
    const int even[] = {0, 2, 2, 0, -2, 126, -4};
    const int away[] = {1, 2, 3, -1, -3, 127, -4};
    for (int k = 0; k < 7; ++k) x[1 + k] = ties[k];
    block_q8_0 act, portable;
    quantize_activation(WeightType::Q8_0, x, &act, 32);
    quantize_row_q8_0_ref(x, &portable, 32);
    COMPARE_BITS(fp16_to_fp32(act.d), 1.f);
    QCOMPARE(int{act.qs[0]}, 127);
    for (int k = 0; k < 7; ++k) {
        QCOMPARE(int{act.qs[1 + k]}, even[k]);
        QCOMPARE(int{portable.qs[1 + k]}, away[k]);
    }
    block_q8_1 act1;
    quantize_activation(WeightType::Q4_1, x, &act1, 32);
    for (int k = 0; k < 7; ++k) QCOMPARE(int{act1.qs[1 + k]}, even[k]);
    // q8_K rounds with nearest_int: ties to even too (iscale = -127/127 = -1).
    float xk[QK_K] = {};
    xk[0] = 127.f;
    for (int k = 0; k < 7; ++k) xk[1 + k] = ties[k];
    block_q8_K k8;
    quantize_activation(WeightType::Q4_K, xk, &k8, QK_K);
    for (int k = 0; k < 7; ++k) QCOMPARE(int{k8.qs[1 + k]}, -even[k]);
}

void TestVecDot::q8_activation_matches_portable_quantizer_off_ties() {
    // Off ties the x86 activation quantizer and ggml's portable one agree: same
    // d, quants equal except (rarely) by one.
    std::mt19937 rng(13);
    const int64_t n = 1 << 16;
    const std::vector<float> x = gaussian_row(rng, n, 0.f, 1.f);
    std::vector<block_q8_0> a(n / 32), p(n / 32);
    quantize_activation(WeightType::Q8_0, x.data(), a.data(), n);
    quantize_row_q8_0_ref(x.data(), p.data(), n);
    std::vector<block_q8_1> a1(n / 32), p1(n / 32);
    quantize_act_q8_1_ref(x.data(), a1.data(), n);
    quantize_row_q8_1_ref(x.data(), p1.data(), n);
    int differ = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
        QCOMPARE(a[b].d, p[b].d);
        QCOMPARE(a1[b].d, p1[b].d);
        for (int j = 0; j < 32; ++j) {
            QVERIFY(std::abs(a[b].qs[j] - p[b].qs[j]) <= 1);
            QCOMPARE(a1[b].qs[j], a[b].qs[j]);
            QCOMPARE(p1[b].qs[j], p[b].qs[j]);
            differ += a[b].qs[j] != p[b].qs[j];
        }
    }
    QVERIFY(differ <= n / 10000);
    qInfo("x86 vs portable q8_0 activation quants differ in %d of %lld elements", differ,
          static_cast<long long>(n));
}

void TestVecDot::f16_activations_rounded_before_product() {
    // w = 1 (exact in fp16); x = 1 + 2^-12 is not an fp16 (rounds to 1, a tie
    // to even), 1 + 3*2^-12 rounds up to 1 + 2^-10.
    const uint16_t w[4] = {h(1.f), h(1.f), h(2.f), h(-0.5f)};
    const float x[4] = {1.f + 0x1p-12f, 1.f + 3 * 0x1p-12f, 0.1f, 3.f};
    uint16_t xq[4];
    quantize_activation(WeightType::F16, x, xq, 4);
    for (int i = 0; i < 4; ++i) QCOMPARE(xq[i], h(x[i]));
    COMPARE_BITS(fp16_to_fp32(xq[0]), 1.f);
    COMPARE_BITS(fp16_to_fp32(xq[1]), 1.f + 0x1p-10f);
    // each product of two halves is exact in float; ggml sums them in double
    double expect = 0;
    for (int i = 0; i < 4; ++i) expect += static_cast<double>(fp16_to_fp32(w[i]) * fp16_to_fp32(xq[i]));
    COMPARE_BITS(dot_row_q(WeightType::F16, w, xq, 4), static_cast<float>(expect));
    COMPARE_BITS(dot_row_q(WeightType::F16, w, xq, 1), 1.f);
    COMPARE_BITS(dot_row(WeightType::F16, w, x, 1), 1.f + 0x1p-12f);  // the float path does not round x

    // Longer rows: exactly the double sum of fp16 * fp16 products, element order.
    std::mt19937 rng(14);
    for (int64_t n : {7, 64, 1000}) {
        const std::vector<float> wf = gaussian_row(rng, n, 0.f, 1.f);
        const std::vector<float> xf = gaussian_row(rng, n, 0.f, 3.f);
        const std::vector<uint8_t> wq = quantize_weights(WeightType::F16, wf);
        const std::vector<uint8_t> xa = quantize_act(WeightType::F16, xf);
        const auto* w16 = reinterpret_cast<const uint16_t*>(wq.data());
        const auto* x16 = reinterpret_cast<const uint16_t*>(xa.data());
        double s = 0;
        for (int64_t i = 0; i < n; ++i) {
            QCOMPARE(x16[i], h(xf[i]));
            s += static_cast<double>(fp16_to_fp32(w16[i]) * fp16_to_fp32(x16[i]));
        }
        COMPARE_BITS(dot_row_q(WeightType::F16, wq.data(), xa.data(), n), static_cast<float>(s));
    }
}

void TestVecDot::bf16_and_f32_activations() {
    std::mt19937 rng(15);
    for (int64_t n : {1, 9, 300}) {
        const std::vector<float> wf = gaussian_row(rng, n, 0.f, 1.f);
        const std::vector<float> xf = gaussian_row(rng, n, 0.f, 1.f);
        // bf16: activations rounded to bf16, products exact, double sum
        const std::vector<uint8_t> wb = quantize_weights(WeightType::BF16, wf);
        const std::vector<uint8_t> xb = quantize_act(WeightType::BF16, xf);
        const auto* w16 = reinterpret_cast<const uint16_t*>(wb.data());
        const auto* x16 = reinterpret_cast<const uint16_t*>(xb.data());
        double s = 0;
        for (int64_t i = 0; i < n; ++i) {
            QCOMPARE(x16[i], fp32_to_bf16(xf[i]));
            s += static_cast<double>(bf16_to_fp32(w16[i]) * bf16_to_fp32(x16[i]));
        }
        COMPARE_BITS(dot_row_q(WeightType::BF16, wb.data(), xb.data(), n), static_cast<float>(s));
        // f32: activations copied; float products, double sum
        const std::vector<uint8_t> xa = quantize_act(WeightType::F32, xf);
        QVERIFY(std::memcmp(xa.data(), xf.data(), static_cast<size_t>(n) * 4) == 0);
        double s32 = 0;
        for (int64_t i = 0; i < n; ++i) s32 += static_cast<double>(wf[static_cast<size_t>(i)] * xf[static_cast<size_t>(i)]);
        COMPARE_BITS(dot_row_q(WeightType::F32, wf.data(), xa.data(), n), static_cast<float>(s32));
    }
}

void TestVecDot::zero_activation_rows() {
    std::mt19937 rng(16);
    for (WeightType t : kWeightTypes) {
        const int64_t n = 2 * std::max<int64_t>(block_elems(t), 32);
        const std::vector<float> wf = gaussian_row(rng, n, 0.3f, 1.f);
        const std::vector<uint8_t> wq = quantize_weights(t, wf);
        const std::vector<float> zeros(static_cast<size_t>(n), 0.f);
        const std::vector<uint8_t> xq = quantize_act(t, zeros);
        for (uint8_t b : xq) QCOMPARE(b, uint8_t{0});  // d = 0 (and s = 0, bsums = 0), quants 0
        COMPARE_BITS(dot_row_q(t, wq.data(), xq.data(), n), 0.f);
    }
}

QTEST_APPLESS_MAIN(TestVecDot)
#include "test_vec_dot.moc"
