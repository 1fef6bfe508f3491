// make-model: every architecture and weight type writes a file that loads,
// generates, and survives a writer -> reader -> writer round trip byte for byte.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "common/error.h"
#include "model/arch/arch.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/op_fallback.h"
#include "model/model.h"
#include "sched/generator.h"
#include "small_moe.h"
#include "test_support.h"

using namespace strata;

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Re-serialises a file from what the reader saw.
std::vector<uint8_t> rewrite(const gguf::File& f) {
    gguf::Writer w;
    for (const auto& [k, v] : f.metadata()) w.set(k, v);
    for (const gguf::TensorInfo& t : f.tensors()) {
        std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        w.add_tensor_view(t.name, t.type, ne, t.data, t.nbytes);
    }
    return w.to_bytes();
}

}  // namespace

class TestMakeModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void architectures_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<QString>("type");
        for (const char* arch : {"llama", "qwen2moe", "qwen3moe", "olmoe", "glm4moe", "minimax-m2", "ernie4_5-moe", "llama4",
                                 "qwen35moe"}) {
            QTest::newRow(qPrintable(QString(arch) + "-f32")) << arch << "f32";
        }
        for (const char* type : {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"})
            QTest::newRow(qPrintable(QString("llama-") + type)) << "llama" << type;
    }

    void architectures() {
        QFETCH(QString, arch);
        QFETCH(QString, type);
        QTemporaryDir dir;
        model::MakeModelSpec spec = test::small_arch_spec(arch.toStdString());
        QVERIFY(kernels::parse_type_name(type.toLatin1().constData(), &spec.type));
        const std::string path = (dir.path() + "/m.gguf").toStdString();
        model::make_model(spec, path);

        // Round trip byte for byte.
        const auto bytes = read_all(path);
        auto file = gguf::File::open(path);
        QVERIFY(rewrite(*file) == bytes);

        // Deterministic: same spec, same bytes (with another thread count).
        spec.threads = 1;
        const std::string again = (dir.path() + "/again.gguf").toStdString();
        model::make_model(spec, again);
        QVERIFY(read_all(again) == bytes);

        // Loads with the expected structure and generates.
        auto m = model::Model::load(path);
        QCOMPARE(m->config().arch_name, arch.toStdString());
        QCOMPARE(m->config().n_layer, spec.layers);
        int moe_layers = 0;
        for (const auto& L : m->weights().layers) moe_layers += L.ffn == model::FfnKind::Moe;
        QCOMPARE(moe_layers, int(arch == "llama4" ? spec.layers / spec.moe_step : spec.layers - spec.dense_layers));
        if (arch == "llama4") QCOMPARE(int64_t(m->config().rope_freq_factors.size()), m->config().n_rot / 2);
        const model::LayerWeights& first_moe =
            m->weights().layers[static_cast<size_t>(arch == "llama4" ? spec.moe_step - 1 : spec.dense_layers)];
        QCOMPARE(first_moe.has_shared_expert(),
                 arch == "qwen2moe" || arch == "glm4moe" || arch == "ernie4_5-moe" || arch == "llama4" || arch == "qwen35moe");
        if (arch == "qwen35moe") QCOMPARE(m->config().n_recurrent_layers(), int64_t{3});
        QCOMPARE(!first_moe.router_select_bias.empty(), arch == "glm4moe" || arch == "minimax-m2" || arch == "ernie4_5-moe");
        if (spec.head_dim > 0) QCOMPARE(m->config().head_dim, spec.head_dim);
        model::Context ctx(*m, {});
        sched::SamplingParams sp;
        sp.temperature = 0.0f;
        sp.max_tokens = 8;
        const auto r = sched::generate(ctx, m->vocab(), sp, m->vocab().encode("hello world", true));
        QVERIFY(!r.tokens.empty());
        const float* logits = ctx.decode(r.tokens, false);
        for (int64_t i = 0; i < m->config().n_vocab; ++i) QVERIFY(std::isfinite(logits[i]));
    }

    // Each architecture's layer, recorded op by op (arch::ops_used): what a
    // backend is asked to support at load. A backend lacking one is refused
    // with the op and the architecture named.
    void ops_each_architecture_uses_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<QStringList>("ops");
        QTest::newRow("llama") << "llama" << QStringList{"embedding", "RMSNorm", "attention", "residual add",
                                                        "router (softmax top-k)", "routed experts (SwiGLU)", "output head"};
        QTest::newRow("qwen2moe") << "qwen2moe" << QStringList{"attention", "router (softmax top-k)", "shared expert"};
        QTest::newRow("deepseek2") << "deepseek2"
                                   << QStringList{"latent attention (MLA)", "router (scored: selection bias, sigmoid, groups)"};
        QTest::newRow("gpt-oss") << "gpt-oss"
                                 << QStringList{"attention", "attention sinks", "sliding-window attention",
                                                "routed experts (clamped SwiGLU with biases)"};
        QTest::newRow("glm4moe") << "glm4moe" << QStringList{"attention", "dense FFN", "router (scored: selection bias, sigmoid, groups)", "shared expert"};
        QTest::newRow("minimax-m2") << "minimax-m2" << QStringList{"attention", "router (scored: selection bias, sigmoid, groups)"};
        QTest::newRow("llama4") << "llama4" << QStringList{"dense FFN", "chunked attention", "Q/K norm after RoPE",
                                                          "attention temperature", "routed experts (weighted before the FFN)",
                                                          "shared expert"};
        QTest::newRow("qwen35moe") << "qwen35moe"
                                   << QStringList{"gated delta net (linear attention with a recurrent state)",
                                                  "attention output gate", "router (softmax top-k)", "shared expert"};
        QTest::newRow("ernie4_5-moe") << "ernie4_5-moe" << QStringList{"attention", "dense FFN", "router (scored: selection bias, sigmoid, groups)", "shared expert"};
    }

    void ops_each_architecture_uses() {
        QFETCH(QString, arch);
        QFETCH(QStringList, ops);
        QTemporaryDir dir;
        model::MakeModelSpec spec = test::small_arch_spec(arch.toStdString());
        const std::string path = (dir.path() + "/m.gguf").toStdString();
        model::make_model(spec, path);
        auto m = model::Model::load(path);
        QStringList used;
        for (model::Op op : model::arch::ops_used(m->config(), m->weights())) used << model::op_name(op);
        for (const QString& op : ops) QVERIFY2(used.contains(op), qPrintable(arch + " does not use " + op + ": " + used.join(", ")));
        if (arch != "deepseek2") QVERIFY(!used.contains("latent attention (MLA)"));
        if (arch != "gpt-oss") QVERIFY(!used.contains("attention sinks"));

        // A device that computes every op leaves none to the CPU; one that
        // lacks the RMSNorm, or is told to leave it, leaves it; one that
        // lacks the layers' first stateful op (the attention or the delta
        // net, third after the embedding and the norm) cannot run the model.
        const auto all = [](model::Op) { return true; };
        QVERIFY(model::choose_cpu_ops(m->config(), m->weights(), all, {}, "test backend").empty());
        const std::vector<model::Op> norm{model::Op::RmsNorm};
        QVERIFY(model::choose_cpu_ops(m->config(), m->weights(), [](model::Op op) { return op != model::Op::RmsNorm; }, {},
                                      "test backend") == norm);
        QVERIFY(model::choose_cpu_ops(m->config(), m->weights(), all, norm, "test backend") == norm);
        if (arch == "llama") {
            // Per layer the residual goes to the CPU and the normed row back,
            // twice (before the attention and before the FFN); the CPU reads the norms.
            const model::ModelConfig& c = m->config();
            const model::CpuOpsCost cost = model::cpu_ops_cost(c, m->weights(), norm);
            QCOMPARE(cost.moved_bytes, uint64_t(4 * c.n_layer * c.n_embd * 4));
            QCOMPARE(cost.weight_bytes, uint64_t(2 * c.n_layer * c.n_embd * 4));
            QCOMPARE(QString::fromStdString(cost.describe()).left(19), QString("RMSNorm on the CPU:"));
        }
        const model::Op missing = model::arch::ops_used(m->config(), m->weights())[2];
        QVERIFY(!model::can_fall_back(missing));
        try {
            (void)model::choose_cpu_ops(m->config(), m->weights(), [&](model::Op op) { return op != missing; }, {}, "test backend");
            QFAIL("a model whose stateful op the device lacks was accepted");
        } catch (const Error& e) {
            QCOMPARE(QString(e.what()), arch + " uses " + model::op_name(missing) +
                                            ", which the test backend does not compute and cannot leave to the CPU (its "
                                            "state lives in the device's memory); use --device cpu");
        }
    }

    void kquant_types() {
        // k-quants need rows of whole 256-element super-blocks.
        QTemporaryDir dir;
        for (const char* type : {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}) {
            model::MakeModelSpec spec = test::small_arch_spec("llama");
            spec.dim = 256;
            spec.expert_ff = 256;
            spec.ff = 512;
            spec.layers = 2;
            QVERIFY(kernels::parse_type_name(type, &spec.type));
            const std::string path = (dir.path() + "/" + type + ".gguf").toStdString();
            model::make_model(spec, path);
            auto m = model::Model::load(path);
            model::Context ctx(*m, {});
            const int32_t bos = 1;
            const float* logits = ctx.decode({&bos, 1}, false);
            QVERIFY(std::isfinite(logits[0]));
        }
    }

    void bad_specs_are_refused() {
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/bad.gguf").toStdString();
        model::MakeModelSpec s = test::small_arch_spec("llama");
        s.arch = "gpt5";
        QVERIFY(s.validate().find("unknown architecture") != std::string::npos);
        s = test::small_arch_spec("llama");
        s.type = kernels::WeightType::Q4_K;  // dim 64 is not a multiple of 256
        QVERIFY(s.validate().find("block size") != std::string::npos);
        QVERIFY_THROWS_EXCEPTION(Error, model::make_model(s, path));
        s = test::small_arch_spec("llama");
        s.heads = 5;
        QVERIFY(!s.validate().empty());
        s = test::small_arch_spec("llama");
        s.used = 9;
        QVERIFY(!s.validate().empty());
        QVERIFY(!QFile::exists(QString::fromStdString(path)));
    }

    // A synthetic vocabulary of any allowed size has exactly as many tokens as
    // the embedding has rows (32000 once wrote 1664 tokens for 32000 rows).
    void large_synthetic_vocab_matches_the_embedding() {
        QTemporaryDir dir;
        model::MakeModelSpec s = test::small_arch_spec("olmoe");
        s.layers = 1;
        for (int64_t n : {int64_t{32000}, model::kMaxSyntheticVocab}) {
            s.vocab = n;
            const std::string path = (dir.path() + "/v" + QString::number(n) + ".gguf").toStdString();
            model::make_model(s, path);
            auto m = model::Model::load(path);
            QCOMPARE(m->config().n_vocab, n);
            QCOMPARE(static_cast<int64_t>(m->vocab().n_tokens()), n);
        }
        s.vocab = model::kMaxSyntheticVocab + 1;
        QVERIFY(s.validate().find("--vocab-from") != std::string::npos);
    }

    void vocab_from_fixture() {
        STRATA_REQUIRE_FIXTURES();
        QTemporaryDir dir;
        model::MakeModelSpec s = test::small_arch_spec("olmoe");
        s.vocab_from = test::fixture_path("models/stories260K.gguf");
        const std::string path = (dir.path() + "/v.gguf").toStdString();
        model::make_model(s, path);
        auto m = model::Model::load(path);
        QCOMPARE(m->vocab().encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
    }
};

QTEST_APPLESS_MAIN(TestMakeModel)
#include "test_make_model.moc"
