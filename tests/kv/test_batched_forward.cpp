// The forward pass over the paged KV cache with many sequences in one batch:
// a token's logits do not depend on what else is in the batch (bit for bit),
// prefix-shared blocks give the same logits as recomputing them, and int8 K/V
// stay within a stated tolerance of f32 K/V on the fixtures.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <QTemporaryDir>

#include "runner/context.h"
#include "model/make_model.h"
#include "small_moe.h"
#include "model/model.h"
#include "common/error.h"
#include "context_params.h"
#include "reference_files.h"
#include "test_support.h"

using namespace strata;

namespace {

const std::string kDemo = test::demo_model_path();

const char* kPrompts[] = {
    "In the beginning God created the heaven and the earth.",
    "And the LORD spake unto Moses, saying,",
    "Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are they that mourn:",
    "Jesus wept.",
};

std::vector<float> row(const float* p, int64_t n) { return std::vector<float>(p, p + n); }

double std_of(const std::vector<float>& x) {
    double m = 0, s = 0;
    for (float v : x) m += v;
    m /= static_cast<double>(x.size());
    for (float v : x) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(x.size()));
}

// The demo model, and deepseek2 files whose cache holds MLA's latent rows.
void models_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("demo") << "demo";
    QTest::newRow("deepseek2-tiny-f32") << "deepseek2-tiny-f32";
    QTest::newRow("deepseek3-tiny-q4_k_m") << "deepseek3-tiny-q4_k_m";
}

std::string model_path(const QString& name) {
    return name == "demo" ? kDemo : test::fixture_path(QString("models/%1.gguf").arg(name));
}

}  // namespace

class TestBatchedForward : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // And qwen35moe, whose delta-net layers keep a recurrent state per
    // sequence beside the attention layer's KV (it shares no prefix, so it is
    // not in models_data's other uses).
    void batch_does_not_change_a_tokens_logits_data() {
        models_data();
        QTest::newRow("qwen35moe-tiny-f32") << "qwen35moe-tiny-f32";
    }
    void batch_does_not_change_a_tokens_logits() {
        QFETCH(QString, name);
        if (name != "demo") STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(model_path(name));
        const int64_t V = m->config().n_vocab;
        std::vector<std::vector<int32_t>> prompts;
        for (const char* p : kPrompts) prompts.push_back(m->vocab().encode(p, true));

        // Alone: each prompt, then 6 greedy steps, one sequence per context.
        std::vector<std::vector<std::vector<float>>> alone(prompts.size());
        std::vector<std::vector<int32_t>> gen(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) {
            model::Context ctx(*m, test::context_params(256, 64, 2));
            const float* l = ctx.decode(prompts[i], false);
            alone[i].push_back(row(l, V));
            for (int s = 0; s < 6; ++s) {
                const int32_t t = test::argmax(l, V);
                gen[i].push_back(t);
                l = ctx.decode({&t, 1}, false);
                alone[i].push_back(row(l, V));
            }
        }

        // Together: one context, four sequences; prompts in one mixed batch
        // (interleaved chunks), then decode steps of all four at once.
        model::ContextParams cp = test::context_params(256, 256, 2);
        cp.kv_block_tokens = 8;
        model::Context ctx(*m, cp);
        kv::KvCache& kvc = ctx.kv_cache();
        std::vector<kv::SeqId> seqs;
        for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(kvc.create_sequence());
        std::vector<int32_t> toks;
        std::vector<kv::SeqId> ids;
        std::vector<uint8_t> want;
        for (size_t i = 0; i < prompts.size(); ++i)
            for (size_t j = 0; j < prompts[i].size(); ++j) {
                toks.push_back(prompts[i][j]);
                ids.push_back(seqs[i]);
                want.push_back(j + 1 == prompts[i].size());
            }
        const float* l = ctx.decode_batch(toks, ids, want);
        for (size_t i = 0; i < prompts.size(); ++i)
            QVERIFY2(std::memcmp(l + i * V, alone[i][0].data(), V * sizeof(float)) == 0, kPrompts[i]);
        for (int s = 0; s < 6; ++s) {
            toks.clear();
            ids.clear();
            for (size_t i = 0; i < prompts.size(); ++i) {
                toks.push_back(gen[i][static_cast<size_t>(s)]);
                ids.push_back(seqs[i]);
            }
            l = ctx.decode_batch(toks, ids);
            for (size_t i = 0; i < prompts.size(); ++i)
                QVERIFY2(std::memcmp(l + i * V, alone[i][static_cast<size_t>(s + 1)].data(), V * sizeof(float)) == 0,
                         qPrintable(QString("prompt %1 step %2").arg(i).arg(s)));
        }
        // The default sequence is untouched by the others.
        QCOMPARE(ctx.n_past(), int64_t{0});
    }

    void thread_count_does_not_change_logits_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<int>("type");
        QTest::newRow("demo") << "" << 0;
        QTest::newRow("llama-q4_0") << "llama" << int(kernels::WeightType::Q4_0);
        QTest::newRow("qwen2moe-q8_0") << "qwen2moe" << int(kernels::WeightType::Q8_0);  // Q/K/V biases, shared expert
        QTest::newRow("qwen3moe-q4_0") << "qwen3moe" << int(kernels::WeightType::Q4_0);  // per-head Q/K norms
        QTest::newRow("olmoe-q8_0") << "olmoe" << int(kernels::WeightType::Q8_0);        // whole-vector Q/K norms
    }

    // The thread count changes how the work is split, never the logits. With
    // 2 or more threads a decode step's attention is one region (Q/K/V and wo
    // rows shared out in chunks, each KV head attended once its rows are
    // done; 3 threads do not divide the 4 KV heads); with 2 threads (and 4)
    // the experts of top-2 and top-4 split evenly, so each thread runs an
    // expert's whole FFN; with 1 or 3 the experts' rows are shared out.
    void thread_count_does_not_change_logits() {
        QFETCH(QString, arch);
        QFETCH(int, type);
        QTemporaryDir dir;
        std::string path = kDemo;
        if (!arch.isEmpty()) {
            model::MakeModelSpec spec = test::small_moe_spec(static_cast<kernels::WeightType>(type), arch.toStdString());
            if (arch == "qwen2moe") spec.shared_ff = 96;
            path = (dir.path() + "/m.gguf").toStdString();
            model::make_model(spec, path);
        }
        auto m = model::Model::load(path);
        const int64_t V = m->config().n_vocab;
        std::vector<int32_t> prompt = {1, 17, 300, 42, 9, 250, 77, 3, 411, 12};
        if (arch.isEmpty()) prompt = m->vocab().encode(kPrompts[2], true);
        std::vector<float> want;
        for (int threads : {1, 2, 3, 4}) {
            model::Context ctx(*m, test::context_params(256, 64, threads));
            const float* l = ctx.decode(prompt, true);
            std::vector<float> got(l, l + prompt.size() * V);
            int32_t t = test::argmax(l + (prompt.size() - 1) * V, V);
            for (int s = 0; s < 8; ++s) {
                l = ctx.decode({&t, 1}, false);
                got.insert(got.end(), l, l + V);
                t = test::argmax(l, V);
            }
            if (want.empty()) want = got;
            QVERIFY2(got == want, qPrintable(QString("%1 threads").arg(threads)));
        }
    }

    // A recurrent model's sequence attaches no prefix (the state after it is
    // not in the blocks), computes its prompt whole, and gives the logits of
    // a fresh context; rewound past its start, it refuses to go on.
    void recurrent_state_is_per_sequence_and_never_shared() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(model_path("qwen35moe-tiny-f32"));
        const int64_t V = m->config().n_vocab;
        const std::vector<int32_t> p = m->vocab().encode(kPrompts[2], true);
        model::Context fresh(*m, test::context_params(256, 256, 2));
        const std::vector<float> want = row(fresh.decode(p, false), V);
        model::ContextParams cp = test::context_params(256, 256, 2);
        cp.kv_block_tokens = 8;
        model::Context ctx(*m, cp);
        kv::KvCache& kvc = ctx.kv_cache();
        QVERIFY(kvc.params().state_floats > 0);
        const kv::SeqId a = kvc.create_sequence();
        ctx.decode_batch(p, std::vector<kv::SeqId>(p.size(), a), {});
        const kv::SeqId b = kvc.create_sequence();
        QCOMPARE(kvc.attach_prefix(b, p), int64_t{0});
        std::vector<uint8_t> w(p.size(), 0);
        w.back() = 1;
        QVERIFY(std::memcmp(ctx.decode_batch(p, std::vector<kv::SeqId>(p.size(), b), w), want.data(), V * sizeof(float)) == 0);
        QCOMPARE(kvc.state_bytes(), uint64_t(3) * uint64_t(kvc.params().state_floats) * sizeof(float));  // ctx's own, a, b
        kvc.truncate(a, 4);
        const int32_t t = 7;
        QVERIFY_THROWS_EXCEPTION(Error, ctx.decode_batch({&t, 1}, std::vector<kv::SeqId>{a}, {}));
        kvc.truncate(a, 0);  // back to its start: computed afresh
        QVERIFY(std::memcmp(ctx.decode_batch(p, std::vector<kv::SeqId>(p.size(), a), w), want.data(), V * sizeof(float)) == 0);
    }

    // With state slots (set_state_rollback), a recurrent sequence rewound by
    // up to that many tokens goes on as if the dropped tokens never came (the
    // logits of a fresh context, bit for bit); further back it refuses, and
    // the slots are set only while it is empty.
    void recurrent_state_rewinds_within_its_slots() {
        STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(model_path("qwen35moe-tiny-f32"));
        const int64_t V = m->config().n_vocab;
        const std::vector<int32_t> p = m->vocab().encode(kPrompts[1], true);
        std::vector<int32_t> next = p;
        next.push_back(7);
        model::Context fresh(*m, test::context_params(256, 256, 2));
        const std::vector<float> want = row(fresh.decode(next, false), V);

        model::Context ctx(*m, test::context_params(256, 256, 2));
        kv::KvCache& kvc = ctx.kv_cache();
        const uint64_t one = uint64_t(kvc.params().state_floats) * sizeof(float);
        QCOMPARE(kvc.state_rollback(ctx.default_sequence()), int64_t{0});
        kvc.set_state_rollback(ctx.default_sequence(), 3);
        QCOMPARE(kvc.state_bytes(), 4 * one);  // four slots
        std::vector<int32_t> drafted = p;
        drafted.insert(drafted.end(), {5, 6, 8});  // three tokens to be rejected
        ctx.decode(drafted, false);
        ctx.truncate(static_cast<int64_t>(p.size()));
        const int32_t t = 7;
        QVERIFY(std::memcmp(ctx.decode({&t, 1}, false), want.data(), V * sizeof(float)) == 0);
        // Rewound by 3 again, then by 4: further than its slots reach.
        ctx.decode(std::vector<int32_t>{5, 6, 8}, false);
        ctx.truncate(ctx.n_past() - 3);
        ctx.decode(std::vector<int32_t>{5}, false);
        ctx.truncate(ctx.n_past() - 4);
        QVERIFY_THROWS_EXCEPTION(Error, ctx.decode({&t, 1}, false));
        QVERIFY_THROWS_EXCEPTION(Error, kvc.set_state_rollback(ctx.default_sequence(), 1));  // not empty
        ctx.clear();
        kvc.set_state_rollback(ctx.default_sequence(), 0);
        QCOMPARE(kvc.state_bytes(), one);
        QVERIFY(std::memcmp(row(ctx.decode(next, false), V).data(), want.data(), V * sizeof(float)) == 0);
    }

    void shared_prefix_gives_the_same_logits_data() { models_data(); }
    void shared_prefix_gives_the_same_logits() {
        QFETCH(QString, name);
        if (name != "demo") STRATA_REQUIRE_FIXTURES();
        auto m = model::Model::load(model_path(name));
        const int64_t V = m->config().n_vocab;
        const std::vector<int32_t> sys = m->vocab().encode(
            "And God said, Let there be light: and there was light. And God saw the light, that it was good:", true);
        std::vector<int32_t> a = sys, b = sys;
        for (int32_t t : m->vocab().encode(" and God divided", false)) a.push_back(t);
        for (int32_t t : m->vocab().encode(" the evening and the morning", false)) b.push_back(t);
        QVERIFY(sys.size() > 16);

        model::Context fresh(*m, test::context_params(256, 256, 2));
        const std::vector<float> want = row(fresh.decode(b, false), V);

        model::ContextParams cp = test::context_params(256, 256, 2);
        cp.kv_block_tokens = 8;
        model::Context ctx(*m, cp);
        kv::KvCache& kvc = ctx.kv_cache();
        const kv::SeqId sa = kvc.create_sequence();
        std::vector<kv::SeqId> ids(a.size(), sa);
        ctx.decode_batch(a, ids, {});
        const kv::SeqId sb = kvc.create_sequence();
        const int64_t reused = kvc.attach_prefix(sb, b);
        QVERIFY2(reused >= 16, qPrintable(QString::number(reused)));
        std::vector<int32_t> rest(b.begin() + reused, b.end());
        std::vector<kv::SeqId> rid(rest.size(), sb);
        std::vector<uint8_t> w(rest.size(), 0);
        w.back() = 1;
        const float* l = ctx.decode_batch(rest, rid, w);
        QVERIFY(std::memcmp(l, want.data(), V * sizeof(float)) == 0);
        QVERIFY(kvc.stats().shared_blocks >= 2);
    }

    void kv_full_is_a_clear_error_that_changes_nothing() {
        auto m = model::Model::load(kDemo);
        model::ContextParams cp = test::context_params(256, 256, 2);
        model::Context ctx(*m, cp);  // its own pool: one sequence of 256 tokens
        kv::KvCache& kvc = ctx.kv_cache();
        const kv::SeqId s = kvc.create_sequence();
        std::vector<int32_t> toks(200, 5);
        std::vector<kv::SeqId> ids(200, s);
        ctx.decode_batch(toks, ids, {});
        std::vector<int32_t> more(100, 7);
        try {
            ctx.decode(more, false);
            QFAIL("expected the KV cache to be full");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("KV cache is full"), e.what());
        }
        QCOMPARE(ctx.n_past(), int64_t{0});
        QCOMPARE(kvc.n_tokens(s), int64_t{200});
    }

    void int8_kv_close_to_f32() {
        // Tolerance (stated in README), per-block per-head scales, blocks of 16:
        // mean |Δlogit| <= 0.04 std(logits) and top-1 agreement >= 0.90 on the
        // random-weight fixtures (whose routers flip experts on tiny changes,
        // so their max |Δ| is large: reported, not bounded); on the trained
        // demo model mean <= 0.01 std and top-1 >= 0.98.
        STRATA_REQUIRE_FIXTURES();
        for (const char* name : {"moe-tiny-f32", "qwen2moe-tiny-f32", "stories260K", "demo"}) {
            const std::string path = std::string(name) == "demo" ? kDemo : test::fixture_path(QString("models/%1.gguf").arg(name));
            auto m = model::Model::load(path);
            const int64_t V = m->config().n_vocab;
            const std::vector<int32_t> toks = m->vocab().encode(
                "Once upon a time there was a little girl who lived in a village near the forest. "
                "Whenever she went out, the little girl wore a red riding cloak, so everyone in the village called her",
                true);
            model::ContextParams f = test::context_params(256, 256, 2);
            model::ContextParams q = f;
            q.kv_type = kv::KvType::Q8;
            model::Context cf(*m, f), cq(*m, q);
            const std::vector<float> lf = row(cf.decode(toks, true), static_cast<int64_t>(toks.size()) * V);
            const std::vector<float> lq = row(cq.decode(toks, true), static_cast<int64_t>(toks.size()) * V);
            double max_d = 0, sum_d = 0;
            int same = 0;
            for (size_t t = 0; t < toks.size(); ++t) {
                same += test::argmax(lf.data() + t * V, V) == test::argmax(lq.data() + t * V, V);
                for (int64_t i = 0; i < V; ++i) {
                    const double d = std::fabs(lf[t * V + i] - lq[t * V + i]);
                    max_d = std::max(max_d, d);
                    sum_d += d;
                }
            }
            const double sd = std_of(lf);
            const double top1 = static_cast<double>(same) / static_cast<double>(toks.size());
            const double mean_d = sum_d / static_cast<double>(lf.size());
            qInfo("%s: int8 KV mean|dlogit| %.4f std, max %.4f std, top-1 agreement %.3f over %zu positions", name,
                  mean_d / sd, max_d / sd, top1, toks.size());
            const bool demo = std::string(name) == "demo";
            QVERIFY2(mean_d <= (demo ? 0.01 : 0.04) * sd, name);
            QVERIFY2(top1 >= (demo ? 0.98 : 0.90), name);
        }
    }
};

QTEST_APPLESS_MAIN(TestBatchedForward)
#include "test_batched_forward.moc"
