// Loading models that are wrong in the ways real files are wrong: each gives a
// strata::Error that names the file, the tensor or key, what was expected and
// what was found. Also: a tied output embedding computes what an explicit copy
// of it computes.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <functional>

#include "common/error.h"
#include "gguf/gguf.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "small_moe.h"
#include "test_support.h"

using namespace strata;

namespace {

using TensorEdit = std::function<bool(const gguf::TensorInfo&, gguf::Writer&)>;  // true: handled (skip default copy)
using MetaEdit = std::function<bool(const std::string&, const gguf::Value&, gguf::Writer&)>;

class Fixture {
public:
    Fixture() {
        model::MakeModelSpec s;
        s.layers = 2;
        s.dim = 64;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 4;
        s.used = 2;
        s.expert_ff = 32;
        s.dense_layers = 1;
        s.ff = 64;
        s.threads = 1;
        base_ = (dir_.path() + "/base.gguf").toStdString();
        model::make_model(s, base_);
        file_ = gguf::File::open(base_);
    }

    // A fixture model as the base (../shared/fixtures/models/NAME.gguf).
    explicit Fixture(const std::string& path) : base_(path) { file_ = gguf::File::open(base_); }

    // Writes a variant of the base model and returns its path.
    std::string variant(const char* name, const MetaEdit& meta, const TensorEdit& tensor) {
        gguf::Writer w;
        for (const auto& [k, v] : file_->metadata())
            if (!meta || !meta(k, v, w)) w.set(k, v);
        for (const gguf::TensorInfo& t : file_->tensors()) {
            if (tensor && tensor(t, w)) continue;
            w.add_tensor_view(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
        }
        const std::string path = (dir_.path() + "/" + name + ".gguf").toStdString();
        w.write(path);
        return path;
    }

    const std::string& base() const { return base_; }
    const gguf::File& file() const { return *file_; }

private:
    QTemporaryDir dir_;
    std::string base_;
    std::unique_ptr<gguf::File> file_;
};

void expect_load_error(const std::string& path, std::initializer_list<const char*> phrases) {
    try {
        model::Model::load(path);
        QFAIL("the model loaded");
    } catch (const Error& e) {
        const std::string msg = e.what();
        QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
        for (const char* p : phrases) QVERIFY2(msg.find(p) != std::string::npos, (msg + " lacks: " + p).c_str());
    }
}

}  // namespace

class TestModelErrors : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void missing_tensor() {
        Fixture f;
        const auto path = f.variant("missing", {}, [](const gguf::TensorInfo& t, gguf::Writer&) {
            return t.name == "blk.1.attn_q.weight";
        });
        expect_load_error(path, {"blk.1.attn_q.weight", "missing"});
    }

    void wrong_shape() {
        Fixture f;
        std::vector<float> zeros(64 * 48, 0.0f);
        const auto path = f.variant("shape", {}, [&](const gguf::TensorInfo& t, gguf::Writer& w) {
            if (t.name != "blk.0.attn_k.weight") return false;
            w.add_tensor(t.name, kernels::WeightType::F32, {64, 48},
                         std::vector<uint8_t>(reinterpret_cast<uint8_t*>(zeros.data()),
                                              reinterpret_cast<uint8_t*>(zeros.data() + zeros.size())));
            return true;
        });
        expect_load_error(path, {"blk.0.attn_k.weight", "expected shape [64, 32]", "found [64, 48]"});
    }

    void unsupported_type() {
        Fixture f;
        const auto path = f.variant("type", {}, [&](const gguf::TensorInfo& t, gguf::Writer& w) {
            if (t.name != "blk.1.ffn_up_exps.weight") return false;
            // iq2_xxs: 66 bytes per 256 elements; 64-wide rows cannot hold it, so use 256 x 8 x 4 rows.
            const int64_t rows = t.ne[0] * t.ne[1] * t.ne[2] / 256;
            w.add_tensor(t.name, static_cast<kernels::WeightType>(16), {256, rows},
                         std::vector<uint8_t>(static_cast<size_t>(rows * 66), 0));
            return true;
        });
        expect_load_error(path, {"blk.1.ffn_up_exps.weight", "iq2_xxs", "not supported"});
    }

    void unsupported_architecture() {
        Fixture f;
        const auto path = f.variant("arch", [](const std::string& k, const gguf::Value&, gguf::Writer& w) {
            if (k != "general.architecture") return false;
            w.set(k, gguf::Value::make_string("mamba"));
            return true;
        }, {});
        expect_load_error(path, {"architecture 'mamba' is not supported", "llama"});
    }

    void missing_metadata() {
        Fixture f;
        const auto path = f.variant("meta", [](const std::string& k, const gguf::Value&, gguf::Writer&) {
            return k == "llama.embedding_length";
        }, {});
        expect_load_error(path, {"llama.embedding_length", "missing"});
    }

    void bad_metadata_values() {
        Fixture f;
        auto set = [&](const char* name, const char* key, gguf::Value v) {
            return f.variant(name, [key, v](const std::string& k, const gguf::Value&, gguf::Writer& w) {
                if (k != key) return false;
                w.set(k, v);
                return true;
            }, {});
        };
        expect_load_error(set("kv", "llama.attention.head_count_kv", gguf::Value::make_u32(3)), {"head_count_kv 3"});
        expect_load_error(set("used", "llama.expert_used_count", gguf::Value::make_u32(9)), {"expert_used_count", "1..4"});
        expect_load_error(set("eps", "llama.attention.layer_norm_rms_epsilon", gguf::Value::make_f32(-1.0f)),
                          {"layer_norm_rms_epsilon"});
        expect_load_error(set("strtype", "llama.block_count", gguf::Value::make_string("two")),
                          {"llama.block_count", "expected an unsigned integer, found string"});
        expect_load_error(set("dense", "llama.leading_dense_block_count", gguf::Value::make_u32(2)),
                          {"has a router but leading_dense_block_count is 2"});
    }

    // deepseek2 files without what MLA needs: each error names the key or tensor.
    void deepseek_missing_keys_and_tensors() {
        STRATA_REQUIRE_FIXTURES();
        Fixture f(test::fixture_path("models/deepseek2-tiny-f32.gguf"));
        const auto drop_key = [&](const char* name, const char* key) {
            return f.variant(name, [key](const std::string& k, const gguf::Value&, gguf::Writer&) { return k == key; }, {});
        };
        expect_load_error(drop_key("nolora", "deepseek2.attention.kv_lora_rank"),
                          {"deepseek2.attention.kv_lora_rank", "compressed KV"});
        expect_load_error(drop_key("norope", "deepseek2.rope.dimension_count"), {"deepseek2.rope.dimension_count"});
        expect_load_error(drop_key("noqlora", "deepseek2.attention.q_lora_rank"), {"blk.0.attn_q_a.weight", "q_lora_rank"});
        const auto kvb = f.variant("nokvb", {}, [](const gguf::TensorInfo& t, gguf::Writer&) {
            return t.name == "blk.2.attn_kv_b.weight";
        });
        expect_load_error(kvb, {"blk.2.attn_kv_b.weight", "missing"});
        const auto gating = f.variant("gating", [](const std::string& k, const gguf::Value&, gguf::Writer& w) {
            if (k != "deepseek2.expert_gating_func") return false;
            w.set(k, gguf::Value::make_u32(7));
            return true;
        }, {});
        expect_load_error(gating, {"expert_gating_func", "7", "sigmoid"});
    }

    // gpt-oss files without what it needs: each error names the key or tensor.
    void gpt_oss_missing_keys_and_tensors() {
        QTemporaryDir dir;
        model::MakeModelSpec s = test::small_moe_spec(kernels::WeightType::F32, "gpt-oss");
        s.threads = 1;
        const std::string base = (dir.path() + "/oss.gguf").toStdString();
        model::make_model(s, base);
        Fixture f(base);
        expect_load_error(f.variant("noswa", [](const std::string& k, const gguf::Value&, gguf::Writer&) {
            return k == "gpt-oss.attention.sliding_window";
        }, {}), {"gpt-oss.attention.sliding_window", "sliding window"});
        for (const char* t : {"blk.1.attn_sinks.weight", "blk.0.ffn_up_exps.bias", "blk.1.ffn_gate_inp.bias",
                              "blk.0.post_attention_norm.weight"}) {
            const auto path = f.variant("drop", {}, [t](const gguf::TensorInfo& x, gguf::Writer&) { return x.name == t; });
            expect_load_error(path, {t, "missing"});
        }
    }

    // The 2026 families' fixtures without a key or tensor they need: each
    // error names it (the key llama.cpp requires, the tensor it creates).
    void families_missing_keys_and_tensors_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("key");        // a key whose absence is refused
        QTest::addColumn<QString>("tensor");     // a tensor whose absence is refused
        QTest::newRow("glm4moe") << "glm4moe-tiny-f32" << "glm4moe.expert_shared_count" << "blk.2.exp_probs_b.bias";
        QTest::newRow("glm4moe router") << "glm4moe-tiny-f32" << "glm4moe.expert_count" << "blk.3.ffn_gate_inp.weight";
        QTest::newRow("minimax-m2") << "minimaxm2-tiny-f32" << "minimax-m2.expert_gating_func" << "blk.1.exp_probs_b.bias";
        QTest::newRow("minimax-m2 norm") << "minimaxm2-tiny-f32" << "minimax-m2.feed_forward_length" << "blk.0.attn_k_norm.weight";
        QTest::newRow("ernie4_5-moe") << "ernie45moe-tiny-f32" << "ernie4_5-moe.interleave_moe_layer_step"
                                      << "blk.1.ffn_up_shexp.weight";
        QTest::newRow("llama4") << "llama4-tiny-f32" << "llama4.interleave_moe_layer_step" << "blk.3.ffn_gate_inp.weight";
        QTest::newRow("qwen35moe") << "qwen35moe-tiny-f32" << "qwen35moe.ssm.conv_kernel" << "blk.1.ssm_a";
        QTest::newRow("qwen35moe gate") << "qwen35moe-tiny-f32" << "qwen35moe.rope.dimension_sections"
                                        << "blk.2.attn_gate.weight";
        QTest::newRow("qwen35moe attention") << "qwen35moe-tiny-f32" << "qwen35moe.ssm.inner_size" << "blk.3.attn_q_norm.weight";
        QTest::newRow("llama4 experts") << "llama4-tiny-f32" << "llama4.expert_feed_forward_length"
                                        << "blk.1.ffn_down_shexp.weight";
    }
    void families_missing_keys_and_tensors() {
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, fixture);
        QFETCH(QString, key);
        QFETCH(QString, tensor);
        Fixture f(test::fixture_path("models/" + fixture + ".gguf"));
        const std::string k = key.toStdString(), t = tensor.toStdString();
        expect_load_error(f.variant("nokey", [&](const std::string& x, const gguf::Value&, gguf::Writer&) { return x == k; }, {}),
                          {k.c_str()});
        expect_load_error(f.variant("notensor", {}, [&](const gguf::TensorInfo& x, gguf::Writer&) { return x.name == t; }),
                          {t.c_str(), "missing"});
    }

    // NextN/MTP blocks (GLM-4.5, Qwen3.5) come after the trunk in block_count:
    // the model is the trunk, the blocks past it are not run (nor counted as
    // its layers); a count that leaves no trunk is refused naming the key.
    void nextn_blocks_after_the_trunk() {
        STRATA_REQUIRE_FIXTURES();
        Fixture f(test::fixture_path("models/glm4moe-tiny-f32.gguf"));
        const auto with_nextn = [&](const char* name, uint32_t n) {
            return f.variant(name, [n](const std::string& k, const gguf::Value& v, gguf::Writer& w) {
                if (k == "glm4moe.block_count") {
                    w.set(k, v);
                    w.set("glm4moe.nextn_predict_layers", gguf::Value::make_u32(n));  // blk.3 becomes the MTP block
                    return true;
                }
                return false;
            }, {});
        };
        auto m = model::Model::load(with_nextn("nextn", 1));
        QCOMPARE(m->config().n_layer, int64_t{3});
        QCOMPARE(m->config().n_nextn, int64_t{1});
        QCOMPARE(int64_t(m->weights().layers.size()), int64_t{3});
        model::Context ctx(*m, {});
        const int32_t bos = 1;
        QVERIFY(std::isfinite(ctx.decode({&bos, 1}, false)[0]));
        expect_load_error(with_nextn("allnextn", 4), {"glm4moe.nextn_predict_layers", "leaves no layers"});
    }

    // A file with the NextN block's tensors binds them all (the MTP draft,
    // Model::nextn); one of them missing is refused naming it. Without any
    // (a trunk-only conversion) the file loads, with no draft.
    void nextn_block_tensors() {
        QTemporaryDir dir;
        model::MakeModelSpec s;
        s.arch = "glm4moe";
        s.layers = 2;
        s.dim = 64;
        s.heads = 4;
        s.kv_heads = 2;
        s.experts = 4;
        s.used = 2;
        s.expert_ff = 64;
        s.nextn = 1;
        const std::string path = dir.filePath("mtp.gguf").toStdString();
        model::make_model(s, path);
        auto m = model::Model::load(path);
        QVERIFY(m->nextn() != nullptr);
        QCOMPARE(m->nextn()->config().n_layer, int64_t{1});
        Fixture f(path);
        const auto drop = [&](const char* name, const std::string& prefix) {
            return f.variant(name, {}, [prefix](const gguf::TensorInfo& t, gguf::Writer&) { return t.name.rfind(prefix, 0) == 0; });
        };
        expect_load_error(drop("noenorm", "blk.2.nextn.enorm.weight"), {"blk.2.nextn.enorm.weight", "missing"});
        expect_load_error(drop("norouter", "blk.2.ffn_gate_inp.weight"), {"blk.2.ffn_gate_inp.weight"});
        QVERIFY(model::Model::load(drop("trunk", "blk.2."))->nextn() == nullptr);
    }

    // qwen35moe's per-layer pattern (attention.recurrent_layers) overrides the
    // interval: the fixture's own pattern loads as it is, another is refused
    // naming the tensor the layer then lacks.
    void qwen35moe_recurrent_pattern() {
        STRATA_REQUIRE_FIXTURES();
        Fixture f(test::fixture_path("models/qwen35moe-tiny-f32.gguf"));
        const auto with_pattern = [&](const char* name, std::vector<bool> layers) {
            return f.variant(name, [layers](const std::string& k, const gguf::Value& v, gguf::Writer& w) {
                if (k != "qwen35moe.full_attention_interval") return false;
                w.set(k, v);
                std::vector<gguf::Value> items;
                for (bool r : layers) items.push_back(gguf::Value::make_bool(r));
                w.set("qwen35moe.attention.recurrent_layers", gguf::Value::make_array(gguf::ValueType::BOOL, items));
                return true;
            }, {});
        };
        auto m = model::Model::load(with_pattern("same", {true, true, true, false}));
        QCOMPARE(m->config().n_recurrent_layers(), int64_t{3});
        expect_load_error(with_pattern("other", {true, false, true, false}), {"blk.1.attn_q.weight", "missing"});
        expect_load_error(with_pattern("short", {true, true}), {"qwen35moe.attention.recurrent_layers", "2 entries"});
    }

    // A llama4 file whose routers are not on the layers its step says: refused, naming the tensor.
    void llama4_router_on_a_dense_layer() {
        STRATA_REQUIRE_FIXTURES();
        Fixture f(test::fixture_path("models/llama4-tiny-f32.gguf"));
        const auto path = f.variant("step1", [](const std::string& k, const gguf::Value&, gguf::Writer& w) {
            if (k != "llama4.interleave_moe_layer_step") return false;
            w.set(k, gguf::Value::make_u32(1));  // every layer MoE, but layers 0 and 2 are dense in the file
            return true;
        }, {});
        expect_load_error(path, {"blk.0.ffn_gate_inp.weight", "routes experts"});
    }

    void vocabulary_mismatch() {
        Fixture f;
        const auto path = f.variant("vocab", [](const std::string& k, const gguf::Value& v, gguf::Writer& w) {
            if (k != "tokenizer.ggml.tokens" && k != "tokenizer.ggml.scores" && k != "tokenizer.ggml.token_type")
                return false;
            gguf::Value shorter = v;
            shorter.array.resize(shorter.array.size() - 10);
            w.set(k, shorter);
            return true;
        }, {});
        expect_load_error(path, {"token_embd.weight", "has 512 rows but the vocabulary has 502 tokens"});
    }

    // A file without output.weight uses the token embedding as the output head.
    void tied_output_matches_explicit_copy() {
        Fixture f;
        const gguf::TensorInfo* emb = f.file().tensor("token_embd.weight");
        const auto explicit_path = f.variant("explicit", {}, [&](const gguf::TensorInfo& t, gguf::Writer& w) {
            if (t.name != "output.weight") return false;
            w.add_tensor_view(t.name, emb->type, {emb->ne[0], emb->ne[1]}, emb->data, emb->nbytes);
            return true;
        });
        const auto tied_path = f.variant("tied", {}, [](const gguf::TensorInfo& t, gguf::Writer&) {
            return t.name == "output.weight";
        });
        auto a = model::Model::load(explicit_path);
        auto b = model::Model::load(tied_path);
        QVERIFY(!a->weights().output_tied);
        QVERIFY(b->weights().output_tied);
        model::Context ca(*a, {}), cb(*b, {});
        const auto toks = a->vocab().encode("the end of the tied test", true);
        const float* la = ca.decode(toks, true);
        const float* lb = cb.decode(toks, true);
        for (size_t i = 0; i < toks.size() * 512; ++i) QCOMPARE(la[i], lb[i]);
    }
};

QTEST_APPLESS_MAIN(TestModelErrors)
#include "test_model_errors.moc"
