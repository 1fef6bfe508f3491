// The plan: the whole ledger table for a model before it loads. Numbers add up
// to the model's bytes, fractions and budgets give the slots they should, a
// budget below the resident minimum says so, and bad settings are errors.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "common/error.h"
#include "model/plan_model.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "memory/system_memory.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "error_of.h"
#include "test_support.h"

using namespace strata;
using namespace strata::memory;
using strata::test::error_of;

namespace {

// The plan of a loaded model, as the engine makes it.
Plan make_plan(const model::Model& m, const PlanSettings& s) { return memory::make_plan(model::plan_model(m), s); }

constexpr uint64_t MiB = 1ull << 20;

uint64_t file_tensor_bytes(const model::Model& m) {
    uint64_t s = 0;
    for (const gguf::TensorInfo& t : m.file().tensors()) s += t.nbytes;
    return s;
}

uint64_t router_bytes(const model::Model& m) {
    uint64_t s = 0;
    for (const model::LayerWeights& L : m.weights().layers)
        if (L.router) s += L.router.slab_bytes();
    return s;
}

uint64_t max_expert_bytes(const model::Model& m) {
    uint64_t best = 0;
    for (const model::LayerWeights& L : m.weights().layers)
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            const model::FfnMatrices x = L.expert(e);
            best = std::max(best, x.gate.slab_bytes() + x.up.slab_bytes() + x.down.slab_bytes());
        }
    return best;
}

uint64_t fast_sum(const Plan& p) {
    uint64_t s = 0;
    for (const LedgerRow& r : p.rows)
        if (r.tier == Tier::Fast) s += r.reserved;
    return s;
}

// Checks that hold for every plan.
void check_invariants(const model::Model& m, const Plan& p) {
    const model::Model::Sizes sz = m.sizes();
    QCOMPARE(p.bytes(Account::WeightsShared) + p.bytes(Account::WeightsRouter) + p.bytes(Account::ExpertsHome),
             sz.bytes_total);
    QCOMPARE(p.bytes(Account::ExpertsHome), sz.bytes_experts);
    QCOMPARE(p.bytes(Account::WeightsRouter), router_bytes(m));
    QCOMPARE(p.fast_total, fast_sum(p));
    QCOMPARE(p.slow_total, p.bytes(Account::ExpertsHome));
    // Slots live in arenas: slots x slot bytes, each huge-page arena rounded up
    // to 2 MiB (exactly slots x slot bytes for a small model without arenas).
    QCOMPARE(p.bytes(Account::ExpertsCache) + p.bytes(Account::ExpertsPinned),
             expert_slots_bytes(p.slot_bytes, p.experts_total, p.expert_slots));
    QVERIFY(p.bytes(Account::ExpertsCache) + p.bytes(Account::ExpertsPinned) >= p.slot_bytes * uint64_t(p.expert_slots));
    QCOMPARE(p.bytes(Account::ExpertsPinned), p.slot_bytes * uint64_t(p.pinned_experts));
    QCOMPARE(p.bytes(Account::TransferBuffers), p.slot_bytes * uint64_t(p.transfer_buffers));
    const model::ModelConfig& c = m.config();
    QCOMPARE(p.bytes(Account::KvPages), uint64_t(2 * c.n_layer * p.n_ctx * c.n_head_kv * c.head_dim * 4));
    QVERIFY(p.bytes(Account::Activations) >= uint64_t(p.n_batch * c.n_vocab * 4));
    if (p.experts_total > 0) {
        // A slot holds the largest expert plus at most two pages of O_DIRECT padding per matrix.
        const uint64_t biggest = max_expert_bytes(m);
        QVERIFY(p.slot_bytes >= biggest);
        QVERIFY(p.slot_bytes <= biggest + 6 * 4096);
        QCOMPARE(p.slot_bytes % 4096, uint64_t{0});
        QCOMPARE(p.cache_fraction, double(p.expert_slots) / double(p.experts_total));
    }
    QCOMPARE(p.rows.size(), p.notes.size());
    QVERIFY(p.fits ? p.reason.rfind("fits:", 0) == 0 : p.reason.rfind("does not fit:", 0) == 0);
    if (p.fits && p.fast_budget != Ledger::kUnlimited) QVERIFY(p.fast_total <= p.fast_budget);
    QVERIFY(!p.to_table().empty());
    QVERIFY(p.to_json().front() == '{');
}

// A plan that fits can be reserved, row by row, in a ledger with its budgets.
void reserve_plan(const Plan& p) {
    Ledger l;
    apply_budgets(p, l);
    for (const LedgerRow& r : p.rows) l.reserve(r.account, r.tier, r.reserved);
    QCOMPARE(l.reserved(Tier::Fast), p.fast_total);
    QVERIFY(l.peak_reserved(Tier::Fast) <= l.budget(Tier::Fast));
}

}  // namespace

class TestPlan : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::unique_ptr<model::Model> moe_, shared_, dense_;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        model::MakeModelSpec s;
        s.layers = 3;
        s.dim = 64;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 8;
        s.used = 2;
        s.expert_ff = 96;
        s.dense_layers = 1;
        s.ff = 128;
        s.ctx = 256;
        s.threads = 1;
        model::make_model(s, (dir_.path() + "/moe.gguf").toStdString());
        moe_ = model::Model::load((dir_.path() + "/moe.gguf").toStdString());

        model::MakeModelSpec q = s;
        q.arch = "qwen2moe";
        q.dense_layers = 0;
        q.shared_ff = 64;
        q.type = kernels::WeightType::Q8_0;
        model::make_model(q, (dir_.path() + "/shared.gguf").toStdString());
        shared_ = model::Model::load((dir_.path() + "/shared.gguf").toStdString());

        model::MakeModelSpec d = s;
        d.experts = 0;
        d.dense_layers = 0;
        model::make_model(d, (dir_.path() + "/dense.gguf").toStdString());
        dense_ = model::Model::load((dir_.path() + "/dense.gguf").toStdString());
    }

    void no_budget_caches_everything() {
        const Plan p = make_plan(*moe_, {});
        check_invariants(*moe_, p);
        QVERIFY(p.fits);
        QCOMPARE(p.experts_total, int64_t{2 * 8});  // two MoE layers after one dense one
        QCOMPARE(p.moe_layers, int64_t{2});
        QCOMPARE(p.expert_slots, p.experts_total);
        QCOMPARE(p.cache_fraction, 1.0);
        QCOMPARE(p.bytes(Account::TransferBuffers), uint64_t{0});  // nothing to stage
        QCOMPARE(p.n_ctx, int64_t{256});                          // the model's context
        QCOMPARE(p.fast_budget, Ledger::kUnlimited);
        QVERIFY(p.reason.find("no budget") != std::string::npos);
        // The F32 file holds exactly the planned weight bytes.
        QCOMPARE(p.bytes(Account::WeightsShared) + p.bytes(Account::WeightsRouter) + p.bytes(Account::ExpertsHome),
                 file_tensor_bytes(*moe_));
        reserve_plan(p);
    }

    // The default budget comes from what the machine has: everything when the
    // model fits in it, the expert cache that fits when not, and a refusal
    // that says the budget was automatic when not even the minimum fits.
    void automatic_budget_from_available_memory() {
        const Plan everything = make_plan(*moe_, {});
        const uint64_t GiB = 1ull << 30;
        PlanSettings s;  // fast_budget 0: automatic
        s.fast_available = 16 * GiB;
        const Plan roomy = make_plan(*moe_, s);
        check_invariants(*moe_, roomy);
        QVERIFY(roomy.fits);
        QVERIFY(roomy.fast_budget_auto);
        QCOMPARE(roomy.fast_available, 16 * GiB);
        QCOMPARE(roomy.fast_budget, 16 * GiB - default_budget_reserve(16 * GiB));
        QCOMPARE(roomy.expert_slots, roomy.experts_total);  // fits: fully resident, not a share
        QVERIFY2(roomy.reason.find("automatic") != std::string::npos, roomy.reason.c_str());
        QVERIFY(roomy.to_table().find("automatic: 16.00 GiB available") != std::string::npos);
        QVERIFY(roomy.to_json().find("\"fast_budget_auto\":true") != std::string::npos);

        // Room for the resident part and 5 slots after the reserve.
        const uint64_t reserve = default_budget_reserve(everything.resident_minimum + 5 * everything.slot_bytes);
        s.fast_available = everything.resident_minimum + 3 * everything.slot_bytes + reserve + everything.slot_bytes / 2;
        const Plan tight = make_plan(*moe_, s);
        check_invariants(*moe_, tight);
        QVERIFY2(tight.fits, tight.reason.c_str());
        QCOMPARE(tight.fast_budget, s.fast_available - default_budget_reserve(s.fast_available));
        QVERIFY(tight.expert_slots > tight.minimum_slots);
        QVERIFY(tight.expert_slots < tight.experts_total);
        QVERIFY(tight.fast_total <= tight.fast_budget);

        // The reserve (512 MiB here) leaves half the resident minimum.
        s.fast_available = 512 * MiB + everything.resident_minimum / 2;
        const Plan poor = make_plan(*moe_, s);
        QVERIFY(!poor.fits);
        QVERIFY2(poor.reason.find("fast budget was automatic") != std::string::npos, poor.reason.c_str());
        QVERIFY2(poor.reason.find(format_bytes(s.fast_available) + " available") != std::string::npos, poor.reason.c_str());

        s.fast_available = 100 * MiB;  // below the reserve: nothing left, still a budget (not "unlimited")
        const Plan none_left = make_plan(*moe_, s);
        QVERIFY(!none_left.fits);
        QVERIFY(none_left.fast_budget != Ledger::kUnlimited);

        s.fast_budget = Ledger::kUnlimited;  // "none" wins over what is available
        const Plan unlimited = make_plan(*moe_, s);
        QVERIFY(unlimited.fits);
        QVERIFY(!unlimited.fast_budget_auto);
        QCOMPARE(unlimited.fast_budget, Ledger::kUnlimited);

        s.fast_budget = 0;
        s.fast_available = 0;  // unknown: no budget, as before
        QCOMPARE(make_plan(*moe_, s).fast_budget, Ledger::kUnlimited);
    }

    // The plan for a reload or a model switch counts what the loaded engine
    // gives back when it unloads (issue 45: a plan promised a 33% expert
    // cache, the reload then got 63%, the old model's own memory counted as
    // taken). Held bytes plus what is free plan exactly as that much free.
    void memory_the_loaded_model_gives_back_counts_as_available() {
        const Plan everything = make_plan(*moe_, {});
        const uint64_t reserve = default_budget_reserve(everything.resident_minimum + 5 * everything.slot_bytes);
        PlanSettings s;
        s.fast_available = everything.resident_minimum + 3 * everything.slot_bytes + reserve;
        const Plan alone = make_plan(*moe_, s);
        PlanSettings with_loaded = s;
        with_loaded.fast_available = s.fast_available - 4 * everything.slot_bytes;  // the loaded model holds some
        with_loaded.fast_returned = 4 * everything.slot_bytes;                   // ... and gives it back
        const Plan reload = make_plan(*moe_, with_loaded);
        check_invariants(*moe_, reload);
        QCOMPARE(reload.fast_available, alone.fast_available);
        QCOMPARE(reload.fast_returned, 4 * everything.slot_bytes);
        QCOMPARE(reload.fast_budget, alone.fast_budget);
        QCOMPARE(reload.expert_slots, alone.expert_slots);
        QVERIFY2(reload.reason.find(format_bytes(reload.fast_returned) + " of it held by the loaded model") != std::string::npos,
                 reload.reason.c_str());
        QVERIFY(reload.to_json().find("\"fast_returned\":" + std::to_string(reload.fast_returned)) != std::string::npos);
        // Without the correction the same machine plans fewer slots.
        with_loaded.fast_returned = 0;
        QVERIFY(make_plan(*moe_, with_loaded).expert_slots < alone.expert_slots);
        // What is free unknown (0): nothing to add to; no budget, as before.
        with_loaded.fast_available = 0;
        with_loaded.fast_returned = 1 << 30;
        QCOMPARE(make_plan(*moe_, with_loaded).fast_budget, Ledger::kUnlimited);
    }

    // A GPU that leaves the first N MoE layers' experts to the CPU plans no
    // slots for them; experts.home still holds every expert.
    void experts_left_to_the_cpu() {
        PlanSettings s;
        const Plan all = make_plan(*moe_, s);
        s.cpu_moe_layers = 1;
        const Plan one = make_plan(*moe_, s);
        check_invariants(*moe_, one);
        QCOMPARE(one.experts_total, all.experts_total / 2);  // two MoE layers, one left to the CPU
        QCOMPARE(one.expert_slots, one.experts_total);
        QVERIFY(one.bytes(Account::ExpertsCache) < all.bytes(Account::ExpertsCache));
        QCOMPARE(one.bytes(Account::ExpertsHome), all.bytes(Account::ExpertsHome));
        s.cpu_moe_layers = -1;
        const Plan none = make_plan(*moe_, s);
        QCOMPARE(none.experts_total, int64_t{0});
        QCOMPARE(none.bytes(Account::ExpertsCache), uint64_t{0});
        QVERIFY(none.fits);
    }

    // On a GPU the slow tier is host RAM: none when VRAM holds every expert,
    // a copy of each within the slow budget, and below it a cache of them
    // over the model file (three tiers), or a refusal with the numbers when
    // it cannot hold one MoE layer's experts.
    void three_tiers_on_a_gpu() {
        const model::ModelConfig& c = moe_->config();
        PlanSettings s;
        s.gpu = true;
        const Plan all = make_plan(*moe_, s);
        QVERIFY(all.fits);
        QCOMPARE(all.bytes(Account::ExpertsHome), uint64_t{0});  // every expert has a VRAM slot
        s.expert_slots = all.experts_total / 4;
        const Plan two = make_plan(*moe_, s);
        QCOMPARE(two.host_slots, int64_t{0});
        const uint64_t experts = two.bytes(Account::ExpertsHome);
        QCOMPARE(experts, moe_->sizes().bytes_experts);
        // A slow budget of two thirds of the experts: a host cache.
        s.slow_budget = experts * 2 / 3;
        const Plan three = make_plan(*moe_, s);
        QVERIFY2(three.fits, three.reason.c_str());
        QVERIFY(three.host_slots >= c.n_expert && three.host_slots < three.host_experts);
        QCOMPARE(three.bytes(Account::ExpertsHome), uint64_t{0});
        QCOMPARE(three.bytes(Account::ExpertsCache) - two.bytes(Account::ExpertsCache),
                 expert_slots_bytes(three.slot_bytes, three.host_experts, three.host_slots));
        QVERIFY(three.slow_total <= s.slow_budget);
        QCOMPARE(three.slow_total, three.bytes(Account::ExpertsCache) - two.bytes(Account::ExpertsCache));
        QVERIFY(three.to_table().find("three tiers") != std::string::npos);
        QVERIFY(three.to_json().find("\"host_slots\":" + std::to_string(three.host_slots)) != std::string::npos);
        // The ops the device leaves to the CPU (filled in by the caller): a line of the table and a JSON field.
        QVERIFY(three.to_table().find("device ops:") == std::string::npos);
        Plan fell_back = three;
        fell_back.device_ops = "output_head on the CPU: 4 KiB of activations moved";
        QVERIFY(fell_back.to_table().find("\ndevice ops: output_head on the CPU: 4 KiB") != std::string::npos);
        QVERIFY(fell_back.to_json().find("\"device_ops\":\"output_head on the CPU") != std::string::npos);
        // Below one layer's experts: refused, saying what it holds and what it needs.
        s.slow_budget = three.slot_bytes * uint64_t(c.n_expert - 1);
        const Plan none = make_plan(*moe_, s);
        QVERIFY(!none.fits);
        const std::string need = format_bytes(expert_slots_bytes(three.slot_bytes, three.host_experts, c.n_expert));
        QVERIFY2(none.reason.find("slow budget of " + format_bytes(s.slow_budget)) != std::string::npos, none.reason.c_str());
        QVERIFY2(none.reason.find("at least " + std::to_string(c.n_expert)) != std::string::npos, none.reason.c_str());
        QVERIFY2(none.reason.find("raise the slow budget to at least " + need) != std::string::npos, none.reason.c_str());
        // The CPU's slow tier is the file: the budget is checked as before.
        s.gpu = false;
        QVERIFY(make_plan(*moe_, s).reason.find("experts.home needs") != std::string::npos);
    }

    void system_memory_parsing() {
        QCOMPARE(parse_meminfo_available("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20971520 kB\n"),
                 uint64_t{20971520} * 1024);
        QCOMPARE(parse_meminfo_available("MemTotal: 1 kB\n"), uint64_t{0});
        QCOMPARE(parse_meminfo_available("MemAvailable: lots kB\n"), uint64_t{0});
        QCOMPARE(cgroup_room("max\n", "123\n"), uint64_t{0});
        QCOMPARE(cgroup_room("1000\n", "400\n"), uint64_t{600});
        QCOMPARE(cgroup_room("1000\n", "4000\n"), uint64_t{1});  // over its limit: known, nothing left
        QCOMPARE(default_budget_reserve(1ull << 30), uint64_t{512} << 20);
        QCOMPARE(default_budget_reserve(20ull << 30), uint64_t{2} << 30);
        QCOMPARE(default_budget_reserve(200ull << 30), uint64_t{4} << 30);
        QCOMPARE(auto_budget(256ull << 20), uint64_t{0});
        QCOMPARE(auto_budget(0), uint64_t{0});
        QVERIFY(available_ram_bytes() > 0);  // Linux: /proc/meminfo is there
    }

    void shared_expert_and_quantized() {
        const Plan p = make_plan(*shared_, {});
        check_invariants(*shared_, p);
        QCOMPARE(p.experts_total, int64_t{3 * 8});
        // The shared expert is a shared weight, not a routed one.
        uint64_t shexp = 0;
        for (const auto& L : shared_->weights().layers)
            shexp += L.shared.gate.slab_bytes() + L.shared.up.slab_bytes() + L.shared.down.slab_bytes();
        QVERIFY(shexp > 0);
        QVERIFY(p.bytes(Account::WeightsShared) > shexp);
    }

    // qwen35moe: the delta nets' state per sequence is a row of its own
    // (recurrent.state), in the resident minimum, for the context's own
    // sequence and one more; the engine's KV cache reserves what it plans.
    void recurrent_state_row() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/qwen35moe-tiny-f32.gguf"));
        const model::ModelConfig& c = m->config();
        const Plan p = make_plan(*m, {});
        const uint64_t per_seq = uint64_t(c.n_recurrent_layers() * c.ssm.state_floats()) * 4;
        QCOMPARE(per_seq, uint64_t(3 * (768 + 4096) * 4));  // ARCHITECTURES.md: conv 768, delta 4096 floats a layer
        QCOMPARE(p.state_bytes_per_sequence, per_seq);
        QCOMPARE(p.state_sequences, int64_t{2});
        QCOMPARE(p.bytes(Account::RecurrentState), 2 * per_seq);
        // K/V for the one attention layer of four: the delta nets keep none.
        QCOMPARE(c.n_kv_layers(), int64_t{1});
        QCOMPARE(p.bytes(Account::KvPages), uint64_t(2 * 1 * p.n_ctx * c.n_head_kv * c.head_dim * 4));
        QCOMPARE(p.fast_total, fast_sum(p));
        QVERIFY(p.to_table().find("recurrent.state") != std::string::npos);
        QCOMPARE(make_plan(*dense_, {}).bytes(Account::RecurrentState), uint64_t{0});
    }

    void dense_model() {
        PlanSettings s;
        s.fast_budget = 200 * MiB;
        const Plan p = make_plan(*dense_, s);
        check_invariants(*dense_, p);
        QVERIFY(p.fits);
        QCOMPARE(p.experts_total, int64_t{0});
        QCOMPARE(p.bytes(Account::ExpertsCache), uint64_t{0});
        QCOMPARE(p.bytes(Account::ExpertsHome), uint64_t{0});
        QCOMPARE(p.resident_minimum, p.fast_total);
    }

    void fraction_gives_share_of_slots() {
        PlanSettings s;
        s.expert_cache_fraction = 0.25;
        const Plan p = make_plan(*moe_, s);
        check_invariants(*moe_, p);
        QCOMPARE(p.expert_slots, int64_t{4});
        QCOMPARE(p.cache_fraction, 0.25);
        QCOMPARE(p.transfer_buffers, int64_t{2});
        s.expert_cache_fraction = 0.5;
        QCOMPARE(make_plan(*moe_, s).expert_slots, int64_t{8});
        // A tiny fraction is raised to the minimum a layer needs.
        s.expert_cache_fraction = 0.01;
        const Plan tiny = make_plan(*moe_, s);
        QCOMPARE(tiny.expert_slots, int64_t{2});
        QVERIFY(tiny.reason.find("raised") != std::string::npos);
        // Explicit slots override the fraction.
        s.expert_slots = 5;
        QCOMPARE(make_plan(*moe_, s).expert_slots, int64_t{5});
    }

    void pinned_experts() {
        PlanSettings s;
        s.expert_slots = 6;
        s.pinned_experts = 3;
        const Plan p = make_plan(*moe_, s);
        check_invariants(*moe_, p);
        QCOMPARE(p.expert_slots, int64_t{6});
        QCOMPARE(p.bytes(Account::ExpertsPinned), 3 * p.slot_bytes);
        QCOMPARE(p.bytes(Account::ExpertsCache), 3 * p.slot_bytes);
        QCOMPARE(p.minimum_slots, int64_t{5});
        s.expert_slots = 4;  // the 3 pinned + 2 for a layer do not fit in 4
        QVERIFY(error_of([&] { make_plan(*moe_, s); }).contains("too few expert slots (4)"));
    }

    void budget_below_minimum_does_not_fit() {
        PlanSettings s;
        s.runtime_reserve = 1 * MiB;
        const Plan unlimited = make_plan(*moe_, s);
        const uint64_t min = unlimited.resident_minimum;
        QVERIFY(min < unlimited.fast_total);

        s.fast_budget = min - 1;
        const Plan below = make_plan(*moe_, s);
        check_invariants(*moe_, below);
        QVERIFY(!below.fits);
        QVERIFY2(below.reason.find("resident minimum") != std::string::npos, below.reason.c_str());
        QVERIFY(below.reason.find(format_bytes(min)) != std::string::npos);
        QVERIFY(below.fast_total > below.fast_budget);

        // Just at the minimum: it fits with the fewest slots, transfer buffers gave way.
        s.fast_budget = min;
        const Plan at = make_plan(*moe_, s);
        check_invariants(*moe_, at);
        QVERIFY2(at.fits, at.reason.c_str());
        QCOMPARE(at.expert_slots, int64_t{2});
        QCOMPARE(at.fast_total, min);
        QCOMPARE(at.bytes(Account::TransferBuffers), uint64_t{0});
        QVERIFY(at.reason.find("transfer buffers") != std::string::npos);
        reserve_plan(at);

        // Room for the transfer buffers and two more slots.
        s.fast_budget = min + 4 * at.slot_bytes + 100;
        const Plan more = make_plan(*moe_, s);
        check_invariants(*moe_, more);
        QVERIFY(more.fits);
        QCOMPARE(more.transfer_buffers, int64_t{2});
        QCOMPARE(more.expert_slots, int64_t{4});
        reserve_plan(more);

        // Room for every expert: all slots, no staging needed.
        s.fast_budget = unlimited.fast_total + 1;
        const Plan all = make_plan(*moe_, s);
        QVERIFY(all.fits);
        QCOMPARE(all.expert_slots, all.experts_total);
        QCOMPARE(all.transfer_buffers, int64_t{0});

        // Without prefetch there are never transfer buffers.
        s.fast_budget = min + 4 * at.slot_bytes + 100;
        s.prefetch = false;
        const Plan nopf = make_plan(*moe_, s);
        QCOMPARE(nopf.transfer_buffers, int64_t{0});
        QCOMPARE(nopf.expert_slots, int64_t{6});
    }

    void explicit_cache_over_budget() {
        PlanSettings s;
        s.runtime_reserve = 1 * MiB;
        const uint64_t min = make_plan(*moe_, s).resident_minimum;
        s.fast_budget = min + 3 * make_plan(*moe_, s).slot_bytes;
        s.expert_cache_fraction = 1.0;
        const Plan p = make_plan(*moe_, s);
        check_invariants(*moe_, p);
        QVERIFY(!p.fits);
        QVERIFY2(p.reason.find("experts.cache") != std::string::npos, p.reason.c_str());
        QVERIFY(p.reason.find("over its budget") != std::string::npos);
        QVERIFY2(p.reason.find("at most 5 slots") != std::string::npos, p.reason.c_str());
        s.expert_cache_fraction = -1;
        s.expert_slots = 5;
        const Plan five = make_plan(*moe_, s);
        QVERIFY2(five.fits, five.reason.c_str());
        QCOMPARE(five.transfer_buffers, int64_t{0});  // they gave way to the requested slots
    }

    void slow_budget() {
        PlanSettings s;
        s.slow_budget = moe_->sizes().bytes_experts - 1;
        const Plan p = make_plan(*moe_, s);
        QVERIFY(!p.fits);
        QVERIFY2(p.reason.find("experts.home") != std::string::npos, p.reason.c_str());
        QVERIFY(p.reason.find("slow") != std::string::npos);
        s.slow_budget = moe_->sizes().bytes_experts;
        QVERIFY(make_plan(*moe_, s).fits);
    }

    void context_and_batch() {
        PlanSettings s;
        s.n_ctx = 128;
        s.n_batch = 1000;
        s.threads = 3;
        const Plan p = make_plan(*moe_, s);
        check_invariants(*moe_, p);
        QCOMPARE(p.n_ctx, int64_t{128});
        QCOMPARE(p.n_batch, int64_t{128});  // capped at the context, as Context does
        s.n_ctx = 256;
        QCOMPARE(make_plan(*moe_, s).bytes(Account::KvPages), 2 * p.bytes(Account::KvPages));
        s.n_batch = 64;
        QVERIFY(make_plan(*moe_, s).bytes(Account::Activations) < p.bytes(Account::Activations));
    }

    void bad_settings() {
        auto err = [&](auto tweak) {
            PlanSettings s;
            tweak(s);
            return error_of([&] { make_plan(*moe_, s); });
        };
        QVERIFY(err([](PlanSettings& s) { s.expert_cache_fraction = 0; }).contains("outside (0, 1]"));
        QVERIFY(err([](PlanSettings& s) { s.expert_cache_fraction = 1.5; }).contains("outside (0, 1]"));
        QVERIFY(err([](PlanSettings& s) { s.expert_cache_fraction = NAN; }).contains("outside (0, 1]"));
        QVERIFY(err([](PlanSettings& s) { s.expert_slots = 0; }).contains("zero slots"));
        QVERIFY(err([](PlanSettings& s) { s.expert_slots = 1; }).contains("too few expert slots (1)"));
        QVERIFY(err([](PlanSettings& s) { s.pinned_experts = 17; }).contains("only 16 routed experts"));
        QVERIFY(err([](PlanSettings& s) { s.pinned_experts = -1; }).contains("negative"));
        QVERIFY(err([](PlanSettings& s) { s.n_ctx = -1; }).contains("negative"));
        QVERIFY(err([](PlanSettings& s) { s.n_batch = 0; }).contains("batch"));
        QVERIFY(err([](PlanSettings& s) { s.transfer_buffers = -1; }).contains("transfer buffers"));
        // Asking for more slots than experts is not an error: every expert gets one.
        PlanSettings s;
        s.expert_slots = 100;
        const Plan p = make_plan(*moe_, s);
        QCOMPARE(p.expert_slots, p.experts_total);
    }

    // The plan's KV is exactly what a Context allocates, and its activation
    // estimate covers the Context's scratch after a full chunk with all logits.
    void plan_matches_context() {
        for (model::Model* m : {moe_.get(), shared_.get(), dense_.get()}) {
            PlanSettings s;
            s.n_ctx = 200;
            s.n_batch = 64;
            s.threads = 2;
            const Plan p = make_plan(*m, s);
            model::ContextParams cp;
            cp.n_ctx = s.n_ctx;
            cp.n_batch = s.n_batch;
            cp.n_threads = s.threads;
            model::Context ctx(*m, cp);
            std::vector<int32_t> tokens(64, 1);
            ctx.decode(tokens, true);
            QCOMPARE(p.bytes(Account::KvPages), ctx.kv_bytes());
            QVERIFY2(p.bytes(Account::Activations) >= ctx.scratch_bytes(),
                     qPrintable(QString("planned %1 < context %2").arg(p.bytes(Account::Activations)).arg(ctx.scratch_bytes())));
            // ... and not wildly more (lookahead buffers are the only extra).
            QVERIFY(p.bytes(Account::Activations) <= ctx.scratch_bytes() * 3 / 2);
        }
    }

    void json_is_complete() {
        PlanSettings s;
        s.fast_budget = 100 * MiB;
        const std::string j = make_plan(*moe_, s).to_json();
        for (const char* key : {"\"fits\":", "\"reason\":", "\"fast_budget\":104857600", "\"slow_budget\":null",
                                "\"resident_minimum\":", "\"expert_slots\":", "\"slot_bytes\":", "\"rows\":[",
                                "\"account\":\"experts.home\",\"tier\":\"slow\""})
            QVERIFY2(j.find(key) != std::string::npos, key);
    }

    void fixture_moe_tiny() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(strata::test::fixture_path("models/moe-tiny-f32.gguf"));
        PlanSettings s;
        s.threads = 1;
        const Plan all = make_plan(*m, s);
        check_invariants(*m, all);
        // d=128, 4 layers, 8 experts of FFN 256, F32: one expert is 3 * 128 * 256 * 4 bytes.
        QCOMPARE(all.experts_total, int64_t{32});
        QCOMPARE(all.bytes(Account::ExpertsHome), uint64_t{32 * 3 * 128 * 256 * 4});
        QCOMPARE(all.bytes(Account::WeightsShared) + all.bytes(Account::WeightsRouter) + all.bytes(Account::ExpertsHome),
                 file_tensor_bytes(*m));
        QCOMPARE(all.bytes(Account::WeightsRouter), uint64_t{4 * 128 * 8 * 4});
        QCOMPARE(all.expert_slots, int64_t{32});
        QVERIFY(all.fits);

        s.expert_cache_fraction = 0.25;
        const Plan quarter = make_plan(*m, s);
        QCOMPARE(quarter.expert_slots, int64_t{8});
        QCOMPARE(quarter.cache_fraction, 0.25);

        s.expert_cache_fraction = -1;
        s.fast_budget = all.resident_minimum - 1;
        const Plan below = make_plan(*m, s);
        QVERIFY(!below.fits);
        QVERIFY(below.reason.find("resident minimum") != std::string::npos);
        s.fast_budget = all.resident_minimum + 1;
        const Plan above = make_plan(*m, s);
        QVERIFY2(above.fits, above.reason.c_str());
        // The minimum's 2 slots round up to a whole huge page in an arena: the
        // slots that fit in that page (and no more) are what the budget allows.
        QVERIFY(above.expert_slots >= 2);
        QCOMPARE(above.expert_slots,
                 expert_slots_within(above.slot_bytes, above.experts_total,
                                     expert_slots_bytes(above.slot_bytes, above.experts_total, 2) + 1));
        QCOMPARE(expert_slots_bytes(above.slot_bytes, above.experts_total, above.expert_slots),
                 expert_slots_bytes(above.slot_bytes, above.experts_total, 2));
        reserve_plan(above);
    }
};

QTEST_GUILESS_MAIN(TestPlan)
#include "test_plan.moc"
