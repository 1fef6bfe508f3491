// The engine against an independent float64 reference (reference_forward.py,
// NumPy, written from llama.cpp's model definitions and not from the engine).
//
// 1. The reference itself reproduces llama.cpp's logits for the F32 fixtures
//    (dense llama, Mixtral layout, qwen2moe) within 1e-3.
// 2. On random-weight F32 models of the shapes that have no llama.cpp fixture
//    (qwen3moe, olmoe, mixed dense/MoE, qwen2moe with a shared expert, dense
//    llama, deepseek2, gpt-oss), the engine's teacher-forced logits match the
//    reference's within 1e-3 (deepseek2 and gpt-oss: 1e-4).
// 3. gpt-oss's MXFP4 experts dequantize in the engine to the reference's values exactly.
//
// Needs python3 with NumPy (Debian: python3-numpy); skips without it. The
// interpreter is $STRATA_PYTHON if set, else the first of python3 and
// /usr/bin/python3 that can import numpy.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStringList>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"
#include "memory/ledger.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "test_support.h"

using namespace strata;

namespace {

constexpr double kTolerance = 1e-3;  // F32 models, the fixtures README's bound

const QString kScript = QStringLiteral(STRATA_SOURCE_DIR "/tests/reference/reference_forward.py");

bool python_has_numpy(const QString& exe) {
    QProcess p;
    p.start(exe, {"-c", "import numpy"});
    if (!p.waitForStarted(10000)) return false;
    if (!p.waitForFinished(60000)) {
        p.kill();
        p.waitForFinished();
        return false;
    }
    return p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

QString find_python() {
    QStringList candidates;
    const QByteArray env = qgetenv("STRATA_PYTHON");
    if (!env.isEmpty()) candidates << QString::fromLocal8Bit(env);
    candidates << "python3" << "/usr/bin/python3";
    for (const QString& c : candidates)
        if (python_has_numpy(c)) return c;
    return {};
}

QString join_tokens(const std::vector<int32_t>& toks) {
    QStringList s;
    for (int32_t t : toks) s << QString::number(t);
    return s.join(',');
}

std::vector<float> read_floats(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QByteArray b = f.readAll();
    std::vector<float> v(static_cast<size_t>(b.size()) / 4);
    std::memcpy(v.data(), b.constData(), v.size() * 4);
    return v;
}

// max |a - b| over n values; NaN anywhere counts as infinitely far.
double max_abs_diff(const float* a, const float* b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
    }
    return m;
}

// deepseek2's extra shape (MakeModelSpec's fields of the same names).
struct Mla {
    int64_t q_lora = 0, kv_lora = 0, shared_experts = 0;
    const char* gating = "softmax";
    bool weights_norm = false;
    float weights_scale = 1.0f;
    int64_t expert_groups = 0, groups_used = 0;
    float yarn_factor = 0.0f;
};

// gpt-oss's: the sliding window, MXFP4 experts, YaRN.
struct Oss {
    int64_t sliding_window = 0;
    bool mxfp4_experts = false;
    float yarn_factor = 0.0f;
};

struct Shape {
    const char* arch;
    int64_t layers, dim, heads, kv_heads, experts, used, expert_ff, dense_layers, ff, shared_ff;
    Mla mla{};
    Oss oss{};
};

model::MakeModelSpec spec_of(const Shape& s, uint64_t seed) {
    model::MakeModelSpec spec;
    spec.arch = s.arch;
    spec.layers = s.layers;
    spec.dim = s.dim;
    spec.heads = s.heads;
    spec.kv_heads = s.kv_heads;
    spec.experts = s.experts;
    spec.used = s.used;
    spec.expert_ff = s.expert_ff;
    spec.dense_layers = s.dense_layers;
    spec.ff = s.ff;
    spec.shared_ff = s.shared_ff;
    if (s.mla.kv_lora > 0) {
        spec.q_lora = s.mla.q_lora;
        spec.kv_lora = s.mla.kv_lora;
        spec.shared_experts = s.mla.shared_experts;
        spec.gating = s.mla.gating;
        spec.weights_norm = s.mla.weights_norm;
        spec.weights_scale = s.mla.weights_scale;
        spec.expert_groups = s.mla.expert_groups;
        spec.groups_used = s.mla.groups_used;
        spec.yarn_factor = s.mla.yarn_factor;
    }
    if (s.oss.sliding_window > 0) {
        spec.sliding_window = s.oss.sliding_window;
        spec.yarn_factor = s.oss.yarn_factor;
        if (s.oss.mxfp4_experts) {
            spec.expert_type = kernels::WeightType::MXFP4;
            spec.expert_type_set = true;
        }
    }
    spec.ctx = 256;
    spec.type = kernels::WeightType::F32;
    spec.seed = seed;
    spec.threads = 2;
    return spec;
}

}  // namespace

Q_DECLARE_METATYPE(Shape)

class TestReferenceForward : public QObject {
    Q_OBJECT

    QString python_;
    QTemporaryDir tmp_;

#define REQUIRE_PYTHON()                                                                                       \
    do {                                                                                                       \
        if (python_.isEmpty())                                                                                 \
            QSKIP("python3 with NumPy not found: install python3-numpy (Debian) or set STRATA_PYTHON to an "   \
                  "interpreter that can import numpy");                                                        \
    } while (0)

    // Runs the reference on `model` and returns n_tokens rows of logits (empty
    // after a QFAIL-worthy failure, with the reason in `err`).
    std::vector<float> reference(const QString& model, const std::vector<int32_t>& tokens, QString& err) {
        const QString out = tmp_.filePath("ref-" + QFileInfo(model).completeBaseName() + ".f32");
        QFile::remove(out);
        QProcess p;
        p.start(python_, {kScript, model, "--tokens", join_tokens(tokens), "--out", out});
        if (!p.waitForStarted(10000)) {
            err = "cannot start " + python_;
            return {};
        }
        if (!p.waitForFinished(300000)) {
            p.kill();
            p.waitForFinished();
            err = "reference_forward.py timed out";
            return {};
        }
        if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
            err = "reference_forward.py failed (exit " + QString::number(p.exitCode()) +
                  "): " + QString::fromLocal8Bit(p.readAllStandardError());
            return {};
        }
        std::vector<float> v = read_floats(out);
        if (v.empty()) err = "reference_forward.py wrote nothing to " + out;
        return v;
    }

private Q_SLOTS:
    // gpt-oss's MXFP4 experts: the engine's dequantization equals the
    // reference's (written from the OCP Microscaling spec's E2M1 and E8M0
    // tables) value for value, and the engine's logits on such a file meet
    // the fixtures' mean-difference bound for quantized files (it multiplies MXFP4 rows with
    // activations rounded to 8 bits, as ggml does; the reference with floats).
    void mxfp4_experts_dequantize_exactly() {
        REQUIRE_PYTHON();
        const QString path = tmp_.filePath("gpt-oss-mxfp4.gguf");
        const model::MakeModelSpec spec = spec_of(Shape{"gpt-oss", 3, 64, 8, 2, 16, 4, 64, 0, 0, 0, {}, {5, true, 8.0f}}, 11);
        model::make_model(spec, path.toStdString());
        auto m = model::Model::load(path.toStdString());
        const model::Matrix& gate = m->weights().layers[1].experts_stacked.gate;
        QCOMPARE(gate.type, kernels::WeightType::MXFP4);
        const int64_t n = gate.cols * gate.rows * gate.slabs;
        std::vector<float> have(static_cast<size_t>(n));
        for (int64_t r = 0; r < gate.rows * gate.slabs; ++r)
            kernels::dequantize_row(gate.type, gate.row(r), have.data() + r * gate.cols, gate.cols);
        const QString out = tmp_.filePath("gate.f32");
        QProcess p;
        p.start(python_, {kScript, path, "--dequantize", "blk.1.ffn_gate_exps.weight", "--out", out});
        QVERIFY(p.waitForFinished(60000) && p.exitCode() == 0);
        const std::vector<float> want = read_floats(out);
        QCOMPARE(want.size(), have.size());
        int64_t nonzero = 0;
        for (size_t i = 0; i < have.size(); ++i) {
            if (have[i] != want[i]) QFAIL(qPrintable(QString("value %1: engine %2, reference %3").arg(i).arg(have[i]).arg(want[i])));
            nonzero += have[i] != 0.0f;
        }
        QVERIFY(nonzero > n / 2);

        const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 291, 376, 400, 428, 352, 303, 267};
        model::ContextParams cp;
        cp.n_threads = 2;
        model::Context ctx(*m, cp);
        const float* l = ctx.decode(tokens, true);
        const int64_t V = m->config().n_vocab;
        QString err;
        const std::vector<float> ref = reference(path, tokens, err);
        QVERIFY2(err.isEmpty(), qPrintable(err));
        double diff = 0, sum = 0, sq = 0;
        int64_t agree = 0;
        for (size_t t = 0; t < tokens.size(); ++t) {
            const float* a = l + t * V;
            const float* b = ref.data() + t * V;
            agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
            for (int64_t i = 0; i < V; ++i) {
                diff += std::fabs(double(a[i]) - b[i]);
                sum += b[i];
                sq += double(b[i]) * b[i];
            }
        }
        const double cnt = double(tokens.size() * V), mean = sum / cnt;
        const double spread = std::sqrt(sq / cnt - mean * mean);
        qInfo("gpt-oss MXFP4 experts: top-1 agreement %lld/%zu, mean |dlogit| %.3g (%.3f of the spread)",
              static_cast<long long>(agree), tokens.size(), diff / cnt, diff / cnt / spread);
        // A random model's logits are nearly flat (ties everywhere), so top-1
        // agreement is only reported; the mean difference is the README's bound.
        QVERIFY(diff / cnt <= 0.05 * spread);
    }

    void initTestCase() {
        QVERIFY(tmp_.isValid());
        QVERIFY2(QFile::exists(kScript), qPrintable(kScript + " is missing"));
        python_ = find_python();
        if (!python_.isEmpty()) qInfo("reference interpreter: %s", qPrintable(python_));
    }

    // The reference reproduces llama.cpp on the first prompt of each F32 fixture.
    void reference_matches_llama_cpp_data() {
        QTest::addColumn<QString>("name");
        QTest::newRow("stories260K") << "stories260K";
        QTest::newRow("moe-tiny-f32") << "moe-tiny-f32";
        QTest::newRow("qwen2moe-tiny-f32") << "qwen2moe-tiny-f32";
        QTest::newRow("deepseek2-tiny-f32") << "deepseek2-tiny-f32";
        QTest::newRow("deepseek3-tiny-f32") << "deepseek3-tiny-f32";
    }

    void reference_matches_llama_cpp() {
        REQUIRE_PYTHON();
        STRATA_REQUIRE_FIXTURES();
        QFETCH(QString, name);
        const QString base = test::fixtures_dir() + "/models/" + name;

        QFile refs(base + ".ref.jsonl");
        QVERIFY2(refs.open(QIODevice::ReadOnly), qPrintable("cannot open " + refs.fileName()));
        QByteArray first;
        for (const QByteArray& line : refs.readAll().split('\n'))
            if (!line.trimmed().isEmpty()) {
                first = line;
                break;
            }
        const QJsonObject o = QJsonDocument::fromJson(first).object();
        std::vector<int32_t> tokens;
        for (const auto& t : o["tokens"].toArray()) tokens.push_back(t.toInt());
        const int64_t offset = o["logits_offset_rows"].toInteger();
        QVERIFY(!tokens.empty());

        const std::vector<float> want_all = read_floats(base + ".logits.f32");
        const int64_t V = 512;  // the fixtures' shared vocabulary
        QVERIFY(static_cast<int64_t>(want_all.size()) >= (offset + static_cast<int64_t>(tokens.size())) * V);

        QString err;
        const std::vector<float> got = reference(base + ".gguf", tokens, err);
        QVERIFY2(err.isEmpty(), qPrintable(err));
        QCOMPARE(static_cast<int64_t>(got.size()), static_cast<int64_t>(tokens.size()) * V);

        const double d = max_abs_diff(got.data(), want_all.data() + offset * V, got.size());
        qInfo("reference vs llama.cpp, %s (%zu tokens): max |dlogit| %.3g", qPrintable(name), tokens.size(), d);
        QVERIFY2(d <= kTolerance, qPrintable(QString("reference vs llama.cpp: max |dlogit| %1 > %2").arg(d).arg(kTolerance)));
    }

    // The engine against the reference on random-weight models.
    // gpt-oss in a batch: two sequences interleaved in one chunk (each with its
    // own sliding window and positions) give each sequence's logits alone.
    void gpt_oss_batch_equals_each_alone() {
        const QString path = tmp_.filePath("gpt-oss-batch.gguf");
        model::make_model(spec_of(Shape{"gpt-oss", 4, 64, 4, 2, 8, 2, 64, 0, 0, 0, {}, {4, false, 0.0f}}, 5),
                          path.toStdString());
        auto m = model::Model::load(path.toStdString());
        const int64_t V = m->config().n_vocab;
        model::ContextParams cp;
        cp.n_threads = 2;
        cp.n_ctx = 64;
        kv::KvCacheParams kp = model::kv_cache_params(m->config(), 0, 16, kv::KvType::F32);
        kp.n_blocks = kp.blocks_for(256);
        memory::Ledger ledger;
        kv::KvCache kv(kp, &ledger, memory::Tier::Fast);
        model::Context ctx(*m, cp, &m->weights(), nullptr, &kv);
        const std::vector<int32_t> a = {1, 403, 407, 261, 378, 291, 376, 400, 428, 352, 303, 267};
        const std::vector<int32_t> b = {1, 300, 310, 320, 330};
        const kv::SeqId sa = kv.create_sequence(), sb = kv.create_sequence();
        const float* la = ctx.decode_batch(a, std::vector<kv::SeqId>(a.size(), sa));
        const std::vector<float> alone_a(la + (a.size() - 1) * V, la + a.size() * V);
        const float* lb = ctx.decode_batch(b, std::vector<kv::SeqId>(b.size(), sb));
        const std::vector<float> alone_b(lb + (b.size() - 1) * V, lb + b.size() * V);
        const kv::SeqId ta = kv.create_sequence(), tb = kv.create_sequence();
        std::vector<int32_t> toks;
        std::vector<kv::SeqId> seqs;
        for (size_t i = 0; i < a.size(); ++i) {
            toks.push_back(a[i]), seqs.push_back(ta);
            if (i < b.size()) toks.push_back(b[i]), seqs.push_back(tb);
        }
        const float* l = ctx.decode_batch(toks, seqs);
        int64_t last_a = -1, last_b = -1;
        for (size_t i = 0; i < seqs.size(); ++i) (seqs[i] == ta ? last_a : last_b) = static_cast<int64_t>(i);
        QVERIFY(max_abs_diff(l + last_a * V, alone_a.data(), size_t(V)) < 1e-5);
        QVERIFY(max_abs_diff(l + last_b * V, alone_b.data(), size_t(V)) < 1e-5);
    }

    void engine_matches_reference_data() {
        QTest::addColumn<Shape>("shape");
        //                                   arch        L  dim  H kv  E  k  eff dense  ff shared
        QTest::newRow("qwen3moe") << Shape{"qwen3moe", 3, 128, 4, 2, 8, 2, 64, 0, 0, 0};
        QTest::newRow("qwen3moe-top1-mixed") << Shape{"qwen3moe", 3, 64, 4, 1, 6, 1, 64, 1, 128, 0};
        QTest::newRow("olmoe") << Shape{"olmoe", 3, 128, 4, 2, 8, 2, 64, 0, 0, 0};
        QTest::newRow("olmoe-mixed") << Shape{"olmoe", 3, 64, 4, 4, 8, 3, 32, 1, 96, 0};
        QTest::newRow("qwen2moe-shared") << Shape{"qwen2moe", 3, 64, 4, 2, 8, 2, 64, 0, 0, 96};
        QTest::newRow("llama-mixed") << Shape{"llama", 3, 64, 4, 2, 8, 2, 64, 1, 128, 0};
        QTest::newRow("llama-moe") << Shape{"llama", 2, 64, 8, 2, 4, 2, 64, 0, 0, 0};
        QTest::newRow("llama-dense") << Shape{"llama", 3, 64, 4, 2, 0, 0, 0, 0, 128, 0};
        // deepseek2: V2 (query LoRA, softmax, a shared expert), V2 with expert
        // groups, V3 (plain attn_q, sigmoid + selection bias, renormalised and
        // scaled weights, groups scored by their two best, two shared experts, YaRN).
        QTest::newRow("deepseek2-v2") << Shape{"deepseek2", 3, 64, 4, 4, 8, 3, 32, 1, 96, 0, {32, 32, 1}};
        QTest::newRow("deepseek2-v2-groups")
            << Shape{"deepseek2", 3, 64, 4, 4, 16, 4, 32, 1, 96, 0, {32, 32, 0, "softmax", false, 1.0f, 4, 2}};
        QTest::newRow("deepseek2-v3-yarn")
            << Shape{"deepseek2", 3, 64, 4, 4, 16, 4, 32, 1, 96, 0, {0, 32, 2, "sigmoid", true, 2.5f, 4, 2, 4.0f}};
        // gpt-oss: sinks, a window of 4 (12 tokens: the even layers forget),
        // biases, the clamped SwiGLU; MXFP4 experts (dequantized from the OCP
        // value table in the reference) with YaRN.
        QTest::newRow("gpt-oss") << Shape{"gpt-oss", 4, 64, 4, 2, 8, 2, 64, 0, 0, 0, {}, {4, false, 0.0f}};
        QTest::newRow("gpt-oss-yarn") << Shape{"gpt-oss", 3, 64, 8, 2, 16, 4, 64, 0, 0, 0, {}, {5, false, 8.0f}};
    }

    void engine_matches_reference() {
        REQUIRE_PYTHON();
        QFETCH(Shape, shape);
        const QString name = QTest::currentDataTag();
        const QString path = tmp_.filePath(name + ".gguf");
        const model::MakeModelSpec spec = spec_of(shape, 7);
        try {
            model::make_model(spec, path.toStdString());
        } catch (const Error& e) {
            QFAIL(qPrintable(QString("make_model: ") + e.what()));
        }

        const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 291, 376, 400, 428, 352, 303, 267};

        std::vector<float> have;
        int64_t V = 0;
        try {
            auto m = model::Model::load(path.toStdString());
            V = m->config().n_vocab;
            model::ContextParams cp;
            cp.n_threads = 2;
            model::Context ctx(*m, cp);
            const float* logits = ctx.decode(tokens, true);
            have.assign(logits, logits + tokens.size() * V);
        } catch (const Error& e) {
            QFAIL(qPrintable(QString("engine: ") + e.what()));
        }
        QCOMPARE(V, spec.vocab);

        QString err;
        const std::vector<float> want = reference(path, tokens, err);
        QVERIFY2(err.isEmpty(), qPrintable(err));
        QCOMPARE(want.size(), have.size());

        double worst = 0;
        int64_t worst_pos = 0;
        for (size_t p = 0; p < tokens.size(); ++p) {
            const double d = max_abs_diff(have.data() + p * V, want.data() + p * V, static_cast<size_t>(V));
            if (d > worst) {
                worst = d;
                worst_pos = static_cast<int64_t>(p);
            }
        }
        qInfo("engine vs reference, %s: max |dlogit| %.3g (worst at position %lld)", qPrintable(name), worst,
              static_cast<long long>(worst_pos));
        // deepseek2 and gpt-oss are held to issue 29's 1e-4 (the fixtures README's F32 bound is 1e-3).
        const double tolerance = shape.mla.kv_lora > 0 || shape.oss.sliding_window > 0 ? 1e-4 : kTolerance;
        QVERIFY2(worst <= tolerance, qPrintable(QString("engine vs reference, %1: max |dlogit| %2 > %3 at position %4")
                                                    .arg(name)
                                                    .arg(worst)
                                                    .arg(tolerance)
                                                    .arg(worst_pos)));
    }
};

QTEST_GUILESS_MAIN(TestReferenceForward)
#include "test_reference_forward.moc"
