#include "quant/quality.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.h"
#include "runner/context.h"
#include "model/model.h"

namespace strata::quant {

namespace {

// log-softmax in double.
void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
    out.resize(static_cast<size_t>(n));
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = double(x[i]) - lse;
}

// KL(p || q) of two non-negative weight vectors, each normalised first (a
// sigmoid router's probabilities do not sum to 1); tiny floors keep it finite.
double kl_weights(const std::vector<float>& p, const std::vector<float>& q) {
    double sp = 0, sq = 0;
    for (float v : p) sp += std::max(0.0f, v);
    for (float v : q) sq += std::max(0.0f, v);
    if (sp <= 0 || sq <= 0) return 0;
    double kl = 0;
    for (size_t i = 0; i < p.size(); ++i) {
        const double a = std::max(0.0f, p[i]) / sp, b = std::max(1e-30, double(std::max(0.0f, q[i])) / sq);
        if (a > 0) kl += a * std::log(a / b);
    }
    return std::max(0.0, kl);
}

// The routing of one run: per (layer, position) the chosen set and the router probabilities.
struct Routing {
    std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<int32_t>, std::vector<float>>> at;
};

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    // Nearest rank: the ceil(q n)-th smallest (the first for q = 0).
    const auto rank = static_cast<size_t>(std::ceil(q * double(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace

QualityReport measure_quality(const model::Model& base, const model::Model& quant,
                              const std::vector<std::vector<int32_t>>& lists, int threads) {
    const auto& cb = base.config();
    const auto& cq = quant.config();
    if (cb.n_vocab != cq.n_vocab)
        throw Error("quality: the models' vocabularies differ (" + std::to_string(cb.n_vocab) + " and " +
                    std::to_string(cq.n_vocab) + " tokens): compare a model with a quantization of it");
    if (cb.n_layer != cq.n_layer || cb.n_expert != cq.n_expert || cb.n_expert_used != cq.n_expert_used)
        throw Error("quality: the models' shapes differ (layers, experts or top-k): compare a model with a quantization of it");
    model::ContextParams cp;
    cp.n_threads = threads;
    model::Context xb(base, cp), xq(quant, cp);
    Routing rb, rq;
    const auto recorder = [](Routing& r) {
        return [&r](const model::RoutingEvent& e) {
            std::vector<int32_t> ids(e.experts, e.experts + e.n_used);
            std::sort(ids.begin(), ids.end());
            r.at[{e.layer, e.pos}] = {std::move(ids), std::vector<float>(e.probs, e.probs + e.n_expert)};
        };
    };
    xb.set_routing_observer(recorder(rb));
    xq.set_routing_observer(recorder(rq));

    QualityReport rep;
    const int64_t V = cb.n_vocab;
    std::vector<double> lb, lq, kls;
    double nll_b = 0, nll_q = 0, diff_sq = 0;  // diff_sq: sum of squared per-position NLL differences
    int64_t agree = 0;
    std::map<int64_t, LayerDrift> drift;
    for (const std::vector<int32_t>& toks : lists) {
        if (toks.empty()) continue;
        if (static_cast<int64_t>(toks.size()) > xb.n_ctx())
            throw Error("quality: a prompt has " + std::to_string(toks.size()) + " tokens, more than the context of " +
                        std::to_string(xb.n_ctx()));
        xb.clear();
        xq.clear();
        rb.at.clear();
        rq.at.clear();
        const float* ob = xb.decode(toks, true);
        const std::vector<float> base_logits(ob, ob + toks.size() * static_cast<size_t>(V));
        const float* oq = xq.decode(toks, true);
        for (size_t i = 0; i < toks.size(); ++i) {
            log_softmax(base_logits.data() + i * static_cast<size_t>(V), V, lb);
            log_softmax(oq + i * static_cast<size_t>(V), V, lq);
            double kl = 0;
            int64_t ab = 0, aq = 0;
            for (int64_t v = 0; v < V; ++v) {
                kl += std::exp(lb[static_cast<size_t>(v)]) * (lb[static_cast<size_t>(v)] - lq[static_cast<size_t>(v)]);
                if (lb[static_cast<size_t>(v)] > lb[static_cast<size_t>(ab)]) ab = v;
                if (lq[static_cast<size_t>(v)] > lq[static_cast<size_t>(aq)]) aq = v;
            }
            kls.push_back(std::max(0.0, kl));
            agree += ab == aq;
            ++rep.positions;
            if (i + 1 < toks.size()) {
                const double b = lb[static_cast<size_t>(toks[i + 1])], q = lq[static_cast<size_t>(toks[i + 1])];
                nll_b -= b;
                nll_q -= q;
                diff_sq += (b - q) * (b - q);
                ++rep.predicted;
            }
        }
        for (const auto& [key, b] : rb.at) {
            const auto it = rq.at.find(key);
            if (it == rq.at.end()) continue;
            const auto& [ids_b, p_b] = b;
            const auto& [ids_q, p_q] = it->second;
            LayerDrift& d = drift[key.first];
            d.layer = key.first;
            ++d.tokens;
            d.exact_set += ids_b == ids_q;
            std::vector<int32_t> both;
            std::set_intersection(ids_b.begin(), ids_b.end(), ids_q.begin(), ids_q.end(), std::back_inserter(both));
            const double uni = double(ids_b.size() + ids_q.size() - both.size());
            d.jaccard += uni > 0 ? double(both.size()) / uni : 1.0;
            d.router_kl += kl_weights(p_b, p_q);
        }
        ++rep.prompts;
    }
    if (rep.positions == 0) throw Error("quality: no tokens to compare (the prompts are empty)");
    double sum = 0;
    for (double k : kls) sum += k;
    rep.kl_mean = sum / double(kls.size());
    rep.kl_p95 = percentile(kls, 0.95);
    rep.kl_p99 = percentile(kls, 0.99);
    rep.kl_max = *std::max_element(kls.begin(), kls.end());
    rep.top1 = double(agree) / double(rep.positions);
    if (rep.predicted > 0) {
        rep.ppl_base = std::exp(nll_b / double(rep.predicted));
        rep.ppl_quant = std::exp(nll_q / double(rep.predicted));
        const double n = double(rep.predicted), mean = (nll_q - nll_b) / n;
        rep.ln_ppl_ratio = mean;
        if (rep.predicted > 1)
            rep.ln_ppl_ratio_se = std::sqrt(std::max(0.0, (diff_sq / n - mean * mean) * n / (n - 1)) / n);
    }
    for (auto& [layer, d] : drift) {
        d.exact_set /= double(d.tokens);
        d.jaccard /= double(d.tokens);
        d.router_kl /= double(d.tokens);
        rep.layers.push_back(d);
    }
    return rep;
}

}  // namespace strata::quant
