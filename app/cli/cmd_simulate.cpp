// strata-cli simulate: replays a routing trace through the expert cache
// policies and projects decode speed onto a hardware profile.
//
// Projection model (also in --help; engine/analysis/simulator.h has the code):
// per decoded token,
//   compute  = (shared_bytes + uses_per_token * expert_bytes) / fast_bw     (bandwidth-bound decode)
//   demand   = demand_misses * expert_bytes / link_bw                      (stalls)
//   prefetch = prefetch_loads * expert_bytes / link_bw                     (overlaps compute)
//   time     = compute + demand + max(0, prefetch - compute)   (--no-overlap: compute + demand + prefetch)
// Projecting a small model's trace onto a profile with its own model
// (seed-125b): the trace's routing is replayed on the trace's own experts; the
// cache keeps the same fraction of all experts (slots are scaled: profile slots
// / profile experts x trace experts, rounded); misses and prefetch loads per
// token are scaled by (profile MoE layers x top-k) / (trace MoE layers x
// top-k), i.e. per-use rates are kept. Byte sizes and bandwidths are the
// profile's; nothing else is scaled.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "analysis/hardware_profile.h"
#include "analysis/hybrid_sim.h"
#include "analysis/simulator.h"
#include "experts/trace.h"

namespace strata::cli {

namespace {

std::vector<std::string> split_list(const std::string& s, const std::string& what) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream is(s);
    while (std::getline(is, cur, ',')) {
        if (cur.empty()) throw UsageError(what + ": empty item in '" + s + "'");
        out.push_back(cur);
    }
    if (out.empty()) throw UsageError(what + ": empty list");
    return out;
}

// "N" (a count), "P%" or "0.F" (a fraction).
struct SizeSpec {
    bool fraction = false;
    double value = 0;
    std::string text;
};

SizeSpec parse_spec(const std::string& s, const std::string& what) {
    SizeSpec spec;
    spec.text = s;
    std::string num = s;
    const bool percent = !num.empty() && num.back() == '%';
    if (percent) num.pop_back();
    size_t used = 0;
    double v = -1;
    try {
        v = std::stod(num, &used);
    } catch (...) {
        used = 0;
    }
    if (used == 0 || used != num.size() || !std::isfinite(v) || v < 0)
        throw UsageError(what + ": '" + s + "' is not a count, a percentage (25%) or a fraction (0.25)");
    if (percent) {
        spec.fraction = true;
        spec.value = v / 100.0;
    } else if (num.find('.') != std::string::npos || num.find('e') != std::string::npos) {
        spec.fraction = true;
        spec.value = v;
    } else {
        spec.value = v;
    }
    if (spec.fraction && spec.value > 1.0) throw UsageError(what + ": '" + s + "' is more than 100%");
    return spec;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// --hybrid: each policy and cache size under the three placements (hybrid_sim.h).
int run_hybrid(const experts::Trace& trace, const std::string& path, const experts::HardwareProfile& prof,
               const std::vector<std::string>& policies, const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>>& sizes,
               const std::function<std::vector<experts::ExpertKey>(const std::string&, int64_t)>& pins, int64_t batch,
               int64_t window, const std::string& calibration, bool json) {
    struct HRow {
        std::string policy, slots;
        int64_t profile_slots, trace_slots;
        experts::HybridMode mode;
        experts::HybridSimResult r;
    };
    std::vector<HRow> rows;
    for (const std::string& policy : policies) {
        if (policy == experts::kOptPolicy) continue;  // Belady's bound reads the future: no placement can
        for (const auto& [text, slots] : sizes)
            for (experts::HybridMode mode : {experts::HybridMode::Link, experts::HybridMode::Cpu, experts::HybridMode::Hybrid}) {
                experts::HybridSimOptions o;
                o.mode = mode;
                o.policy = policy;
                o.cache_slots = slots.second;
                o.batch = batch;
                o.reuse_window = window;
                o.pinned = pins(policy, slots.second);
                rows.push_back({policy, text, slots.first, slots.second, mode, experts::simulate_hybrid(trace, o, prof)});
            }
    }
    if (rows.empty()) throw UsageError("--hybrid replays the engine's policies (lru, lfu, arc, pinned): give one of them with --policy");
    if (json) {
        std::ostringstream os;
        os.precision(6);
        os << "{\"trace\": \"" << json_escape(path) << "\", \"profile\": \"" << json_escape(prof.name) << "\", \"batch\": " << batch
           << ", \"reuse_window\": " << window << ", \"runs\": [";
        for (size_t i = 0; i < rows.size(); ++i) {
            const HRow& h = rows[i];
            os << (i ? ", " : "") << "{\"mode\": \"" << experts::hybrid_mode_name(h.mode) << "\", \"policy\": \"" << h.policy
               << "\", \"slots\": " << h.profile_slots << ", \"trace_slots\": " << h.trace_slots << ", \"steps\": " << h.r.steps
               << ", \"tokens\": " << h.r.tokens << ", \"hit_rate\": " << h.r.hit_rate() << ", \"misses_cpu\": " << h.r.cpu
               << ", \"misses_link\": " << h.r.link << ", \"misses_both\": " << h.r.both << ", \"tok_s\": " << h.r.tok_s() << "}";
        }
        os << "]}\n";
        std::fputs(os.str().c_str(), stdout);
        return 0;
    }
    std::printf("hybrid     %s on %s, %lld sequence%s at a time; each expert not in VRAM is computed on the CPU, copied over\n"
                "           the link, or both (CPU now, copied in the background), decided per expert and step by the cost\n"
                "           model; expected reuse = steps of the last %lld that routed it\n",
                path.c_str(), prof.name.c_str(), static_cast<long long>(batch), batch == 1 ? "" : "s",
                static_cast<long long>(window));
    std::istringstream desc(prof.describe());
    for (std::string line; std::getline(desc, line);) std::printf("           %s\n", line.c_str());
    std::printf("pinned     the hottest experts of %s fill the slots\n", calibration.c_str());
    std::printf("\n%-14s %-7s %-14s %8s %10s %10s %10s %9s\n", "placement", "policy", "slots", "hit rate", "miss: cpu",
                "link", "both", "tok/s");
    for (const HRow& h : rows) {
        const double m = double(std::max<int64_t>(1, h.r.misses()));
        std::printf("%-14s %-7s %-14s %8.4f %10s %10s %10s %9.1f\n", experts::hybrid_mode_name(h.mode), h.policy.c_str(),
                    (std::to_string(h.profile_slots) + "/" + std::to_string(prof.total_experts())).c_str(), h.r.hit_rate(),
                    fmt("%.0f%%", 100.0 * double(h.r.cpu) / m).c_str(), fmt("%.0f%%", 100.0 * double(h.r.link) / m).c_str(),
                    fmt("%.0f%%", 100.0 * double(h.r.both) / m).c_str(), h.r.tok_s());
    }
    std::printf("\nmiss shares: of the experts routed in a step that were not in VRAM (cpu-only places every expert on\n"
                "the CPU: no VRAM cache). tok/s: tokens of all lanes per second of projected step time.\n");
    return 0;
}

struct Row {
    std::string policy, predictor, slots_text;
    int64_t profile_slots = 0;  // in the profile's experts
    experts::SimResult sim;
    experts::Projection proj;
};

}  // namespace

int cmd_simulate(int argc, char** argv) {
    std::string keys;
    for (const auto& [k, unit] : experts::HardwareProfile::keys()) keys += "  " + k + std::string(14 - std::min<size_t>(13, k.size()), ' ') + unit + "\n";
    keys.pop_back();  // Args adds the line break
    std::string profiles;
    for (const std::string& n : experts::hardware_profile_names())
        profiles += "  " + n + std::string(12 - std::min<size_t>(11, n.size()), ' ') + experts::hardware_profile(n).description + "\n";
    Args a("simulate", "TRACE [--policy P,...] [--slots N|P%,...] [--predictor S,...] [--profile NAME] [options]",
           "Replays a routing trace (from 'strata-cli trace') through an expert cache and reports, per policy,\n"
           "cache size and predictor: hit rate, demand misses and prefetch loads per token, bytes moved per\n"
           "token, prefetch precision/recall against the router's choice, and projected tokens/s.\n\n"
           "Replay: every token is one decode step (a causal model routes a token the same in prefill and\n"
           "decode); one cache of slots for all MoE layers; pinned experts (the hottest of --calibration) hold\n"
           "slots and are never evicted; after each MoE layer the predictor picks the next layer's experts and\n"
           "those not resident are prefetched.\n\n"
           "Projection, per decoded token:\n"
           "  compute  = (shared bytes + uses/token x expert bytes) / fast GB/s     (decode is bandwidth-bound)\n"
           "  demand   = demand misses x expert bytes / link GB/s                  (stalls compute)\n"
           "  prefetch = prefetch loads x expert bytes / link GB/s                 (overlaps compute)\n"
           "  time     = compute + demand + max(0, prefetch - compute)   (--no-overlap: + prefetch)\n"
           "With a profile that has its own model (seed-125b), the trace's routing is replayed on the trace's\n"
           "experts, the cache keeps the same fraction of all experts (slots scaled and rounded), and misses\n"
           "and prefetch loads per token are scaled by (profile MoE layers x top-k) / (trace MoE layers x top-k).\n"
           "Without a profile: the trace's model (its expert and shared bytes) on pcie3-24g's machine.\n"
           "Profile figures use decimal units: 1 GB = 1e9 bytes, GB/s = 1e9 bytes/s.\n\n"
           "policies:\n" + experts::policy_help() +
               "\n  opt       Belady's MIN, evicts the expert used furthest ahead: it reads the trace's future, so\n"
               "            it is no engine policy but the bound on the hit rate (and the fewest loads) any\n"
               "            eviction policy can reach for the cache size\n\nprofiles:\n" + profiles +
           "\nprofile figures (--set KEY=VALUE):\n" + keys);
    a.positional("TRACE", "a routing trace", false);
    a.option("--policy", "-p", "P,...", "cache policies: lru, lfu, arc, pinned, opt", "lru,lfu,arc,pinned,opt");
    a.option("--slots", "-s", "N|P%,...",
             "cache sizes, pinned included: N slots (of the profile's experts when it has a model, else the "
             "trace's), P% or 0.F of all experts (default: the profile's budget, else 25%,50%)");
    a.option("--pin", "", "N|P%", "experts pinned: N, or P% of the slots (default: 50% for policy pinned, else 0)");
    a.option("--calibration", "", "FILE",
             "expert use counts for pinning: a trace, or lines 'LAYER EXPERT COUNT' (default: the replayed "
             "trace itself, an oracle)");
    a.option("--predictor", "", "S,...", "prefetch predictors: none, lookahead, frequency, combined", "none");
    a.option("--prefetch-width", "", "W", "experts prefetched per predicted layer (0: top-k of the trace)", "0");
    a.option("--window", "", "N", "tokens in the frequency predictor's window", "16");
    a.option("--lookahead-weight", "", "X", "combined predictor: weight of the lookahead vs frequency", "0.5");
    a.option("--lfu-half-life", "", "N", "lfu: decay half-life in decode steps (0: no aging)", "128");
    a.option("--profile", "", "NAME", "hardware profile (see above; default: pcie3-24g)");
    a.multi_option("--set", "KEY=VALUE", "override one profile figure (see above)");
    a.option("--expert-bytes", "", "B",
             "bytes of one expert, e.g. 50e6 or 48M (M = MiB) (default: the profile's, else the trace's model)");
    a.option("--shared-bytes", "", "B", "bytes every token reads besides experts (default: as above)");
    a.option("--link-gbs", "", "X", "link bandwidth in GB/s (default: the profile's)");
    a.option("--fast-gbs", "", "Y", "fast tier bandwidth in GB/s (default: the profile's)");
    a.option("--target-tps", "", "T", "report the hit rate needed for T tokens/s", "100");
    a.flag("--no-overlap", "prefetch transfers do not overlap compute");
    a.option("--tokens", "", "all|decode", "measure all tokens, or only those recorded as decode steps", "all");
    a.flag("--list-profiles", "print the profiles with every figure and exit");
    a.flag("--hybrid", "project hybrid execution instead: transfer-only, CPU-only and per-expert hybrid placement "
                       "(profile figures cpu-gbs, cpu-tflops, gpu-tflops; policies lru, lfu, arc, and pinned: the hottest experts of "
                       "--calibration fill the slots, a static placement)");
    a.option("--batch", "", "B", "--hybrid: sequences decoded together (continuous batching)", "1");
    a.option("--reuse-window", "", "N", "--hybrid: steps over which an expert's reuse is counted", "16");
    a.flag("--json", "print one JSON object instead of the table");
    if (!a.parse(argc, argv, 2)) return 0;

    if (a.flag_set("--list-profiles")) {
        for (const std::string& n : experts::hardware_profile_names()) {
            const experts::HardwareProfile p = experts::hardware_profile(n);
            std::printf("%s: %s\n", n.c_str(), p.description.c_str());
            if (p.has_model()) std::printf("  %s", p.describe().c_str());
            else std::printf("  (model figures from the trace)\n");
        }
        return 0;
    }
    if (a.pos("TRACE").empty()) throw UsageError("missing TRACE (usage: strata-cli simulate TRACE [options])");

    // Options first (usage errors before any file is read).
    const std::vector<std::string> policies = split_list(a.str("--policy"), "--policy");
    for (const std::string& p : policies) {
        const auto names = experts::policy_names();
        if (p != experts::kOptPolicy && std::find(names.begin(), names.end(), p) == names.end())
            throw UsageError("unknown policy '" + p + "' (known: lru, lfu, arc, pinned, opt)");
    }
    const std::vector<std::string> predictors = split_list(a.str("--predictor"), "--predictor");
    for (const std::string& p : predictors) {
        const auto names = experts::Predictor::strategies();
        if (std::find(names.begin(), names.end(), p) == names.end())
            throw UsageError("unknown predictor '" + p + "' (known: none, lookahead, frequency, combined)");
    }
    std::vector<SizeSpec> slot_specs;
    if (a.has("--slots"))
        for (const std::string& s : split_list(a.str("--slots"), "--slots")) slot_specs.push_back(parse_spec(s, "--slots"));
    std::optional<SizeSpec> pin_spec;
    if (a.has("--pin")) pin_spec = parse_spec(a.str("--pin"), "--pin");
    experts::PolicyOptions popt;
    popt.lfu_half_life = a.number("--lfu-half-life", 0.0, 1e12);
    experts::PredictorOptions pred;
    pred.width = a.integer("--prefetch-width", 0, 1 << 20);
    pred.window = a.integer("--window", 1, 1 << 20);
    pred.lookahead_weight = a.number("--lookahead-weight", 0.0, 1.0);
    const double target = a.number("--target-tps", 1e-6, 1e9);
    const bool overlap = !a.flag_set("--no-overlap");
    const std::string which_tokens = a.str("--tokens");
    if (which_tokens != "all" && which_tokens != "decode") throw UsageError("--tokens: expected 'all' or 'decode'");

    experts::HardwareProfile prof;
    try {
        prof = experts::hardware_profile(a.has("--profile") ? a.str("--profile") : "pcie3-24g");
        for (const std::string& kv : a.all("--set")) {
            const size_t eq = kv.find('=');
            if (eq == std::string::npos) throw UsageError("--set: expected KEY=VALUE, got '" + kv + "'");
            prof.set(kv.substr(0, eq), kv.substr(eq + 1));
        }
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    if (a.has("--expert-bytes")) prof.expert_bytes = static_cast<double>(parse_size(a.str("--expert-bytes"), "--expert-bytes"));
    if (a.has("--shared-bytes")) prof.shared_bytes = static_cast<double>(parse_size(a.str("--shared-bytes"), "--shared-bytes"));
    if (a.has("--link-gbs")) prof.link_bps = a.number("--link-gbs", 1e-9, 1e9) * 1e9;
    if (a.has("--fast-gbs")) prof.fast_bps = a.number("--fast-gbs", 1e-9, 1e9) * 1e9;
    const bool profile_model = prof.moe_layers > 0 && prof.n_expert > 0;

    const std::string path = a.pos("TRACE");
    const experts::Trace trace = experts::read_trace(path);
    const experts::TraceHeader& H = trace.header;
    prof.fill_model(H.n_layer, H.n_moe(), H.n_expert, H.n_used, static_cast<double>(H.expert_bytes),
                    static_cast<double>(H.shared_bytes));
    try {
        prof.validate();
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    const bool decode_only = which_tokens == "decode";
    if (decode_only && trace.n_decode_tokens() == 0)
        throw Error(path + ": the trace has no decode tokens (record it with 'strata-cli trace --greedy N')");

    const int64_t trace_total = H.n_moe() * H.n_expert;
    const int64_t prof_total = prof.total_experts();
    if (slot_specs.empty()) {
        if (profile_model) slot_specs.push_back({false, static_cast<double>(prof.cache_slots()), std::to_string(prof.cache_slots())});
        else slot_specs = {parse_spec("25%", "--slots"), parse_spec("50%", "--slots")};
    }
    // Cache size in the profile's experts, then in the trace's.
    auto profile_slots = [&](const SizeSpec& s) -> int64_t {
        const double n = s.fraction ? s.value * prof_total : s.value;
        return std::min<int64_t>(prof_total, static_cast<int64_t>(std::llround(n)));
    };
    auto trace_slots = [&](int64_t ps) -> int64_t {
        return std::min<int64_t>(trace_total, std::llround(double(ps) / double(prof_total) * double(trace_total)));
    };

    std::vector<int64_t> counts;
    std::string calibration = "the replayed trace itself (an oracle; use --calibration for held-out statistics)";
    if (a.has("--calibration")) {
        counts = experts::read_calibration(a.str("--calibration"), H);
        calibration = a.str("--calibration");
    } else {
        counts = trace.expert_counts();
    }

    if (a.flag_set("--hybrid")) {
        if (!prof.has_hybrid())
            throw UsageError("--hybrid: profile " + prof.name + " has no CPU/GPU figures (cpu-gbs, cpu-tflops, gpu-tflops); "
                             "use seed-125b or pcie3-24g, or --set them");
        std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> sizes;
        for (const SizeSpec& ss : slot_specs) {
            const int64_t ps = profile_slots(ss);
            sizes.push_back({ss.text, {ps, trace_slots(ps)}});
        }
        // Policy "pinned" here is a static placement: the hottest experts fill every slot (--pin: fewer).
        auto pins = [&](const std::string& policy, int64_t trace_slots_n) {
            if (policy != "pinned") return std::vector<experts::ExpertKey>{};
            int64_t n = trace_slots_n;
            if (pin_spec) n = pin_spec->fraction ? std::llround(pin_spec->value * double(trace_slots_n))
                                                 : trace_slots(static_cast<int64_t>(pin_spec->value));
            return experts::hottest_experts(counts, std::min(n, trace_slots_n));
        };
        return run_hybrid(trace, path, prof, policies, sizes, pins, a.integer("--batch", 1, 4096),
                          a.integer("--reuse-window", 1, 1 << 20), calibration, a.flag_set("--json"));
    }

    std::vector<Row> rows;
    for (const std::string& policy : policies) {
        for (const SizeSpec& ss : slot_specs) {
            for (const std::string& strategy : predictors) {
                Row row;
                row.policy = policy;
                row.predictor = strategy;
                row.slots_text = ss.text;
                row.profile_slots = profile_slots(ss);
                experts::SimOptions o;
                o.policy = policy;
                o.policy_options = popt;
                o.cache_slots = trace_slots(row.profile_slots);
                o.decode_only = decode_only;
                o.predictor = pred;
                o.predictor.strategy = strategy;
                int64_t n_pin = 0;
                if (pin_spec) {
                    n_pin = pin_spec->fraction ? std::llround(pin_spec->value * double(o.cache_slots))
                                               : trace_slots(static_cast<int64_t>(pin_spec->value));
                } else if (policy == "pinned") {
                    n_pin = o.cache_slots / 2;
                }
                n_pin = std::min(n_pin, o.cache_slots);
                o.pinned = experts::hottest_experts(counts, n_pin);
                row.sim = experts::simulate(trace, o);
                row.proj = experts::project(row.sim, prof, overlap);
                rows.push_back(std::move(row));
            }
        }
    }
    experts::SimResult none;  // no misses: the all-hit bound
    none.moe_layers = H.n_moe();
    none.n_used = H.n_used;
    const experts::Projection all_hit = experts::project(none, prof, overlap);
    const experts::TargetHitRates need = experts::hit_rate_needed(prof, target);
    const double scale = rows.empty() ? 1.0 : rows.front().proj.scale;
    const int64_t measured_tokens = rows.empty() ? 0 : rows.front().sim.tokens;

    if (a.flag_set("--json")) {
        std::ostringstream os;
        os.precision(6);
        os << "{\"trace\": {\"path\": \"" << json_escape(path) << "\", \"model\": \"" << json_escape(H.model_name)
           << "\", \"layers\": " << H.n_layer << ", \"moe_layers\": " << H.n_moe() << ", \"experts\": " << H.n_expert
           << ", \"used\": " << H.n_used << ", \"sequences\": " << trace.n_sequences() << ", \"tokens\": " << trace.n_tokens()
           << ", \"decode_tokens\": " << trace.n_decode_tokens() << ", \"measured_tokens\": " << measured_tokens
           << ", \"moe_layers_with_lookahead\": " << trace.n_moe_with_lookahead() << "}, \"profile\": {\"name\": \""
           << json_escape(prof.name) << "\", \"moe_layers\": " << prof.moe_layers << ", \"experts\": " << prof.n_expert
           << ", \"used\": " << prof.n_used << ", \"expert_bytes\": " << prof.expert_bytes << ", \"shared_bytes\": "
           << prof.shared_bytes << ", \"fast_gbs\": " << prof.fast_bps / 1e9 << ", \"link_gbs\": " << prof.link_bps / 1e9
           << ", \"budget_slots\": " << prof.cache_slots() << "}, \"scale\": " << scale << ", \"overlap\": "
           << (overlap ? "true" : "false") << ", \"compute_ms\": " << all_hit.compute_s * 1e3
           << ", \"max_tok_s\": " << all_hit.max_tok_s << ", \"target_tok_s\": " << target
           << ", \"hit_rate_needed_stall\": " << need.stall << ", \"hit_rate_needed_overlap\": " << need.overlap
           << ", \"target_reachable\": " << (need.reachable ? "true" : "false") << ", \"runs\": [";
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            const experts::SimResult& s = r.sim;
            os << (i ? ", " : "") << "{\"policy\": \"" << r.policy << "\", \"predictor\": \"" << r.predictor
               << "\", \"slots\": " << r.profile_slots << ", \"trace_slots\": " << s.cache_slots << ", \"cache_fraction\": "
               << (s.total_experts ? double(s.cache_slots) / double(s.total_experts) : 0.0) << ", \"pinned\": " << s.pinned
               << ", \"uses\": " << s.uses << ", \"hits\": " << s.hits << ", \"pinned_hits\": " << s.pinned_hits
               << ", \"prefetch_hits\": " << s.prefetch_hits << ", \"misses\": " << s.misses << ", \"streamed\": " << s.streamed
               << ", \"prefetch_loads\": " << s.prefetch_loads << ", \"prefetch_evicted_unused\": " << s.prefetch_evicted_unused
               << ", \"hit_rate\": " << s.hit_rate() << ", \"trace_misses_per_token\": " << s.misses_per_token()
               << ", \"trace_prefetch_per_token\": " << s.prefetch_per_token()
               << ", \"misses_per_token\": " << r.proj.misses_per_token << ", \"prefetch_per_token\": " << r.proj.prefetch_per_token
               << ", \"link_bytes_per_token\": " << r.proj.link_bytes_per_token << ", \"precision\": " << s.prediction.precision()
               << ", \"recall\": " << s.prediction.recall() << ", \"time_ms\": " << r.proj.time_s * 1e3
               << ", \"tok_s\": " << r.proj.tok_s << "}";
        }
        os << "]}\n";
        std::fputs(os.str().c_str(), stdout);
        return 0;
    }

    std::printf("trace      %s: %s, %lld MoE layers x %lld experts top-%lld (%lld experts), %lld sequences, %lld tokens "
                "(%lld decoded one at a time), lookahead for %lld of %lld MoE layers; measuring %s tokens (%lld)\n",
                path.c_str(), H.model_name.c_str(), static_cast<long long>(H.n_moe()), static_cast<long long>(H.n_expert),
                static_cast<long long>(H.n_used), static_cast<long long>(trace_total),
                static_cast<long long>(trace.n_sequences()), static_cast<long long>(trace.n_tokens()),
                static_cast<long long>(trace.n_decode_tokens()), static_cast<long long>(trace.n_moe_with_lookahead()),
                static_cast<long long>(H.n_moe()), decode_only ? "decode" : "all", static_cast<long long>(measured_tokens));
    std::printf("profile    %s: %s\n", prof.name.c_str(), prof.description.c_str());
    std::istringstream desc(prof.describe());
    for (std::string line; std::getline(desc, line);) std::printf("           %s\n", line.c_str());
    if (profile_model) {
        std::printf("scaling    routing replayed on the trace's %lld experts; cache sizes keep their fraction of all experts "
                    "(%lld profile experts -> %lld trace experts, rounded); misses and prefetch loads per token x %.4g "
                    "= (%lld MoE layers x top-%lld) / (%lld x top-%lld)\n",
                    static_cast<long long>(trace_total), static_cast<long long>(prof_total), static_cast<long long>(trace_total),
                    scale, static_cast<long long>(prof.moe_layers), static_cast<long long>(prof.n_used),
                    static_cast<long long>(H.n_moe()), static_cast<long long>(H.n_used));
    }
    std::printf("pinning    hottest experts of %s\n", calibration.c_str());
    std::printf("time       per token = compute + demand misses/link + %s; compute = (shared + %lld uses x expert) / fast "
                "= %.3f ms -> at most %.1f tok/s with every expert resident\n",
                overlap ? "max(0, prefetch/link - compute)" : "prefetch/link", static_cast<long long>(prof.uses_per_token()),
                all_hit.compute_s * 1e3, all_hit.max_tok_s);
    if (need.reachable) {
        std::printf("target     %.4g tok/s needs a hit rate >= %.2f%% when misses stall (demand), >= %.2f%% when every miss "
                    "is prefetched behind compute (DESIGN.md §1's bound)\n",
                    target, 100 * need.stall, 100 * need.overlap);
    } else {
        std::printf("target     %.4g tok/s is out of reach: compute alone takes %.3f ms per token\n", target, all_hit.compute_s * 1e3);
    }
    std::printf("\n%-7s %-24s %6s %-9s %8s %9s %9s %11s %9s %7s %9s\n", "policy", profile_model ? "slots (-> trace)" : "slots",
                "pinned", "predictor", "hit rate", "miss/tok", "pref/tok", "link MB/tok", "precision", "recall", "tok/s");
    for (const Row& r : rows) {
        const experts::SimResult& s = r.sim;
        std::string size = std::to_string(r.profile_slots) + "/" + std::to_string(prof_total);
        if (profile_model) size += " -> " + std::to_string(s.cache_slots) + "/" + std::to_string(s.total_experts);
        size += " (" + fmt("%.0f%%", s.total_experts ? 100.0 * double(s.cache_slots) / double(s.total_experts) : 0.0) + ")";
        const bool pred = r.predictor != "none";
        std::printf("%-7s %-24s %6lld %-9s %8.4f %9.3f %9.3f %11.1f %9s %7s %9.1f\n", r.policy.c_str(), size.c_str(),
                    static_cast<long long>(s.pinned), r.predictor.c_str(), s.hit_rate(), r.proj.misses_per_token,
                    r.proj.prefetch_per_token, r.proj.link_bytes_per_token / 1e6,
                    pred ? fmt("%.3f", s.prediction.precision()).c_str() : "-",
                    pred ? fmt("%.3f", s.prediction.recall()).c_str() : "-", r.proj.tok_s);
    }
    const Row* small = nullptr;
    for (const Row& r : rows)
        if (r.sim.cache_slots < H.n_moe() * H.n_used && !small) small = &r;
    if (small) {
        std::printf("\nnote: some trace caches hold fewer experts than one token uses (%lld): a recency policy cycles through\n"
                    "them layer by layer and thrashes. A model with few experts per layer cannot carry both the profile's\n"
                    "cache fraction and its cache-to-working-set ratio (%.1f tokens' worth of uses at %lld profile slots).\n",
                    static_cast<long long>(H.n_moe() * H.n_used),
                    double(small->profile_slots) / double(std::max<int64_t>(1, prof.uses_per_token())),
                    static_cast<long long>(small->profile_slots));
    }
    std::printf("\nhit rate: expert uses found resident (pinned and prefetched included); miss/tok and pref/tok: demand and\n"
                "prefetch loads per token%s; precision/recall: predicted experts vs the router's choice.\n",
                profile_model ? " scaled to the profile" : "");
    return 0;
}

}  // namespace strata::cli
