// strata-cli quality's measurements (quant/quality.h) on a make-model MoE
// and its quantizations by our quantizer: a model against itself shows no
// difference at all; a 4-bit quantization shows KL, top-1 disagreement and
// routing drift, and more of it than 8 bits; models of different shapes are
// refused.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "common/error.h"
#include "model/make_model.h"
#include "model/model.h"
#include "quant/quality.h"
#include "quant/quantize.h"

using namespace strata;

class TestQuality : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string base_;
    std::vector<std::vector<int32_t>> prompts_;

    std::string quantized(const char* recipe) {
        const std::string out = (dir_.path() + "/" + recipe + ".gguf").toStdString();
        quant::QuantizeOptions o;
        o.recipe = quant::load_recipe(recipe);
        o.threads = 2;
        quant::quantize_file(base_, out, o);
        return out;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        model::MakeModelSpec s;
        s.arch = "qwen3moe";
        s.layers = 3;
        s.dim = 256;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 8;
        s.used = 2;
        s.expert_ff = 256;
        s.threads = 2;
        base_ = (dir_.path() + "/base.gguf").toStdString();
        model::make_model(s, base_);
        for (int p = 0; p < 4; ++p) {
            std::vector<int32_t> t = {1};
            for (int i = 0; i < 24; ++i) t.push_back(3 + (p * 97 + i * 31) % 500);
            prompts_.push_back(t);
        }
    }

    void a_model_against_itself_shows_nothing() {
        auto m = model::Model::load(base_);
        const quant::QualityReport r = quant::measure_quality(*m, *m, prompts_, 2);
        QCOMPARE(r.prompts, int64_t(4));
        QCOMPARE(r.positions, int64_t(100));
        QCOMPARE(r.ppl_base, r.ppl_quant);
        QCOMPARE(r.ln_ppl_ratio, 0.0);
        QCOMPARE(r.ln_ppl_ratio_se, 0.0);
        QCOMPARE(r.kl_mean, 0.0);
        QCOMPARE(r.top1, 1.0);
        QCOMPARE(r.layers.size(), size_t(3));
        for (const quant::LayerDrift& d : r.layers) {
            QCOMPARE(d.exact_set, 1.0);
            QCOMPARE(d.jaccard, 1.0);
            QCOMPARE(d.router_kl, 0.0);
        }
    }

    void four_bits_drift_more_than_eight() {
        auto m = model::Model::load(base_);
        auto q8 = model::Model::load(quantized("q8"));
        auto q2 = model::Model::load(quantized("q2-experts"));
        const quant::QualityReport r8 = quant::measure_quality(*m, *q8, prompts_, 2);
        const quant::QualityReport r2 = quant::measure_quality(*m, *q2, prompts_, 2);
        qInfo("q8: KL %.5f top-1 %.3f; q2-experts: KL %.5f top-1 %.3f, layer 0 same set %.3f", r8.kl_mean, r8.top1,
              r2.kl_mean, r2.top1, r2.layers[0].exact_set);
        QVERIFY(r8.kl_mean > 0.0);
        QVERIFY(r2.kl_mean > r8.kl_mean);
        QVERIFY(r2.kl_p99 >= r2.kl_p95 && r2.kl_max >= r2.kl_p99);
        QVERIFY(r2.top1 <= r8.top1);
        // The log ratio is the perplexities' (both are exps of mean NLLs); its
        // standard error is positive, and larger where the damage is.
        for (const quant::QualityReport* r : {&r8, &r2}) {
            QVERIFY(std::abs(r->ln_ppl_ratio - std::log(r->ppl_quant / r->ppl_base)) < 1e-9);
            QVERIFY(r->ln_ppl_ratio_se > 0.0);
        }
        QVERIFY(r2.ln_ppl_ratio_se > r8.ln_ppl_ratio_se);
        double drift8 = 0, drift2 = 0;
        for (size_t i = 0; i < r8.layers.size(); ++i) {
            drift8 += r8.layers[i].router_kl;
            drift2 += r2.layers[i].router_kl;
            QVERIFY(r2.layers[i].jaccard <= 1.0 && r2.layers[i].jaccard >= r2.layers[i].exact_set - 1e-12);
        }
        QVERIFY(drift2 > drift8);
    }

    void different_models_are_refused() {
        model::MakeModelSpec s;
        s.layers = 2;
        s.dim = 64;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 4;
        s.used = 2;
        s.expert_ff = 64;
        s.threads = 1;
        const std::string other = (dir_.path() + "/other.gguf").toStdString();
        model::make_model(s, other);
        auto a = model::Model::load(base_);
        auto b = model::Model::load(other);
        QVERIFY_THROWS_EXCEPTION(Error, quant::measure_quality(*a, *b, prompts_, 1));
    }
};

QTEST_GUILESS_MAIN(TestQuality)
#include "test_quality.moc"
