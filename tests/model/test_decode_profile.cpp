// Context::set_profile (strata-cli bench --profile): every weight byte a
// decoded token reads is counted once, under the right part, on the thread
// that read it; each thread's parts fit inside its time in parallel regions;
// and profiling changes no result.
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <numeric>
#include <vector>

#include "runner/context.h"
#include "model/decode_profile.h"
#include "model/make_model.h"
#include "model/model.h"
#include "small_moe.h"

using namespace strata;
using P = model::DecodeProfile;

namespace {

// Weight bytes of one decoded token, quantized and f32: every layer's
// attention matrices, its router and top-k experts, and the output head.
struct TokenBytes {
    uint64_t quant = 0, f32 = 0;
    void add(const model::Matrix& m) { (m.type == kernels::WeightType::F32 ? f32 : quant) += m.slab_bytes(); }
};

TokenBytes token_bytes(const model::Model& m) {
    TokenBytes b;
    for (const model::LayerWeights& L : m.weights().layers) {
        for (const model::Matrix* w : {&L.wq, &L.wk, &L.wv, &L.wo}) b.add(*w);
        b.add(L.router);
        const model::FfnMatrices e = L.expert(0);
        for (int64_t k = 0; k < m.config().n_expert_used; ++k)
            for (const model::Matrix* w : {&e.gate, &e.up, &e.down}) b.add(*w);
    }
    b.add(m.weights().output);
    return b;
}

}  // namespace

class TestDecodeProfile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        // From 2 threads decode takes the one-region attention and the per-expert path.
        path_ = (dir_.path() + "/m.gguf").toStdString();
        model::make_model(test::small_moe_spec(kernels::WeightType::Q8_0), path_);
    }

    void counts_every_weight_byte_data() {
        QTest::addColumn<int>("threads");
        QTest::newRow("1 thread") << 1;
        QTest::newRow("2 threads") << 2;
    }

    void counts_every_weight_byte() {
        QFETCH(int, threads);
        auto m = model::Model::load(path_);
        model::ContextParams cp;
        cp.n_ctx = 64;
        cp.n_threads = threads;
        model::Context profiled(*m, cp), plain(*m, cp);
        const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 300, 5, 12};
        profiled.decode(prompt, false);
        plain.decode(prompt, false);

        P p;
        profiled.set_profile(&p);
        QCOMPARE(p.threads.size(), size_t(threads));
        const int64_t n_tokens = 5;
        std::vector<float> a, b;
        for (int64_t i = 0; i < n_tokens; ++i) {
            const int32_t t = static_cast<int32_t>(20 + 31 * i);
            const float* la = profiled.decode({&t, 1}, false);
            const float* lb = plain.decode({&t, 1}, false);
            a.assign(la, la + m->config().n_vocab);
            b.assign(lb, lb + m->config().n_vocab);
            QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, "profiling changed the logits");
        }
        profiled.set_profile(nullptr);

        const TokenBytes want = token_bytes(*m);
        QVERIFY(want.quant > 0 && want.f32 > 0);  // make-model keeps the router in f32
        uint64_t quant = 0, f32 = 0, attn_bytes = 0;
        double attention_s = 0, waiting_s = 0;
        for (const P::Thread& t : p.threads) {
            quant += t.bytes[P::QuantWeights];
            f32 += t.bytes[P::F32Weights];
            attn_bytes += t.bytes[P::Attention];
            attention_s += t.seconds[P::Attention];
            waiting_s += t.seconds[P::Waiting];
            QCOMPARE(t.bytes[P::Waiting], uint64_t(0));
            const double parts =
                t.seconds[P::QuantWeights] + t.seconds[P::F32Weights] + t.seconds[P::Attention] + t.seconds[P::Waiting];
            QVERIFY2(parts <= t.in_regions + 1e-6, "a thread's timed parts exceed its time in parallel regions");
        }
        QCOMPARE(quant, uint64_t(n_tokens) * want.quant);
        QCOMPARE(f32, uint64_t(n_tokens) * want.f32);
        QCOMPARE(attn_bytes, uint64_t(0));
        QVERIFY(attention_s > 0);
        QVERIFY(p.threads[0].in_regions > 0);
        if (threads == 1) {  // no region has workers to wait for
            QCOMPARE(waiting_s, 0.0);
            QCOMPARE(p.threads[0].region_end_wait, 0.0);
        } else {  // the one-token regions' waits are timed (even a wait that ends at once takes two clock reads)
            QVERIFY(waiting_s > 0);
            QVERIFY(p.threads[0].region_end_wait > 0);
            QVERIFY(p.threads[0].region_end_wait <= 5.0);
            for (size_t i = 1; i < p.threads.size(); ++i) QCOMPARE(p.threads[i].region_end_wait, 0.0);  // the caller's alone
        }

        // Off again: decoding adds nothing to the profile.
        const P before = p;
        const int32_t t = 3;
        profiled.decode({&t, 1}, false);
        for (size_t i = 0; i < p.threads.size(); ++i)
            QCOMPARE(p.threads[i].bytes[P::QuantWeights], before.threads[i].bytes[P::QuantWeights]);
    }

private:
    QTemporaryDir dir_;
    std::string path_;
};

QTEST_GUILESS_MAIN(TestDecodeProfile)
#include "test_decode_profile.moc"
