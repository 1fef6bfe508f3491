// The sampler chain (penalties, top-k, top-p, min-p, temperature, seeded draw) and the
// stop-string matcher for streamed text.
#include "common/error.h"
#include "sched/sampler.h"
#include "sched/stop_strings.h"

#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

// Counts heap allocations so the test can check that sample() allocates nothing.
static std::atomic<long> g_allocations{0};
void* operator new(std::size_t n) {
    ++g_allocations;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using strata::sched::Rng;
using strata::sched::Sampler;
using strata::sched::SamplingParams;
using strata::sched::StopMatcher;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Plain sampling: temperature 1, no filters, no penalties.
SamplingParams plain(uint64_t seed = 1) {
    SamplingParams p;
    p.temperature = 1.f;
    p.top_k = 0;
    p.top_p = 1.f;
    p.min_p = 0.f;
    p.seed = seed;
    return p;
}

std::vector<float> log_of(const std::vector<double>& probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(float(std::log(p)));
    return l;
}

std::vector<float> random_logits(Rng& rng, int n, float scale) {
    std::vector<float> l(static_cast<size_t>(n));
    for (auto& v : l) v = float((rng.uniform() * 2.0 - 1.0) * scale);
    return l;
}

int argmax_lowest(const std::vector<float>& l) {
    int best = 0;
    for (int i = 1; i < int(l.size()); ++i)
        if (l[size_t(i)] > l[size_t(best)]) best = i;
    return best;
}

// An independent, slow version of the chain: full sort, then the filters in order.
std::vector<double> reference_distribution(std::vector<float> l, const SamplingParams& p,
                                           const std::vector<int>& counts) {
    const int n = int(l.size());
    for (int i = 0; i < n; ++i) {
        const int c = counts.empty() ? 0 : counts[size_t(i)];
        if (c == 0) continue;
        float v = l[size_t(i)];
        v = v <= 0.f ? v * p.repeat_penalty : v / p.repeat_penalty;
        l[size_t(i)] = v - float(c) * p.frequency_penalty - p.presence_penalty;
    }
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
    });
    std::vector<double> out(static_cast<size_t>(n), 0.0);
    if (p.greedy()) {
        out[size_t(order[0])] = 1.0;
        return out;
    }
    const float max = l[size_t(order[0])];
    size_t keep = size_t(n);
    if (p.top_k > 0) keep = std::min(keep, size_t(p.top_k));
    if (p.top_p < 1.f) {
        double z = 0;
        for (size_t i = 0; i < keep; ++i) z += std::exp(l[size_t(order[i])] - max);  // float exp, as the sampler
        double cum = 0;
        size_t i = 0;
        while (i < keep) {
            cum += std::exp(l[size_t(order[i])] - max);
            ++i;
            if (cum >= double(p.top_p) * z) break;
        }
        keep = i;
    }
    if (p.min_p > 0.f) {
        const float threshold = max + std::log(p.min_p);
        size_t i = 1;
        while (i < keep && l[size_t(order[i])] >= threshold) ++i;
        keep = i;
    }
    double z = 0;
    for (size_t i = 0; i < keep; ++i) z += std::exp((double(l[size_t(order[i])]) - double(max)) / p.temperature);
    for (size_t i = 0; i < keep; ++i)
        out[size_t(order[i])] = std::exp((double(l[size_t(order[i])]) - double(max)) / p.temperature) / z;
    return out;
}

std::vector<float> dist(Sampler& s, const std::vector<float>& logits) {
    std::vector<float> probs(logits.size(), -1.f);
    s.distribution(logits.data(), probs.data());
    return probs;
}

std::vector<int> kept(const std::vector<float>& probs) {
    std::vector<int> ids;
    for (int i = 0; i < int(probs.size()); ++i)
        if (probs[size_t(i)] > 0.f) ids.push_back(i);
    return ids;
}

// Feeds pieces; returns everything emitted (plus flush when not stopped) and what matched.
std::pair<std::string, std::string> run_stops(StopMatcher& m, const std::vector<std::string>& pieces) {
    std::string out;
    std::string matched;
    for (const auto& piece : pieces) {
        auto r = m.push(piece);
        out += r.text;
        if (r.stopped) matched = r.matched;
    }
    if (!m.stopped()) out += m.flush();
    return {out, matched};
}

}  // namespace

class TestSampler : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // --- greedy -----------------------------------------------------------
    void greedyPicksArgmax() {
        SamplingParams p;
        p.temperature = 0.f;
        Sampler s(p, 6);
        const std::vector<float> l = {0.1f, 2.5f, -1.f, 2.4f, 0.f, 1.f};
        for (int i = 0; i < 5; ++i) QCOMPARE(s.sample(l.data()), 1);
        const auto d = dist(s, l);
        QCOMPARE(kept(d), std::vector<int>{1});
        QCOMPARE(d[1], 1.f);
    }

    void greedyTiesGoToLowestId() {
        SamplingParams p;
        p.temperature = -1.f;  // any value <= 0 is greedy
        Sampler s(p, 6);
        const std::vector<float> l = {0.f, 1.f, 3.f, 3.f, -2.f, 3.f};
        QCOMPARE(s.sample(l.data()), 2);
        const std::vector<float> nan_first = {std::nanf(""), -kInf, 0.5f, 0.5f, 0.1f, -kInf};
        QCOMPARE(s.sample(nan_first.data()), 2);
    }

    void samplingDoesNotModifyLogits() {
        Rng rng(7);
        auto l = random_logits(rng, 1000, 5.f);
        const auto copy = l;
        SamplingParams p;
        p.repeat_penalty = 1.3f;
        p.presence_penalty = 0.5f;
        Sampler s(p, 1000);
        for (int t = 0; t < 50; ++t) s.accept(t);
        for (int i = 0; i < 20; ++i) s.sample(l.data());
        std::vector<float> probs(1000);
        s.distribution(l.data(), probs.data());
        QVERIFY(l == copy);
    }

    void sampleDoesNotAllocate() {
        Rng rng(3);
        const auto l = random_logits(rng, 32000, 8.f);
        std::vector<float> probs(l.size());
        {  // the counter works: constructing a sampler allocates its scratch
            const long before = g_allocations.load();
            Sampler probe(SamplingParams{}, 100);
            QVERIFY(g_allocations.load() > before);
        }
        for (const int top_k : {0, 40}) {
            SamplingParams p;
            p.top_k = top_k;
            p.top_p = 0.9f;
            p.min_p = top_k ? 0.05f : 0.f;
            p.repeat_penalty = 1.1f;
            p.frequency_penalty = 0.1f;
            p.penalty_last_n = 16;
            Sampler s(p, int32_t(l.size()));
            s.sample(l.data());
            const long before = g_allocations.load();
            for (int i = 0; i < 20; ++i) {
                s.accept(s.sample(l.data()));
                s.distribution(l.data(), probs.data());
            }
            QCOMPARE(g_allocations.load() - before, 0L);
        }
    }

    // --- seeds ------------------------------------------------------------
    void sameSeedSameTokens() {
        Rng rng(11);
        const auto l = random_logits(rng, 500, 2.f);
        auto draw = [&](uint64_t seed) {
            Sampler s(plain(seed), 500);
            std::vector<int> out;
            for (int i = 0; i < 200; ++i) out.push_back(s.sample(l.data()));
            return out;
        };
        const auto a = draw(42);
        QVERIFY(a == draw(42));
        QVERIFY(a != draw(43));
        QVERIFY(a != draw(0));

        // reset() reseeds: the same sequence again.
        Sampler s(plain(42), 500);
        for (int i = 0; i < 50; ++i) s.sample(l.data());
        s.reset();
        std::vector<int> again;
        for (int i = 0; i < 200; ++i) again.push_back(s.sample(l.data()));
        QVERIFY(again == a);
    }

    void rngIsPortable() {
        // xoshiro256** seeded by splitmix64: fixed numbers on every platform. If these change,
        // every "same seed => same text" promise made to users breaks.
        Rng a(0), b(0), c(1);
        uint64_t first[3];
        for (auto& v : first) v = a.next();
        for (auto v : first) QCOMPARE(b.next(), v);
        QVERIFY(c.next() != first[0]);
        Rng r(12345);
        double lo = 1, hi = 0, sum = 0;
        for (int i = 0; i < 100000; ++i) {
            const double u = r.uniform();
            QVERIFY(u >= 0.0 && u < 1.0);
            lo = std::min(lo, u);
            hi = std::max(hi, u);
            sum += u;
        }
        QVERIFY(lo < 1e-3 && hi > 1 - 1e-3);
        QVERIFY(std::abs(sum / 100000 - 0.5) < 0.005);
        // Golden values (seed 0), checked against an independent Python transcription.
        Rng g(0);
        QCOMPARE(g.next(), uint64_t(0x99ec5f36cb75f2b4ull));
        QCOMPARE(g.next(), uint64_t(0xbf6e1f784956452aull));
    }

    // --- temperature and top-k --------------------------------------------
    void lowTemperatureApproachesGreedy() {
        Rng rng(5);
        for (int row = 0; row < 20; ++row) {
            auto l = random_logits(rng, 300, 3.f);
            const int best = argmax_lowest(l);
            l[size_t(best)] += 0.1f;  // a clear winner
            SamplingParams p = plain(uint64_t(row));
            p.temperature = 1e-3f;
            Sampler s(p, 300);
            for (int i = 0; i < 20; ++i) QCOMPARE(s.sample(l.data()), best);
            // The top probability rises towards 1 as the temperature falls.
            float prev = 0.f;
            for (float t : {2.f, 1.f, 0.5f, 0.1f, 0.01f}) {
                p.temperature = t;
                Sampler st(p, 300);
                const float top = dist(st, l)[size_t(best)];
                QVERIFY(top >= prev);
                prev = top;
            }
            QVERIFY(prev > 0.999f);
        }
    }

    void topKOneEqualsGreedy() {
        Rng rng(9);
        SamplingParams p = plain(77);
        p.top_k = 1;
        p.temperature = 1.5f;
        Sampler s(p, 1000);
        for (int row = 0; row < 50; ++row) {
            auto l = random_logits(rng, 1000, 4.f);
            if (row % 5 == 0) l[17] = l[900] = 10.f;  // a tie: the lower id wins
            QCOMPARE(s.sample(l.data()), argmax_lowest(l));
        }
    }

    void topKKeepsTheKHighest() {
        const std::vector<float> l = {1.f, 5.f, 3.f, 4.f, 2.f, 4.f};
        SamplingParams p = plain();
        p.top_k = 3;
        Sampler s(p, 6);
        QCOMPARE(kept(dist(s, l)), (std::vector<int>{1, 3, 5}));
        p.top_k = 2;  // 3 and 5 tie at 4: the lower id stays
        Sampler s2(p, 6);
        QCOMPARE(kept(dist(s2, l)), (std::vector<int>{1, 3}));
        p.top_k = 100;  // more than the vocabulary: everything
        Sampler s3(p, 6);
        QCOMPARE(kept(dist(s3, l)).size(), size_t(6));

        // Fewer finite logits than k (but k below the vocabulary): all finite ones stay.
        std::vector<float> masked(10, -kInf);
        masked[2] = 1.f;
        masked[5] = 3.f;
        masked[9] = 2.f;
        p.top_k = 8;
        Sampler s4(p, 10);
        const auto d = dist(s4, masked);
        QCOMPARE(kept(d), (std::vector<int>{2, 5, 9}));
        QVERIFY(d[5] > d[9] && d[9] > d[2]);
    }

    // --- top-p and min-p --------------------------------------------------
    void topPKeepsExpectedSet() {
        // ids 0..4 with probabilities 0.1, 0.4, 0.05, 0.3, 0.15 (shuffled on purpose)
        const auto l = log_of({0.1, 0.4, 0.05, 0.3, 0.15});
        struct Case {
            float top_p;
            std::vector<int> ids;
        };
        const std::vector<Case> cases = {
            {0.2f, {1}},              // the top token alone reaches 0.2
            {0.65f, {1, 3}},          // 0.4 + 0.3 = 0.7 >= 0.65
            {0.8f, {1, 3, 4}},        // 0.85
            {0.9f, {0, 1, 3, 4}},     // 0.95
            {0.99f, {0, 1, 2, 3, 4}}, // 1.0
            {1.0f, {0, 1, 2, 3, 4}},  // off
        };
        for (const auto& c : cases) {
            SamplingParams p = plain();
            p.top_p = c.top_p;
            Sampler s(p, 5);
            const auto d = dist(s, l);
            QCOMPARE(kept(d), c.ids);
            double mass = 0;
            for (int id : c.ids) mass += std::exp(double(l[size_t(id)]));
            for (int id : c.ids) QVERIFY(std::abs(d[size_t(id)] - std::exp(double(l[size_t(id)])) / mass) < 1e-5);
        }
    }

    void minPKeepsExpectedSet() {
        // ids 0..5: 0.05, 0.5, 0.02, 0.2, 0.1, 0.13
        const auto l = log_of({0.05, 0.5, 0.02, 0.2, 0.1, 0.13});
        struct Case {
            float min_p;
            std::vector<int> ids;
        };
        const std::vector<Case> cases = {
            {0.09f, {0, 1, 3, 4, 5}},  // p >= 0.045
            {0.15f, {1, 3, 4, 5}},     // p >= 0.075
            {0.3f, {1, 3}},            // p >= 0.15
            {0.5f, {1}},               // p >= 0.25
            {1.0f, {1}},               // only the top one
        };
        for (const auto& c : cases) {
            SamplingParams p = plain();
            p.min_p = c.min_p;
            Sampler s(p, 6);
            QCOMPARE(kept(dist(s, l)), c.ids);
        }
    }

    void filtersComposeInOrder() {
        // top-p 0.8 keeps {1, 3, 5} (0.5 + 0.2 + 0.13 = 0.83), then min-p 0.3 (p >= 0.15) keeps {1, 3}.
        const auto l = log_of({0.05, 0.5, 0.02, 0.2, 0.1, 0.13});
        SamplingParams p = plain();
        p.top_p = 0.8f;
        p.min_p = 0.3f;
        p.temperature = 2.f;  // applied last, to the kept logits
        Sampler s(p, 6);
        const auto d = dist(s, l);
        QCOMPARE(kept(d), (std::vector<int>{1, 3}));
        const double w1 = std::exp(double(l[1]) / 2), w3 = std::exp(double(l[3]) / 2);
        QVERIFY(std::abs(d[1] - w1 / (w1 + w3)) < 1e-5);
        QVERIFY(std::abs(d[3] - w3 / (w1 + w3)) < 1e-5);
        // top-k first: with k = 1 nothing else matters.
        p.top_k = 1;
        Sampler s1(p, 6);
        QCOMPARE(kept(dist(s1, l)), std::vector<int>{1});
    }

    void matchesReferenceChain() {
        // Random logits and settings, large vocabularies included (the lazily sorted top-p path).
        Rng rng(2024);
        for (int trial = 0; trial < 60; ++trial) {
            const int n = trial % 3 == 0 ? 20000 : 50 + int(rng.uniform() * 400);
            const auto l = random_logits(rng, n, trial % 2 ? 5.f : 0.5f);
            SamplingParams p;
            p.temperature = float(0.3 + rng.uniform() * 1.7);
            p.top_k = trial % 4 == 0 ? 0 : 1 + int(rng.uniform() * n * 0.8);
            p.top_p = trial % 5 == 0 ? 1.f : float(0.05 + rng.uniform() * 0.94);
            p.min_p = trial % 3 == 1 ? 0.f : float(rng.uniform() * 0.3);
            p.repeat_penalty = float(0.8 + rng.uniform());
            p.presence_penalty = float(rng.uniform() - 0.3);
            p.frequency_penalty = float(rng.uniform() * 0.5);
            p.penalty_last_n = 32;
            Sampler s(p, n);
            std::vector<int> counts(size_t(n), 0);
            std::vector<int> history;
            for (int t = 0; t < 60; ++t) {
                const int tok = int(rng.uniform() * std::min(n, 40));
                s.accept(tok);
                history.push_back(tok);
            }
            for (size_t i = history.size() - 32; i < history.size(); ++i) ++counts[size_t(history[i])];
            const auto d = dist(s, l);
            const auto ref = reference_distribution(l, p, counts);
            int kept_n = 0;
            for (int i = 0; i < n; ++i) {
                QVERIFY2((d[size_t(i)] > 0.f) == (ref[size_t(i)] > 0.0),
                         qPrintable(QString("trial %1 token %2: %3 vs %4").arg(trial).arg(i).arg(d[size_t(i)]).arg(ref[size_t(i)])));
                QVERIFY(std::abs(double(d[size_t(i)]) - ref[size_t(i)]) < 1e-5);
                kept_n += d[size_t(i)] > 0.f;
            }
            QVERIFY(kept_n >= 1);
        }
    }

    // --- empirical frequencies --------------------------------------------
    void frequenciesMatchDistribution() {
        const std::vector<double> probs = {0.05, 0.4, 0.15, 0.3, 0.1};
        const auto l = log_of(probs);
        const int draws = 20000;
        Sampler s(plain(99), 5);
        std::vector<int> hits(5, 0);
        for (int i = 0; i < draws; ++i) ++hits[size_t(s.sample(l.data()))];
        double chi2 = 0, max_abs = 0;
        for (int i = 0; i < 5; ++i) {
            const double expected = probs[size_t(i)] * draws;
            chi2 += (hits[size_t(i)] - expected) * (hits[size_t(i)] - expected) / expected;
            max_abs = std::max(max_abs, std::abs(hits[size_t(i)] / double(draws) - probs[size_t(i)]));
        }
        QVERIFY2(chi2 < 18.47, qPrintable(QString("chi2 %1 (4 dof, p = 0.001)").arg(chi2)));  // 4 dof
        QVERIFY2(max_abs < 0.015, qPrintable(QString("max abs error %1").arg(max_abs)));

        // The same with filters and a temperature: frequencies follow distribution().
        SamplingParams p = plain(5);
        p.temperature = 0.7f;
        p.top_k = 4;
        p.top_p = 0.9f;
        Sampler f(p, 5);
        const auto d = dist(f, l);
        std::vector<int> fh(5, 0);
        for (int i = 0; i < draws; ++i) ++fh[size_t(f.sample(l.data()))];
        for (int i = 0; i < 5; ++i) {
            if (d[size_t(i)] == 0.f) QCOMPARE(fh[size_t(i)], 0);
            QVERIFY(std::abs(fh[size_t(i)] / double(draws) - d[size_t(i)]) < 0.015);
        }
    }

    void sampleFromExplicitDistribution() {
        Sampler s(plain(8), 4);
        const std::vector<float> w = {0.f, 3.f, 1.f, 0.f};  // unnormalized
        std::vector<int> hits(4, 0);
        for (int i = 0; i < 20000; ++i) ++hits[size_t(s.sample_from(w.data()))];
        QCOMPARE(hits[0], 0);
        QCOMPARE(hits[3], 0);
        QVERIFY(std::abs(hits[1] / 20000.0 - 0.75) < 0.015);
        const std::vector<float> zero(4, 0.f);
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.sample_from(zero.data()));
        const std::vector<float> negative = {0.5f, -0.1f, 0.f, 0.f};
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.sample_from(negative.data()));
    }

    // --- penalties --------------------------------------------------------
    void penaltiesChangeLogitsAsSpecified() {
        SamplingParams p = plain();
        p.repeat_penalty = 2.f;
        p.presence_penalty = 0.5f;
        p.frequency_penalty = 0.25f;
        p.penalty_last_n = 64;
        Sampler s(p, 6);
        const std::vector<float> l = {1.f, 2.f, -1.f, 3.f, 0.5f, -2.f};
        for (int t : {1, 1, 1, 2, 5}) s.accept(t);
        QCOMPARE(s.window_count(1), 3);
        std::vector<float> out(6);
        s.penalized_logits(l.data(), out.data());
        QCOMPARE(out[0], 1.f);                           // not in the window
        QCOMPARE(out[1], 2.f / 2 - 3 * 0.25f - 0.5f);    // positive: divided
        QCOMPARE(out[2], -1.f * 2 - 1 * 0.25f - 0.5f);   // negative: multiplied
        QCOMPARE(out[3], 3.f);
        QCOMPARE(out[4], 0.5f);
        QCOMPARE(out[5], -2.f * 2 - 0.25f - 0.5f);
        // The distribution is the softmax of the penalized logits.
        const auto d = dist(s, l);
        for (int i = 1; i < 6; ++i)
            QVERIFY(std::abs(std::log(double(d[size_t(i)]) / d[0]) - (double(out[size_t(i)]) - out[0])) < 1e-4);
        // Greedy follows the penalties.
        SamplingParams g = p;
        g.temperature = 0.f;
        Sampler gs(g, 6);
        QCOMPARE(gs.sample(l.data()), 3);
        gs.accept(3);  // 3 -> 1.5 - 0.25 - 0.5 = 0.75 < 1
        QCOMPARE(gs.sample(l.data()), 1);  // 2 is now the highest
        gs.accept(1);  // 1 -> 2 / 2 - 0.25 - 0.5 = 0.25
        QCOMPARE(gs.sample(l.data()), 0);
    }

    void penaltiesOnlyOverTheWindow() {
        SamplingParams p = plain();
        p.presence_penalty = 1.f;
        p.penalty_last_n = 3;
        Sampler s(p, 8);
        const std::vector<float> l(8, 0.f);
        std::vector<float> out(8);
        for (int t : {0, 1, 2, 3}) s.accept(t);  // 0 has left the window
        s.penalized_logits(l.data(), out.data());
        QCOMPARE(out, (std::vector<float>{0.f, -1.f, -1.f, -1.f, 0.f, 0.f, 0.f, 0.f}));
        s.accept(1);  // window {2, 3, 1}
        s.accept(1);  // window {3, 1, 1}
        QCOMPARE(s.window_count(1), 2);
        QCOMPARE(s.window_count(2), 0);
        s.penalized_logits(l.data(), out.data());
        QCOMPARE(out, (std::vector<float>{0.f, -1.f, 0.f, -1.f, 0.f, 0.f, 0.f, 0.f}));
        s.reset();
        s.penalized_logits(l.data(), out.data());
        QCOMPARE(out, l);

        // -1: everything since reset() counts.
        p.penalty_last_n = -1;
        p.frequency_penalty = 0.5f;
        p.presence_penalty = 0.f;
        Sampler all(p, 8);
        for (int i = 0; i < 1000; ++i) all.accept(i % 2 ? 7 : 6);
        all.penalized_logits(l.data(), out.data());
        QCOMPARE(out[6], -250.f);
        QCOMPARE(out[7], -250.f);

        // 0: off, whatever the penalties say.
        p.penalty_last_n = 0;
        p.repeat_penalty = 3.f;
        Sampler off(p, 8);
        off.accept(4);
        const std::vector<float> ones(8, 1.f);
        off.penalized_logits(ones.data(), out.data());
        QCOMPARE(out, ones);
    }

    // --- validation and errors --------------------------------------------
    void validateRejectsBadValues() {
        QCOMPARE(QString::fromStdString(SamplingParams{}.validate()), QString());
        struct Case {
            const char* field;
            void (*set)(SamplingParams&);
        };
        const std::vector<Case> bad = {
            {"temperature", [](SamplingParams& p) { p.temperature = std::nanf(""); }},
            {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
            {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
            {"top_p", [](SamplingParams& p) { p.top_p = 0.f; }},
            {"top_p", [](SamplingParams& p) { p.top_p = 1.5f; }},
            {"top_p", [](SamplingParams& p) { p.top_p = std::nanf(""); }},
            {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
            {"min_p", [](SamplingParams& p) { p.min_p = 1.1f; }},
            {"min_p", [](SamplingParams& p) { p.min_p = std::nanf(""); }},
            {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = 0.f; }},
            {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = -1.f; }},
            {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = std::nanf(""); }},
            {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = std::nanf(""); }},
            {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -kInf; }},
            {"penalty_last_n", [](SamplingParams& p) { p.penalty_last_n = -2; }},
            {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
            {"max_tokens", [](SamplingParams& p) { p.max_tokens = -5; }},
            {"stop[1]", [](SamplingParams& p) { p.stop = {"###", ""}; }},
        };
        for (const auto& c : bad) {
            SamplingParams p;
            c.set(p);
            const QString msg = QString::fromStdString(p.validate());
            QVERIFY2(msg.startsWith(QString(c.field) + " "), qPrintable(msg));
            try {
                Sampler s(p, 10);
                QFAIL("the constructor accepted invalid parameters");
            } catch (const strata::Error& e) {
                QVERIFY2(QString(e.what()).contains(c.field), e.what());
            }
        }
        SamplingParams p;
        p.top_p = 1.5f;
        QCOMPARE(QString::fromStdString(p.validate()),
                 QStringLiteral("top_p 1.5 is out of range: expected 0 < top_p <= 1"));
        p = {};
        p.max_tokens = 0;
        QVERIFY(QString::fromStdString(p.validate()).contains("max_tokens 0"));

        // Edges that are fine.
        for (auto set : {+[](SamplingParams& q) { q.top_k = -1; }, +[](SamplingParams& q) { q.top_k = 0; },
                         +[](SamplingParams& q) { q.top_p = 1.f; }, +[](SamplingParams& q) { q.min_p = 0.f; },
                         +[](SamplingParams& q) { q.min_p = 1.f; }, +[](SamplingParams& q) { q.temperature = -0.5f; },
                         +[](SamplingParams& q) { q.penalty_last_n = -1; },
                         +[](SamplingParams& q) { q.presence_penalty = -1.f; }}) {
            SamplingParams q;
            set(q);
            QCOMPARE(QString::fromStdString(q.validate()), QString());
        }
    }

    void errorsAreReported() {
        QVERIFY_THROWS_EXCEPTION(strata::Error, Sampler(SamplingParams{}, 0));
        Sampler s(SamplingParams{}, 10);
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.accept(10));
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.accept(-1));
        const std::vector<float> dead(10, -kInf);
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.sample(dead.data()));
        QVERIFY_THROWS_EXCEPTION(strata::Error, s.set_end_tokens({3, 12}));
    }

    void infiniteLogits() {
        std::vector<float> l(10, 1.f);
        l[2] = -kInf;
        l[4] = kInf;
        l[7] = kInf;
        l[9] = std::nanf("");
        Sampler s(plain(3), 10);
        const auto d = dist(s, l);
        QCOMPARE(kept(d), (std::vector<int>{4, 7}));
        QCOMPARE(d[4], 0.5f);
        for (int i = 0; i < 100; ++i) {
            const int t = s.sample(l.data());
            QVERIFY(t == 4 || t == 7);
        }
        // -inf and NaN are never drawn.
        std::vector<float> m(10, 0.f);
        m[0] = -kInf;
        m[5] = std::nanf("");
        for (int i = 0; i < 2000; ++i) {
            const int t = s.sample(m.data());
            QVERIFY(t != 0 && t != 5);
        }
    }

    // A constraint: the first draw stands when allowed; otherwise the draw is
    // repeated among the kept candidates it allows (in proportion to their
    // probabilities), and when it allows none of them, over its whole answer.
    void constraintRedrawsOnlyWhenRefused() {
        struct Only : strata::sched::TokenConstraint {
            std::vector<int32_t> ok;
            int checks = 0, passes = 0;
            bool allows(int32_t t) override {
                ++checks;
                return std::find(ok.begin(), ok.end(), t) != ok.end();
            }
            void allowed(std::vector<uint8_t>& a) override {
                ++passes;
                a.assign(8, 0);
                for (int32_t t : ok) a[size_t(t)] = 1;
            }
        };
        const std::vector<float> logits = {5.f, 4.f, 3.f, 0.f, -1.f, -2.f, -3.f, -9.f};
        SamplingParams greedy;
        greedy.temperature = 0.f;
        Only c;
        Sampler g(greedy, 8);
        g.set_constraint(&c);
        c.ok = {0, 2};
        QCOMPARE(g.sample(logits.data()), 0);  // the argmax is allowed: one check
        QCOMPARE(c.checks, 1);
        QCOMPARE(c.passes, 0);
        c.ok = {6, 2};
        QCOMPARE(g.sample(logits.data()), 2);  // the best allowed token
        QCOMPARE(c.passes, 1);
        QCOMPARE(g.constraint_stats().tokens, 2);
        QCOMPARE(g.constraint_stats().refused, 1);

        SamplingParams p;
        p.temperature = 1.f;
        p.top_k = 3;
        p.top_p = 1.f;
        p.min_p = 0.f;
        Sampler s(p, 8);
        s.set_constraint(&c);
        c.ok = {1, 2};  // two of the three kept: 4 and 3 -> e^1 : 1
        c.passes = 0;
        int ones = 0;
        for (int i = 0; i < 4000; ++i) {
            const int32_t t = s.sample(logits.data());
            QVERIFY(t == 1 || t == 2);
            ones += t == 1;
        }
        QCOMPARE(c.passes, 0);
        QVERIFY(std::fabs(ones / 4000.0 - std::exp(1.0) / (1.0 + std::exp(1.0))) < 0.03);
        c.ok = {7};  // none kept: the whole answer
        QCOMPARE(s.sample(logits.data()), 7);
        QCOMPARE(c.passes, 1);
        c.ok = {};
        bool threw = false;
        try {
            s.sample(logits.data());
        } catch (const strata::Error& e) {
            threw = QString(e.what()).contains("allows no token");
        }
        QVERIFY(threw);
        std::vector<float> probs(8);
        threw = false;
        try {
            s.distribution(logits.data(), probs.data());
        } catch (const strata::Error&) {
            threw = true;
        }
        QVERIFY(threw);
    }

    void endTokens() {
        Sampler s(SamplingParams{}, 100);
        QVERIFY(!s.is_end_token(2));
        s.set_end_tokens({2, 99, 2});
        QVERIFY(s.is_end_token(2));
        QVERIFY(s.is_end_token(99));
        QVERIFY(!s.is_end_token(3));
        QCOMPARE(s.end_tokens(), (std::vector<int32_t>{2, 99}));
    }

    // --- stop strings -----------------------------------------------------
    void stopStringSplitAcrossPieces() {
        StopMatcher m({"</s>"});
        auto r = m.push("Hello wor");
        QCOMPARE(r.text, std::string("Hello wor"));
        QVERIFY(!r.stopped);
        r = m.push("ld<");
        QCOMPARE(r.text, std::string("ld"));  // "<" could start "</s>"
        r = m.push("/");
        QCOMPARE(r.text, std::string());
        r = m.push("s>tail");
        QVERIFY(r.stopped);
        QCOMPARE(r.matched, std::string("</s>"));
        QCOMPARE(r.text, std::string());
        // After a stop everything is ignored, and nothing is left to flush.
        r = m.push("more");
        QVERIFY(r.stopped);
        QCOMPARE(r.text, std::string());
        QCOMPARE(m.flush(), std::string());
    }

    void partialMatchIsReleased() {
        StopMatcher m({"\nUser:"});
        auto r = m.push("one\nUs");
        QCOMPARE(r.text, std::string("one"));
        r = m.push("ually fine");
        QVERIFY(!r.stopped);
        QCOMPARE(r.text, std::string("\nUsually fine"));
        r = m.push("\n");
        QCOMPARE(r.text, std::string());
        r = m.push("\n");  // the first "\n" cannot start a match any more, the second can
        QCOMPARE(r.text, std::string("\n"));
        QCOMPARE(m.flush(), std::string("\n"));
        QCOMPARE(m.flush(), std::string());
    }

    void multipleStopStrings() {
        StopMatcher m({"###", "<|im_end|>", "STOP"});
        auto r = m.push("answer: 42 <|im_");
        QCOMPARE(r.text, std::string("answer: 42 "));
        r = m.push("end|> ### STOP");
        QVERIFY(r.stopped);
        QCOMPARE(r.matched, std::string("<|im_end|>"));
        QCOMPARE(r.text, std::string());

        StopMatcher m2({"###", "<|im_end|>", "STOP"});
        r = m2.push("x ST");
        QCOMPARE(r.text, std::string("x "));
        r = m2.push("OP");
        QVERIFY(r.stopped);
        QCOMPARE(r.matched, std::string("STOP"));
        QCOMPARE(r.text, std::string());

        // Two candidates in one piece: the one that ends first wins.
        StopMatcher m3({"abc", "b"});
        r = m3.push("xxabcd");
        QCOMPARE(r.matched, std::string("b"));
        QCOMPARE(r.text, std::string("xxa"));
    }

    void flushReturnsHeldText() {
        StopMatcher m({"<end>"});
        auto r = m.push("done <en");
        QCOMPARE(r.text, std::string("done "));
        QCOMPARE(m.flush(), std::string("<en"));
        m.reset();
        r = m.push("again");
        QCOMPARE(r.text, std::string("again"));

        StopMatcher none({});
        r = none.push("<en");
        QCOMPARE(r.text, std::string("<en"));
        QCOMPARE(none.flush(), std::string());
    }

    void stopResultDoesNotDependOnPieces() {
        const std::vector<std::string> stops = {"abc", "b", "\n\n", "ab\nx", "aab"};
        const std::vector<std::string> texts = {"xxabcd", "aab", "hello\n\nworld", "zz ab\nx yy", "ab\n", "a",
                                                "no stop here", "aaab", "a\nb"};
        for (const auto& text : texts) {
            StopMatcher whole(stops);
            const auto expected = run_stops(whole, {text});
            // Every split into two pieces, and byte by byte.
            for (size_t cut = 0; cut <= text.size(); ++cut) {
                StopMatcher m(stops);
                QVERIFY(run_stops(m, {text.substr(0, cut), text.substr(cut)}) == expected);
            }
            std::vector<std::string> bytes;
            for (char ch : text) bytes.emplace_back(1, ch);
            StopMatcher b(stops);
            QVERIFY(run_stops(b, bytes) == expected);
            // Without a stop everything comes out; with one, exactly the text before it.
            if (expected.second.empty()) {
                QCOMPARE(expected.first, text);
            } else {
                QVERIFY(text.find(expected.first + expected.second) == 0);
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
