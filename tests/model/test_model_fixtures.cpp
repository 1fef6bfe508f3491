// The engine against llama.cpp's reference logits (../shared/fixtures/models):
// teacher-forced logits for every prompt position, greedy continuations, and
// the tokenization of every prompt. Tolerances are the fixtures README's.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "model/context.h"
#include "model/model.h"
#include "reference_files.h"
#include "test_support.h"

using namespace strata;
using test::argmax;
using test::read_floats;
using test::read_refs;
using test::RefPrompt;

namespace {

enum class Tolerance { F32, F16, Quantized };

}  // namespace

class TestModelFixtures : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void logits_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("tolerance");
        QTest::newRow("stories260K") << "stories260K" << int(Tolerance::F32);
        QTest::newRow("moe-tiny-f32") << "moe-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("qwen2moe-tiny-f32") << "qwen2moe-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("moe-tiny-f16") << "moe-tiny-f16" << int(Tolerance::F16);
        QTest::newRow("moe-tiny-q8_0") << "moe-tiny-q8_0" << int(Tolerance::Quantized);
        QTest::newRow("moe-tiny-q4_0") << "moe-tiny-q4_0" << int(Tolerance::Quantized);
        QTest::newRow("moe-small-q4_k_m") << "moe-small-q4_k_m" << int(Tolerance::Quantized);
    }

    void logits() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, name);
        QFETCH(int, tolerance);
        const QString base = test::fixtures_dir() + "/models/" + name;
        auto m = model::Model::load((base + ".gguf").toStdString());
        const auto refs = read_refs(base + ".ref.jsonl");
        const auto ref_logits = read_floats(base + ".logits.f32");
        const int64_t V = m->config().n_vocab;
        QCOMPARE(V, int64_t{512});

        model::ContextParams cp;
        cp.n_threads = 2;
        model::Context ctx(*m, cp);
        double max_abs = 0, sum_abs = 0, sum_ref = 0, sum_ref2 = 0;
        int64_t n_pos = 0, top1_agree = 0, greedy_match = 0, greedy_total = 0;
        for (const RefPrompt& r : refs) {
            // The tokenizer reproduces the reference tokens.
            std::vector<int32_t> toks = m->vocab().encode(r.prompt.toStdString(), false);
            toks.insert(toks.begin(), m->vocab().bos());
            QCOMPARE(toks, r.tokens);

            ctx.clear();
            const float* got = ctx.decode(r.tokens, true);
            for (size_t p = 0; p < r.tokens.size(); ++p) {
                const float* want = ref_logits.data() + (r.offset_rows + static_cast<int64_t>(p)) * V;
                const float* have = got + p * V;
                for (int64_t i = 0; i < V; ++i) {
                    const double d = std::fabs(double(have[i]) - want[i]);
                    max_abs = std::max(max_abs, d);
                    sum_abs += d;
                    sum_ref += want[i];
                    sum_ref2 += double(want[i]) * want[i];
                }
                top1_agree += argmax(have, V) == argmax(want, V);
                ++n_pos;
            }
            // Greedy continuation, one token at a time. For each step, the margin
            // between our top two logits: a divergence from the reference is only
            // acceptable (quantized models) where that margin is a near-tie.
            std::vector<int32_t> greedy;
            std::vector<float> margin;
            const float* row = got + (r.tokens.size() - 1) * V;
            for (size_t i = 0; i < r.greedy.size(); ++i) {
                const int32_t next = argmax(row, V);
                float second = -INFINITY;
                for (int64_t v = 0; v < V; ++v)
                    if (v != next) second = std::max(second, row[v]);
                greedy.push_back(next);
                margin.push_back(row[next] - second);
                if (i + 1 < r.greedy.size()) row = ctx.decode({&next, 1}, false);
            }
            for (size_t i = 0; i < greedy.size(); ++i) greedy_match += greedy[i] == r.greedy[i];
            greedy_total += static_cast<int64_t>(greedy.size());
            if (tolerance == int(Tolerance::Quantized)) {
                const auto d = std::mismatch(greedy.begin(), greedy.end(), r.greedy.begin());
                if (d.first != greedy.end()) {
                    const size_t at = static_cast<size_t>(d.first - greedy.begin());
                    QVERIFY2(margin[at] < 0.1f, qPrintable(QString("greedy diverges at step %1 of '%2' where our top-2 "
                                                                   "margin is %3, not a near-tie")
                                                               .arg(at).arg(r.prompt).arg(margin[at])));
                }
            }
            if (tolerance != int(Tolerance::Quantized)) {
                QCOMPARE(greedy, r.greedy);
                if (r.has_text) QCOMPARE(QString::fromStdString(m->vocab().pieces_text(greedy)), r.greedy_text);
            }
        }
        const double n_vals = double(n_pos) * V;
        const double mean_abs = sum_abs / n_vals;
        const double std_ref = std::sqrt(sum_ref2 / n_vals - (sum_ref / n_vals) * (sum_ref / n_vals));
        const double agree = double(top1_agree) / n_pos;
        qInfo("%s: max|d| %.3g, mean|d| %.3g (%.4f x std %.3g), top-1 agreement %.3f, greedy ids %lld/%lld",
              qPrintable(name), max_abs, mean_abs, mean_abs / std_ref, std_ref, agree,
              static_cast<long long>(greedy_match), static_cast<long long>(greedy_total));
        switch (Tolerance(tolerance)) {
            case Tolerance::F32: QVERIFY2(max_abs <= 1e-3, qPrintable(QString("max |dlogit| %1 > 1e-3").arg(max_abs))); break;
            case Tolerance::F16: QVERIFY2(max_abs <= 2e-2, qPrintable(QString("max |dlogit| %1 > 2e-2").arg(max_abs))); break;
            case Tolerance::Quantized:
                // The README's bounds are top-1 >= 0.90 and mean <= 0.05 x std. The
                // engine quantizes activations as the reference does (Q8_0/Q8_1/Q8_K),
                // so it is held tighter; greedy continuations may part from the
                // reference only at a near-tie (checked above), since summation
                // order alone flips those.
                QVERIFY2(agree >= 0.98, qPrintable(QString("top-1 agreement %1 < 0.98").arg(agree)));
                QVERIFY2(mean_abs <= 0.02 * std_ref,
                         qPrintable(QString("mean |dlogit| %1 > 0.02 x std %2").arg(mean_abs).arg(std_ref)));
                break;
        }
    }

    // The README's sentence, through the whole text path (tokenizer, sampler at
    // temperature 0, streaming detokenizer).
    void stories_greedy_text() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/stories260K.gguf"));
        model::Context ctx(*m, {});
        std::vector<int32_t> toks = m->vocab().encode("Once upon a time", true);
        std::vector<int32_t> out;
        const float* logits = ctx.decode(toks, false);
        std::string text;
        for (int i = 0; i < 32; ++i) {
            int32_t next = argmax(logits, m->config().n_vocab);
            out.push_back(next);
            logits = ctx.decode({&next, 1}, false);
        }
        text = m->vocab().pieces_text(out);
        QVERIFY2(text.rfind(", there was a little girl named Lily. She loved to play outside in the park. One day, she saw", 0) == 0,
                 text.c_str());
    }

    // Chunked prefill (small batches) computes the same logits as one pass.
    void chunked_prefill_matches() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/qwen2moe-tiny-f32.gguf"));
        const std::vector<int32_t> toks = m->vocab().encode("Lily and Tom went to the store. They bought apples.", true);
        model::ContextParams one;
        model::Context a(*m, one);
        const int64_t V = m->config().n_vocab;
        const float* la = a.decode(toks, true);
        std::vector<float> ref(la, la + toks.size() * V);
        model::ContextParams small;
        small.n_batch = 3;
        model::Context b(*m, small);
        const float* lb = b.decode(toks, true);
        for (size_t i = 0; i < ref.size(); ++i) QVERIFY(std::fabs(ref[i] - lb[i]) < 1e-4f);
    }

    void bad_tokens_are_errors() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(test::fixture_path("models/stories260K.gguf"));
        model::Context ctx(*m, {});
        const int32_t bad = 100000;
        QVERIFY_THROWS_EXCEPTION(Error, ctx.decode({&bad, 1}, false));
        std::vector<int32_t> too_many(static_cast<size_t>(ctx.n_ctx() + 1), 1);
        QVERIFY_THROWS_EXCEPTION(Error, ctx.decode(too_many, false));
        QCOMPARE(ctx.n_past(), int64_t{0});
    }
};

QTEST_APPLESS_MAIN(TestModelFixtures)
#include "test_model_fixtures.moc"
