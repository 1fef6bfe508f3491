// In-memory weight layouts (kernels/ref/repack_ref.h): Q4_0_R4 and Q8_0_R2.
//
//  - the layout: where each block's quants and scale go (Q8_0_R2's quants
//    stored unsigned), for rows of 1..13 blocks (every tail); repacking and
//    unpacking in place over strided rows round-trips, and its refusals;
//  - the reference kernels on a layout (dequantize_row, dot_row, dot_row_q,
//    quantize_row) equal the file type's on the unpacked row bit for bit;
//  - a layout is not a file type (a file's id 62/63 is unknown, the names are
//    no --type), file_type() maps it back;
//  - fast_layout follows the kernel level: the layouts where the level has
//    the 512-bit kernels, and only for rows they handle;
//  - gemm_q on repacked rows equals gemm_q on the file's rows bit for bit at
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

using Bytes = std::vector<uint8_t>;

// A row of nb blocks of file type t, made by the reference quantizer.
Bytes file_row(std::mt19937& rng, WeightType t, int64_t nb) {
    Bytes b(static_cast<size_t>(row_bytes(t, nb * 32)));
    const std::vector<float> x = gaussian(rng, nb * 32);
    quantize_row(t, x.data(), b.data(), nb * 32);
    return b;
}

Bytes repacked(const Bytes& row, WeightType from, WeightType to) {
    Bytes r = row, scratch(row.size());
    if (!repack_rows(from, to, r.data(), 1, static_cast<int64_t>(row.size()) / type_traits(from)->block_bytes * 32,
                     r.size(), scratch.data()))
        return {};
    return r;
}

Bytes act_q8_0(std::mt19937& rng, int64_t n) {
    Bytes q(static_cast<size_t>(activation_row_bytes(WeightType::Q8_0, n)));
    const std::vector<float> x = gaussian(rng, n);
    quantize_activation_ref(WeightType::Q8_0, x.data(), q.data(), n);
    return q;
}

void add_layout_rows() {
    QTest::addColumn<int>("file_i");
    QTest::addColumn<int>("layout_i");
    QTest::newRow("q4_0_r4") << int(WeightType::Q4_0) << int(WeightType::Q4_0_R4);
    QTest::newRow("q8_0_r2") << int(WeightType::Q8_0) << int(WeightType::Q8_0_R2);
}

#define FETCH_LAYOUT()                                         \
    QFETCH(int, file_i);                                       \
    QFETCH(int, layout_i);                                     \
    const auto file = static_cast<WeightType>(file_i);         \
    const auto layout = static_cast<WeightType>(layout_i)

}  // namespace

class TestRepack : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void q4_0_r4_layout();
    void q8_0_r2_layout();
    void reference_kernels_equal_file_type_data() { add_layout_rows(); }
    void reference_kernels_equal_file_type();
    void repack_rows_in_place_data() { add_layout_rows(); }
    void repack_rows_in_place();
    void layouts_are_not_file_types();
    void fast_layout_follows_level();
    void gemm_equals_file_type_data();
    void gemm_equals_file_type();
};

void TestRepack::q4_0_r4_layout() {
    std::mt19937 rng(7);
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const Bytes row = file_row(rng, WeightType::Q4_0, nb);
        const auto* b = reinterpret_cast<const block_q4_0*>(row.data());
        const Bytes r = repacked(row, WeightType::Q4_0, WeightType::Q4_0_R4);
        QCOMPARE(r.size(), row.size());
        // Quad j's quants lie at 64 j, the quads' scales after all of them,
        // the last nb % 4 blocks as they were.
        const int64_t quads = nb / 4;
        for (int64_t i = 0; i < 4 * quads; ++i) {
            QCOMPARE(std::memcmp(r.data() + i * 16, b[i].qs, 16), 0);
            QCOMPARE(std::memcmp(r.data() + quads * 64 + i * 2, &b[i].d, 2), 0);
        }
        QCOMPARE(std::memcmp(r.data() + quads * 72, b + 4 * quads, static_cast<size_t>(nb - 4 * quads) * 18), 0);
        for (int64_t i = 0; i < nb; ++i) {
            const block_q4_0 one = q4_0_r4_block(r.data(), nb, i);
            QCOMPARE(std::memcmp(&one, &b[i], sizeof one), 0);
        }
    }
}

void TestRepack::q8_0_r2_layout() {
    std::mt19937 rng(8);
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const Bytes row = file_row(rng, WeightType::Q8_0, nb);
        const auto* b = reinterpret_cast<const block_q8_0*>(row.data());
        const Bytes r = repacked(row, WeightType::Q8_0, WeightType::Q8_0_R2);
        QCOMPARE(r.size(), row.size());
        // Pair j's quants (as q + 128) at 64 j, the pairs' scales after them,
        // an odd last block as it was.
        const int64_t pairs = nb / 2;
        for (int64_t i = 0; i < 2 * pairs; ++i) {
            for (int k = 0; k < 32; ++k) QCOMPARE(int(r[static_cast<size_t>(i * 32 + k)]), b[i].qs[k] + 128);
            QCOMPARE(std::memcmp(r.data() + pairs * 64 + i * 2, &b[i].d, 2), 0);
        }
        QCOMPARE(std::memcmp(r.data() + pairs * 68, b + 2 * pairs, static_cast<size_t>(nb - 2 * pairs) * 34), 0);
        for (int64_t i = 0; i < nb; ++i) {
            const block_q8_0 one = q8_0_r2_block(r.data(), nb, i);
            QCOMPARE(std::memcmp(&one, &b[i], sizeof one), 0);
        }
    }
}

void TestRepack::reference_kernels_equal_file_type() {
    FETCH_LAYOUT();
    std::mt19937 rng(11);
    QVERIFY(has_kernels(layout));
    QCOMPARE(activation_type(layout), activation_type(file));
    for (int64_t nb = 1; nb <= 13; ++nb) {
        const int64_t n = nb * 32;
        const Bytes row = file_row(rng, file, nb);
        const Bytes r = repacked(row, file, layout);
        std::vector<float> y0(static_cast<size_t>(n)), y1(y0.size());
        dequantize_row(file, row.data(), y0.data(), n);
        dequantize_row(layout, r.data(), y1.data(), n);
        QCOMPARE(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)), 0);

        const std::vector<float> x = gaussian(rng, n);
        QCOMPARE(bits(dot_row_ref(layout, r.data(), x.data(), n)), bits(dot_row_ref(file, row.data(), x.data(), n)));
        const Bytes xq = act_q8_0(rng, n);
        QCOMPARE(bits(dot_row_q_ref(layout, r.data(), xq.data(), n)), bits(dot_row_q_ref(file, row.data(), xq.data(), n)));

        // quantize_row into the layout writes the repacked bytes of the file type's.
        Bytes q0(row.size()), q1(row.size(), 0xEE);
        quantize_row(file, x.data(), q0.data(), n);
        quantize_row(layout, x.data(), q1.data(), n);
        QCOMPARE(q1, repacked(q0, file, layout));
    }
}

void TestRepack::repack_rows_in_place() {
    FETCH_LAYOUT();
    std::mt19937 rng(13);
    const int64_t nb = 7, rows = 5, cols = nb * 32;
    const auto rb = static_cast<uint64_t>(row_bytes(file, cols));
    const uint64_t stride = rb + 6;  // padded rows: the padding is left alone
    Bytes m(stride * rows, 0xAB);
    for (int64_t r = 0; r < rows; ++r) {
        const Bytes row = file_row(rng, file, nb);
        std::memcpy(m.data() + r * stride, row.data(), rb);
    }
    const Bytes original = m;
    Bytes scratch(rb);
    QVERIFY(repack_rows(file, layout, m.data(), rows, cols, stride, scratch.data()));
    for (int64_t r = 0; r < rows; ++r) {
        const Bytes row(original.begin() + r * stride, original.begin() + r * stride + rb);
        QCOMPARE(std::memcmp(m.data() + r * stride, repacked(row, file, layout).data(), rb), 0);
        for (uint64_t p = rb; p < stride; ++p) QCOMPARE(m[r * stride + p], uint8_t(0xAB));
    }
    QVERIFY(repack_rows(layout, file, m.data(), rows, cols, stride, scratch.data()));
    QCOMPARE(m, original);
    QVERIFY(repack_rows(file, file, m.data(), rows, cols, stride, scratch.data()));
    QCOMPARE(m, original);
    // Refused, nothing written: another file type's layout, f32, a row that is not whole blocks.
    const WeightType other = layout == WeightType::Q4_0_R4 ? WeightType::Q8_0_R2 : WeightType::Q4_0_R4;
    QVERIFY(!repack_rows(file, other, m.data(), rows, cols, stride, scratch.data()));
    QVERIFY(!repack_rows(WeightType::F32, layout, m.data(), rows, cols, stride, scratch.data()));
    QVERIFY(!repack_rows(file, layout, m.data(), rows, cols + 3, stride, scratch.data()));
    QCOMPARE(m, original);
}

void TestRepack::layouts_are_not_file_types() {
    for (WeightType layout : {WeightType::Q4_0_R4, WeightType::Q8_0_R2}) {
        const WeightType file = file_type(layout);
        QVERIFY(file != layout);
        QVERIFY(type_traits(static_cast<uint32_t>(layout)) == nullptr);
        QVERIFY(type_traits(layout) != nullptr);
        QCOMPARE(type_traits(layout)->block_bytes, type_traits(file)->block_bytes);
        QCOMPARE(row_bytes(layout, 4096), row_bytes(file, 4096));
        WeightType parsed;
        QVERIFY(!parse_type_name(type_traits(layout)->name, &parsed));
    }
    QCOMPARE(file_type(WeightType::Q4_0_R4), WeightType::Q4_0);
    QCOMPARE(file_type(WeightType::Q8_0_R2), WeightType::Q8_0);
    QCOMPARE(file_type(WeightType::Q6_K), WeightType::Q6_K);
}

void TestRepack::fast_layout_follows_level() {
    const KernelLevel before = kernel_level();
    for (int l = 0; l < kKernelLevels; ++l) {
        const auto level = static_cast<KernelLevel>(l);
        if (!set_kernel_level(level)) continue;
        // Every SIMD level has a kernel for Q4_0_R4; only the 512-bit one for Q8_0_R2.
        const bool wide = level == KernelLevel::Avx512;
        const bool simd = level != KernelLevel::Ref;
        QCOMPARE(fast_layout(WeightType::Q4_0, 1024), simd ? WeightType::Q4_0_R4 : WeightType::Q4_0);
        QCOMPARE(fast_layout(WeightType::Q4_0, 32768), simd ? WeightType::Q4_0_R4 : WeightType::Q4_0);
        QCOMPARE(fast_layout(WeightType::Q4_0, 32768 + 32), WeightType::Q4_0);  // past the kernel's activation buffer
        QCOMPARE(fast_layout(WeightType::Q8_0, 1024), wide ? WeightType::Q8_0_R2 : WeightType::Q8_0);
        QCOMPARE(fast_layout(WeightType::Q8_0, 21824), wide ? WeightType::Q8_0_R2 : WeightType::Q8_0);
        QCOMPARE(fast_layout(WeightType::Q8_0, 21824 + 32), WeightType::Q8_0);
        for (WeightType w : {WeightType::F32, WeightType::F16, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q4_K,
                             WeightType::Q6_K})
            QCOMPARE(fast_layout(w, 1024), w);
    }
    QVERIFY(set_kernel_level(before));
    if (!kernel_level_supported(KernelLevel::Avx512)) qInfo("no avx512 level here: only the ref and avx2 rows ran");
}

void TestRepack::gemm_equals_file_type_data() {
    QTest::addColumn<int>("file_i");
    QTest::addColumn<int>("layout_i");
    QTest::addColumn<int>("level_i");
    for (int l = 0; l < kKernelLevels; ++l) {
        const char* lv = kernel_level_name(static_cast<KernelLevel>(l));
        QTest::addRow("q4_0_r4-%s", lv) << int(WeightType::Q4_0) << int(WeightType::Q4_0_R4) << l;
        QTest::addRow("q8_0_r2-%s", lv) << int(WeightType::Q8_0) << int(WeightType::Q8_0_R2) << l;
    }
}

// Where a level repacks (or at ref), gemm_q on the layout must give the file
// type's bits: the engine repacks on load and its results must not change.
void TestRepack::gemm_equals_file_type() {
    FETCH_LAYOUT();
    QFETCH(int, level_i);
    const auto level = static_cast<KernelLevel>(level_i);
    const KernelTable* t = kernel_table(level);
    if (!t) QSKIP(qPrintable(QString("level %1 is not available on this CPU").arg(kernel_level_name(level))));
    const bool repacks = t->packed[static_cast<int>(file)].type == layout && t->packed[static_cast<int>(file)].max_cols > 0;
    if (!repacks && level != KernelLevel::Ref)
        QSKIP(qPrintable(QString("level %1 does not repack %2 (its gemm on the layout is the reference, compared in "
                                 "test_simd_kernels)").arg(kernel_level_name(level), type_traits(file)->name)));
    std::mt19937 rng(17);
    // Every block count up to 13, and whole quads up to 12 of them (the
    // one-token Q4_0_R4 path holds up to 8 quads' activations in registers).
    for (int64_t nb : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 20, 24, 28, 32, 36, 48}) {
        const int64_t cols = nb * 32;
        for (int64_t rows : {1, 3, 50}) {
            const auto rb = static_cast<uint64_t>(row_bytes(file, cols));
            Bytes W(rb * rows), R(rb * rows);
            for (int64_t r = 0; r < rows; ++r) {
                const Bytes row = file_row(rng, file, nb);
                std::memcpy(W.data() + r * rb, row.data(), rb);
                std::memcpy(R.data() + r * rb, repacked(row, file, layout).data(), rb);
            }
            for (int64_t nt = 1; nt <= 5; ++nt) {
                const int64_t ab = activation_row_bytes(file, cols);
                Bytes X;
                for (int64_t k = 0; k < nt; ++k) {
                    const Bytes xq = act_q8_0(rng, cols);
                    X.insert(X.end(), xq.begin(), xq.end());
                }
                std::vector<float> y0(static_cast<size_t>(rows * nt)), y1(y0.size());
                t->gemm_q[static_cast<int>(file)](W.data(), rb, rows, X.data(), ab, nt, cols, y0.data(), rows);
                t->gemm_q[static_cast<int>(layout)](R.data(), rb, rows, X.data(), ab, nt, cols, y1.data(), rows);
                std::vector<float> y2(y0.size());  // read once (decode's experts): other prefetch hints only
                t->gemm_q_once[static_cast<int>(layout)](R.data(), rb, rows, X.data(), ab, nt, cols, y2.data(), rows);
                for (size_t i = 0; i < y0.size(); ++i)
                    QVERIFY2(bits(y0[i]) == bits(y1[i]) && bits(y0[i]) == bits(y2[i]),
                             qPrintable(QString("%1 blocks, %2 rows, %3 tokens: [%4] file layout %5, repacked %6, once %7")
                                            .arg(nb).arg(rows).arg(nt).arg(i)
                                            .arg(static_cast<double>(y0[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(y1[i]), 0, 'g', 9)
                                            .arg(static_cast<double>(y2[i]), 0, 'g', 9)));
            }
        }
    }
}

QTEST_APPLESS_MAIN(TestRepack)
#include "test_repack.moc"
