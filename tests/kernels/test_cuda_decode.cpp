// The CUDA kernels' per-element decoders (kernels/cuda/dequant_elem.h),
// compiled for the host: every element of every core format equals the
// reference decoder's, bit for bit, over random blocks (every nibble and
// bit pattern, scales of both signs, subnormal and special halves). Runs
// everywhere, GPU or not, so the GPU kernels build on a decoding checked here.
#include <QtTest>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/dequant_elem.h"
#include "kernels/quant.h"
#include "kernels/quant_types.h"
#include "kernels/ref/quant_ref.h"

using namespace strata;
namespace kc = strata::kernels::cuda;

namespace {

// Byte offsets of the half-precision scale fields in a block (random bytes
// there could be NaN, which compares unequal to itself).
std::vector<int> half_fields(kc::QType t) {
    switch (t) {
        case kc::QType::Q4_0: case kc::QType::Q5_0: case kc::QType::Q8_0: return {0};
        case kc::QType::Q4_1: case kc::QType::Q5_1: case kc::QType::Q4_K: case kc::QType::Q5_K: return {0, 2};
        case kc::QType::Q2_K: return {80, 82};
        case kc::QType::Q3_K: return {108};
        case kc::QType::Q6_K: return {208};
        default: return {};
    }
}

template <kc::QType T>
float elem(const uint8_t* row, int64_t j) { return kc::row_elem<T>(row, j); }

float elem_of(kc::QType t, const uint8_t* row, int64_t j) {
    switch (t) {
        case kc::QType::F32: return elem<kc::QType::F32>(row, j);
        case kc::QType::F16: return elem<kc::QType::F16>(row, j);
        case kc::QType::BF16: return elem<kc::QType::BF16>(row, j);
        case kc::QType::Q4_0: return elem<kc::QType::Q4_0>(row, j);
        case kc::QType::Q4_1: return elem<kc::QType::Q4_1>(row, j);
        case kc::QType::Q5_0: return elem<kc::QType::Q5_0>(row, j);
        case kc::QType::Q5_1: return elem<kc::QType::Q5_1>(row, j);
        case kc::QType::Q8_0: return elem<kc::QType::Q8_0>(row, j);
        case kc::QType::Q2_K: return elem<kc::QType::Q2_K>(row, j);
        case kc::QType::Q3_K: return elem<kc::QType::Q3_K>(row, j);
        case kc::QType::Q4_K: return elem<kc::QType::Q4_K>(row, j);
        case kc::QType::Q5_K: return elem<kc::QType::Q5_K>(row, j);
        case kc::QType::Q6_K: return elem<kc::QType::Q6_K>(row, j);
        case kc::QType::MXFP4: return elem<kc::QType::MXFP4>(row, j);
    }
    return 0;
}

const kc::QType kAll[] = {kc::QType::F32,  kc::QType::F16,  kc::QType::BF16, kc::QType::Q4_0, kc::QType::Q4_1,
                          kc::QType::Q5_0, kc::QType::Q5_1, kc::QType::Q8_0, kc::QType::Q2_K, kc::QType::Q3_K,
                          kc::QType::Q4_K, kc::QType::Q5_K, kc::QType::Q6_K, kc::QType::MXFP4};

}  // namespace

class TestCudaDecode : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void block_sizes_match_the_type_table() {
        for (kc::QType t : kAll) {
            const auto* tr = kernels::type_traits(static_cast<kernels::WeightType>(t));
            QVERIFY(tr);
            QCOMPARE(int64_t(kc::block_elems(t)), tr->block_elems);
            QCOMPARE(int64_t(kc::block_bytes(t)), tr->block_bytes);
            QVERIFY(kc::known_qtype(static_cast<uint32_t>(t)));
        }
        QVERIFY(!kc::known_qtype(9));   // q8_1: no decoder
        QVERIFY(!kc::known_qtype(63));  // a repacked CPU layout
    }

    void every_element_equals_the_reference() {
        std::mt19937 rng(1234);
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
        for (kc::QType t : kAll) {
            const int64_t blocks = 6;
            const int64_t n = blocks * kc::block_elems(t);
            for (int round = 0; round < 20; ++round) {
                std::vector<uint8_t> row(static_cast<size_t>(blocks * kc::block_bytes(t)));
                for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
                for (int64_t b = 0; b < blocks; ++b)
                    for (int off : half_fields(t)) {
                        // Mostly ordinary scales; now and then a subnormal or zero.
                        float v = scale(rng);
                        if (round % 7 == 3) v *= 1e-6f;
                        if (round % 11 == 5) v = 0.0f;
                        const uint16_t h = kernels::fp32_to_fp16_ref(v);
                        std::memcpy(&row[static_cast<size_t>(b * kc::block_bytes(t) + off)], &h, 2);
                    }
                std::vector<float> want(static_cast<size_t>(n));
                kernels::dequantize_row(static_cast<kernels::WeightType>(t), row.data(), want.data(), n);
                for (int64_t j = 0; j < n; ++j) {
                    const float got = elem_of(t, row.data(), j);
                    uint32_t a, b;
                    std::memcpy(&a, &got, 4);
                    std::memcpy(&b, &want[static_cast<size_t>(j)], 4);
                    if (a != b)
                        QFAIL(qPrintable(QStringLiteral("%1 element %2 (round %3): %4 != reference %5")
                                             .arg(kernels::type_traits(static_cast<kernels::WeightType>(t))->name)
                                             .arg(j).arg(round).arg(double(got)).arg(double(want[size_t(j)]))));
                }
            }
        }
    }

    void half_widening_is_exact_everywhere() {
        for (uint32_t h = 0; h <= 0xFFFF; ++h) {
            const float a = kc::half_bits_to_float(static_cast<uint16_t>(h));
            const float b = kernels::fp16_to_fp32_ref(static_cast<uint16_t>(h));
            QCOMPARE(kc::float_to_bits(a), kc::float_to_bits(b));
        }
    }
};

QTEST_GUILESS_MAIN(TestCudaDecode)
#include "test_cuda_decode.moc"
