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
#include "runner/context.h"
#include "model/model.h"
#include "fixture_check.h"
#include "reference_files.h"
#include "test_support.h"

using namespace strata;
using test::argmax;
using test::read_floats;
using test::read_refs;
using test::RefPrompt;

using test::Tolerance;

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
        QTest::newRow("deepseek2-tiny-f32") << "deepseek2-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("deepseek3-tiny-f32") << "deepseek3-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("deepseek3-tiny-q4_k_m") << "deepseek3-tiny-q4_k_m" << int(Tolerance::Quantized);
        QTest::newRow("gptoss-tiny-f32") << "gptoss-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("gptoss-tiny-mxfp4") << "gptoss-tiny-mxfp4" << int(Tolerance::Quantized);
        QTest::newRow("qwen3moe-tiny-f32") << "qwen3moe-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("glm4moe-tiny-f32") << "glm4moe-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("minimaxm2-tiny-f32") << "minimaxm2-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("ernie45moe-tiny-f32") << "ernie45moe-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("llama4-tiny-f32") << "llama4-tiny-f32" << int(Tolerance::F32);
        QTest::newRow("qwen35moe-tiny-f32") << "qwen35moe-tiny-f32" << int(Tolerance::F32);
    }

    void logits() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, name);
        QFETCH(int, tolerance);
        test::check_fixture(name, test::Tolerance(tolerance), [](const model::Model& m) {
            model::ContextParams cp;
            cp.n_threads = 2;
            return std::make_unique<model::Context>(m, cp);
        });
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
