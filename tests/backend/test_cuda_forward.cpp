// The CUDA forward pass against the fixtures and the CPU. Built twice:
//  - test_cuda_on_cpu_forward (labels unit slow, STRATA_CUDA_ON_CPU):
//    engine/backend/cuda/cuda_forward.cpp, its runtime wrapper
//    (cuda_runtime.cpp) and the kernels of kernels/cuda, all unchanged, run
//    on the CPU by tests/cuda_on_cpu (each CUDA thread a fiber; kernel
//    arguments and copies checked against device allocations), so the pass
//    and its kernels run in every CI run without a GPU;
//  - test_cuda_forward (label gpu, STRATA_TEST_REAL_GPU): the same checks on
//    the real runtime and kernels, plus Engine::load on the GPU (its
//    self-check against the CPU); skipped, saying why, without a GPU.
// The checks:
//  - every fixture model within the fixtures README's tolerances (float
//    activations: the README's bounds for quantized files);
//  - the VRAM expert cache at 25% and at the minimum (waves within a layer)
//    gives the same greedy ids as every expert resident, and counts its
//    traffic; its ledger rows are where the plan puts them;
//  - hybrid placement: each miss computed on the CPU or copied as the cost
//    model says for the rates given (one token on a cold expert: the CPU;
//    many tokens: the link; expected reuse: both), with the text of every
//    expert resident, its paths counted and marked for the heat map;
//  - three tiers: host RAM a cache of experts over the model file (loaded on
//    the store's transfer threads), with either placement, the same text;
//  - batches of several sequences equal each sequence alone (block tables);
//  - ops the GPU leaves to the CPU (model/op_fallback.h) give the GPU's logits;
//  - qwen2moe (biases, gated shared expert), qwen3moe (per-head Q/K norm) and
//    olmoe (whole Q/K norm) files from make-model against the CPU.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include "backend/cuda/cuda_forward.h"
#include "backend/device.h"
#ifdef STRATA_TEST_REAL_GPU
#include "core/engine.h"
#endif
#include "common/error.h"
#include "experts/expert_store.h"
#include "plan/plan.h"
#include "fixture_check.h"
#include "kernels/quant_types.h"
#include "runner/context.h"
#include "sched/drafter.h"
#include "sched/embedding.h"
#include "sched/speculative.h"
#include "model/make_model.h"
#include "model/op_fallback.h"
#include "model/model.h"
#include "error_of.h"
#include "test_support.h"
#include "experts/expert_cache.h"

using namespace strata;
using strata::test::error_of;
namespace bc = strata::backend::cuda;

#ifndef STRATA_TEST_REAL_GPU
#include "cuda_on_cpu/control.h"
// Makes the n-th kernel launch from now fail, as a lost device would.
using cuda_on_cpu::fail_launch_in;
#endif

namespace {

// A context whose forward pass is the CUDA one (on the CPU or a GPU), with its KV tables
// and ledger kept alive beside it.
struct GpuContext {
    memory::Ledger ledger;
    std::unique_ptr<experts::ExpertStore> host_cache;
    std::unique_ptr<kv::KvCache> kv;
    std::unique_ptr<model::Context> ctx;
    model::DeviceForward* device = nullptr;
};

// Placement "transfer" unless `hybrid` gives the rates for "auto".
std::unique_ptr<GpuContext> gpu_context(const model::Model& m, int64_t expert_slots = -1, int64_t n_ctx = 256,
                                        int64_t n_batch = 64, int64_t kv_tokens = 0, int64_t cpu_moe_layers = 0,
                                        const experts::HybridRates* hybrid = nullptr, int64_t host_slots = 0,
                                        std::vector<model::Op> cpu_ops = {}) {
    auto g = std::make_unique<GpuContext>();
    if (host_slots > 0) {  // three tiers: host RAM caches experts over the file
        experts::ExpertStoreSettings hs;
        hs.slots = host_slots;
        hs.repack = false;
        g->host_cache = std::make_unique<experts::ExpertStore>(m, g->ledger, memory::Tier::Slow, hs);
    }
    kv::KvCacheParams kp = model::kv_cache_params(m.config(), 0, 16, kv::KvType::F32);
    kp.n_blocks = kp.blocks_for(kv_tokens > 0 ? kv_tokens : n_ctx);
    kp.host_storage = false;
    g->kv = std::make_unique<kv::KvCache>(kp, &g->ledger, memory::Tier::Fast);
    bc::CudaForwardOptions o;
    o.n_batch = n_batch;
    o.expert_slots = expert_slots;
    o.cpu_moe_layers = cpu_moe_layers;
    o.cpu_threads = 2;
    o.placement = hybrid ? "auto" : "transfer";
    if (hybrid) o.rates = *hybrid;
    o.host_cache = g->host_cache.get();
    o.cpu_ops = std::move(cpu_ops);
    // Hand-built rates stay as given; measured CPU rates (cpu_bps 0) follow the host.
    o.refresh_rates = hybrid && hybrid->cpu_bps <= 0;
    auto fwd = bc::make_cuda_forward(m, *g->kv, g->ledger, o);
    g->device = fwd.get();
    model::ContextParams cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    g->ctx = std::make_unique<model::Context>(m, cp, &m.weights(), nullptr, g->kv.get(), std::move(fwd));
    return g;
}

std::vector<int32_t> greedy(model::Context& ctx, const std::vector<int32_t>& prompt, int n, int64_t vocab) {
    ctx.clear();
    const float* logits = ctx.decode(prompt, false);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t next = test::argmax(logits, vocab);
        out.push_back(next);
        logits = ctx.decode({&next, 1}, false);
    }
    return out;
}

// Mean |a - b| over the standard deviation of b (the fixtures' measure for quantized files).
double mean_diff_of_spread(const float* a, const float* b, size_t n) {
    double diff = 0, sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) {
        diff += std::fabs(double(a[i]) - b[i]);
        sum += b[i];
        sq += double(b[i]) * b[i];
    }
    const double mean = sum / double(n);
    return diff / double(n) / std::sqrt(std::max(1e-30, sq / double(n) - mean * mean));
}

double max_diff(const float* a, const float* b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
    return m;
}

}  // namespace

class TestCudaForward : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

private Q_SLOTS:
    // STRATA_TEST_SHARD="i/n": this process runs the i-th of every n test
    // cases (a function, or one row of a data-driven one), counted in the
    // order they run, which every process shares (CTest runs the emulated
    // suite as two processes side by side, one a core; unset: all of them).
    void init() {
        static const std::pair<int, int> shard = [] {
            int i = 0, n = 1;
            const QByteArray s = qgetenv("STRATA_TEST_SHARD");
            if (!s.isEmpty() && (std::sscanf(s.constData(), "%d/%d", &i, &n) != 2 || n < 1 || i < 0 || i >= n))
                qFatal("STRATA_TEST_SHARD must be i/n with 0 <= i < n, not '%s'", s.constData());
            return std::pair{i, n};
        }();
        static int cases = 0;
        if (cases++ % shard.second != shard.first) QSKIP("run by another shard (STRATA_TEST_SHARD)");
    }

#ifdef STRATA_TEST_REAL_GPU
    void initTestCase() {
        const backend::DeviceProbe& p = backend::probe_devices();
        if (p.gpus.empty()) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(p.why_none)));
        qInfo("%s", backend::describe_gpu(p.gpus[0]).c_str());
    }

    // The engine on the GPU: its plan against VRAM, the tiers it names, and
    // the self-check against the CPU, which a correct GPU passes.
    void engine_on_the_gpu() {
        STRATA_REQUIRE_FIXTURES();
        EngineSettings s;
        s.device = "cuda:0";
        s.n_ctx = 256;
        auto e = core::Engine::load(test::fixture_path("models/moe-tiny-q8_0.gguf"), s);
        QVERIFY2(e->device().rfind("device cuda:0", 0) == 0, e->device().c_str());
        QCOMPARE(e->gpu_index(), 0);
        QVERIFY(e->ledger().description(memory::Tier::Fast).rfind("VRAM (", 0) == 0);
        QVERIFY(e->ledger().reserved(memory::Account::WeightsShared, memory::Tier::Fast) > 0);
        const std::vector<int32_t> p = e->vocab().encode("Once upon a time", true);
        const float* l = e->context().decode(p, false);
        QVERIFY(std::isfinite(l[0]));
        const TelemetrySnapshot t = e->snapshot();
        QCOMPARE(QString::fromStdString(t.fast_tier), QString::fromStdString(e->ledger().description(memory::Tier::Fast)));
    }
#endif

    void fixtures_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("tolerance");
        QTest::newRow("stories260K") << "stories260K" << int(test::Tolerance::F32);
        QTest::newRow("moe-tiny-f32") << "moe-tiny-f32" << int(test::Tolerance::F32);
        QTest::newRow("qwen2moe-tiny-f32") << "qwen2moe-tiny-f32" << int(test::Tolerance::F32);
        QTest::newRow("moe-tiny-f16") << "moe-tiny-f16" << int(test::Tolerance::F16);
        QTest::newRow("moe-tiny-q8_0") << "moe-tiny-q8_0" << int(test::Tolerance::Quantized);
        QTest::newRow("moe-tiny-q4_0") << "moe-tiny-q4_0" << int(test::Tolerance::Quantized);
        QTest::newRow("moe-small-q4_k_m") << "moe-small-q4_k_m" << int(test::Tolerance::Quantized);
    }

    void fixtures() {
        QFETCH(QString, name);
        QFETCH(int, tolerance);
        check_on_gpu(name, test::Tolerance(tolerance));
    }

    // The families with their own ops, through the same architecture files
    // as the CPU: latent attention and scored routing (DeepSeek-V2/V3),
    // sinks, sliding windows, clamped biased experts and MXFP4 (gpt-oss).
    void deepseek2_tiny_f32() { check_on_gpu("deepseek2-tiny-f32", test::Tolerance::F32); }
    void deepseek3_tiny_f32() { check_on_gpu("deepseek3-tiny-f32", test::Tolerance::F32); }
    void deepseek3_tiny_q4_k_m() { check_on_gpu("deepseek3-tiny-q4_k_m", test::Tolerance::Quantized); }
    void gptoss_tiny_f32() { check_on_gpu("gptoss-tiny-f32", test::Tolerance::F32); }
    void gptoss_tiny_mxfp4() { check_on_gpu("gptoss-tiny-mxfp4", test::Tolerance::Quantized); }
    // The 2026 families whose ops the others already had: partial RoPE, Q/K
    // norms per head or over the projection, the selection bias on sigmoid
    // and softmax routing, leading dense layers, shared experts.
    void qwen3moe_tiny_f32() { check_on_gpu("qwen3moe-tiny-f32", test::Tolerance::F32); }
    void glm4moe_tiny_f32() { check_on_gpu("glm4moe-tiny-f32", test::Tolerance::F32); }
    void minimaxm2_tiny_f32() { check_on_gpu("minimaxm2-tiny-f32", test::Tolerance::F32); }
    void ernie45moe_tiny_f32() { check_on_gpu("ernie45moe-tiny-f32", test::Tolerance::F32); }
    // RoPE frequency divisors, NoPE layers, Q/K norms after RoPE, experts weighted before their FFN.
    void llama4_tiny_f32() { check_on_gpu("llama4-tiny-f32", test::Tolerance::F32); }
    // Gated delta nets over each sequence's recurrent state in VRAM, the attention's output gate.
    void qwen35moe_tiny_f32() { check_on_gpu("qwen35moe-tiny-f32", test::Tolerance::F32); }

private:
    // A fixture's logits and greedy text on the GPU path, within the fixtures'
    // tolerances: every teacher-forced position and the greedy tokens; on
    // the CPU-emulated GPU the first 16 of each prompt's 32 (the CPU checks
    // all 32 there; each emulated decode step is some ten thousand fiber
    // switches, and the second 16 of 14 fixtures would add over a minute).
    void check_on_gpu(const QString& name, test::Tolerance tolerance) {
        STRATA_REQUIRE_FIXTURES();
        // A GPU machine may carry a subset of the fixtures (packaging/gpu-bundle.sh).
        if (!QFileInfo::exists(test::fixtures_dir() + "/models/" + name + ".gguf"))
            QSKIP(qPrintable(name + " is not in this fixture set"));
        std::vector<std::unique_ptr<GpuContext>> keep;
        test::check_fixture(
            name, test::Tolerance(tolerance),
            [&keep](const model::Model& m) {
                auto g = gpu_context(m);
                // The fixture check owns the context; its KV tables and ledger stay here.
                std::unique_ptr<model::Context> ctx = std::move(g->ctx);
                keep.push_back(std::move(g));
                return ctx;
            },
            /*tight=*/false, kGpuGreedySteps);
    }
#ifdef STRATA_CUDA_ON_CPU
    // Every decode step is every kernel launch emulated in fibers: 8 greedy
    // tokens per prompt check the decode path (KV appends, positions) at half
    // the cost of 16; the real GPU checks them all.
    static constexpr int kGpuGreedySteps = 8;
#else
    static constexpr int kGpuGreedySteps = -1;
#endif

private Q_SLOTS:

    // The VRAM cache as the engine sees any expert cache (experts::ExpertCache):
    // its size changes live within the slots reserved at load and its policy
    // at any time, the text stays that of every expert resident; what cannot
    // apply now is refused, saying when it applies.
    void vram_cache_settings_apply_live() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-q8_0.gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away,", true);
        auto all = gpu_context(*m);
        const std::vector<int32_t> want = greedy(*all->ctx, prompt, 16, c.n_vocab);
        QVERIFY(bc::vram_expert_cache(all->device) != nullptr);
        QVERIFY(error_of([&] { bc::vram_expert_cache(all->device)->set_slots(4); }).contains("next load"));

        const int64_t total = c.n_expert * c.n_layer;
        auto g = gpu_context(*m, total / 2);
        experts::ExpertCache* cache = bc::vram_expert_cache(g->device);
        QVERIFY(cache);
        QCOMPARE(QString::fromStdString(cache->where()), QStringLiteral("VRAM"));
        QCOMPARE(cache->slots(), total / 2);
        QCOMPARE(cache->experts_total(), total);
        QCOMPARE(greedy(*g->ctx, prompt, 16, c.n_vocab), want);
        auto resident = [&] {
            int64_t n = 0;
            for (experts::Residency r : cache->residency()) n += r == experts::Residency::Resident;
            return n;
        };
        QVERIFY(resident() > 0 && resident() <= total / 2);

        cache->set_slots(c.n_expert_used);  // shrink: the experts in the slots given up leave
        QCOMPARE(cache->slots(), c.n_expert_used);
        QVERIFY(resident() <= c.n_expert_used);
        cache->set_policy("lfu");
        QCOMPARE(greedy(*g->ctx, prompt, 16, c.n_vocab), want);
        cache->set_slots(total / 2);  // and back, within what was reserved at load
        cache->set_policy("arc");
        QCOMPARE(greedy(*g->ctx, prompt, 16, c.n_vocab), want);
        QCOMPARE(cache->stats().demanded, g->device->expert_stats().demanded);

        QVERIFY(error_of([&] { cache->set_slots(total / 2 + 1); }).contains("applies at the next load"));
        QVERIFY(error_of([&] { cache->set_slots(c.n_expert_used - 1); }).contains("at least"));
        QVERIFY(error_of([&] { cache->set_policy("mru"); }).contains("mru"));
        QVERIFY(error_of([&] { cache->set_pinned({0}); }).contains("RAM"));
        cache->set_pinned({});  // no pins: nothing to refuse
        QCOMPARE(cache->slots(), total / 2);
    }

    // Llama 4's experts weighted before their FFN, qwen35moe's delta nets,
    // with the VRAM cache at 25% of the experts: the text of every expert resident.
    void quarter_cache_same_text_data() {
        QTest::addColumn<QString>("name");
        QTest::newRow("llama4") << "llama4-tiny-f32";
        QTest::newRow("qwen35moe") << "qwen35moe-tiny-f32";
    }
    void quarter_cache_same_text() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, name);
        auto m = model::Model::load(test::fixture_path("models/" + name + ".gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away,", true);
        const std::vector<int32_t> want = greedy(*gpu_context(*m)->ctx, prompt, 16, c.n_vocab);
        int64_t moe_layers = 0;
        for (const model::LayerWeights& L : m->weights().layers) moe_layers += L.ffn == model::FfnKind::Moe;
        auto cached = gpu_context(*m, c.n_expert * moe_layers / 4);
        QCOMPARE(greedy(*cached->ctx, prompt, 16, c.n_vocab), want);
        QVERIFY(cached->device->expert_stats().hits < cached->device->expert_stats().demanded);
    }

    // The VRAM expert cache gives the text of every expert resident, at 25%
    // of the experts and at the fewest slots a token needs (so a layer's
    // experts come in waves and evict one another), and accounts for itself.
    void expert_cache_same_text() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-q8_0.gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away,", true);
        auto all = gpu_context(*m);
        const std::vector<int32_t> want = greedy(*all->ctx, prompt, 24, c.n_vocab);
        QCOMPARE(all->device->expert_stats().bytes_loaded, uint64_t{0});
        const int64_t total = c.n_expert * c.n_layer;
        for (int64_t slots : {total / 4, c.n_expert_used}) {
            auto cached = gpu_context(*m, slots);
            QCOMPARE(greedy(*cached->ctx, prompt, 24, c.n_vocab), want);
            const model::DeviceExpertStats st = cached->device->expert_stats();
            QCOMPARE(st.slots, slots);
            QCOMPARE(st.experts_total, total);
            QVERIFY(st.demanded > 0);
            QVERIFY2(st.hits < st.demanded, "a cache smaller than the experts must miss");
            // Every miss copies one expert over the link (this file's experts are all one size).
            QCOMPARE(st.bytes_loaded, (st.demanded - st.hits) * (m->sizes().bytes_experts / uint64_t(total)));
            // Slots in the fast tier, every expert's home in the slow one (pinned host RAM).
            QCOMPARE(cached->ledger.reserved(memory::Account::ExpertsCache, memory::Tier::Fast),
                     static_cast<uint64_t>(slots) * st.slot_bytes);
            QCOMPARE(cached->ledger.reserved(memory::Account::ExpertsHome, memory::Tier::Slow), m->sizes().bytes_experts);
            // Residency as the app's heat map shows it: as many experts as slots at most.
            int64_t resident = 0;
            for (experts::Residency r : bc::vram_expert_cache(cached->device)->residency())
                resident += r == experts::Residency::Resident;
            QVERIFY(resident <= slots && resident >= c.n_expert_used);
        }
    }

    // Prefetch from a lookahead (the next layer's router, one layer early)
    // into the VRAM cache: the same text, and the guesses are copies that the
    // next layer then uses.
    void prefetch_into_the_cache() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-q8_0.gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away,", true);
        auto all = gpu_context(*m);
        const std::vector<int32_t> want = greedy(*all->ctx, prompt, 24, c.n_vocab);
        auto g = gpu_context(*m, c.n_expert * c.n_layer / 2);
        model::DeviceForward* dev = g->device;
        experts::ExpertCache* cache = bc::vram_expert_cache(dev);
        int64_t step_tokens = 0;
        g->ctx->set_step_begin_observer([&](int64_t n) { step_tokens = n; });
        g->ctx->set_lookahead_observer([&](const model::LookaheadEvent& e) {
            if (step_tokens != 1) return;  // as the engine: one-token steps prefetch
            std::vector<int32_t> ids(static_cast<size_t>(e.n_expert));
            std::iota(ids.begin(), ids.end(), 0);
            std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return e.probs[a] > e.probs[b]; });
            std::vector<experts::ExpertKey> keys;
            for (int64_t i = 0; i < c.n_expert_used; ++i)
                keys.push_back(static_cast<experts::ExpertKey>(e.layer * c.n_expert + ids[static_cast<size_t>(i)]));
            cache->prefetch(e.layer, keys);
        });
        QCOMPARE(greedy(*g->ctx, prompt, 24, c.n_vocab), want);
        const model::DeviceExpertStats st = dev->expert_stats();
        qInfo("prefetch: %llu copies, %llu used; hits %llu of %llu", (unsigned long long)st.prefetch_loads,
              (unsigned long long)st.prefetch_used, (unsigned long long)st.hits, (unsigned long long)st.demanded);
        QVERIFY(st.prefetch_loads > 0);
        QVERIFY(st.prefetch_used > 0);
        QVERIFY(st.prefetch_used <= st.prefetch_loads);
    }

    // Experts placed on the CPU (--cpu-moe, --n-cpu-moe 1): the same text as
    // on the GPU, none of those layers' experts in the fast tier, all of them
    // in host RAM (the slow tier), and with a VRAM cache over the rest.
    void experts_on_the_cpu() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/qwen2moe-tiny-f32.gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Lily and Tom went to the park to play.", true);
        auto gpu = gpu_context(*m);
        const float* lg = gpu->ctx->decode(prompt, true);
        const std::vector<float> want(lg, lg + prompt.size() * c.n_vocab);
        const std::vector<int32_t> text = greedy(*gpu->ctx, prompt, 16, c.n_vocab);
        const uint64_t all_experts = m->sizes().bytes_experts;
        for (int64_t layers : {int64_t{-1}, int64_t{1}}) {
            for (int64_t slots : {int64_t{-1}, c.n_expert_used}) {
                auto mixed = gpu_context(*m, slots, 256, 64, 0, layers);
                const float* lm = mixed->ctx->decode(prompt, true);
                QVERIFY2(max_diff(lm, want.data(), want.size()) < 1e-4, qPrintable(QString("layers %1").arg(layers)));
                QCOMPARE(greedy(*mixed->ctx, prompt, 16, c.n_vocab), text);
                const model::DeviceExpertStats st = mixed->device->expert_stats();
                QVERIFY(st.cpu_computed > 0);
                const uint64_t on_cpu = layers < 0 ? all_experts : all_experts / uint64_t(c.n_layer);
                // The CPU layers' experts live in host RAM, in the slow tier.
                QVERIFY(mixed->ledger.reserved(memory::Account::ExpertsHome, memory::Tier::Slow) >= on_cpu);
                if (layers < 0) {
                    QCOMPARE(mixed->ledger.reserved(memory::Account::ExpertsCache, memory::Tier::Fast), uint64_t{0});
                    QCOMPARE(st.bytes_loaded, uint64_t{0});
                }
            }
        }
    }

    // Hybrid placement, rates chosen so the right path is known. The file's
    // experts are all one size: `one` is the time each rate gives one
    // expert over one token.
    static experts::HybridRates rates_for(const model::Model& m, double cpu_s, double link_s, double gpu_s,
                                          double cpu_flop_s = 0, double gpu_flop_s = 0) {
        const model::FfnMatrices f = m.weights().layers[0].expert(0);
        const double bytes = double(f.gate.slab_bytes() + f.up.slab_bytes() + f.down.slab_bytes());
        const double flops = 2.0 * double(f.gate.rows * f.gate.cols + f.up.rows * f.up.cols + f.down.rows * f.down.cols);
        experts::HybridRates r;
        r.cpu_bps = bytes / cpu_s;
        r.link_bps = bytes / link_s;
        r.gpu_bps = bytes / gpu_s;
        r.cpu_flops = cpu_flop_s > 0 ? flops / cpu_flop_s : 1e30;  // 0: never compute-bound
        r.gpu_flops = gpu_flop_s > 0 ? flops / gpu_flop_s : 1e30;
        return r;
    }

    void hybrid_placement_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("qwen2moe-tiny-f32") << "qwen2moe-tiny-f32";
        QTest::newRow("moe-tiny-q8_0") << "moe-tiny-q8_0";
    }

    void hybrid_placement() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, model);
        auto m = model::Model::load(test::fixture_path("models/" + model + ".gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away, Lily and Tom", true);
        auto all = gpu_context(*m);
        const float* la = all->ctx->decode(prompt, true);
        const std::vector<float> want_logits(la, la + prompt.size() * c.n_vocab);
        const std::vector<int32_t> want = greedy(*all->ctx, prompt, 24, c.n_vocab);
        // The text of every expert resident: F32, the same greedy ids; q8_0
        // (the CPU quantizes its activations to 8 bits, the GPU does not),
        // the fixtures' measure for quantized files, teacher-forced over the
        // prompt and that text: top-1 agreement and mean |d| against the spread.
        std::vector<int32_t> forced = prompt;
        forced.insert(forced.end(), want.begin(), want.end());
        all->ctx->clear();
        const float* lf = all->ctx->decode(forced, true);
        const std::vector<float> want_forced(lf, lf + forced.size() * c.n_vocab);
        all->ctx->clear();
        const bool f32 = model.endsWith("f32");
        auto same_text = [&](GpuContext& g) {
            if (f32) {
                QCOMPARE(greedy(*g.ctx, prompt, 24, c.n_vocab), want);
                return;
            }
            g.ctx->clear();
            (void)greedy(*g.ctx, prompt, 24, c.n_vocab);  // the same steps as the F32 case
            g.ctx->clear();
            const float* l = g.ctx->decode(forced, true);
            int64_t agree = 0;
            for (size_t t = 0; t < forced.size(); ++t)
                agree += test::argmax(l + t * c.n_vocab, c.n_vocab) == test::argmax(want_forced.data() + t * c.n_vocab, c.n_vocab);
            QVERIFY2(double(agree) >= 0.95 * double(forced.size()), qPrintable(QString("top-1 agreement %1 of %2").arg(agree).arg(forced.size())));
            QVERIFY(mean_diff_of_spread(l, want_forced.data(), want_forced.size()) < 0.02);
        };
        const int64_t slots = c.n_expert * c.n_layer / 4;

        // A link far slower than the CPU: every miss on the CPU, nothing copied.
        {
            const experts::HybridRates r = rates_for(*m, 1e-6, 1.0, 1e-7);
            auto g = gpu_context(*m, slots, 256, 64, 0, 0, &r);
            const float* l = g->ctx->decode(prompt, true);
            // F32: the same sums; q8_0: the CPU quantizes its activations to 8
            // bits, the GPU does not (the fixtures' quantized measure, tight).
            const double diff = f32 ? max_diff(l, want_logits.data(), want_logits.size())
                                                      : mean_diff_of_spread(l, want_logits.data(), want_logits.size());
            QVERIFY2(diff < (f32 ? 1e-4 : 0.02),
                     qPrintable(QString("the CPU's experts change the logits by %1").arg(diff)));
            same_text(*g);
            const model::DeviceExpertStats st = g->device->expert_stats();
            QVERIFY(st.miss_cpu > 0);
            QCOMPARE(st.miss_link, uint64_t{0});
            QCOMPARE(st.miss_both, uint64_t{0});
            QCOMPARE(st.bytes_loaded, uint64_t{0});
            QCOMPARE(st.cpu_computed, st.miss_cpu);
            // The heat map's marks: some experts computed on the CPU, none of them resident.
            int64_t marked = 0;  // (a key is one of OnCpu, Resident, Absent: never both)
            for (experts::Residency r : bc::vram_expert_cache(g->device)->residency()) marked += r == experts::Residency::OnCpu;
            QVERIFY(marked > 0);
        }
        // A link far faster than the CPU: every miss copied, as placement transfer.
        {
            const experts::HybridRates r = rates_for(*m, 1.0, 1e-9, 1e-9);
            auto g = gpu_context(*m, slots, 256, 64, 0, 0, &r);
            same_text(*g);
            const model::DeviceExpertStats st = g->device->expert_stats();
            QCOMPARE(st.miss_cpu + st.miss_both, uint64_t{0});
            QVERIFY(st.miss_link > 0);
            QCOMPARE(st.cpu_computed, uint64_t{0});
            QCOMPARE(st.bytes_loaded, st.miss_link * (m->sizes().bytes_experts / uint64_t(c.n_expert * c.n_layer)));
        }
        // The CPU's compute grows with tokens: 1 us of bytes, 1 us per token;
        // the copy 3 us. A decode step's single token goes to the CPU, the
        // prompt's experts routed 4 or more tokens over the link.
        {
            const experts::HybridRates r = rates_for(*m, 1e-6, 3e-6, 1e-9, 1e-6, 1e-9);
            QCOMPARE(experts::choose_miss_path(r, double(m->sizes().bytes_experts / uint64_t(c.n_expert * c.n_layer)),
                                               0, 1).path, experts::MissPath::Cpu);
            auto g = gpu_context(*m, slots, 256, 64, 0, 0, &r);
            g->ctx->decode(prompt, false);
            const model::DeviceExpertStats prefill = g->device->expert_stats();
            QVERIFY2(prefill.miss_link > 0, "the prompt's many-token experts are copied");
            same_text(*g);
            const model::DeviceExpertStats st = g->device->expert_stats();
            QVERIFY2(st.miss_cpu + st.miss_both > prefill.miss_cpu + prefill.miss_both, "decode's one-token misses on the CPU");
        }
        // Copies that repay themselves after two more uses (CPU 3 us, GPU 1 us,
        // link 2.5 us: the CPU wins one step, the copy three): experts routed
        // again and again are computed on the CPU and copied in the background.
        {
            const experts::HybridRates r = rates_for(*m, 3e-6, 2.5e-6, 1e-6);
            auto g = gpu_context(*m, slots, 256, 64, 0, 0, &r);
            same_text(*g);
            const model::DeviceExpertStats st = g->device->expert_stats();
            qInfo("cpu %llu link %llu both %llu hits %llu of %llu", (unsigned long long)st.miss_cpu,
                  (unsigned long long)st.miss_link, (unsigned long long)st.miss_both, (unsigned long long)st.hits,
                  (unsigned long long)st.demanded);
            QVERIFY(st.miss_both > 0);
            QVERIFY(st.bytes_loaded >= st.miss_both * (m->sizes().bytes_experts / uint64_t(c.n_expert * c.n_layer)));
            QVERIFY2(st.hits > 0, "background copies become hits");
        }
    }

    // Three tiers (VRAM slots, a host RAM cache smaller than the experts, the
    // model file): the text of every expert resident, under transfer-only and
    // hybrid placement (a --cpu-moe layer too), the host cache loading from
    // the file as the steps need, and the ledger holding it in the slow tier.
    void three_tiers() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/qwen2moe-tiny-f32.gguf"));
        const model::ModelConfig& c = m->config();
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time, in a land far away, Lily and Tom", true);
        auto all = gpu_context(*m);
        const std::vector<int32_t> want = greedy(*all->ctx, prompt, 24, c.n_vocab);
        const int64_t total = c.n_expert * c.n_layer, host = c.n_expert + 2;
        QVERIFY(host < total);
        const experts::HybridRates cpu_wins = rates_for(*m, 1e-6, 1.0, 1e-7);
        const experts::HybridRates both = rates_for(*m, 3e-6, 2.5e-6, 1e-6);
        struct Case {
            const char* name;
            const experts::HybridRates* rates;
            int64_t cpu_layers;
        };
        for (const Case& k : {Case{"transfer", nullptr, 0}, Case{"hybrid, CPU", &cpu_wins, 0},
                              Case{"hybrid, both", &both, 0}, Case{"transfer, a CPU layer", nullptr, 1}}) {
            auto g = gpu_context(*m, total / 4, 256, 64, 0, k.cpu_layers, k.rates, host);
            QVERIFY2(greedy(*g->ctx, prompt, 24, c.n_vocab) == want, k.name);
            const experts::ExpertStoreStats hs = g->host_cache->stats();
            QVERIFY2(hs.demand_loads > 0 && hs.bytes_loaded > 0, k.name);  // from the file
            QVERIFY2(hs.evictions > 0, k.name);                              // smaller than the experts
            QCOMPARE(hs.bytes_repacked, uint64_t{0});                        // the file's layout, as the GPU reads it
            QCOMPARE(g->ledger.reserved(memory::Account::ExpertsHome, memory::Tier::Slow), uint64_t{0});
            QCOMPARE(g->ledger.reserved(memory::Account::ExpertsCache, memory::Tier::Slow),
                     memory::expert_slots_bytes(g->host_cache->slot_bytes(), g->host_cache->experts_total(), host));
            if (k.cpu_layers) QVERIFY(g->device->expert_stats().cpu_computed > 0);
        }
#ifndef STRATA_TEST_REAL_GPU
        // A step that fails midway gives the experts it took back to the host
        // cache (else the next layer, finding the cache full, would wait forever).
        {
            auto g = gpu_context(*m, total / 4, 256, 64, 0, 0, nullptr, host);
            g->ctx->clear();
            fail_launch_in(7);  // inside the first layer
            bool threw = false;
            try {
                g->ctx->decode(prompt, false);
            } catch (const Error&) {
                threw = true;
            }
            QVERIFY(threw);
            QVERIFY2(greedy(*g->ctx, prompt, 24, c.n_vocab) == want, "after a failed step");
        }
#endif
        // A host cache that cannot hold one layer's experts is refused, saying so.
        QString what;
        try {
            (void)gpu_context(*m, total / 4, 256, 64, 0, 0, nullptr, c.n_expert - 1);
        } catch (const Error& e) {
            what = QString::fromUtf8(e.what());
        }
        QVERIFY2(what.contains("host RAM expert cache") && what.contains(QString::number(c.n_expert)), qPrintable(what));
    }

    // The CPU's rates, when not given, are measured at load on the experts.
    void hybrid_measures_the_cpu() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-q8_0.gguf"));
        experts::HybridRates r;
        r.link_bps = 12e9;
        r.gpu_bps = 900e9;
        r.gpu_flops = 50e12;
        auto g = gpu_context(*m, m->config().n_expert * m->config().n_layer / 4, 256, 64, 0, 0, &r);
        const model::DeviceExpertStats st = g->device->expert_stats();
        QVERIFY2(st.cpu_bps > 1e6 && std::isfinite(st.cpu_bps), qPrintable(QString::number(st.cpu_bps)));
        QVERIFY2(st.cpu_flops > 1e6 && std::isfinite(st.cpu_flops), qPrintable(QString::number(st.cpu_flops)));
        QCOMPARE(st.link_bps, 12e9);
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time", true);
        QVERIFY(std::isfinite(g->ctx->decode(prompt, false)[0]));
        // An unknown placement is refused, naming the values.
        memory::Ledger ledger;
        kv::KvCacheParams kp = model::kv_cache_params(m->config(), 4, 16, kv::KvType::F32);
        kp.host_storage = false;
        kv::KvCache kv(kp, &ledger, memory::Tier::Fast);
        bc::CudaForwardOptions o;
        o.placement = "cpu-sometimes";
        QString what;
        try {
            (void)bc::make_cuda_forward(*m, kv, ledger, o);
        } catch (const Error& e) {
            what = QString::fromUtf8(e.what());
        }
        QVERIFY2(what.contains("cpu-sometimes") && what.contains("auto or transfer"), qPrintable(what));
    }

    // Several sequences in one batch (block tables, per-token key counts)
    // give each sequence's logits alone.
    // qwen35moe too: interleaved tokens of two sequences, each delta net's
    // state its own sequence's in VRAM.
    void batch_of_sequences_equals_each_alone_data() {
        QTest::addColumn<QString>("name");
        QTest::newRow("qwen2moe") << "qwen2moe-tiny-f32";
        QTest::newRow("qwen35moe") << "qwen35moe-tiny-f32";
    }
    void batch_of_sequences_equals_each_alone() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, name);
        auto m = model::Model::load(test::fixture_path("models/" + name + ".gguf"));
        const int64_t V = m->config().n_vocab;
        auto g = gpu_context(*m, -1, 128, 64, 512);
        model::Context& ctx = *g->ctx;
        kv::KvCache& kv = ctx.kv_cache();
        const std::vector<int32_t> a = m->vocab().encode("Lily and Tom went to the park to play.", true);
        const std::vector<int32_t> b = m->vocab().encode("The cat sat", true);
        // Alone.
        const kv::SeqId sa = kv.create_sequence(), sb = kv.create_sequence();
        std::vector<kv::SeqId> seq_a(a.size(), sa), seq_b(b.size(), sb);
        const float* la = ctx.decode_batch(a, seq_a);
        const std::vector<float> alone_a(la + (a.size() - 1) * V, la + a.size() * V);
        const float* lb = ctx.decode_batch(b, seq_b);
        const std::vector<float> alone_b(lb + (b.size() - 1) * V, lb + b.size() * V);
        // Together, interleaved, from scratch in two new sequences.
        const kv::SeqId ta = kv.create_sequence(), tb = kv.create_sequence();
        std::vector<int32_t> toks;
        std::vector<kv::SeqId> seqs;
        for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
            if (i < a.size()) toks.push_back(a[i]), seqs.push_back(ta);
            if (i < b.size()) toks.push_back(b[i]), seqs.push_back(tb);
        }
        const float* l = ctx.decode_batch(toks, seqs);
        int64_t last_a = -1, last_b = -1;
        for (size_t i = 0; i < seqs.size(); ++i) (seqs[i] == ta ? last_a : last_b) = static_cast<int64_t>(i);
        QVERIFY(max_diff(l + last_a * V, alone_a.data(), size_t(V)) < 1e-4);
        QVERIFY(max_diff(l + last_b * V, alone_b.data(), size_t(V)) < 1e-4);
    }

    // The families' attention and FFN variants against the CPU on make-model files.
    void families_match_the_cpu_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<int>("type");
        QTest::addColumn<float>("yarn");  // YaRN factor (0: plain RoPE)
        // Their F32 forms are fixtures (fixtures(), qwen3moe_tiny_f32): here quantized.
        for (const char* arch : {"qwen2moe", "qwen3moe", "olmoe", "llama"})
            QTest::newRow((std::string(arch) + " q4_k").c_str()) << arch << int(kernels::WeightType::Q4_K) << 0.0f;
        // YaRN context extension (Qwen3's long-context files): the same RoPE
        // tables on both devices (model::rope_tables).
        QTest::newRow("qwen3moe yarn f32") << "qwen3moe" << int(kernels::WeightType::F32) << 4.0f;
        QTest::newRow("llama yarn q4_k") << "llama" << int(kernels::WeightType::Q4_K) << 4.0f;
        // DeepSeek-V3's shape (sigmoid routing, selection bias, expert groups,
        // a shared expert, latent attention with a query LoRA, YaRN), gpt-oss's.
        QTest::newRow("deepseek2 v3 f32") << "deepseek2" << int(kernels::WeightType::F32) << 4.0f;
        QTest::newRow("deepseek2 v3 q8_0") << "deepseek2" << int(kernels::WeightType::Q8_0) << 0.0f;  // q4_k: see the fixture
        QTest::newRow("gpt-oss f32") << "gpt-oss" << int(kernels::WeightType::F32) << 0.0f;  // MXFP4: gptoss_tiny_mxfp4
        // GLM-4.5's (partial RoPE, Q/K norms, biases, sigmoid routing with a
        // selection bias, a shared expert), Llama 4's (experts weighted
        // before their FFN, RoPE divisors, a NoPE layer), quantized.
        QTest::newRow("glm4moe q4_k") << "glm4moe" << int(kernels::WeightType::Q4_K) << 0.0f;
        QTest::newRow("llama4 q8_0") << "llama4" << int(kernels::WeightType::Q8_0) << 0.0f;
        QTest::newRow("qwen35moe q8_0") << "qwen35moe" << int(kernels::WeightType::Q8_0) << 0.0f;
    }

    void families_match_the_cpu() {
        QFETCH(QString, arch);
        QFETCH(int, type);
        QFETCH(float, yarn);
        QVERIFY(dir_.isValid());
        model::MakeModelSpec s;
        s.arch = arch.toStdString();
        s.layers = 3;
        s.dim = 256;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 8;
        s.used = 2;
        s.expert_ff = 256;
        s.dense_layers = arch == "llama" ? 1 : 0;
        s.ff = 256;
        s.shared_ff = arch == "qwen2moe" ? 256 : 0;
        s.vocab = 300;
        s.ctx = 128;
        s.type = static_cast<kernels::WeightType>(type);
        if (s.type == kernels::WeightType::MXFP4) {  // gpt-oss's experts only; the rest Q8_0
            s.type = kernels::WeightType::Q8_0;
            s.expert_type = kernels::WeightType::MXFP4;
            s.expert_type_set = true;
        }
        if (arch == "deepseek2") {
            s.q_lora = 64;
            s.kv_lora = 64;
            s.shared_experts = 1;
            s.gating = "sigmoid";
            s.weights_norm = true;
            s.weights_scale = 2.5f;
            s.expert_groups = 4;
            s.groups_used = 2;
        }
        if (arch == "gpt-oss") s.sliding_window = 16;
        if (arch == "glm4moe") {
            s.dense_layers = 1;
            s.head_dim = 128;  // q twice as wide as dim, as GLM-4.5's
            s.shared_experts = 1;
            s.weights_norm = true;
            s.weights_scale = 2.5f;
            s.qk_norm = true;
        }
        if (arch == "qwen35moe") {
            s.layers = 4;  // three delta nets, then gated attention
            s.head_dim = 64;
            s.shared_ff = 128;
        }
        if (arch == "llama4") {
            s.layers = 4;  // the last without RoPE
            s.moe_step = 2;
            s.used = 1;
        }
        s.threads = 1;
        s.yarn_factor = yarn;
        const std::string path =
            (dir_.path() + "/" + arch + QString::number(type) + "-" + QString::number(yarn) + ".gguf").toStdString();
        model::make_model(s, path);
        auto m = model::Model::load(path);
        QCOMPARE(bool(m->config().yarn), yarn > 0);
        const int64_t V = m->config().n_vocab;
        std::vector<int32_t> toks;
        for (int i = 0; i < 40; ++i) toks.push_back((i * 37 + 5) % static_cast<int>(V));  // past gpt-oss's window of 16
        model::ContextParams cp;
        cp.n_threads = 1;
        model::Context cpu(*m, cp);
        const float* lc = cpu.decode(toks, true);
        const std::vector<float> want(lc, lc + toks.size() * V);
        auto g = gpu_context(*m, -1, 128, 8);  // chunks of 8: prefill in five passes
        const float* lg = g->ctx->decode(toks, true);
        double mean = 0, sq = 0, diff = 0, sum_diff = 0;
        int64_t agree = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            mean += want[i];
            sq += double(want[i]) * want[i];
            diff = std::max(diff, std::fabs(double(lg[i]) - want[i]));
            sum_diff += std::fabs(double(lg[i]) - want[i]);
        }
        for (size_t t = 0; t < toks.size(); ++t)
            agree += test::argmax(lg + t * V, V) == test::argmax(want.data() + t * V, V);
        mean /= double(want.size());
        const double stddev = std::sqrt(sq / double(want.size()) - mean * mean);
        const double mean_diff = sum_diff / double(want.size()), top1 = double(agree) / double(toks.size());
        qInfo("%s: max |GPU - CPU| %.3g, mean %.3g (logits' spread %.3g), top-1 agreement %.2f",
              qPrintable(QTest::currentDataTag()), diff, mean_diff, stddev, top1);
        if (type == int(kernels::WeightType::F32)) {
            // Only summation order differs.
            QVERIFY2(diff <= 1e-3, qPrintable(QString("max |difference| %1 > 1e-3").arg(diff)));
        } else {
            // Both round the activations to 8 bits alike (Q8_0, Q8_1's values,
            // Q8_K); the GPU then sums in float where the CPU sums integers,
            // which on these random-weight files (logits ~1 apart) flips a
            // near-tied expert now and then: the fixtures README's bounds
            // (worst seen: top-1 0.97, mean 0.019 of the spread).
            QVERIFY2(top1 >= 0.90, qPrintable(QString("top-1 agreement %1 < 0.90").arg(top1)));
            QVERIFY2(mean_diff <= 0.05 * stddev, qPrintable(QString("mean |difference| %1 > 0.05 x %2").arg(mean_diff).arg(stddev)));
        }
    }

#ifndef STRATA_TEST_REAL_GPU
    // A failed launch mid-step (what a lost device or a kernel fault gives)
    // is a strata::Error naming the operation; the KV cache's tables are
    // rolled back, and the next step computes as if it had not happened.
    void device_error_mid_step_is_an_error_and_recoverable() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-q8_0.gguf"));
        const int64_t V = m->config().n_vocab;
        const std::vector<int32_t> prompt = m->vocab().encode("Once upon a time", true);
        auto g = gpu_context(*m);
        const float* l = g->ctx->decode(prompt, false);
        const std::vector<float> want(l, l + V);
        g->ctx->clear();
        fail_launch_in(7);  // a launch inside the first layer
        QString what;
        try {
            g->ctx->decode(prompt, false);
        } catch (const Error& e) {
            what = QString::fromUtf8(e.what());
        }
        QVERIFY2(what.startsWith("CUDA ") && what.contains("(layer 0) failed"), qPrintable(what));
        QCOMPARE(g->ctx->n_past(), int64_t{0});  // nothing of the failed step stays in the cache
        const float* again = g->ctx->decode(prompt, false);
        QVERIFY(max_diff(again, want.data(), size_t(V)) == 0.0);
    }
#endif

    // Every token's normed last hidden state comes back from the GPU pass as
    // from the CPU's (embeddings read it: the same vector).
    void hidden_states_match_the_cpu() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-f32.gguf"));
        const int64_t d = m->config().n_embd;
        const std::vector<int32_t> prompt = m->vocab().encode("The quick brown fox jumps over the lazy dog", true);
        auto g = gpu_context(*m);
        model::ContextParams cp;
        cp.n_ctx = 256;
        cp.n_batch = 64;
        cp.n_threads = 1;
        model::Context cpu(*m, cp);
        std::vector<std::vector<float>> hidden;
        for (model::Context* c : {g->ctx.get(), &cpu}) {
            c->clear();
            c->set_keep_hidden(true);
            c->decode(prompt, true);
            hidden.emplace_back(c->hidden(), c->hidden() + prompt.size() * d);
            c->set_keep_hidden(false);
        }
        QVERIFY(max_diff(hidden[0].data(), hidden[1].data(), hidden[0].size()) < 1e-3);
        const std::vector<float> e_gpu = sched::embed(*g->ctx, prompt), e_cpu = sched::embed(cpu, prompt);
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(e_gpu[size_t(i)]) * e_cpu[size_t(i)];
        QVERIFY2(dot > 0.99999, qPrintable(QString::number(dot)));
    }

    // The file's own MTP block drafts for a target on the GPU: the block runs
    // on the CPU from the hidden rows the GPU pass returns, and greedy
    // speculative decoding gives plain decoding's tokens.
    void mtp_draft_for_a_gpu_target() {
        QVERIFY(dir_.isValid());
        model::MakeModelSpec s;
        s.arch = "glm4moe";
        s.layers = 2;
        s.dense_layers = 1;
        s.dim = 256;
        s.heads = 4;
        s.kv_heads = 2;
        s.head_dim = 128;
        s.experts = 8;
        s.used = 2;
        s.expert_ff = 256;
        s.ff = 256;
        s.shared_experts = 1;
        s.weights_norm = true;
        s.qk_norm = true;
        s.vocab = 300;
        s.ctx = 128;
        s.nextn = 1;
        s.type = kernels::WeightType::F32;
        s.threads = 1;
        const std::string path = (dir_.path() + "/glm-mtp.gguf").toStdString();
        model::make_model(s, path);
        auto m = model::Model::load(path);
        QVERIFY(m->nextn());
        const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 250, 31};
        auto g = gpu_context(*m, -1, 128, 16);
        const std::vector<int32_t> want = greedy(*g->ctx, prompt, 24, m->config().n_vocab);
        model::ContextParams dp;
        dp.n_ctx = 128;
        dp.n_threads = 1;
        sched::MtpDrafter drafter(*m, dp);
        sched::SamplingParams sp;
        sp.temperature = 0.0f;
        sp.max_tokens = 24;
        sched::SpeculativeParams spec;
        spec.k = 3;
        sched::SpeculativeStats st;
        g->ctx->clear();
        const sched::GenerationResult r = sched::generate_speculative(*g->ctx, drafter, m->vocab(), sp, prompt, spec, &st);
        QCOMPARE(r.tokens, want);
        QVERIFY(st.drafted > 0);
    }

    // Ops the GPU leaves to the CPU (model/op_fallback.h): the same logits
    // as the GPU computing all of them, within F32 summation order; a run of
    // CPU ops keeps the activations on the host, so each leg costs the moves
    // the cost model counts; the ledger holds the CPU side's scratch; the
    // device line says what fell back. A stateful op cannot fall back: the
    // load says which and why.
    void ops_on_the_cpu_match_the_gpu() {
        QTemporaryDir dir;
        model::MakeModelSpec s;
        s.arch = "glm4moe";  // a dense layer, a shared expert, sigmoid routing
        s.layers = 3;
        s.dense_layers = 1;
        s.dim = 128;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 8;
        s.used = 2;
        s.expert_ff = 64;
        s.ff = 128;
        s.shared_experts = 1;
        s.vocab = 300;
        s.ctx = 128;
        s.threads = 1;
        const std::string path = (dir.path() + "/glm.gguf").toStdString();
        model::make_model(s, path);
        auto m = model::Model::load(path);
        const int64_t V = m->config().n_vocab;
        std::vector<int32_t> toks;
        for (int i = 0; i < 24; ++i) toks.push_back((i * 37 + 5) % static_cast<int>(V));
        auto gpu = gpu_context(*m, -1, 128, 8);
        QVERIFY(gpu->device->cpu_ops().empty());
        const float* lg = gpu->ctx->decode(toks, true);
        const std::vector<float> want(lg, lg + toks.size() * V);
        using model::Op;
        for (const std::vector<Op>& ops : {std::vector<Op>{Op::DenseFfn, Op::OutputHead},
                                           std::vector<Op>{Op::Embed, Op::RmsNorm, Op::Add, Op::SharedExpert, Op::DenseFfn,
                                                           Op::OutputHead}}) {
            auto g = gpu_context(*m, -1, 128, 8, 0, 0, nullptr, 0, ops);
            const std::string said = g->device->cpu_ops();
            QVERIFY2(QString::fromStdString(said).contains("dense FFN"), said.c_str());
            QVERIFY2(QString::fromStdString(said).contains("per token"), said.c_str());
            QVERIFY(g->ledger.reserved(memory::Account::Activations, memory::Tier::Slow) > 0);
            const std::vector<Op> chosen =
                model::choose_cpu_ops(m->config(), m->weights(), [](Op) { return true; }, ops, "test");
            QCOMPARE(chosen.size(), ops.size());  // the model uses each
            const model::CpuOpsCost cost = model::cpu_ops_cost(m->config(), m->weights(), chosen);
            QCOMPARE(QString::fromStdString(cost.describe()), QString::fromStdString(said));
            QVERIFY(cost.weight_bytes > 0 && cost.moved_bytes > 0);
            const float* l = g->ctx->decode(toks, true);
            double diff = 0;
            for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(double(l[i]) - want[i]));
            QVERIFY2(diff <= 1e-3, qPrintable(QString("%1: max |difference| %2 > 1e-3").arg(said.c_str()).arg(diff)));
        }
        {
            auto g = gpu_context(*m, -1, 128, 8, 0, 0, nullptr, 0, {Op::DenseFfn, Op::OutputHead});
            QCOMPARE(greedy(*g->ctx, {1, 2, 3}, 8, V), greedy(*gpu->ctx, {1, 2, 3}, 8, V));
        }
        QString why;
        try {
            (void)gpu_context(*m, -1, 128, 8, 0, 0, nullptr, 0, {Op::Attention});
        } catch (const Error& e) {
            why = QString::fromUtf8(e.what());
        }
        QCOMPARE(why, QString("glm4moe uses attention, which the CUDA backend cannot leave to the CPU (its state lives in "
                              "the device's memory); use --device cpu"));
    }

    void unsupported_input_is_an_error() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-f32.gguf"));
        // A KV cache with host storage is a caller's mistake, said as such.
        memory::Ledger ledger;
        kv::KvCacheParams kp = model::kv_cache_params(m->config(), 4, 16, kv::KvType::F32);
        kv::KvCache host_kv(kp, &ledger, memory::Tier::Fast);
        bool threw = false;
        try {
            (void)bc::make_cuda_forward(*m, host_kv, ledger, {});
        } catch (const Error& e) {
            threw = QString::fromUtf8(e.what()).contains("KV cache");
        }
        QVERIFY(threw);
        // A budget the weights do not fit: the ledger's message, and nothing left reserved.
        memory::Ledger small;
        small.set_budget(memory::Tier::Fast, 1 << 20);
        kp.host_storage = false;
        kv::KvCache kv(kp, &small, memory::Tier::Fast);
        threw = false;
        try {
            (void)bc::make_cuda_forward(*m, kv, small, {});
        } catch (const Error& e) {
            threw = QString::fromUtf8(e.what()).contains("weights.shared");
        }
        QVERIFY(threw);
        QCOMPARE(small.reserved(memory::Tier::Fast), uint64_t{0});
        // A delta net whose heads the GPU's kernel cannot take: refused at
        // load with the reason and what to use, not a launch error later.
        QTemporaryDir dir;
        model::MakeModelSpec spec;
        spec.arch = "qwen35moe";
        spec.layers = 4;
        spec.dim = 64;
        spec.heads = 4;
        spec.kv_heads = 2;
        spec.head_dim = 32;
        spec.experts = 4;
        spec.used = 2;
        spec.expert_ff = 32;
        spec.ssm_state = 24;
        spec.threads = 1;
        const std::string path = (dir.path() + "/q.gguf").toStdString();
        model::make_model(spec, path);
        auto q = model::Model::load(path);
        memory::Ledger l3;
        kv::KvCacheParams qp = model::kv_cache_params(q->config(), 4, 16, kv::KvType::F32);
        qp.host_storage = false;
        kv::KvCache qkv(qp, &l3, memory::Tier::Fast);
        QString message;
        try {
            (void)bc::make_cuda_forward(*q, qkv, l3, {});
        } catch (const Error& e) {
            message = QString::fromUtf8(e.what());
        }
        QVERIFY2(message.contains("gated delta net") && message.contains("24") && message.contains("--device cpu"),
                 qPrintable(message));
    }
};

QTEST_GUILESS_MAIN(TestCudaForward)
#include "test_cuda_forward.moc"
