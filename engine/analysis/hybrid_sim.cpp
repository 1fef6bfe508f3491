#include "analysis/hybrid_sim.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "common/error.h"
#include "experts/hybrid_cost.h"
#include "analysis/simulator.h"

namespace strata::experts {

const char* hybrid_mode_name(HybridMode m) {
    switch (m) {
        case HybridMode::Link: return "transfer-only";
        case HybridMode::Cpu: return "cpu-only";
        case HybridMode::Hybrid: return "hybrid";
    }
    return "?";
}

namespace {

double roofline(double bytes, double flops, double bps, double flops_per_s) {
    return std::max(bytes / bps, flops / flops_per_s);
}

// The trace's sequences as [begin, end) token ranges, in replay order.
std::vector<std::pair<int64_t, int64_t>> sequences(const Trace& tr) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t t = 0; t < tr.n_tokens(); ++t)
        if (t == 0 || tr.tokens[t].sequence != tr.tokens[t - 1].sequence) {
            if (!out.empty()) out.back().second = t;
            out.emplace_back(t, tr.n_tokens());
        }
    return out;
}

}  // namespace

HybridSimResult simulate_hybrid(const Trace& tr, const HybridSimOptions& o, const HardwareProfile& p) {
    if (!p.has_hybrid())
        throw Error("profile " + p.name + " has no hybrid figures: set cpu-gbs, cpu-tflops and gpu-tflops (--set KEY=VALUE)");
    p.validate();
    if (o.batch < 1) throw Error("hybrid replay: the batch must be at least 1 sequence");
    if (o.reuse_window < 1) throw Error("hybrid replay: the reuse window must be at least 1 step");
    const TraceHeader& H = tr.header;
    const int64_t M = H.n_moe(), E = H.n_expert;
    const HybridRates rates{p.link_bps, p.cpu_bps, p.cpu_flops, p.fast_bps, p.gpu_flops};
    const double bytes = p.expert_bytes, params = p.params_per_expert();
    const double per_layer = double(p.n_used) / double(H.n_used);  // profile top-k / trace top-k
    const double layers = double(p.moe_layers) / double(M);         // profile MoE layers / trace's
    const double scale = per_layer * layers;  // a trace layer's expert costs -> the profile's
    const double shared_s = p.shared_bytes / p.fast_bps;
    const double link_s = bytes / p.link_bps;
    const double cpu1 = roofline(bytes, 2 * params, p.cpu_bps, p.cpu_flops);
    const double gpu1 = roofline(bytes, 2 * params, p.fast_bps, p.gpu_flops);

    SlotCache cache(o.policy, std::min(std::max<int64_t>(o.cache_slots, 0), M * E));
    if (o.mode != HybridMode::Cpu) cache.set_pinned(o.pinned);
    std::vector<std::deque<int64_t>> recent(static_cast<size_t>(H.n_layer * E));  // steps that routed each expert
    const auto seqs = sequences(tr);
    std::vector<int64_t> lane_seq(static_cast<size_t>(o.batch), -1), lane_pos(static_cast<size_t>(o.batch), 0);
    size_t next_seq = 0;
    HybridSimResult r;
    std::vector<int64_t> step_tokens;
    std::vector<std::pair<ExpertKey, int64_t>> routed;  // (key, tokens) of one layer of the step
    std::vector<ExpertKey> keys;
    double backlog = 0;      // seconds of background copies still queued on the link
    double last_step_s = 0;  // the previous step's time: background copies are admitted within it
    for (int64_t step = 0;; ++step) {
        // Lanes without a sequence take the next one; a step runs one token of each.
        step_tokens.clear();
        for (size_t l = 0; l < lane_seq.size(); ++l) {
            if (lane_seq[l] >= 0 && seqs[static_cast<size_t>(lane_seq[l])].first + lane_pos[l] >=
                                        seqs[static_cast<size_t>(lane_seq[l])].second)
                lane_seq[l] = -1;
            if (lane_seq[l] < 0 && next_seq < seqs.size()) {
                lane_seq[l] = static_cast<int64_t>(next_seq++);
                lane_pos[l] = 0;
            }
            if (lane_seq[l] >= 0) step_tokens.push_back(seqs[static_cast<size_t>(lane_seq[l])].first + lane_pos[l]++);
        }
        if (step_tokens.empty()) break;
        double step_s = 0;
        for (int64_t m = 0; m < M; ++m) {
            const int64_t layer = H.moe_layers[m];
            routed.clear();
            for (int64_t t : step_tokens)
                for (int32_t id : tr.experts_of(t, m)) {
                    const auto key = static_cast<ExpertKey>(layer * E + id);
                    auto it = std::find_if(routed.begin(), routed.end(), [key](const auto& x) { return x.first == key; });
                    if (it == routed.end()) routed.emplace_back(key, 1);
                    else ++it->second;
                }
            keys.clear();
            for (const auto& [key, c] : routed) keys.push_back(key);
            cache.begin_layer(keys);
            double gpu = 0, cpu = 0, demand = 0, background = 0;
            for (const auto& [key, c] : routed) {
                r.uses += c;
                const double flops = 2.0 * params * double(c);
                const double on_gpu = roofline(bytes, flops, p.fast_bps, p.gpu_flops);
                const double on_cpu = roofline(bytes, flops, p.cpu_bps, p.cpu_flops);
                std::deque<int64_t>& seen = recent[key];
                while (!seen.empty() && seen.front() < step - o.reuse_window) seen.pop_front();
                const double reuse = double(seen.size());
                seen.push_back(step);
                if (o.mode != HybridMode::Cpu && cache.resident(key)) {
                    cache.use(key);
                    r.hits += c;
                    gpu += on_gpu;
                    continue;
                }
                // This step alone: the copy is chosen when it beats the CPU for
                // these c tokens (a large batch); the uses expected later
                // decide the background copy below.
                MissPath path = o.mode == HybridMode::Link ? MissPath::Link : MissPath::Cpu;
                if (o.mode == HybridMode::Hybrid) path = choose_miss_path(rates, bytes, params, c, 0.0).path;
                if (path == MissPath::Link) {
                    cache.use(key);  // copied into a slot (or streamed through when none can be freed)
                    ++r.link;
                    demand += link_s;
                    gpu += on_gpu;
                    continue;
                }
                cpu += on_cpu;
                // Computed on the CPU now; copied in the background when the
                // uses expected soon repay the copy (each then runs on the GPU)
                // and the link has room for it behind this layer's CPU work (a
                // background copy must not become the step's bottleneck).
                if (o.mode == HybridMode::Hybrid && reuse * (cpu1 - gpu1) > link_s &&
                    backlog + (background + link_s) * scale <= last_step_s) {
                    cache.use(key);
                    ++r.both;
                    background += link_s;
                } else {
                    ++r.cpu;
                }
            }
            cache.end_layer();
            r.gpu_s += gpu * scale;
            r.cpu_s += cpu * scale;
            r.link_s += (demand + background) * scale;
            // Background copies queue on the link and drain while the layer computes (the demand copies pause them).
            const double layer_s = std::max(gpu + demand, cpu) * scale;
            backlog = std::max(0.0, backlog + background * scale - (layer_s - demand * scale));
            step_s += layer_s;
        }
        cache.on_step();
        step_s += shared_s;
        last_step_s = step_s;
        r.time_s += step_s;
        ++r.steps;
        r.tokens += static_cast<int64_t>(step_tokens.size());
    }
    return r;
}

}  // namespace strata::experts
