// In-memory weight layouts (kernels/ref/repack_ref.h): Q4_0_R4.
//
//  - the layout: repack then unpack gives the q4_0 bytes back; block i seen
//    through q4_0_r4_block is block i of the q4_0 row; rows of 1..13 blocks
//    (every tail: nb % 4 = 0..3);
//  - the reference kernels on the layout (dequantize_row, dot_row,
//    dot_row_q, quantize_row) equal q4_0's on the unpacked row bit for bit;
//  - repack_rows in place over strided rows, both ways, and its refusals;
//  - a layout is not a file type (a file's id 63 is unknown, "q4_0_r4" is no
//    --type), file_type() maps it back;
//  - fast_layout follows the kernel level: Q4_0 -> Q4_0_R4 where the level
//    has the 512-bit kernel, and only for rows it handles;
//  - gemm_q on repacked rows equals gemm_q on the q4_0 rows bit for bit at
//    every level that repacks (and at ref), 1..5 tokens.
#include <QtTest>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "kernels/ref/gemm_ref.h"
#include "kernels/ref/repack_ref.h"
#include "kernels/ref/vec_dot_ref.h"

using namespace strata::kernels;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::vector<float> gaussian(std::mt19937& rng, int64_t n) {
    std::normal_distribution<float> dist(0.1f, 1.f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
}

// A q4_0 row of nb blocks made by the reference quantizer.
std::vector<block_q4_0> q4_row(std::mt19937& rng, int64_t nb) {
    std::vector<block_q4_0> b(static_cast<size_t>(nb));
    const std::vector<float> x = gaussian(rng, nb * QK4_0);
    quantize_row_q4_0_ref(x.data(), b.data(), nb * QK4_0);
    return b;
}

std::vector<uint8_t> repacked(const std::vector<block_q4_0>& b) {
    std::vector<uint8_t> r(b.size() * sizeof(block_q4_0));
    repack_row_q4_0_r4(b.data(), r.data(), static_cast<int64_t>(b.size()));
    return r;
}

std::vector<uint8_t> act_q8_0(std::mt19937& rng, int64_t n) {
    std::vector<uint8_t> q(static_cast<size_t>(activation_row_bytes(WeightType::Q4_0, n)));
    const std::vector<float> x = gaussian(rng, n);
    quantize_activation_ref(WeightType::Q4_0, x.data(), q.data(), n);
    return q;
}

}  // namespace

class TestRepack : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void layout_round_trip();
    void reference_kernels_equal_q4_0();
    void repack_rows_in_place();
    void layouts_are_not_file_types();
    void fast_layout_follows_level();
    void gemm_equals_q4_0_data();
    void gemm_equals_q4_0();
};

void TestRepack::layout_round_trip() {
    std::mt19937 rng(7);
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const std::vector<block_q4_0> b = q4_row(rng, nb);
        const std::vector<uint8_t> r = repacked(b);
        QCOMPARE(static_cast<int64_t>(r.size()), row_bytes(WeightType::Q4_0_R4, nb * QK4_0));
        // Quad j's quants lie at 64 j, its scales after all the quads' quants.
        const int64_t quads = nb / 4;
        for (int64_t i = 0; i < 4 * quads; ++i) {
            QCOMPARE(std::memcmp(r.data() + i * 16, b[static_cast<size_t>(i)].qs, 16), 0);
            QCOMPARE(std::memcmp(r.data() + quads * 64 + i * 2, &b[static_cast<size_t>(i)].d, 2), 0);
        }
        std::vector<block_q4_0> back(static_cast<size_t>(nb));
        unpack_row_q4_0_r4(r.data(), back.data(), nb);
        QCOMPARE(std::memcmp(back.data(), b.data(), b.size() * sizeof(block_q4_0)), 0);
        for (int64_t i = 0; i < nb; ++i) {
            const block_q4_0 one = q4_0_r4_block(r.data(), nb, i);
            QCOMPARE(std::memcmp(&one, &b[static_cast<size_t>(i)], sizeof one), 0);
        }
    }
}

void TestRepack::reference_kernels_equal_q4_0() {
    std::mt19937 rng(11);
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const int64_t n = nb * QK4_0;
        const std::vector<block_q4_0> b = q4_row(rng, nb);
        const std::vector<uint8_t> r = repacked(b);
        std::vector<float> y0(static_cast<size_t>(n)), y1(y0.size());
        dequantize_row(WeightType::Q4_0, b.data(), y0.data(), n);
        dequantize_row(WeightType::Q4_0_R4, r.data(), y1.data(), n);
        QCOMPARE(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)), 0);

        const std::vector<float> x = gaussian(rng, n);
        QCOMPARE(bits(dot_row_ref(WeightType::Q4_0_R4, r.data(), x.data(), n)),
                 bits(dot_row_ref(WeightType::Q4_0, b.data(), x.data(), n)));
        const std::vector<uint8_t> xq = act_q8_0(rng, n);
        QCOMPARE(bits(dot_row_q_ref(WeightType::Q4_0_R4, r.data(), xq.data(), n)),
                 bits(dot_row_q_ref(WeightType::Q4_0, b.data(), xq.data(), n)));

        // quantize_row into the layout writes the repacked q4_0 bytes.
        std::vector<block_q4_0> q0(static_cast<size_t>(nb));
        std::vector<uint8_t> q1(q0.size() * sizeof(block_q4_0), 0xEE);
        quantize_row(WeightType::Q4_0, x.data(), q0.data(), n);
        quantize_row(WeightType::Q4_0_R4, x.data(), q1.data(), n);
        QCOMPARE(q1, repacked(q0));
        QCOMPARE(activation_type(WeightType::Q4_0_R4), WeightType::Q8_0);
        QVERIFY(has_kernels(WeightType::Q4_0_R4));
    }
}

void TestRepack::repack_rows_in_place() {
    std::mt19937 rng(13);
    const int64_t nb = 7, rows = 5;
    const auto rb = static_cast<uint64_t>(row_bytes(WeightType::Q4_0, nb * QK4_0));
    const uint64_t stride = rb + 6;  // padded rows: the padding is left alone
    std::vector<uint8_t> m(stride * rows, 0xAB), original;
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<block_q4_0> b = q4_row(rng, nb);
        std::memcpy(m.data() + r * stride, b.data(), rb);
    }
    original = m;
    std::vector<uint8_t> scratch(rb);
    QVERIFY(repack_rows(WeightType::Q4_0, WeightType::Q4_0_R4, m.data(), rows, nb * QK4_0, stride, scratch.data()));
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<block_q4_0> b(static_cast<size_t>(nb));
        std::memcpy(b.data(), original.data() + r * stride, rb);
        QCOMPARE(std::memcmp(m.data() + r * stride, repacked(b).data(), rb), 0);
        for (uint64_t p = rb; p < stride; ++p) QCOMPARE(m[r * stride + p], uint8_t(0xAB));
    }
    QVERIFY(repack_rows(WeightType::Q4_0_R4, WeightType::Q4_0, m.data(), rows, nb * QK4_0, stride, scratch.data()));
    QCOMPARE(m, original);
    QVERIFY(repack_rows(WeightType::Q4_0, WeightType::Q4_0, m.data(), rows, nb * QK4_0, stride, scratch.data()));
    QCOMPARE(m, original);
    // Refused, nothing written: another file type, a row that is not whole blocks.
    QVERIFY(!repack_rows(WeightType::Q8_0, WeightType::Q4_0_R4, m.data(), rows, nb * QK4_0, stride, scratch.data()));
    QVERIFY(!repack_rows(WeightType::F32, WeightType::Q4_0_R4, m.data(), rows, nb * QK4_0, stride, scratch.data()));
    QVERIFY(!repack_rows(WeightType::Q4_0, WeightType::Q4_0_R4, m.data(), rows, nb * QK4_0 + 3, stride, scratch.data()));
    QCOMPARE(m, original);
}

void TestRepack::layouts_are_not_file_types() {
    QVERIFY(type_traits(static_cast<uint32_t>(WeightType::Q4_0_R4)) == nullptr);
    QVERIFY(type_traits(WeightType::Q4_0_R4) != nullptr);
    QCOMPARE(type_traits(WeightType::Q4_0_R4)->block_bytes, type_traits(WeightType::Q4_0)->block_bytes);
    QCOMPARE(row_bytes(WeightType::Q4_0_R4, 4096), row_bytes(WeightType::Q4_0, 4096));
    WeightType parsed;
    QVERIFY(!parse_type_name("q4_0_r4", &parsed));
    QCOMPARE(file_type(WeightType::Q4_0_R4), WeightType::Q4_0);
    QCOMPARE(file_type(WeightType::Q8_0), WeightType::Q8_0);
}

void TestRepack::fast_layout_follows_level() {
    const KernelLevel before = kernel_level();
    for (int l = 0; l < kKernelLevels; ++l) {
        const auto level = static_cast<KernelLevel>(l);
        if (!set_kernel_level(level)) continue;
        const bool wide = kernel_table(level)->packed[static_cast<int>(WeightType::Q4_0)].max_cols > 0;
        // Only the 512-bit level has a kernel for the layout.
        QCOMPARE(wide, level == KernelLevel::Avx512);
        QCOMPARE(fast_layout(WeightType::Q4_0, 1024), wide ? WeightType::Q4_0_R4 : WeightType::Q4_0);
        QCOMPARE(fast_layout(WeightType::Q4_0, 32768), wide ? WeightType::Q4_0_R4 : WeightType::Q4_0);
        QCOMPARE(fast_layout(WeightType::Q4_0, 32768 + 32), WeightType::Q4_0);  // past the kernel's activation buffer
        for (WeightType w : {WeightType::F32, WeightType::F16, WeightType::Q8_0, WeightType::Q4_1, WeightType::Q4_K,
                             WeightType::Q6_K})
            QCOMPARE(fast_layout(w, 1024), w);
    }
    QVERIFY(set_kernel_level(before));
    if (!kernel_level_supported(KernelLevel::Avx512)) qInfo("no avx512 level here: only the ref and avx2 rows ran");
}

void TestRepack::gemm_equals_q4_0_data() {
    QTest::addColumn<int>("level_i");
    for (int l = 0; l < kKernelLevels; ++l) QTest::newRow(kernel_level_name(static_cast<KernelLevel>(l))) << l;
}

// Where a level repacks (or at ref), gemm_q on the layout must give the q4_0
// bits: the engine repacks on load and its results must not change.
void TestRepack::gemm_equals_q4_0() {
    QFETCH(int, level_i);
    const auto level = static_cast<KernelLevel>(level_i);
    const KernelTable* t = kernel_table(level);
    if (!t) QSKIP(qPrintable(QString("level %1 is not available on this CPU").arg(kernel_level_name(level))));
    const bool repacks = t->packed[static_cast<int>(WeightType::Q4_0)].max_cols > 0;
    if (!repacks && level != KernelLevel::Ref)
        QSKIP(qPrintable(QString("level %1 does not repack q4_0 (its gemm on the layout is the reference, "
                                 "compared in test_simd_kernels)").arg(kernel_level_name(level))));
    std::mt19937 rng(17);
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const int64_t cols = nb * QK4_0;
        for (int64_t rows : {1, 3, 50}) {
            const auto rb = static_cast<uint64_t>(row_bytes(WeightType::Q4_0, cols));
            std::vector<uint8_t> W(rb * rows), R(rb * rows);
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<block_q4_0> b = q4_row(rng, nb);
                std::memcpy(W.data() + r * rb, b.data(), rb);
                std::memcpy(R.data() + r * rb, repacked(b).data(), rb);
            }
            for (int64_t nt = 1; nt <= 5; ++nt) {
                const int64_t ab = activation_row_bytes(WeightType::Q4_0, cols);
                std::vector<uint8_t> X;
                for (int64_t k = 0; k < nt; ++k) {
                    const std::vector<uint8_t> xq = act_q8_0(rng, cols);
                    X.insert(X.end(), xq.begin(), xq.end());
                }
                std::vector<float> y0(static_cast<size_t>(rows * nt)), y1(y0.size());
                t->gemm_q[static_cast<int>(WeightType::Q4_0)](W.data(), rb, rows, X.data(), ab, nt, cols, y0.data(), rows);
                t->gemm_q[static_cast<int>(WeightType::Q4_0_R4)](R.data(), rb, rows, X.data(), ab, nt, cols, y1.data(), rows);
                for (size_t i = 0; i < y0.size(); ++i)
                    QVERIFY2(bits(y0[i]) == bits(y1[i]),
                             qPrintable(QString("%1 blocks, %2 rows, %3 tokens: [%4] q4_0 %5, q4_0_r4 %6")
                                            .arg(nb).arg(rows).arg(nt).arg(i)
                                            .arg(static_cast<double>(y0[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(y1[i]), 0, 'g', 9)));
            }
        }
    }
}

QTEST_APPLESS_MAIN(TestRepack)
#include "test_repack.moc"
