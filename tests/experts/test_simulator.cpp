// Traces (round trip, every kind of bad file), the predictor's strategies and
// accounting, the simulator on hand-made traces with known answers, the
// projection arithmetic on the seed-125b profile, calibration files, and a
// trace recorded from the fixture model.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "common/error.h"
#include "analysis/hardware_profile.h"
#include "experts/predictor.h"
#include "analysis/simulator.h"
#include "experts/trace.h"
#include "model/model.h"
#include "test_support.h"

using namespace strata;
using namespace strata::experts;

namespace {

TraceHeader small_header() {
    TraceHeader h;
    h.model_name = std::string("test-model");
    h.n_layer = 3;
    h.n_expert = 4;
    h.n_used = 2;
    h.expert_bytes = 1000;
    h.shared_bytes = 500;
    h.moe_layers = {1, 2};
    return h;
}

size_t header_size(const TraceHeader& h) { return 8 + 4 + 4 + 16 + 16 + 4 + h.model_name.size() + 4 * h.moe_layers.size(); }

std::vector<uint8_t> slurp(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void route(TraceWriter& w, int64_t layer, int64_t pos, std::vector<int32_t> ids) {
    std::vector<float> wt(ids.size(), 0.5f);
    w.on_route({layer, pos, ids.data(), wt.data(), static_cast<int64_t>(ids.size()), nullptr, 4});
}

// A prefill step of 2 tokens (layer-major, as the Context emits them) and one
// decode step; lookahead for layer 2 only.
void write_small(const QString& path) {
    TraceWriter w(path.toStdString(), small_header());
    const float look0[4] = {0.1f, 0.2f, 0.3f, 0.4f}, look1[4] = {0.4f, 0.3f, 0.2f, 0.1f}, look2[4] = {0.7f, 0.1f, 0.1f, 0.1f};
    w.begin_sequence();
    w.begin_step(2);
    const int32_t ids[2] = {11, 12};
    w.tokens(0, ids);
    route(w, 1, 0, {0, 1});
    route(w, 1, 1, {2, 3});
    w.on_lookahead({2, 0, look0, 4});
    w.on_lookahead({2, 1, look1, 4});
    route(w, 2, 0, {3, 2});
    route(w, 2, 1, {0, 1});
    w.begin_step(1);
    route(w, 1, 2, {1, 2});
    w.on_lookahead({2, 2, look2, 4});
    route(w, 2, 2, {0, 3});
    w.finish();
    QCOMPARE(w.routes(), int64_t{6});
    QCOMPARE(w.lookaheads(), int64_t{3});
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
    } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(needle) != std::string::npos,
                 qPrintable(QString("'%1' lacks '%2'").arg(e.what(), QString::fromStdString(needle))));
        return;
    }
    QFAIL(qPrintable(QString("no error; expected '%1'").arg(QString::fromStdString(needle))));
}

void expect_bad(std::vector<uint8_t> bytes, const std::string& needle) {
    expect_error([&] { parse_trace(bytes, "bad.trace"); }, needle);
}

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

Trace synthetic(int64_t n_moe, int64_t E, int64_t U, const std::vector<std::vector<int32_t>>& per_token) {
    Trace t;
    t.header.model_name = "synthetic";
    t.header.n_layer = n_moe;
    t.header.n_expert = E;
    t.header.n_used = U;
    t.header.expert_bytes = 1000;
    t.header.shared_bytes = 0;
    for (int64_t l = 0; l < n_moe; ++l) t.header.moe_layers.push_back(l);
    for (size_t i = 0; i < per_token.size(); ++i) {
        t.tokens.push_back({0, static_cast<int64_t>(i), static_cast<int64_t>(i), -1, true});
        for (int32_t x : per_token[i]) {
            t.experts.push_back(x);
            t.weights.push_back(1.0f);
        }
        for (int64_t l = 0; l < n_moe; ++l) t.has_lookahead.push_back(0);
    }
    return t;
}

PredictorOptions popts(const char* strategy, int64_t width = 2, int64_t window = 16, double w = 0.5) {
    PredictorOptions o;
    o.strategy = strategy;
    o.width = width;
    o.window = window;
    o.lookahead_weight = w;
    return o;
}

void routed(Predictor& p, int64_t layer, int64_t pos, std::vector<int32_t> ids) {
    p.on_route({layer, pos, ids.data(), nullptr, static_cast<int64_t>(ids.size()), nullptr, 4});
}

std::vector<int32_t> experts_of(const std::vector<ExpertPrediction>& v) {
    std::vector<int32_t> out;
    for (const auto& x : v) out.push_back(x.expert);
    return out;
}

}  // namespace

class TestSimulator : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void trace_round_trip() {
        QTemporaryDir dir;
        const QString path = dir.path() + "/a.trace";
        write_small(path);
        QVERIFY(is_trace_file(path.toStdString()));
        const Trace t = read_trace(path.toStdString());
        QCOMPARE(t.header.model_name, std::string("test-model"));
        QCOMPARE(t.header.moe_layers, std::vector<int64_t>({1, 2}));
        QCOMPARE(t.header.expert_bytes, uint64_t{1000});
        QCOMPARE(t.n_tokens(), int64_t{3});
        QCOMPARE(t.n_sequences(), int64_t{1});
        QCOMPARE(t.n_decode_tokens(), int64_t{1});
        QVERIFY(!t.tokens[0].decode && !t.tokens[1].decode && t.tokens[2].decode);
        QCOMPARE(t.tokens[2].step, int64_t{1});
        QCOMPARE(t.tokens[0].token, int32_t{11});
        QCOMPARE(t.tokens[1].token, int32_t{12});
        QCOMPARE(t.tokens[2].token, int32_t{-1});
        QCOMPARE(std::vector<int32_t>(t.experts_of(1, 0).begin(), t.experts_of(1, 0).end()), std::vector<int32_t>({2, 3}));
        QCOMPARE(std::vector<int32_t>(t.experts_of(0, 1).begin(), t.experts_of(0, 1).end()), std::vector<int32_t>({3, 2}));
        QCOMPARE(t.weights_of(2, 1)[0], 0.5f);
        QVERIFY(t.lookahead_of(0, 0) == nullptr);
        QVERIFY(t.lookahead_of(1, 1) != nullptr);
        QCOMPARE(t.lookahead_of(1, 1)[0], 0.4f);
        QCOMPARE(t.lookahead_of(2, 1)[0], 0.7f);
        QCOMPARE(t.n_moe_with_lookahead(), int64_t{1});
        const auto counts = t.expert_counts();
        QCOMPARE(counts[1 * 4 + 2], int64_t{2});
        QCOMPARE(counts[2 * 4 + 0], int64_t{2});
        // write_trace reproduces it.
        write_trace(t, (dir.path() + "/b.trace").toStdString());
        const Trace u = read_trace((dir.path() + "/b.trace").toStdString());
        QCOMPARE(u.experts, t.experts);
        QCOMPARE(u.lookahead, t.lookahead);
        QCOMPARE(u.n_decode_tokens(), int64_t{1});
        QCOMPARE(u.tokens[1].token, int32_t{12});
    }

    void bad_traces() {
        QTemporaryDir dir;
        const QString path = dir.path() + "/a.trace";
        write_small(path);
        const std::vector<uint8_t> good = slurp(path);
        const size_t rec = header_size(small_header());
        QVERIFY(parse_trace(good, "ok").n_tokens() == 3);

        expect_error([&] { read_trace((dir.path() + "/none.trace").toStdString()); }, "none.trace: cannot open");
        expect_bad({'h', 'e', 'l', 'l', 'o'}, "not a routing trace");
        auto b = good;
        put_u32(b, 8, 2);
        expect_bad(b, "trace version 2 is not supported");
        b = good;
        put_u32(b, 16 + 8, 9);  // n_used 9 > n_expert 4
        expect_bad(b, "invalid header: experts per token 9");
        b = good;
        b.pop_back();
        expect_bad(b, "truncated in end record");
        b = good;
        b.resize(b.size() - 17);
        expect_bad(b, "truncated trace (no end record");
        b = good;
        b.push_back(0);
        expect_bad(b, "data after the end record");
        b = good;
        b[b.size() - 16] = 7;
        expect_bad(b, "the end record counts 7 routing");
        b = good;
        QCOMPARE(b[rec + 14], uint8_t('T'));
        put_u32(b, rec + 14 + 9 + 1, 0);  // the second token record names position 0 again
        expect_bad(b, "second token record for position 0");
        b = good;
        b[rec] = 'Z';
        expect_bad(b, "unknown record tag 0x5a");
        // First routing record: after 'Q' (5 bytes), 'P' (9 bytes) and two 'T' (9 bytes each).
        const size_t r0 = rec + 5 + 9 + 18;
        QCOMPARE(b[r0], uint8_t('R'));
        b = good;
        put_u32(b, r0 + 1, 0);
        expect_bad(b, "layer 0 is not a MoE layer");
        b = good;
        put_u32(b, r0 + 9, 9);
        expect_bad(b, "expert 9 is out of range");
        b = good;
        put_u32(b, r0 + 13, 0);  // second expert = first
        expect_bad(b, "routed twice");
        b = good;
        const float nan = std::nanf("");
        uint32_t u;
        std::memcpy(&u, &nan, 4);
        put_u32(b, r0 + 17, u);
        expect_bad(b, "not finite");
        // A record before any sequence record.
        std::vector<uint8_t> no_seq(good.begin(), good.begin() + static_cast<long>(rec));
        no_seq.insert(no_seq.end(), good.begin() + static_cast<long>(r0), good.end());
        expect_bad(no_seq, "before the first sequence");

        // Semantic errors written through the writer.
        {
            TraceWriter w((dir.path() + "/inc.trace").toStdString(), small_header());
            w.begin_sequence();
            w.begin_step(1);
            route(w, 1, 0, {0, 1});
            w.finish();
        }
        expect_error([&] { read_trace((dir.path() + "/inc.trace").toStdString()); }, "has no routing for layer 2");
        {
            TraceWriter w((dir.path() + "/dup.trace").toStdString(), small_header());
            w.begin_sequence();
            route(w, 1, 0, {0, 1});
            route(w, 1, 0, {0, 1});
            w.finish();
        }
        expect_error([&] { read_trace((dir.path() + "/dup.trace").toStdString()); }, "second routing record for layer 1");
        {
            TraceWriter w((dir.path() + "/empty.trace").toStdString(), small_header());
            w.finish();
        }
        expect_error([&] { read_trace((dir.path() + "/empty.trace").toStdString()); }, "no tokens");
        {
            TraceWriter w((dir.path() + "/cut.trace").toStdString(), small_header());
            w.begin_sequence();
            route(w, 1, 0, {0, 1});
        }  // no finish()
        expect_error([&] { read_trace((dir.path() + "/cut.trace").toStdString()); }, "no end record");
        // The writer refuses what cannot be read back.
        TraceWriter w((dir.path() + "/w.trace").toStdString(), small_header());
        expect_error([&] { route(w, 0, 0, {0, 1}); }, "not a MoE layer");
        expect_error([&] { route(w, 1, 0, {0}); }, "header says 2");
        TraceHeader bad = small_header();
        bad.moe_layers = {2, 1};
        expect_error([&] { TraceWriter x((dir.path() + "/x.trace").toStdString(), bad); }, "strictly increasing");
        expect_error([&] { TraceWriter x((dir.path() + "/no/dir/x.trace").toStdString(), small_header()); }, "cannot create");
    }

    void predictor_lookahead() {
        Predictor p(popts("lookahead"), 2, 4, 2, {0, 1});
        QCOMPARE(p.next_moe_layer(0), int64_t{1});
        QCOMPARE(p.next_moe_layer(1), int64_t{-1});
        QVERIFY(p.predict(0, 0).empty());  // no lookahead for layer 0
        routed(p, 0, 0, {0, 1});
        const float probs[4] = {0.1f, 0.5f, 0.3f, 0.1f};
        p.on_lookahead({1, 0, probs, 4});
        const auto pr = p.predict(1, 0);
        QCOMPARE(experts_of(pr), std::vector<int32_t>({1, 2}));
        QCOMPARE(pr[0].score, 0.5f);
        QCOMPARE(pr[0].layer, int64_t{1});
        routed(p, 1, 0, {2, 3});
        const PredictionCounts c = p.totals();
        QCOMPARE(c.layer_tokens, int64_t{2});
        QCOMPARE(c.predicted, int64_t{2});
        QCOMPARE(c.routed, int64_t{4});
        QCOMPARE(c.correct, int64_t{1});
        QCOMPARE(c.precision(), 0.5);
        QCOMPARE(c.recall(), 0.25);
        QCOMPARE(p.per_layer()[1].recall(), 0.5);
        // Width 3 predicts three; width larger than the experts is clamped.
        Predictor w(popts("lookahead", 3), 2, 4, 2, {0, 1});
        w.on_lookahead({1, 5, probs, 4});
        QCOMPARE(experts_of(w.predict(1, 5)), std::vector<int32_t>({1, 2, 0}));
        Predictor z(popts("lookahead", 99), 2, 4, 2, {0, 1});
        QCOMPARE(z.width(), int64_t{4});
    }

    void predictor_frequency_and_combined() {
        Predictor p(popts("frequency", 2, 2), 1, 4, 2, {0});
        routed(p, 0, 0, {0, 1});
        routed(p, 0, 1, {0, 2});
        auto pr = p.predict(0, 2);
        QCOMPARE(experts_of(pr), std::vector<int32_t>({0, 1}));  // 0 twice; 1 and 2 tie -> lower id
        QCOMPARE(pr[0].score, 0.5f);
        routed(p, 0, 2, {0, 3});  // window of 2: {0,2} {0,3}
        QCOMPARE(experts_of(p.predict(0, 3)), std::vector<int32_t>({0, 2}));
        QCOMPARE(p.totals().correct, int64_t{1});

        // combined: the lookahead and the frequency share blend; without a
        // lookahead, frequency alone.
        Predictor c(popts("combined", 2, 4, 0.5), 2, 4, 2, {0, 1});
        for (int pos = 0; pos < 4; ++pos) routed(c, 1, pos, {3, 2});
        QCOMPARE(experts_of(c.predict(1, 4)), std::vector<int32_t>({2, 3}));
        const float probs[4] = {0.0f, 0.9f, 0.05f, 0.05f};
        c.on_lookahead({1, 5, probs, 4});
        const auto cp = c.predict(1, 5);  // 1: 0.45; 2 and 3: 0.025 + 0.25
        QCOMPARE(experts_of(cp), std::vector<int32_t>({1, 2}));
        QVERIFY(std::fabs(cp[0].score - 0.45f) < 1e-6f);
        QVERIFY(std::fabs(cp[1].score - 0.275f) < 1e-6f);

        Predictor n(popts("none"), 1, 4, 2, {0});
        QVERIFY(n.predict(0, 0).empty());
        routed(n, 0, 0, {0, 1});
        QCOMPARE(n.totals().routed, int64_t{2});
        QCOMPARE(n.totals().recall(), 0.0);

        expect_error([] { Predictor x(popts("oracle"), 1, 4, 2, {0}); }, "unknown predictor 'oracle'");
        expect_error([] { Predictor x(popts("frequency", 2, 0), 1, 4, 2, {0}); }, "window");
        expect_error([] { Predictor x(popts("combined", 2, 4, 1.5), 1, 4, 2, {0}); }, "weight");
    }

    // LRU, 2 slots, one layer, top-1: 0 1 0 1 2 0 -> miss miss hit hit miss miss.
    void simulate_hand_trace() {
        const Trace t = synthetic(1, 4, 1, {{0}, {1}, {0}, {1}, {2}, {0}});
        SimOptions o;
        o.cache_slots = 2;
        const SimResult r = simulate(t, o);
        QCOMPARE(r.tokens, int64_t{6});
        QCOMPARE(r.uses, int64_t{6});
        QCOMPARE(r.hits, int64_t{2});
        QCOMPARE(r.misses, int64_t{4});
        QCOMPARE(r.evictions, int64_t{2});
        QCOMPARE(r.misses_per_token(), 4.0 / 6.0);
        // Pinning expert 0 in one of the two slots: 0 always hits, 1 and 2 share the other.
        o.pinned = {0};
        const SimResult p = simulate(t, o);
        QCOMPARE(p.pinned_hits, int64_t{3});
        QCOMPARE(p.hits, int64_t{4});
        QCOMPARE(p.pin_loads, int64_t{1});
        o.pinned = {0, 1, 2};
        expect_error([&] { simulate(t, o); }, "3 pinned experts do not fit in a cache of 2 slots");
        o.pinned = {7 * 4};
        expect_error([&] { simulate(t, o); }, "not in a MoE layer");
        // Slots beyond the trace's experts are clamped: everything fits.
        o.pinned.clear();
        o.cache_slots = 100;
        QCOMPARE(simulate(t, o).misses, int64_t{3});
        // decode_only measures only decode tokens (all of them here) ...
        Trace half = t;
        for (size_t i = 0; i < 3; ++i) half.tokens[i].decode = false;
        o.cache_slots = 2;
        o.decode_only = true;
        const SimResult d = simulate(half, o);
        QCOMPARE(d.tokens, int64_t{3});
        QCOMPARE(d.hits, int64_t{1});  // 1 hit, 2 miss, 0 miss
    }

    // Belady's MIN: the textbook string (3 frames: 7 faults, LRU 10), and on a
    // skewed random trace never fewer hits than any engine policy, at every
    // size; with a prefetching predictor it still replays.
    void simulate_opt_bound() {
        std::vector<std::vector<int32_t>> seq;
        for (int32_t e : {0, 1, 2, 3, 0, 1, 4, 0, 1, 2, 3, 4}) seq.push_back({e});
        const Trace t = synthetic(1, 5, 1, seq);
        SimOptions o;
        o.cache_slots = 3;
        o.policy = kOptPolicy;
        const SimResult opt = simulate(t, o);
        QCOMPARE(opt.hits, int64_t{5});
        QCOMPARE(opt.misses, int64_t{7});
        o.policy = "lru";
        QCOMPARE(simulate(t, o).hits, int64_t{2});

        std::mt19937 rng(17);
        std::vector<std::vector<int32_t>> toks;
        auto skewed = [&] { return static_cast<int32_t>(std::min<uint32_t>(rng() % 8, rng() % 8)); };
        for (int i = 0; i < 600; ++i) {
            const int32_t a = skewed(), b = skewed(), c = skewed();
            toks.push_back({a, b == a ? (a + 1) % 8 : b});
            toks.back().push_back(c);
            toks.back().push_back(c == a ? (c + 3) % 8 : (c + 1) % 8);
        }
        std::vector<std::vector<int32_t>> two_used;  // 2 MoE layers x top-2
        for (const auto& v : toks) two_used.push_back({v[0], v[1], v[2], v[3] == v[2] ? (v[2] + 2) % 8 : v[3]});
        const Trace r = synthetic(2, 8, 2, two_used);
        for (int64_t slots : {4, 6, 8, 12}) {
            SimOptions s;
            s.cache_slots = slots;
            s.policy = kOptPolicy;
            const int64_t best = simulate(r, s).hits;
            for (const char* p : {"lru", "lfu", "arc"}) {
                s.policy = p;
                const int64_t h = simulate(r, s).hits;
                QVERIFY2(best >= h, qPrintable(QString("%1 slots: opt %2 < %3 %4").arg(slots).arg(best).arg(p).arg(h)));
            }
        }
        SimOptions s;
        s.cache_slots = 6;
        s.policy = kOptPolicy;
        s.predictor = popts("frequency", 2);
        const SimResult pf = simulate(r, s);
        QVERIFY(pf.prefetch_loads > 0);
        QCOMPARE(pf.uses, r.n_tokens() * 4);
    }

    // A lookahead that always names the routed expert: every use of the
    // predicted layer hits, precision 1, recall 1/2 (layer 0 has no lookahead).
    void simulate_perfect_lookahead() {
        std::mt19937 rng(5);
        std::vector<std::vector<int32_t>> toks;
        for (int i = 0; i < 400; ++i) toks.push_back({static_cast<int32_t>(rng() % 8), static_cast<int32_t>(rng() % 8)});
        Trace t = synthetic(2, 8, 1, toks);
        t.lookahead.assign(t.tokens.size() * 2 * 8, 0.0f);
        for (size_t i = 0; i < t.tokens.size(); ++i) {
            t.has_lookahead[i * 2 + 1] = 1;
            t.lookahead[(i * 2 + 1) * 8 + static_cast<size_t>(toks[i][1])] = 1.0f;
        }
        SimOptions o;
        o.cache_slots = 4;
        o.predictor = popts("lookahead", 1);
        const SimResult r = simulate(t, o);
        QCOMPARE(r.prediction.precision(), 1.0);
        QCOMPARE(r.prediction.recall(), 0.5);
        QVERIFY(r.hits >= r.tokens);  // every layer-1 use
        QCOMPARE(r.prefetch_hits, r.prefetch_loads);  // no prefetch wasted
        o.predictor = popts("none");
        const SimResult n = simulate(t, o);
        QVERIFY(n.hit_rate() < r.hit_rate());
        QCOMPARE(n.prefetch_loads, int64_t{0});
    }

    void seed_profile() {
        const HardwareProfile p = hardware_profile("seed-125b");
        QCOMPARE(p.n_layer, int64_t{60});
        QCOMPARE(p.moe_layers, int64_t{20});
        QCOMPARE(p.n_expert, int64_t{64});
        QCOMPARE(p.n_used, int64_t{2});
        QCOMPARE(p.expert_bytes, 50e6);
        QCOMPARE(p.shared_bytes, 2.0e9);
        QCOMPARE(p.fast_bytes, 24e9);
        QCOMPARE(p.fast_bps, 936e9);
        QCOMPARE(p.link_bps, 13e9);
        QCOMPARE(p.slow_bps, 100e9);
        QCOMPARE(p.total_experts(), int64_t{1280});
        QCOMPARE(p.uses_per_token(), int64_t{40});
        QCOMPARE(p.cache_slots(), int64_t{260});  // 24 - 3 reserve - 6 KV - 2 shared = 13 GB
        // DESIGN.md §1: at 100 tok/s, ~130 MB of misses = 2.6 of 40 uses: hit rate >= 93.5%.
        const TargetHitRates need = hit_rate_needed(p, 100);
        QVERIFY(need.reachable);
        QVERIFY(std::fabs(need.overlap - 0.935) < 1e-9);
        const double compute = 4e9 / 936e9;
        QVERIFY(std::fabs(need.stall - (1 - (0.01 - compute) * 13e9 / 50e6 / 40)) < 1e-9);
        QVERIFY(!hit_rate_needed(p, 300).reachable);  // compute alone is 4.27 ms

        HardwareProfile q = p;
        q.set("link-gbs", "32");
        q.set("layers", "61");
        q.set("expert-bytes", "25e6");
        QCOMPARE(q.link_bps, 32e9);
        QCOMPARE(q.n_layer, int64_t{61});
        QCOMPARE(q.expert_bytes, 25e6);
        expect_error([&] { q.set("warp-gbs", "1"); }, "unknown profile figure 'warp-gbs'");
        expect_error([&] { q.set("layers", "1.5"); }, "not a count");
        expect_error([&] { q.set("fast-gbs", "fast"); }, "not a non-negative number");
        expect_error([] { hardware_profile("h100"); }, "known: seed-125b");
        HardwareProfile r = hardware_profile("pcie3-24g");
        QVERIFY(!r.has_model());
        r.fill_model(4, 4, 8, 2, 1000, 500);
        QCOMPARE(r.total_experts(), int64_t{32});
        QCOMPARE(r.link_bps, 13e9);
    }

    // 2 demand misses per trace token of 4 MoE layers x top-2: x5 on seed-125b.
    void projection_arithmetic() {
        const HardwareProfile p = hardware_profile("seed-125b");
        SimResult r;
        r.moe_layers = 4;
        r.n_used = 2;
        r.tokens = 10;
        r.uses = 80;
        r.misses = 20;
        const Projection j = project(r, p);
        QCOMPARE(j.scale, 5.0);
        QCOMPARE(j.misses_per_token, 10.0);
        const double compute = 4e9 / 936e9, demand = 10 * 50e6 / 13e9;
        QVERIFY(std::fabs(j.compute_s - compute) < 1e-12);
        QVERIFY(std::fabs(j.time_s - (compute + demand)) < 1e-12);
        QVERIFY(std::fabs(j.link_bytes_per_token - 500e6) < 1e-3);
        // Prefetch overlaps compute: 1 load per profile token (3.8 ms) hides.
        r.misses = 0;
        r.prefetch_loads = 2;  // 0.2 per trace token -> 1 per profile token
        const Projection k = project(r, p);
        QVERIFY(std::fabs(k.time_s - compute) < 1e-12);
        const Projection serial = project(r, p, false);
        QVERIFY(std::fabs(serial.time_s - (compute + 50e6 / 13e9)) < 1e-12);
        r.prefetch_loads = 20;  // 10 per profile token: 38 ms, beyond compute
        const Projection l = project(r, p);
        QVERIFY(std::fabs(l.time_s - 10 * 50e6 / 13e9) < 1e-12);
        QVERIFY(std::fabs(l.max_tok_s - 1 / compute) < 1e-6);
    }

    void calibration_files() {
        QTemporaryDir dir;
        const TraceHeader h = small_header();
        const QString text = dir.path() + "/heat.txt";
        {
            std::ofstream f(text.toStdString());
            f << "# layer expert count\n1 2 5\n\n2 0 3  # trailing comment\n1 2 1\n";
        }
        const auto counts = read_calibration(text.toStdString(), h);
        QCOMPARE(counts[1 * 4 + 2], int64_t{6});
        QCOMPARE(counts[2 * 4 + 0], int64_t{3});
        QCOMPARE(hottest_experts(counts, 5), std::vector<ExpertKey>({6, 8}));
        QCOMPARE(hottest_experts(counts, 1), std::vector<ExpertKey>({6}));
        for (const char* bad : {"1 2\n", "0 1 1\n", "1 4 1\n", "1 1 -2\n", "1 1 1 1\n"}) {
            std::ofstream(text.toStdString()) << bad;
            expect_error([&] { read_calibration(text.toStdString(), h); }, "heat.txt:1:");
        }
        expect_error([&] { read_calibration((dir.path() + "/none").toStdString(), h); }, "cannot open");
        // strata-cli calibrate's JSON: counts per layer (empty for dense layers).
        const QString js = dir.path() + "/hot.json";
        std::ofstream(js.toStdString()) << "{\"strata_calibration\": 1, \"n_expert\": 4, \"counts\": [[], [0, 0, 7, 1], "
                                           "[2, 0, 0, 0]], \"pinned\": [[1, 2]]}\n";
        const auto from_json = read_calibration(js.toStdString(), h);
        QCOMPARE(from_json[1 * 4 + 2], int64_t{7});
        QCOMPARE(from_json[2 * 4 + 0], int64_t{2});
        QCOMPARE(hottest_experts(from_json, 2), std::vector<ExpertKey>({6, 8}));
        std::ofstream(js.toStdString()) << "{\"strata_calibration\": 1, \"n_expert\": 8, \"counts\": [[], [], []]}";
        expect_error([&] { read_calibration(js.toStdString(), h); }, "another model shape");
        std::ofstream(js.toStdString()) << "{\"strata_calibration\": 1, \"n_expert\": 4, \"counts\": [[1,1,1,1], [], []]}";
        expect_error([&] { read_calibration(js.toStdString(), h); }, "not a MoE layer");
        std::ofstream(js.toStdString()) << "{\"strata_calibration\": 1, ";
        expect_error([&] { read_calibration(js.toStdString(), h); }, "JSON error");
        // A trace as calibration: counts of its routing; the shape must match.
        write_small(dir.path() + "/a.trace");
        const auto from_trace = read_calibration((dir.path() + "/a.trace").toStdString(), h);
        QCOMPARE(from_trace, read_trace((dir.path() + "/a.trace").toStdString()).expert_counts());
        TraceHeader other = h;
        other.n_expert = 8;
        expect_error([&] { read_calibration((dir.path() + "/a.trace").toStdString(), other); }, "another model shape");
    }

    // A trace recorded from the fixture model: every token in every MoE layer,
    // lookahead for every MoE layer but the first, decode steps marked.
    void fixture_trace() {
        STRATA_REQUIRE_FIXTURES();
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/tiny.trace").toStdString();
        auto m = model::Model::load(test::fixture_path("models/moe-tiny-f32.gguf"));
        const TraceHeader h = TraceHeader::for_model(*m);
        QCOMPARE(h.n_moe(), int64_t{4});
        QCOMPARE(h.n_expert, int64_t{8});
        QVERIFY(h.expert_bytes > 0 && h.shared_bytes > 0);
        model::Context ctx(*m, {});
        TraceWriter w(path, h);
        w.attach(ctx);
        const auto toks = m->vocab().encode("Once upon a time there was a little dog.", true);
        w.begin_sequence();
        w.begin_step(static_cast<int64_t>(toks.size()));
        w.tokens(0, toks);
        ctx.decode(toks, false);
        for (int i = 0; i < 3; ++i) {
            const int32_t next = 5 + i;
            w.begin_step(1);
            ctx.decode({&next, 1}, false);
        }
        w.finish();
        const Trace t = read_trace(path);
        QCOMPARE(t.n_tokens(), static_cast<int64_t>(toks.size()) + 3);
        QCOMPARE(t.n_decode_tokens(), int64_t{3});
        QCOMPARE(t.tokens[0].token, toks[0]);
        QCOMPARE(t.tokens.back().token, int32_t{-1});
        QCOMPARE(t.n_moe_with_lookahead(), int64_t{3});
        QVERIFY(t.lookahead_of(0, 0) == nullptr);
        for (int64_t i = 0; i < t.n_tokens(); ++i) QCOMPARE(t.tokens[i].pos, i);
        SimOptions o;
        o.cache_slots = 16;
        o.predictor = popts("lookahead");
        const SimResult r = simulate(t, o);
        QCOMPARE(r.uses, t.n_tokens() * 8);
        QVERIFY(r.prediction.precision() > 0.25);  // better than uniform (2 of 8)
    }
};

QTEST_APPLESS_MAIN(TestSimulator)
#include "test_simulator.moc"
