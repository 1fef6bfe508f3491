// The hybrid cost model's decisions with measured-rate inputs: the seed
// machine's rates (DESIGN.md §1: PCIe 3.0 at 13 GB/s, 100 GB/s of DDR4, a
// 936 GB/s GPU; an old dual-socket Xeon's ~0.5 TFLOP/s on int4 experts),
// where the right choice is known, and its edges.
#include <QtTest>

#include <limits>

#include "common/error.h"
#include "experts/hybrid_cost.h"

using namespace strata;
using namespace strata::experts;

namespace {
HybridRates seed_rates() {
    HybridRates r;
    r.link_bps = 13e9;
    r.cpu_bps = 100e9;
    r.cpu_flops = 0.5e12;
    r.gpu_bps = 936e9;
    r.gpu_flops = 100e12;
    return r;
}
constexpr double kExpertBytes = 50e6;   // one INT4 expert of the seed model
constexpr double kExpertParams = 95e6;
}  // namespace

class TestHybridCost : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void one_token_on_a_cold_expert_goes_to_the_cpu() {
        const MissCost c = choose_miss_path(seed_rates(), kExpertBytes, kExpertParams, 1);
        QVERIFY(c.path == MissPath::Cpu);
        QVERIFY(std::abs(c.cpu_s - 0.5e-3) < 1e-9);       // 50 MB at 100 GB/s
        QVERIFY(std::abs(c.link_s - 50e6 / 13e9) < 1e-9);  // 3.85 ms over PCIe 3.0
        QVERIFY(c.copy_s > c.cpu_s);
    }

    void sixteen_tokens_on_one_expert_go_over_the_link() {
        const MissCost c = choose_miss_path(seed_rates(), kExpertBytes, kExpertParams, 16);
        QVERIFY(c.path == MissPath::Link);
        QVERIFY(c.cpu_s > c.copy_s);  // 6.1 ms of CPU compute against 3.9 ms copy + GPU
    }

    void expected_reuse_favours_the_copy() {
        // One token, but the predictor expects the expert to stay hot: the
        // copy is shared by the uses to come.
        QVERIFY(choose_miss_path(seed_rates(), kExpertBytes, kExpertParams, 1, 0.0).path == MissPath::Cpu);
        QVERIFY(choose_miss_path(seed_rates(), kExpertBytes, kExpertParams, 1, 8.0).path == MissPath::Link);
    }

    void crossover_is_monotone() {
        const HybridRates r = seed_rates();
        const int64_t limit = cpu_token_limit(r, kExpertBytes, kExpertParams);
        QVERIFY(limit >= 1 && limit < 16);
        QVERIFY(choose_miss_path(r, kExpertBytes, kExpertParams, limit).path == MissPath::Cpu);
        QVERIFY(choose_miss_path(r, kExpertBytes, kExpertParams, limit + 1).path == MissPath::Link);
        // More expected reuse never raises the limit.
        QVERIFY(cpu_token_limit(r, kExpertBytes, kExpertParams, 2.0) <= limit);
        // A fast link (PCIe 5, ~50 GB/s) against a slow CPU: even one token is copied.
        HybridRates fast_link = r;
        fast_link.link_bps = 200e9;
        fast_link.cpu_bps = 40e9;
        QCOMPARE(cpu_token_limit(fast_link, kExpertBytes, kExpertParams), int64_t{0});
        // A CPU as fast as the GPU at any batch: always the CPU.
        HybridRates strong_cpu = r;
        strong_cpu.cpu_bps = r.gpu_bps;
        strong_cpu.cpu_flops = r.gpu_flops;
        QCOMPARE(cpu_token_limit(strong_cpu, kExpertBytes, kExpertParams), std::numeric_limits<int64_t>::max());
    }

    void bad_inputs_are_errors() {
        HybridRates r = seed_rates();
        r.link_bps = 0;
        QVERIFY(QString::fromStdString(r.validate()).contains("link_bps"));
        bool threw = false;
        try {
            choose_miss_path(r, kExpertBytes, kExpertParams, 1);
        } catch (const Error& e) {
            threw = QString::fromUtf8(e.what()).contains("link_bps");
        }
        QVERIFY(threw);
        r = seed_rates();
        r.cpu_flops = std::numeric_limits<double>::quiet_NaN();
        QVERIFY(QString::fromStdString(r.validate()).contains("cpu_flops"));
        threw = false;
        try {
            choose_miss_path(seed_rates(), kExpertBytes, kExpertParams, -1);
        } catch (const Error&) {
            threw = true;
        }
        QVERIFY(threw);
    }
};

QTEST_GUILESS_MAIN(TestHybridCost)
#include "test_hybrid_cost.moc"
