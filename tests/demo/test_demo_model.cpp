// The embedded demo model (resources/models/strata-demo-moe.gguf) against the
// logits its own trainer exported (resources/models/train/export.py): the
// trainer's forward pass in float64 on the weights exactly as stored in the GGUF
// (after F16 / Q8_0 rounding), so the engine must agree up to float32 rounding.
// Also: the engine's tokenizer reproduces SentencePiece's ids for the prompts,
// the greedy continuations match token for token, and the router is trained
// (confident, consistent per token, experts shared by neighbouring tokens).
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "runner/context.h"
#include "model/model.h"
#include "reference_files.h"

using namespace strata;
using test::argmax;
using test::read_floats;
using test::read_refs;
using test::RefPrompt;

namespace {

const QString kBase = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe");

}  // namespace

class TestDemoModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void shape() {
        auto m = model::Model::load((kBase + ".gguf").toStdString());
        const auto& c = m->config();
        // OLMoE's architecture (llama.cpp reads it as it is): every layer MoE,
        // fine-grained experts, multi-head attention with Q/K norms, top-k
        // weights not renormalised; trained at a 2048-token context.
        QCOMPARE(c.arch_name, std::string("olmoe"));
        QCOMPARE(c.n_vocab, int64_t{4096});
        QVERIFY(c.n_layer >= 6 && c.n_layer <= 8);
        QCOMPARE(c.n_expert, int64_t{32});
        QCOMPARE(c.n_expert_used, int64_t{4});
        QCOMPARE(c.leading_dense_blocks, int64_t{0});
        QVERIFY(!c.expert_weights_norm);
        QVERIFY(c.n_ctx_train >= 2048);
        for (const auto& L : m->weights().layers) QVERIFY(L.ffn == model::FfnKind::Moe);
        QVERIFY(QFileInfo(kBase + ".gguf").size() <= 32ll * 1024 * 1024);
    }

    void logits_match_trainer() {
        auto m = model::Model::load((kBase + ".gguf").toStdString());
        const auto refs = read_refs(kBase + ".ref.jsonl");
        const auto ref_logits = read_floats(kBase + ".ref.f32");
        const int64_t V = m->config().n_vocab;
        QVERIFY(refs.size() >= 4);

        model::ContextParams cp;
        cp.n_threads = 2;
        model::Context ctx(*m, cp);
        double max_abs = 0, max_ref = 0;
        int64_t n_pos = 0;
        for (const RefPrompt& r : refs) {
            std::vector<int32_t> toks = m->vocab().encode(r.prompt.toStdString(), false);
            toks.insert(toks.begin(), m->vocab().bos());
            QCOMPARE(toks, r.tokens);
            QVERIFY(static_cast<size_t>((r.offset_rows + static_cast<int64_t>(r.tokens.size())) * V) <=
                    ref_logits.size());

            ctx.clear();
            const float* got = ctx.decode(r.tokens, true);
            for (size_t p = 0; p < r.tokens.size(); ++p) {
                const float* want = ref_logits.data() + (r.offset_rows + static_cast<int64_t>(p)) * V;
                const float* have = got + p * V;
                for (int64_t i = 0; i < V; ++i) {
                    max_abs = std::max(max_abs, std::fabs(double(have[i]) - want[i]));
                    max_ref = std::max(max_ref, std::fabs(double(want[i])));
                }
                ++n_pos;
            }
            std::vector<int32_t> greedy;
            int32_t next = argmax(got + (r.tokens.size() - 1) * V, V);
            for (size_t i = 0; i < r.greedy.size(); ++i) {
                greedy.push_back(next);
                if (i + 1 < r.greedy.size()) next = argmax(ctx.decode({&next, 1}, false), V);
            }
            QCOMPARE(greedy, r.greedy);
            if (r.has_text) QCOMPARE(QString::fromStdString(m->vocab().pieces_text(greedy)), r.greedy_text);
        }
        // Float64 reference vs float32 engine on identical weights and identical
        // activation rounding (q8_0 before the Q8_0 experts): float rounding only
        // (seen: 6e-6 at a logit scale of 22). The matrices outside the experts are
        // F32 so that no F16 activation rounding makes the comparison ill-posed.
        const double tol = 1e-3;
        qInfo("demo model: %lld positions, max|dlogit| %.3g (max|logit| %.3g, tolerance %.3g)",
              static_cast<long long>(n_pos), max_abs, max_ref, tol);
        QVERIFY2(max_abs <= tol, qPrintable(QString("max |dlogit| %1 > %2").arg(max_abs).arg(tol)));
    }

    // A trained router, measured on the prompts and their greedy continuations.
    // The load-balancing loss keeps each layer's overall load near uniform, so
    // the figures that show trained routing are per token: the router is
    // confident (the top-k experts hold far more than k/E of the probability),
    // a token id is sent to the same top-1 expert most of the time, and
    // neighbouring tokens share experts more often than random routing would.
    void routing_is_trained() {
        auto m = model::Model::load((kBase + ".gguf").toStdString());
        const auto& c = m->config();
        const auto refs = read_refs(kBase + ".ref.jsonl");
        model::ContextParams cp;
        cp.n_threads = 2;
        model::Context ctx(*m, cp);
        const int64_t E = c.n_expert, K = c.n_expert_used;
        struct Tok {
            int32_t id;
            std::vector<int32_t> experts;  // best first
            double mass;                   // router probability of the chosen experts
        };
        std::vector<std::vector<Tok>> seen(static_cast<size_t>(c.n_layer));
        const std::vector<int32_t>* cur = nullptr;
        ctx.set_routing_observer([&](const model::RoutingEvent& ev) {
            Tok t{(*cur)[static_cast<size_t>(ev.pos)], {}, 0.0};
            for (int64_t k = 0; k < ev.n_used; ++k) {
                t.experts.push_back(ev.experts[k]);
                t.mass += ev.probs[ev.experts[k]];
            }
            seen[ev.layer].push_back(std::move(t));
        });
        std::vector<std::vector<int32_t>> seqs;
        for (const RefPrompt& r : refs) {
            seqs.push_back(r.tokens);
            seqs.back().insert(seqs.back().end(), r.greedy.begin(), r.greedy.end());
        }
        std::vector<size_t> starts;  // where each sequence begins in seen[layer]
        for (const auto& seq : seqs) {
            starts.push_back(seen[c.leading_dense_blocks].size());
            cur = &seq;
            ctx.clear();
            ctx.decode(seq, false);
        }
        // Uniform random top-K routing: P(two tokens share >= 1 expert).
        double none = 1.0;
        for (int64_t i = 0; i < K; ++i) none *= double(E - K - i) / double(E - i);
        const double share_chance = 1.0 - none;
        int64_t moe_layers = 0;
        double reuse_sum = 0;
        for (int64_t l = 0; l < c.n_layer; ++l) {
            const auto& v = seen[static_cast<size_t>(l)];
            if (v.empty()) continue;
            ++moe_layers;
            double mass = 0;
            for (const Tok& t : v) mass += t.mass;
            mass /= double(v.size());
            int64_t shared = 0, pairs = 0;
            for (size_t i = 1; i < v.size(); ++i) {
                if (std::find(starts.begin(), starts.end(), i) != starts.end()) continue;
                ++pairs;
                bool any = false;
                for (int32_t a : v[i].experts)
                    for (int32_t b : v[i - 1].experts) any = any || a == b;
                shared += any;
            }
            const double reuse = double(shared) / double(pairs);
            // Consistency: for token ids seen at least 3 times, the share of their
            // occurrences that go to that id's most frequent top-1 expert.
            std::map<int32_t, std::map<int32_t, int64_t>> by_id;
            for (const Tok& t : v) ++by_id[t.id][t.experts[0]];
            int64_t agree = 0, total = 0;
            for (const auto& [id, hist] : by_id) {
                int64_t n = 0, best = 0;
                for (const auto& [e, cnt] : hist) n += cnt, best = std::max(best, cnt);
                if (n < 3) continue;
                agree += best;
                total += n;
            }
            const double consistency = total ? double(agree) / double(total) : 0.0;
            qInfo("layer %lld: router mass on the top-%lld %.3f (uniform %.3f), neighbours share an expert %.3f "
                  "(random %.3f), same top-1 for a repeated token %.3f",
                  static_cast<long long>(l), static_cast<long long>(K), mass, double(K) / E, reuse, share_chance,
                  consistency);
            QVERIFY2(mass > 2.0 * K / E, "router no more confident than uniform routing");
            reuse_sum += reuse;
            QVERIFY2(consistency > 0.5, "a repeated token is not routed consistently");
        }
        QCOMPARE(moe_layers, c.n_layer - c.leading_dense_blocks);
        // Temporal locality is weak in the first MoE layer and clear in the later
        // ones (strata-cli routing-stats on held-out text: 0.25 .. 0.38 against
        // 0.24), so it is checked on the mean over the layers.
        const double mean_reuse = reuse_sum / double(moe_layers);
        qInfo("mean over MoE layers: neighbours share an expert %.3f (random %.3f)", mean_reuse, share_chance);
        QVERIFY2(mean_reuse > share_chance + 0.03, "neighbouring tokens share experts no more than random routing");
    }
};

QTEST_APPLESS_MAIN(TestDemoModel)
#include "test_demo_model.moc"
