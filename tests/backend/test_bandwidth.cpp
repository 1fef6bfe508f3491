// The roofline probes bench reports (engine/core/bandwidth.h): they measure
// something finite for every weight type with kernels (read once or not) and
// say 0 for f32 (no quantized kernel to stream); the sustained read rate, a
// mean over the passes whose fastest is the peak, is never above the peak.
// Speeds themselves are bench's business.
#include <QtTest>

#include <cmath>

#include "core/bandwidth.h"
#include "kernels/quant.h"

using namespace strata;

class TestBandwidth : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void probes_measure_every_kernel_type() {
        const core::ReadBandwidth bw = core::measure_read_bandwidth(2, 16ull << 20);
        QVERIFY(std::isfinite(bw.peak_gbs) && bw.peak_gbs > 0.0);
        QVERIFY(std::isfinite(bw.sustained_gbs) && bw.sustained_gbs > 0.0);
        QVERIFY2(bw.sustained_gbs <= bw.peak_gbs * (1.0 + 1e-12), "sustained above the fastest pass");
        for (kernels::WeightType t : {kernels::WeightType::Q4_0, kernels::WeightType::Q8_0, kernels::WeightType::Q4_K,
                                      kernels::WeightType::Q6_K, kernels::WeightType::F16}) {
            for (bool once : {false, true}) {
                const double g = core::measure_gemm_gbs(2, t, 8ull << 20, once);
                QVERIFY2(std::isfinite(g) && g > 0.0, kernels::type_traits(t)->name);
            }
        }
        QCOMPARE(core::measure_gemm_gbs(2, kernels::WeightType::F32, 8ull << 20), 0.0);
        QCOMPARE(core::measure_gemm_gbs(2, kernels::WeightType::Q8_1, 8ull << 20), 0.0);  // no kernels
    }
};

QTEST_APPLESS_MAIN(TestBandwidth)
#include "test_bandwidth.moc"
