// Speculative decoding on the demo model with self-drafts (the same weights
// with fewer experts or fewer layers): at temperature 0 the output equals
// plain decoding token for token; at temperature > 0 the distribution of the
// generated tokens matches plain sampling (and would not with a broken
// acceptance rule); vocabulary mismatches and bad k are clear errors. The
// file's own MTP block drafts on make-model files that have one, and a
// recurrent target is rewound through its state slots.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "context_params.h"
#include "error_of.h"
#include "core/engine.h"
#include "experts/expert_store.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "sched/drafter.h"
#include "sched/generator.h"
#include "sched/speculative.h"
#include "test_support.h"

using namespace strata;

namespace {

const std::string kDemo = test::demo_model_path();

const char* kTexts[] = {
    "In the beginning God created the heaven and the earth.",
    "And the LORD spake unto Moses, saying,",
    "Blessed are the poor in spirit: for theirs is the kingdom of heaven.",
    "The LORD is my shepherd; I shall not want.",
};

model::ContextParams draft_params(int64_t layers, int64_t experts) {
    model::ContextParams p = test::context_params(256, 64, 2);
    p.max_layers = layers;
    p.n_expert_used = experts;
    return p;
}

// Total variation distance between two empirical distributions.
double tv(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, int n) {
    std::map<int32_t, double> d;
    for (const auto& [k, v] : a) d[k] += static_cast<double>(v) / n;
    for (const auto& [k, v] : b) d[k] -= static_cast<double>(v) / n;
    double s = 0;
    for (const auto& [k, v] : d) s += std::fabs(v);
    return s / 2;
}

}  // namespace

class TestSpeculative : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void greedy_output_equals_plain_decoding() {
        auto m = model::Model::load(kDemo);
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 64;
        // Plain decoding of each text, once (the same for every draft and k).
        std::vector<sched::GenerationResult> plain_results;
        for (const char* text : kTexts) {
            model::Context plain(*m, test::context_params(256, 64, 2));
            plain_results.push_back(sched::generate(plain, m->vocab(), p, m->vocab().encode(text, true)));
        }
        for (auto [layers, experts] : {std::pair<int64_t, int64_t>{0, 1}, {4, 0}, {2, 1}}) {
            for (int k : {1, 3, 6}) {
                double acc_sum = 0;
                for (size_t ti = 0; ti < std::size(kTexts); ++ti) {
                    const auto prompt = m->vocab().encode(kTexts[ti], true);
                    const sched::GenerationResult& want = plain_results[ti];
                    model::Context target(*m, test::context_params(256, 64, 2));
                    model::Context draft(*m, draft_params(layers, experts));
                    sched::SpeculativeParams sp;
                    sp.k = k;
                    sp.k_max = std::max(8, k);
                    sched::SpeculativeStats st;
                    const auto got = sched::generate_speculative(target, draft, m->vocab(), p, prompt, sp, &st);
                    QCOMPARE(got.tokens, want.tokens);
                    QCOMPARE(got.text, want.text);
                    QCOMPARE(got.finish, want.finish);
                    QVERIFY(st.rounds > 0 && st.rounds < static_cast<int64_t>(got.tokens.size()) + 1);
                    acc_sum += st.acceptance();
                }
                qInfo("draft layers=%lld experts=%lld k=%d: mean acceptance %.3f", static_cast<long long>(layers),
                      static_cast<long long>(experts), k, acc_sum / std::size(kTexts));
            }
        }
    }

    // The file's own NextN/MTP block as the draft, on make-model files of the
    // two families that carry one (qwen35moe's target is recurrent: its state
    // slots take the rejected drafts back): greedy output equals plain
    // decoding, the block proposes every round, and a file without the block
    // is refused naming it.
    void mtp_draft_output_equals_plain_decoding_data() {
        QTest::addColumn<QString>("arch");
        QTest::newRow("glm4moe") << "glm4moe";
        QTest::newRow("qwen35moe") << "qwen35moe";
    }
    void mtp_draft_output_equals_plain_decoding() {
        QFETCH(QString, arch);
        QTemporaryDir dir;
        const std::string path = dir.filePath("mtp.gguf").toStdString();
        model::MakeModelSpec spec;
        spec.arch = arch.toStdString();
        spec.layers = 4;
        spec.dim = 128;
        spec.heads = 4;
        spec.kv_heads = 2;
        spec.experts = 8;
        spec.used = 2;
        spec.expert_ff = 128;
        spec.nextn = 1;
        if (arch == "glm4moe") spec.shared_experts = 1;
        else spec.shared_ff = 128;
        model::make_model(spec, path);
        auto m = model::Model::load(path);
        QVERIFY(m->nextn() != nullptr);
        QCOMPARE(m->config().n_layer, int64_t{4});  // the trunk: the block is not one of its layers
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 40;
        const auto prompt = m->vocab().encode("abc def ghi", true);
        model::Context plain(*m, test::context_params(256, 64, 2));
        const auto want = sched::generate(plain, m->vocab(), p, prompt);
        model::Context target(*m, test::context_params(256, 64, 2));
        sched::MtpDrafter mtp(*m, test::context_params(256, 64, 2));
        for (int k : {1, 3}) {
            target.clear();
            sched::SpeculativeParams sp;
            sp.k = k;
            sp.k_max = 2 * k;
            sched::SpeculativeStats st;
            const auto got = sched::generate_speculative(target, mtp, m->vocab(), p, prompt, sp, &st);
            QCOMPARE(got.tokens, want.tokens);
            QCOMPARE(got.text, want.text);
            QVERIFY(st.rounds > 0 && st.drafted >= st.rounds);
        }
        // A draft never sure enough (p_min 1) proposes nothing: plain decoding, one token a round.
        target.clear();
        sched::SpeculativeParams unsure;
        unsure.p_min = 1.0f;
        sched::SpeculativeStats st;
        QCOMPARE(sched::generate_speculative(target, mtp, m->vocab(), p, prompt, unsure, &st).tokens, want.tokens);
        QCOMPARE(st.drafted, int64_t{0});
        QCOMPARE(st.rounds + 1, static_cast<int64_t>(want.tokens.size()));  // the first token comes from the prompt pass
        spec.nextn = 0;
        const std::string plain_path = dir.filePath("plain.gguf").toStdString();
        model::make_model(spec, plain_path);
        auto no_block = model::Model::load(plain_path);
        QVERIFY(no_block->nextn() == nullptr);
        const QString err = test::error_of([&] { sched::MtpDrafter d(*no_block, test::context_params(256, 64, 2)); });
        QVERIFY2(err.contains("no NextN/MTP block"), qPrintable(err));
    }

    // The MTP draft catching up round by round (kept positions, the target's
    // rows shifted by one) gives the logits a fresh draft computes from the
    // same accepted tokens and target rows in one go.
    void mtp_catch_up_equals_a_fresh_start() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("mtp.gguf").toStdString();
        model::MakeModelSpec spec;
        spec.arch = "glm4moe";
        spec.layers = 2;
        spec.dim = 128;
        spec.heads = 4;
        spec.kv_heads = 2;
        spec.experts = 4;
        spec.used = 2;
        spec.expert_ff = 128;
        spec.nextn = 1;
        model::make_model(spec, path);
        auto m = model::Model::load(path);
        const int64_t V = m->config().n_vocab, E = m->config().n_embd;
        std::vector<int32_t> seq = m->vocab().encode("the quick brown fox", true);
        for (int32_t t : {40, 41, 42, 43, 44, 45}) seq.push_back(t);
        // The target's rows for every position.
        model::ContextParams tp = test::context_params(256, 64, 2);
        tp.keep_hidden = true;
        model::Context target(*m, tp);
        target.decode(seq, false);
        const std::vector<float> h(target.hidden(), target.hidden() + seq.size() * E);

        sched::MtpDrafter step(*m, test::context_params(256, 64, 2));
        step.begin(4);
        const size_t first = seq.size() - 6;
        step.target_ran(0, static_cast<int64_t>(first), h.data());
        step.start(std::span<const int32_t>(seq).first(first));
        step.next(90);  // a proposal, rejected below
        step.next(91);
        step.target_ran(static_cast<int64_t>(first), 6, h.data() + first * E);
        step.start(seq);
        const float* again = step.start(seq);  // keeps all but the last position
        const std::vector<float> got(again, again + V);

        sched::MtpDrafter fresh(*m, test::context_params(256, 64, 2));
        fresh.begin(4);
        fresh.target_ran(0, static_cast<int64_t>(seq.size()), h.data());
        const float* want = fresh.start(seq);
        QVERIFY(std::memcmp(got.data(), want, V * sizeof(float)) == 0);
    }

    // A second request that starts like the first (a chat's next turn) takes
    // the first one's full KV blocks instead of recomputing them, and its
    // output is still plain decoding's.
    void a_repeated_prompt_reuses_cached_blocks() {
        auto m = model::Model::load(kDemo);
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 24;
        std::vector<int32_t> prompt = m->vocab().encode(std::string(kTexts[0]) + " " + kTexts[2] + " " + kTexts[3], true);
        QVERIFY(prompt.size() > 32);
        model::Context plain(*m, test::context_params(256, 64, 2));
        const auto want = sched::generate(plain, m->vocab(), p, prompt);
        model::Context target(*m, test::context_params(256, 64, 2));
        model::Context draft(*m, draft_params(0, 1));
        const auto first = sched::generate_speculative(target, draft, m->vocab(), p, prompt, {});
        QCOMPARE(first.prefix_reused, int64_t{0});
        QCOMPARE(first.tokens, want.tokens);
        target.clear();
        draft.clear();
        const auto again = sched::generate_speculative(target, draft, m->vocab(), p, prompt, {});
        QCOMPARE(again.prefix_reused, static_cast<int64_t>(prompt.size() - 1) / 16 * 16);
        QCOMPARE(again.tokens, want.tokens);
        // A longer prompt with the same start (the next turn) reuses too.
        target.clear();
        draft.clear();
        std::vector<int32_t> longer = prompt;
        for (int32_t t : m->vocab().encode(kTexts[1], false)) longer.push_back(t);
        model::Context plain2(*m, test::context_params(256, 64, 2));
        const auto want2 = sched::generate(plain2, m->vocab(), p, longer);
        const auto next = sched::generate_speculative(target, draft, m->vocab(), p, longer, {});
        QVERIFY(next.prefix_reused >= 32);
        QCOMPARE(next.tokens, want2.tokens);
    }

    void sampling_keeps_the_target_distribution() {
        // The distribution of the first three generated tokens (top-k 2: at
        // most 8 outcomes) over many seeds, speculative vs plain sampling.
        // With a deliberately poor draft (2 layers, 1 expert) most draft
        // tokens are rejected and resampled, so a wrong rule would show; the
        // draft's own distribution is far off. Expected sampling noise in the
        // TV distance is ~0.05.
        auto m = model::Model::load(kDemo);
        const auto prompt = m->vocab().encode("And God said,", true);
        sched::SamplingParams p;
        p.temperature = 1.0f;
        p.top_k = 2;
        p.top_p = 1.0f;
        p.min_p = 0.0f;
        p.max_tokens = 3;
        const int n = 1000;
        // Outcomes are indexed by first appearance, so the map keys stay small.
        std::map<std::vector<int32_t>, int32_t> outcome;
        auto key = [&](const std::vector<int32_t>& t) {
            return outcome.emplace(t, static_cast<int32_t>(outcome.size())).first->second;
        };
        model::Context plain(*m, test::context_params(256, 64, 2));
        std::map<int32_t, int> plain_hist;
        for (int i = 0; i < n; ++i) {
            p.seed = 1000 + static_cast<uint64_t>(i);
            plain.clear();
            const auto a = sched::generate(plain, m->vocab(), p, prompt);
            if (a.tokens.size() == 3) ++plain_hist[key(a.tokens)];
        }
        // A poor draft (most tokens rejected and resampled) and a good one
        // (most accepted): both paths of the rule.
        for (auto [layers, experts] : {std::pair<int64_t, int64_t>{2, 1}, {0, 1}}) {
            model::Context target(*m, test::context_params(256, 64, 2));
            model::Context draft(*m, draft_params(layers, experts));
            sched::SpeculativeParams sp;
            sp.k = 3;
            sp.adaptive = false;
            std::map<int32_t, int> spec_hist, draft_only_hist;
            int64_t drafted = 0, accepted = 0;
            for (int i = 0; i < n; ++i) {
                p.seed = 5000 + static_cast<uint64_t>(i);
                target.clear();
                draft.clear();
                sched::SpeculativeStats st;
                const auto b = sched::generate_speculative(target, draft, m->vocab(), p, prompt, sp, &st);
                if (b.tokens.size() == 3) ++spec_hist[key(b.tokens)];
                drafted += st.drafted;
                accepted += st.accepted;
                draft.clear();
                const auto c = sched::generate(draft, m->vocab(), p, prompt);  // the draft's own distribution
                if (c.tokens.size() == 3) ++draft_only_hist[key(c.tokens)];
            }
            const double d_spec = tv(plain_hist, spec_hist, n);
            const double d_draft = tv(plain_hist, draft_only_hist, n);
            qInfo("draft layers=%lld experts=%lld: TV(plain, speculative) = %.3f; TV(plain, draft alone) = %.3f; "
                  "acceptance %.3f", static_cast<long long>(layers), static_cast<long long>(experts), d_spec, d_draft,
                  static_cast<double>(accepted) / drafted);
            QVERIFY2(d_spec < 0.1, qPrintable(QString::number(d_spec)));
            QVERIFY2(d_draft > 3 * d_spec, "the draft must differ from the target for this test to mean anything");
        }
    }

    void resident_only_draft_over_a_cache_is_exact_and_loads_nothing() {
        EngineSettings es;
        es.expert_cache_fraction = 0.25;
        es.policy = "lfu";
        es.threads = 2;
        auto eng = core::Engine::load(kDemo, es);
        sched::SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 48;
        const auto prompt = eng->vocab().encode(kTexts[2], true);
        model::Context plain(eng->model(), test::context_params(256, 64, 2));
        const auto want = sched::generate(plain, eng->vocab(), p, prompt);

        experts::DraftExperts view(*eng->expert_store());
        model::ContextParams dp = test::context_params(256, 64, 2);
        dp.resident_experts_only = true;
        model::Context draft(eng->model(), dp, &eng->context().weights(), &view);
        // Warm the cache with the target, then the draft alone: it routes only
        // to resident experts, so it loads nothing, and its lookups are not
        // counted as the model's expert uses.
        eng->context().decode(prompt, false);
        eng->wait_idle();
        eng->context().clear();
        const auto before = eng->expert_store()->stats();
        draft.decode(prompt, false);
        for (int i = 0; i < 16; ++i) {
            const int32_t t = 5 + i;
            draft.decode({&t, 1}, false);
        }
        eng->wait_idle();
        const auto after = eng->expert_store()->stats();
        QCOMPARE(after.bytes_loaded, before.bytes_loaded);
        QCOMPARE(after.demanded, before.demanded);
        draft.clear();

        sched::SpeculativeStats st;
        const auto got = sched::generate_speculative(eng->context(), draft, eng->vocab(), p, prompt, {}, &st);
        QCOMPARE(got.tokens, want.tokens);
        qInfo("resident-only draft at 25%%: acceptance %.3f over %lld rounds", st.acceptance(), static_cast<long long>(st.rounds));
        QVERIFY(st.acceptance() > 0.3);
    }

    void mismatched_vocabulary_and_bad_k_are_errors() {
        auto m = model::Model::load(kDemo);
        model::Context target(*m, test::context_params(256, 64, 2));
        model::Context draft(*m, test::context_params(256, 64, 2));
        sched::SamplingParams p;
        sched::SpeculativeParams bad;
        bad.k = 0;
        QVERIFY_THROWS_EXCEPTION(Error, sched::generate_speculative(target, draft, m->vocab(), p, {1, 2}, bad));
        QVERIFY_THROWS_EXCEPTION(Error, model::Context(*m, draft_params(99, 0)));
        QVERIFY_THROWS_EXCEPTION(Error, model::Context(*m, draft_params(0, 5)));
        STRATA_REQUIRE_FIXTURES();
        auto other = model::Model::load(test::fixture_path("models/moe-tiny-f32.gguf"));
        model::Context od(*other, test::context_params(256, 64, 2));
        try {
            sched::generate_speculative(target, od, m->vocab(), p, {1, 2}, {});
            QFAIL("expected a vocabulary mismatch");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("vocabulary"), e.what());
        }
        QVERIFY(!sched::vocab_mismatch(m->vocab(), other->vocab()).empty());
        QVERIFY(sched::vocab_mismatch(m->vocab(), m->vocab()).empty());
    }
};

QTEST_APPLESS_MAIN(TestSpeculative)
#include "test_speculative.moc"
