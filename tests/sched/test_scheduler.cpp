// Continuous batching on the demo model: many concurrent requests of mixed
// lengths each give exactly what they give alone; KV exhaustion makes requests
// wait or be preempted and recomputed, never fail, with the ledger holding;
// cancellation at any point; priorities; prefix sharing; clear errors.
#include <QtTest>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "context_params.h"
#include "core/engine.h"
#include "runner/context.h"
#include "model/model.h"
#include "sched/generator.h"
#include "sched/scheduler.h"
#include "strata/engine_core.h"
#include "test_support.h"

using namespace strata;

namespace {

const std::string kDemo = test::demo_model_path();

const char* kTexts[] = {
    "In the beginning God created the heaven and the earth.",
    "And the LORD spake unto Moses, saying,",
    "Blessed are the poor in spirit: for theirs is the kingdom of heaven.",
    "Jesus wept.",
    "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures:",
    "And it came to pass",
    "Now the serpent was more subtil than any beast of the field which the LORD God had made.",
    "Honour thy father and thy mother:",
};

struct Job {
    std::vector<int32_t> prompt;
    sched::SamplingParams params;
};

// Mixed lengths: prompts of 3..~70 tokens (texts joined), 4..40 new tokens.
std::vector<Job> make_jobs(const tok::Vocab& vocab, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Job> jobs;
    for (int i = 0; i < n; ++i) {
        std::string text;
        const int parts = 1 + static_cast<int>(rng() % 3);
        for (int p = 0; p < parts; ++p) text += std::string(p ? " " : "") + kTexts[rng() % std::size(kTexts)];
        Job j;
        j.prompt = vocab.encode(text, true);
        if (rng() % 4 == 0 && j.prompt.size() > 4) j.prompt.resize(3 + rng() % (j.prompt.size() - 3));
        j.params.temperature = 0.0f;
        j.params.max_tokens = 4 + static_cast<int32_t>(rng() % 37);
        jobs.push_back(std::move(j));
    }
    return jobs;
}

std::vector<int32_t> alone(model::Context& ctx, const tok::Vocab& vocab, const Job& j) {
    ctx.clear();
    return sched::generate(ctx, vocab, j.params, j.prompt).tokens;
}

// The demo model as the engine core's tests load it (a small context, two threads).
std::unique_ptr<core::Engine> demo_engine() {
    EngineSettings es;
    es.n_ctx = 256;
    es.threads = 2;
    return core::Engine::load(kDemo, es);
}

// Each job's greedy tokens alone, on a context of its own beside the engine's.
std::vector<std::vector<int32_t>> each_alone(const core::Engine& eng, const std::vector<Job>& jobs) {
    model::Context solo(eng.model(), test::context_params(256, 64, 2));
    std::vector<std::vector<int32_t>> want;
    for (const Job& j : jobs) want.push_back(alone(solo, eng.vocab(), j));
    return want;
}

}  // namespace

class TestScheduler : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void sixty_four_concurrent_requests_equal_alone() {
        auto m = model::Model::load(kDemo);
        const auto jobs = make_jobs(m->vocab(), 64, 1);
        model::Context solo(*m, test::context_params(256, 64, 2));
        std::vector<std::vector<int32_t>> want;
        for (const Job& j : jobs) want.push_back(alone(solo, m->vocab(), j));

        model::ContextParams cp = test::context_params(256, 256, 2);
        kv::KvCache kvc(model::kv_cache_params(m->config(), 64 * 8));  // 8192 tokens: room for all
        model::Context ctx(*m, cp, nullptr, nullptr, &kvc);
        sched::SchedulerConfig sc;
        sc.max_batch = 64;
        sched::Scheduler s(ctx, m->vocab(), sc);
        std::map<int64_t, size_t> index;
        std::map<int64_t, sched::RequestResult> got;
        for (size_t i = 0; i < jobs.size(); ++i)
            index[s.submit(jobs[i].prompt, jobs[i].params, 0, {}, [&](const sched::RequestResult& r) { got[r.id] = r; })] = i;
        s.run();
        QCOMPARE(got.size(), jobs.size());
        for (const auto& [id, r] : got) QCOMPARE(r.tokens, want[index[id]]);
        QVERIFY(s.stats().steps < s.stats().tokens_generated / 4);  // batched, not one at a time
        QCOMPARE(kvc.stats().used_blocks, int64_t{0});              // every block released
    }

    // A prompt read in chunks reports how far it got after each step, and
    // nothing once its first token is out (the app's "reading the prompt").
    void prompt_progress_follows_the_chunks() {
        auto m = model::Model::load(kDemo);
        kv::KvCache kvc(model::kv_cache_params(m->config(), 64 * 4));
        model::Context ctx(*m, test::context_params(256, 64, 2), nullptr, nullptr, &kvc);
        sched::SchedulerConfig sc;
        sc.prefill_chunk = 16;
        sched::Scheduler s(ctx, m->vocab(), sc);
        std::string text;
        for (const char* t : kTexts) text += std::string(t) + " ";
        const std::vector<int32_t> prompt = m->vocab().encode(text, true);
        QVERIFY(prompt.size() > 48);
        sched::SamplingParams p;
        p.temperature = 0.0f;
        p.max_tokens = 3;
        const int64_t id = s.submit(prompt, p);
        auto first = s.prompt_progress(id);
        QVERIFY(first.has_value());
        QCOMPARE(first->done, int64_t{0});
        QCOMPARE(first->total, int64_t(prompt.size()));
        std::vector<int64_t> seen;
        while (s.step()) {
            if (auto pp = s.prompt_progress(id)) seen.push_back(pp->done);
            else break;
        }
        // 16 tokens a step until the prompt is read; then no progress (it has a token).
        QCOMPARE(int64_t(seen.size()), (int64_t(prompt.size()) - 1) / 16);
        for (size_t i = 0; i < seen.size(); ++i) QCOMPARE(seen[i], int64_t(16 * (i + 1)));
        QVERIFY(!s.prompt_progress(id).has_value());
        QVERIFY(!s.prompt_progress(id + 100).has_value());
        s.run();
    }

    // Speculative requests through the engine core (the app's Settings and
    // serve --draft): each runs alone once the batch is done and gives the
    // greedy tokens of plain decoding; a queued one can be cancelled; a
    // running one stops when its `cancelled` says so; a draft the model
    // cannot have fails the request (and prepare_draft) saying why.
    void engine_core_runs_speculative_requests() {
        auto eng = demo_engine();
        const auto& vocab = eng->vocab();
        const auto jobs = make_jobs(vocab, 3, 11);
        const std::vector<std::vector<int32_t>> want = each_alone(*eng, jobs);

        EngineCore core(*eng, sched::SchedulerConfig{});
        const EngineCore::Speculation spec{"self:layers=3", 3, 0.0f};
        std::map<int64_t, sched::RequestResult> done;
        std::vector<std::string> failed;
        bool stop_now = false;
        auto cb = [&] {
            return EngineCore::Callbacks{{}, [&](const sched::RequestResult& r) { done[r.id] = r; },
                                         [&](const std::string& why) { failed.push_back(why); }, [&] { return stop_now; }};
        };
        const int64_t batched = core.submit(jobs[0].prompt, jobs[0].params, cb());
        const int64_t s1 = core.submit(jobs[1].prompt, jobs[1].params, cb(), &spec);
        const int64_t s2 = core.submit(jobs[2].prompt, jobs[2].params, cb(), &spec);
        QVERIFY(!core.idle());
        QCOMPARE(core.waiting(), size_t(3));  // the batched one not yet admitted, the two speculative ones
        core.cancel(s2);                     // still queued: ends at once
        QCOMPARE(done[s2].finish, sched::FinishReason::Cancelled);
        QVERIFY(done[s2].tokens.empty());
        while (core.step()) {}
        QVERIFY(core.idle());
        QVERIFY2(failed.empty(), failed.empty() ? "" : failed[0].c_str());
        QCOMPARE(done[batched].tokens, want[0]);
        QCOMPARE(done[s1].tokens, want[1]);
        QVERIFY(done[s1].spec_drafted > 0);
        QVERIFY(done[s1].spec_acceptance >= 0.0 && done[s1].spec_acceptance <= 1.0);
        QCOMPARE(done[batched].spec_acceptance, -1.0);

        // A running one polls `cancelled`.
        sched::SamplingParams longer = jobs[1].params;
        longer.max_tokens = 200;
        stop_now = true;
        const int64_t s3 = core.submit(jobs[1].prompt, longer, cb(), &spec);
        QVERIFY(core.step());
        QCOMPARE(done[s3].finish, sched::FinishReason::Cancelled);
        QVERIFY(done[s3].tokens.size() < 200);
        stop_now = false;

        const EngineCore::Speculation mtp{"mtp", 3, 0.0f};
        const int64_t s4 = core.submit(jobs[1].prompt, jobs[1].params, cb(), &mtp);
        QVERIFY(core.step());
        QVERIFY(!done.count(s4));
        QCOMPARE(failed.size(), size_t(1));
        QVERIFY2(failed[0].find("NextN/MTP") != std::string::npos, failed[0].c_str());
        QVERIFY_THROWS_EXCEPTION(Error, core.prepare_draft("mtp"));
        QVERIFY_THROWS_EXCEPTION(Error, core.prepare_draft("self:layers=99"));
        // The batch goes on after them.
        const int64_t after = core.submit(jobs[0].prompt, jobs[0].params, cb());
        while (core.step()) {}
        QCOMPARE(done[after].tokens, want[0]);
    }

    // The engine core every front end drives: requests give what they give
    // alone; a forward pass that fails (here the expert provider's read, as
    // an I/O error on the model file would) ends every request in flight with
    // the reason, and the core goes on with a fresh scheduler; a batch size
    // set while requests run applies once they are done.
    void engine_core_recovers_from_a_failed_pass() {
        auto eng = demo_engine();
        const auto& vocab = eng->vocab();
        const auto jobs = make_jobs(vocab, 3, 7);
        const std::vector<std::vector<int32_t>> want = each_alone(*eng, jobs);

        sched::SchedulerConfig sc;
        sc.max_batch = 2;
        EngineCore core(*eng, sc);
        std::map<int64_t, sched::RequestResult> done;
        std::vector<std::string> failed;
        auto submit = [&](const Job& j) {
            return core.submit(j.prompt, j.params,
                               {{}, [&](const sched::RequestResult& r) { done[r.id] = r; },
                                [&](const std::string& why) { failed.push_back(why); }, {}});
        };
        std::map<int64_t, size_t> index;
        for (size_t i = 0; i < jobs.size(); ++i) index[submit(jobs[i])] = i;
        while (core.step()) {}
        QCOMPARE(done.size(), jobs.size());
        for (const auto& [id, r] : done) QCOMPARE(r.tokens, want[index[id]]);

        // A failing read of experts mid-generation.
        struct Failing final : model::ExpertProvider {
            model::ExpertProvider* real;
            bool armed = false;
            void demand(int64_t layer, std::span<const int32_t> e) override {
                if (armed) throw Error("reading experts: Input/output error");
                real->demand(layer, e);
            }
            int32_t take(int64_t layer, model::FfnMatrices* out) override { return real->take(layer, out); }
            int32_t take_if_ready(int64_t layer, model::FfnMatrices* out) override { return real->take_if_ready(layer, out); }
            void release(int64_t layer, int32_t e) override { real->release(layer, e); }
        } failing;
        failing.real = eng->expert_store();
        QVERIFY(failing.real);
        eng->context().set_expert_provider(&failing);
        done.clear();
        submit(jobs[0]);
        submit(jobs[1]);
        QVERIFY(core.step());  // the first pass reads the prompts
        failing.armed = true;
        core.set_max_batch(3);  // requests run: applies once they are done
        QCOMPARE(core.max_batch(), 2);
        QVERIFY(!core.step());
        QCOMPARE(failed.size(), size_t{2});
        for (const std::string& why : failed) QVERIFY(QString::fromStdString(why).contains("Input/output error"));
        QVERIFY(done.empty());
        QVERIFY(core.idle());

        // The core goes on: the same requests give what they gave alone.
        failing.armed = false;
        eng->context().set_expert_provider(failing.real);
        index.clear();
        for (size_t i = 0; i < jobs.size(); ++i) index[submit(jobs[i])] = i;
        while (core.step()) {}
        QCOMPARE(done.size(), jobs.size());
        for (const auto& [id, r] : done) QCOMPARE(r.tokens, want[index[id]]);
        QCOMPARE(core.max_batch(), 3);  // the batch size asked for while they ran
    }

    // The demo model, and qwen35moe, whose preempted sequences' recurrent
    // state is computed again from their first token when they resume.
    void kv_exhaustion_waits_or_preempts_and_the_ledger_holds_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("demo") << QString::fromStdString(kDemo);
        QTest::newRow("qwen35moe") << "qwen35moe-tiny-f32";
    }
    void kv_exhaustion_waits_or_preempts_and_the_ledger_holds() {
        QFETCH(QString, model);
        std::string path = model.toStdString();
        if (model == "qwen35moe-tiny-f32") {
            STRATA_REQUIRE_FIXTURES();
            path = test::fixture_path("models/qwen35moe-tiny-f32.gguf");
        }
        EngineSettings es;
        es.kv_tokens = 20 * 16;  // 20 blocks for 16 requests of up to ~110 tokens
        es.n_ctx = 256;
        es.threads = 2;
        es.fast_budget = 256ull << 20;
        auto eng = core::Engine::load(path, es);
        const auto& vocab = eng->vocab();
        const auto jobs = make_jobs(vocab, 16, 2);
        model::Context solo(eng->model(), test::context_params(256, 64, 2));
        std::vector<std::vector<int32_t>> want;
        for (const Job& j : jobs) want.push_back(alone(solo, vocab, j));

        sched::SchedulerConfig sc;
        sc.max_batch = 16;
        sched::Scheduler s(eng->context(), vocab, sc);
        std::map<int64_t, size_t> index;
        std::map<int64_t, sched::RequestResult> got;
        for (size_t i = 0; i < jobs.size(); ++i)
            index[s.submit(jobs[i].prompt, jobs[i].params, 0, {}, [&](const sched::RequestResult& r) { got[r.id] = r; })] = i;
        const memory::Ledger& ledger = eng->ledger();
        const uint64_t kv_reserved = ledger.reserved(memory::Account::KvPages, memory::Tier::Fast);
        while (s.step()) {
            QVERIFY(ledger.used(memory::Account::KvPages, memory::Tier::Fast) <= kv_reserved);
            QVERIFY(ledger.reserved(memory::Tier::Fast) <= es.fast_budget);
        }
        QCOMPARE(got.size(), jobs.size());
        for (const auto& [id, r] : got) {
            QVERIFY2(r.finish != sched::FinishReason::ContextFull, "a request failed for want of KV blocks");
            QCOMPARE(r.tokens, want[index[id]]);
        }
        QVERIFY2(s.stats().preemptions > 0, "the test should exercise preemption");
        QCOMPARE(eng->kv_cache().stats().used_blocks, int64_t{0});
    }

    void a_request_larger_than_the_whole_cache_ends_with_a_reason() {
        auto m = model::Model::load(kDemo);
        kv::KvCache kvc(model::kv_cache_params(m->config(), 2));
        model::Context ctx(*m, test::context_params(256, 64, 2), nullptr, nullptr, &kvc);
        sched::Scheduler s(ctx, m->vocab(), {});
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 100;
        sched::RequestResult res;
        s.submit(m->vocab().encode(kTexts[0], true), p, 0, {}, [&](const sched::RequestResult& r) { res = r; });
        s.run();
        QCOMPARE(res.finish, sched::FinishReason::ContextFull);
        QVERIFY(res.tokens.size() > 0);  // it generated until the cache was full
    }

    void cancellation_at_any_time() {
        auto m = model::Model::load(kDemo);
        model::Context ctx(*m, test::context_params(256, 256, 2));
        // Own pool holds one sequence of 256: 16 blocks, enough for a few short requests.
        sched::SchedulerConfig sc;
        sc.max_batch = 2;
        sched::Scheduler s(ctx, m->vocab(), sc);
        sched::SamplingParams p;
        p.temperature = 0.7f;
        p.max_tokens = 60;
        std::map<int64_t, sched::RequestResult> got;
        std::vector<int64_t> ids;
        for (int i = 0; i < 5; ++i)
            ids.push_back(s.submit(m->vocab().encode(kTexts[i], true), p, 0, {},
                                   [&](const sched::RequestResult& r) { got[r.id] = r; }));
        s.cancel(ids[4]);          // waiting
        s.step();
        s.step();
        s.cancel(ids[0]);          // running
        s.cancel(12345);           // unknown: ignored
        s.run();
        QCOMPARE(got.size(), size_t{5});
        QCOMPARE(got[ids[4]].finish, sched::FinishReason::Cancelled);
        QCOMPARE(got[ids[4]].tokens.size(), size_t{0});
        QCOMPARE(got[ids[0]].finish, sched::FinishReason::Cancelled);
        for (int i = 1; i < 4; ++i) QVERIFY(got[ids[i]].finish != sched::FinishReason::Cancelled);
        QCOMPARE(ctx.kv_cache().stats().used_blocks, int64_t{0});
    }

    void priority_goes_first_and_long_sequences_yield() {
        auto m = model::Model::load(kDemo);
        model::Context ctx(*m, test::context_params(256, 256, 2));
        sched::SchedulerConfig sc;
        sc.max_batch = 1;
        sc.group_by_experts = false;
        sched::Scheduler s(ctx, m->vocab(), sc);
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 3;
        std::vector<int64_t> order;
        auto done = [&](const sched::RequestResult& r) { order.push_back(r.id); };
        const int64_t low = s.submit(m->vocab().encode(kTexts[0], true), p, 0, {}, done);
        const int64_t high = s.submit(m->vocab().encode(kTexts[1], true), p, 5, {}, done);
        s.run();
        QCOMPARE(order, (std::vector<int64_t>{high, low}));

        sched::SchedulerConfig lc = sc;
        lc.long_threshold = 20;
        sched::Scheduler s2(ctx, m->vocab(), lc);
        order.clear();
        const int64_t lng = s2.submit(m->vocab().encode(kTexts[6], true), p, 0, {}, done);  // > 20 tokens
        const int64_t shrt = s2.submit(m->vocab().encode(kTexts[3], true), p, 0, {}, done);
        s2.run();
        QCOMPARE(order, (std::vector<int64_t>{shrt, lng}));
    }

    void same_system_prompt_shares_kv_blocks() {
        auto m = model::Model::load(kDemo);
        model::Context ctx(*m, test::context_params(256, 256, 2));
        sched::Scheduler s(ctx, m->vocab(), {});
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 5;
        const std::string sys = std::string(kTexts[4]) + " " + kTexts[6];
        std::vector<sched::RequestResult> res;
        auto done = [&](const sched::RequestResult& r) { res.push_back(r); };
        s.submit(m->vocab().encode(sys + " And", true), p, 0, {}, done);
        s.run();
        s.submit(m->vocab().encode(sys + " Then", true), p, 0, {}, done);
        s.run();
        QCOMPARE(res.size(), size_t{2});
        QCOMPARE(res[0].prefix_reused, int64_t{0});
        QVERIFY2(res[1].prefix_reused >= 32, qPrintable(QString::number(res[1].prefix_reused)));
        model::Context solo(*m, test::context_params(256, 64, 2));
        QCOMPARE(res[1].tokens, sched::generate(solo, m->vocab(), p, m->vocab().encode(sys + " Then", true)).tokens);
    }

    void batch_forming_timeout_waits_for_company() {
        auto m = model::Model::load(kDemo);
        model::Context ctx(*m, test::context_params(256, 256, 2));
        sched::SchedulerConfig sc;
        sc.max_batch = 4;
        sc.batch_timeout_s = 0.3;
        sched::Scheduler s(ctx, m->vocab(), sc);
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 2;
        s.submit(m->vocab().encode(kTexts[0], true), p);
        QVERIFY(s.step());
        QCOMPARE(s.stats().steps, int64_t{0});  // alone and young: it waits for company
        QCOMPARE(s.running(), size_t{0});
        QTest::qSleep(350);
        QVERIFY(s.step());                       // the timeout passed: it runs alone
        QCOMPARE(s.stats().steps, int64_t{1});
        s.run();
        // A full batch does not wait.
        sched::Scheduler full(ctx, m->vocab(), sc);
        for (int i = 0; i < 4; ++i) full.submit(m->vocab().encode(kTexts[i], true), p);
        QVERIFY(full.step());
        QCOMPARE(full.stats().steps, int64_t{1});
        QCOMPARE(full.running(), size_t{4});
        full.run();
    }

    void admission_prefers_requests_that_share_experts() {
        // One request runs (slot 1 of 2); B waits first, A second. A repeats
        // the running request's tokens, so its predicted experts overlap it
        // more: with grouping A is admitted first, without it B (arrival order).
        auto m = model::Model::load(kDemo);
        const auto running = m->vocab().encode(kTexts[0], true);
        const auto other = m->vocab().encode("Honour thy father and thy mother: that thy days may be long", true);
        std::vector<int32_t> similar = running;
        similar.push_back(running.back());
        for (bool group : {true, false}) {
            model::Context ctx(*m, test::context_params(256, 256, 2));
            sched::SchedulerConfig sc;
            sc.max_batch = 2;
            sc.group_by_experts = group;
            sc.prefix_sharing = false;
            sched::Scheduler s(ctx, m->vocab(), sc);
            sched::SamplingParams p;
            p.temperature = 0;
            p.max_tokens = 8;
            std::map<int64_t, sched::RequestResult> got;
            auto done = [&](const sched::RequestResult& r) { got[r.id] = r; };
            s.submit(running, p, 0, {}, done);
            QVERIFY(s.step());  // admits and starts the first request
            sched::SamplingParams longer = p;
            longer.max_tokens = 20;
            s.submit(running, longer, 0, {}, done);  // fills the second slot for a while
            QVERIFY(s.step());
            const int64_t b = s.submit(other, p, 0, {}, done);
            const int64_t a = s.submit(similar, p, 0, {}, done);
            s.run();
            QCOMPARE(got.size(), size_t{4});
            if (group)
                QVERIFY2(got[a].queue_s < got[b].queue_s, "the request sharing experts should be admitted first");
            else
                QVERIFY2(got[b].queue_s < got[a].queue_s, "without grouping, arrival order");
        }
    }

    void bad_requests_and_config_are_clear_errors() {
        auto m = model::Model::load(kDemo);
        model::Context ctx(*m, test::context_params(64, 64, 2));
        sched::SchedulerConfig bad;
        bad.max_batch = 0;
        QVERIFY_THROWS_EXCEPTION(Error, sched::Scheduler(ctx, m->vocab(), bad));
        sched::Scheduler s(ctx, m->vocab(), {});
        sched::SamplingParams p;
        QVERIFY_THROWS_EXCEPTION(Error, s.submit({}, p));
        QVERIFY_THROWS_EXCEPTION(Error, s.submit(std::vector<int32_t>(64, 5), p));
        QVERIFY_THROWS_EXCEPTION(Error, s.submit({1, 99999}, p));
        sched::SamplingParams badp;
        badp.top_p = 2.0f;
        QVERIFY_THROWS_EXCEPTION(Error, s.submit({1, 2}, badp));
        QVERIFY(s.idle());
    }
};

QTEST_APPLESS_MAIN(TestScheduler)
#include "test_scheduler.moc"
