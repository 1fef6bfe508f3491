// The roofline probes bench reports (engine/core/bandwidth.h): they measure
// something finite for every weight type with kernels (read once or not) and
// say 0 for f32 (no quantized kernel to stream); the sustained read rate, a
// mean over the passes whose fastest is the peak, is never above the peak.
// Speeds themselves are bench's business. The kernel tuning
// (engine/core/kernel_tuning.h) measures, caches, reads its cache, survives a
// corrupt one, and applies what it picked.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/bandwidth.h"
#include "core/kernel_tuning.h"
#include "strata/settings.h"
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

    void kernel_tuning_measures_caches_and_applies() {
        using core::KernelTuningMode;
        QTemporaryDir dir;
        const std::string cache = (dir.path() + "/strata/kernel-tuning.json").toStdString();
        kernels::set_kernel_tuning({});
        const core::KernelTuningReport m = core::tune_kernels(2, kernels::WeightType::Q4_K, 1024, KernelTuningMode::Measure, cache);
        QCOMPARE(m.source, std::string("measured"));
        QVERIFY(m.ms > 0.0 && m.gbs > 0.0 && m.default_gbs > 0.0);
        QVERIFY(kernels::kernel_tuning() == m.tuning);
        QVERIFY(QFile::exists(QString::fromStdString(cache)));
        const nlohmann::json j = nlohmann::json::parse(m.to_json());
        for (const char* key : {"source", "cpu", "level", "type", "threads", "prefetch_bytes", "read_once_nta", "grain_rows",
                                "loop_bits", "gbs", "default_gbs"})
            QVERIFY2(j.contains(key), key);
        QCOMPARE(j["type"].get<std::string>(), std::string("q4_k"));

        // The next load of the same type reads the cache: no time spent.
        kernels::set_kernel_tuning({});
        const core::KernelTuningReport c = core::tune_kernels(2, kernels::WeightType::Q4_K, 1024, KernelTuningMode::Auto, cache);
        QCOMPARE(c.source, std::string("cached"));
        QCOMPARE(c.ms, 0.0);
        QVERIFY(c.tuning == m.tuning);
        QVERIFY(kernels::kernel_tuning() == m.tuning);

        // Off: the built-in defaults; f32 and the reference level: nothing to tune.
        const core::KernelTuningReport off = core::tune_kernels(2, kernels::WeightType::Q4_K, 1024, KernelTuningMode::Off, cache);
        QCOMPARE(off.source, std::string("default"));
        QVERIFY(kernels::kernel_tuning() == kernels::KernelTuning{});
        const core::KernelTuningReport f32 = core::tune_kernels(2, kernels::WeightType::F32, 1024, KernelTuningMode::Auto, cache);
        QCOMPARE(f32.source, std::string("default"));
        QVERIFY(f32.note.find("f32") != std::string::npos);

        // A corrupt cache is measured again and replaced, never an error.
        { std::ofstream(cache, std::ios::trunc) << "{not json"; }
        const core::KernelTuningReport again = core::tune_kernels(2, kernels::WeightType::Q4_K, 1024, KernelTuningMode::Auto, cache);
        QCOMPARE(again.source, std::string("measured"));
        std::ifstream f(cache);
        std::stringstream text;
        text << f.rdbuf();
        const nlohmann::json written = nlohmann::json::parse(text.str());
        QCOMPARE(written["version"].get<int>(), 1);
        QCOMPARE(written["entries"].size(), size_t{1});
        kernels::set_kernel_tuning({});

        core::KernelTuningMode mode;
        QVERIFY(!core::parse_kernel_tuning_mode("fast", &mode));
        EngineSettings s;
        s.kernel_tuning = "fast";
        QVERIFY(s.validate().find("kernel_tuning 'fast'") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestBandwidth)
#include "test_bandwidth.moc"
