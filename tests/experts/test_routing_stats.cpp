// Routing statistics: the LRU simulation, the uniform baselines, and the
// collector's figures on hand-made routing streams whose answers are known.
#include <QtTest>

#include <random>

#include "analysis/routing_stats.h"
#include "model/model.h"
#include "test_support.h"

using namespace strata;

namespace {

model::ModelConfig config(int64_t layers, int64_t experts, int64_t used) {
    model::ModelConfig c;
    c.n_layer = layers;
    c.n_expert = experts;
    c.n_expert_used = used;
    return c;
}

void route(experts::RoutingStatsCollector& s, int64_t layer, int64_t pos, std::vector<int32_t> ids) {
    std::vector<float> w(ids.size(), 1.0f / ids.size());
    s.on_route(model::RoutingEvent{layer, pos, ids.data(), w.data(), static_cast<int64_t>(ids.size()), nullptr, 0});
}

}  // namespace

class TestRoutingStats : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void lru_set() {
        experts::LruSet lru(2);
        QVERIFY(!lru.access(1));
        QVERIFY(!lru.access(2));
        QVERIFY(lru.access(1));   // 1 is now most recent
        QVERIFY(!lru.access(3));  // evicts 2
        QVERIFY(lru.access(1));
        QVERIFY(!lru.access(2));
        experts::LruSet none(0);
        QVERIFY(!none.access(1));
        QVERIFY(!none.access(1));
    }

    void baselines() {
        experts::RoutingStatsReport r;
        r.n_expert = 16;
        r.n_used = 2;
        QCOMPARE(r.max_entropy_bits(), 4.0);
        QVERIFY(std::fabs(r.uniform_reuse() - (1.0 - 14.0 * 13.0 / (16.0 * 15.0))) < 1e-12);
        QCOMPARE(r.uniform_lookahead(), 0.125);
    }

    // A stream that always routes to the same two experts: zero... one bit of
    // entropy, full reuse, perfect LRU after the first token.
    void constant_routing() {
        experts::RoutingStatsCollector s(config(2, 8, 2));
        s.begin_sequence();
        for (int pos = 0; pos < 100; ++pos) route(s, 1, pos, {3, 5});
        const auto r = s.report();
        QCOMPARE(r.layers.size(), size_t{1});
        QCOMPARE(r.tokens, int64_t{100});
        QCOMPARE(r.layers[0].entropy_bits, 1.0);
        QCOMPARE(r.layers[0].reuse_fraction(), 1.0);
        QCOMPARE(r.layers[0].lru_hit_rate(0), 198.0 / 200.0);  // 25% of 8 = 2 slots
        QVERIFY(r.to_json().find("\"consecutive_reuse\": 1") != std::string::npos);
    }

    // Uniform random routing lands on the baselines.
    void random_routing_matches_baselines() {
        experts::RoutingStatsCollector s(config(1, 16, 2));
        std::mt19937 rng(7);
        s.begin_sequence();
        for (int pos = 0; pos < 40000; ++pos) {
            int32_t a = rng() % 16, b;
            do b = rng() % 16;
            while (b == a);
            route(s, 0, pos, {a, b});
        }
        const auto r = s.report();
        QVERIFY(std::fabs(r.layers[0].entropy_bits - 4.0) < 0.01);
        QVERIFY(std::fabs(r.layers[0].reuse_fraction() - r.uniform_reuse()) < 0.01);
        QVERIFY(std::fabs(r.uniform_lru_hit_rate(0) - (4.0 / 16 + 3.0 / 15) / 2) < 1e-12);
        QVERIFY(std::fabs(r.layers[0].lru_hit_rate(0) - r.uniform_lru_hit_rate(0)) < 0.01);
        QVERIFY(std::fabs(r.layers[0].lru_hit_rate(1) - r.uniform_lru_hit_rate(1)) < 0.01);
    }

    void lookahead_precision() {
        experts::RoutingStatsCollector s(config(2, 4, 2));
        s.begin_sequence();
        const float right[4] = {0.4f, 0.0f, 0.5f, 0.1f};   // predicts {2, 0}
        const float half[4] = {0.4f, 0.5f, 0.0f, 0.1f};    // predicts {1, 0}
        s.on_lookahead({1, 0, right, 4});
        route(s, 1, 0, {0, 2});
        s.on_lookahead({1, 1, half, 4});
        route(s, 1, 1, {0, 2});
        const auto r = s.report();
        QCOMPARE(r.layers[0].predicted, int64_t{2});
        QCOMPARE(r.layers[0].lookahead_precision(), 0.75);
        QCOMPARE(r.layers[0].predicted_exact, int64_t{1});
    }

    // The published figures: the share of selections repeated from the
    // previous token, and made within the previous 8, on streams whose answers
    // are known, and on uniform routing against their baselines.
    void selection_repeat_and_window() {
        experts::RoutingStatsCollector s(config(1, 8, 2));
        s.begin_sequence();
        route(s, 0, 0, {0, 1});
        route(s, 0, 1, {1, 2});   // repeats 1 of 2
        route(s, 0, 2, {3, 4});   // repeats 0
        const auto r = s.report();
        QCOMPARE(r.layers[0].repeat_tokens, int64_t{2});
        QCOMPARE(r.layers[0].selection_repeat(), 0.25);
        QCOMPARE(r.layers[0].window_tokens, int64_t{0});  // no token had 8 before it

        experts::RoutingStatsCollector w(config(1, 20, 2));
        w.begin_sequence();
        for (int pos = 0; pos < 9; ++pos) route(w, 0, pos, {pos % 8, 8 + pos % 8});  // token 8 repeats token 0: 1
        route(w, 0, 9, {18, 0});  // expert 18 never seen, 0 by token 8: 1/2
        const auto rw = w.report();
        QCOMPARE(rw.layers[0].window_tokens, int64_t{2});
        QCOMPARE(rw.layers[0].selection_window(), 0.5 * (1.0 + 0.5));

        experts::RoutingStatsCollector u(config(1, 32, 4));
        std::mt19937 rng(11);
        u.begin_sequence();
        for (int pos = 0; pos < 30000; ++pos) {
            std::vector<int32_t> ids;
            while (ids.size() < 4) {
                const int32_t e = static_cast<int32_t>(rng() % 32);
                if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
            }
            route(u, 0, pos, ids);
        }
        const auto ru = u.report();
        QCOMPARE(ru.uniform_selection_repeat(), 0.125);
        QVERIFY(std::fabs(ru.uniform_selection_window() - (1.0 - std::pow(0.875, 8))) < 1e-12);
        QVERIFY(std::fabs(ru.mean_selection_repeat() - ru.uniform_selection_repeat()) < 0.01);
        QVERIFY(std::fabs(ru.mean_selection_window() - ru.uniform_selection_window()) < 0.01);
        QVERIFY(ru.to_json().find("\"selection_within_8_uniform\"") != std::string::npos);
    }

    // Pairs never cross prompts.
    void sequences_are_separate() {
        experts::RoutingStatsCollector s(config(1, 8, 1));
        s.begin_sequence();
        route(s, 0, 0, {1});
        route(s, 0, 1, {1});
        s.begin_sequence();
        route(s, 0, 0, {2});
        const auto r = s.report();
        QCOMPARE(r.layers[0].pairs, int64_t{1});
        QCOMPARE(r.layers[0].reuse_pairs, int64_t{1});
    }

    // On a real model, every routed token is seen in every MoE layer.
    void fixture_model() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-f32.gguf"));
        model::Context ctx(*m, {});
        experts::RoutingStatsCollector s(m->config());
        s.attach(ctx);
        s.begin_sequence();
        const auto toks = m->vocab().encode("Once upon a time there was a little dog.", true);
        ctx.decode(toks, false);
        const auto r = s.report();
        QCOMPARE(r.layers.size(), size_t{4});
        QCOMPARE(r.tokens, static_cast<int64_t>(toks.size()));
        for (const auto& L : r.layers) {
            int64_t total = 0;
            for (int64_t c : L.load) total += c;
            QCOMPARE(total, static_cast<int64_t>(toks.size()) * 2);
            if (L.layer > 0) QCOMPARE(L.predicted, static_cast<int64_t>(toks.size()));
        }
    }
};

QTEST_APPLESS_MAIN(TestRoutingStats)
#include "test_routing_stats.moc"
