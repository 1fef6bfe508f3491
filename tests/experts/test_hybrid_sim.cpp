// The simulator's hybrid projection (analysis/hybrid_sim.h) on hand-built
// traces where the right placement is known, with the rates stated here as a
// measurement would give them: one token on a cold expert is computed on the
// CPU; 16 tokens of a batch on one expert are copied over the link; an expert
// that keeps coming back is computed on the CPU now and copied in the
// background; the three placements agree where they must (the same hits for
// transfer-only as simulate()'s replay, none for cpu-only).
#include <QtTest>

#include "common/error.h"
#include "analysis/hybrid_sim.h"
#include "analysis/simulator.h"
#include "analysis/synthetic_trace.h"

using namespace strata;
using namespace strata::experts;

namespace {

// One MoE layer of 8 experts, top-1; each sequence's tokens route the experts listed.
Trace trace_of(const std::vector<std::vector<int32_t>>& sequences) {
    Trace t;
    t.header.model_name = "hand-built";
    t.header.n_layer = 1;
    t.header.n_expert = 8;
    t.header.n_used = 1;
    t.header.expert_bytes = 1000;
    t.header.moe_layers = {0};
    for (size_t s = 0; s < sequences.size(); ++s)
        for (size_t i = 0; i < sequences[s].size(); ++i) {
            t.tokens.push_back({static_cast<int64_t>(s), static_cast<int64_t>(i), static_cast<int64_t>(i), -1, true});
            t.experts.push_back(sequences[s][i]);
            t.weights.push_back(1.0f);
            t.has_lookahead.push_back(0);
        }
    return t;
}

// seed-125b's machine and expert (50 MB, 94 M parameters), with a CPU of
// 100 GB/s and 0.5 TFLOP/s: one token costs the CPU 0.5 ms and the link
// 3.85 ms (copy and GPU), 16 tokens the CPU 6.0 ms.
// One MoE layer, and 4 GB of shared weights read every step (4.3 ms at 936
// GB/s), so a 3.85 ms background copy fits in a step.
HardwareProfile profile() {
    HardwareProfile p = hardware_profile("seed-125b");
    p.moe_layers = 1;
    p.n_layer = 1;
    p.n_expert = 8;
    p.n_used = 1;
    p.shared_bytes = 4e9;
    p.cpu_bps = 100e9;
    p.cpu_flops = 0.5e12;
    p.gpu_flops = 70e12;
    return p;
}

HybridSimResult run(const Trace& t, HybridMode mode, int64_t batch, int64_t slots = 4) {
    HybridSimOptions o;
    o.mode = mode;
    o.cache_slots = slots;
    o.batch = batch;
    return simulate_hybrid(t, o, profile());
}

}  // namespace

class TestHybridSim : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void one_token_on_a_cold_expert_runs_on_the_cpu() {
        const HybridSimResult r = run(trace_of({{3}}), HybridMode::Hybrid, 1);
        QCOMPARE(r.cpu, int64_t(1));
        QCOMPARE(r.link, int64_t(0));
        QCOMPARE(r.both, int64_t(0));
        QCOMPARE(r.hits, int64_t(0));
        QVERIFY(std::fabs(r.time_s - (0.5e-3 + 4e9 / 936e9)) < 1e-6);  // 50 MB at 100 GB/s, the shared weights
    }

    void sixteen_tokens_on_one_expert_go_over_the_link() {
        std::vector<std::vector<int32_t>> seqs(16, std::vector<int32_t>{5});
        const HybridSimResult r = run(trace_of(seqs), HybridMode::Hybrid, 16);
        QCOMPARE(r.steps, int64_t(1));
        QCOMPARE(r.tokens, int64_t(16));
        QCOMPARE(r.link, int64_t(1));
        QCOMPARE(r.cpu, int64_t(0));
        // Eight tokens stay on the CPU: 3.0 ms against 3.9 ms for the copy.
        std::vector<std::vector<int32_t>> eight(8, std::vector<int32_t>{5});
        QCOMPARE(run(trace_of(eight), HybridMode::Hybrid, 8).cpu, int64_t(1));
    }

    void an_expert_that_keeps_coming_back_is_copied_behind_the_cpu() {
        // Expert 2 every token: once its reuse over the window repays a copy
        // (9 earlier steps x (0.5 - 0.05) ms > 3.85 ms), it is computed on the
        // CPU and copied in the background, then found in VRAM.
        const HybridSimResult r = run(trace_of({std::vector<int32_t>(20, 2)}), HybridMode::Hybrid, 1);
        QCOMPARE(r.both, int64_t(1));
        QCOMPARE(r.link, int64_t(0));
        QCOMPARE(r.cpu, int64_t(9));
        QCOMPARE(r.hits, int64_t(20) - r.cpu - r.both);
        QVERIFY(r.hits > 0);
    }

    void placements_agree_where_they_must() {
        const Trace t = trace_of({{0, 1, 0, 2, 0, 1, 3, 0}, {4, 4, 5, 4}});
        const HybridSimResult link = run(t, HybridMode::Link, 1, 2);
        SimOptions so;
        so.cache_slots = 2;
        const SimResult sim = simulate(t, so);  // the same replay, one token at a time
        QCOMPARE(link.hits, sim.hits);
        QCOMPARE(link.link, sim.misses);
        const HybridSimResult cpu = run(t, HybridMode::Cpu, 1, 2);
        QCOMPARE(cpu.hits, int64_t(0));
        QCOMPARE(cpu.cpu, cpu.uses);
        // Hybrid is never slower than both: it can always take the cheaper path.
        const HybridSimResult hyb = run(t, HybridMode::Hybrid, 1, 2);
        QVERIFY(hyb.time_s <= std::max(link.time_s, cpu.time_s));
        QVERIFY(hyb.time_s <= cpu.time_s * 1.000001);
    }

    void static_placement_pins_the_hot_experts() {
        HybridSimOptions o;
        o.cache_slots = 1;
        o.pinned = {0};  // expert 0 of layer 0
        const HybridSimResult r = simulate_hybrid(trace_of({{0, 1, 0, 0}}), o, profile());
        QCOMPARE(r.hits, int64_t(3));
        QCOMPARE(r.cpu, int64_t(1));
    }

    // make-trace: the locality asked for is the locality measured, and the same seed gives the same trace.
    void synthetic_traces_have_the_locality_asked_for() {
        SyntheticTraceSpec s;
        s.moe_layers = 4;
        s.sequences = 4;
        s.tokens = 200;
        s.repeat = 1.0;
        s.skew = 0.0;
        QVERIFY(measure_locality(synthetic_trace(s)).repeat > 0.99);  // every selection repeats
        s.repeat = 0.0;
        const TraceLocality uniform = measure_locality(synthetic_trace(s));
        QVERIFY2(std::fabs(uniform.repeat - 2.0 / 64.0) < 0.01, qPrintable(QString::number(uniform.repeat)));  // chance: k/E
        s.repeat = 0.38;
        s.skew = 1.0;
        const Trace a = synthetic_trace(s), b = synthetic_trace(s);
        QVERIFY(a.experts == b.experts);
        const double rep = measure_locality(a).repeat;
        QVERIFY2(rep > 0.40 && rep < 0.50, qPrintable(QString::number(rep)));
        s.used = 65;
        QVERIFY_THROWS_EXCEPTION(Error, synthetic_trace(s));
    }

    void bad_input_is_refused() {
        HardwareProfile p = profile();
        p.cpu_flops = 0;
        HybridSimOptions o;
        QVERIFY_THROWS_EXCEPTION(Error, simulate_hybrid(trace_of({{1}}), o, p));
        o.batch = 0;
        QVERIFY_THROWS_EXCEPTION(Error, simulate_hybrid(trace_of({{1}}), o, profile()));
    }
};

QTEST_GUILESS_MAIN(TestHybridSim)
#include "test_hybrid_sim.moc"
