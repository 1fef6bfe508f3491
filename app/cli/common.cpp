#include "common.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "backend/device.h"
#include "common/error.h"
#include "common/json.h"
#include "memory/ledger.h"

namespace strata::cli {

void add_context_options(Args& a) {
    a.option("--ctx", "-c", "N", "context size in tokens (0: the model's, at most 4096)", "0");
    a.option("--threads", "-t", "N", "compute threads (0: all cores)", "0");
    a.option("--batch", "", "N", "largest number of prompt tokens per forward chunk", "256");
}

void add_engine_options(Args& a) {
    add_context_options(a);
    a.option("--device", "", "D", "where the forward pass runs: auto (a GPU when there is one and it passes its\n"
             "check against the CPU at load), cpu, cuda or cuda:N", "auto");
    a.flag("--cpu-moe", "on a GPU: compute every MoE layer's experts on the CPU from host RAM");
    a.option("--n-cpu-moe", "", "N", "on a GPU: compute the experts of the first N MoE layers on the CPU", "0");
    a.option("--placement", "", "P", "on a GPU whose VRAM holds only some experts, a missing expert: auto (computed\n"
             "on the CPU or copied to VRAM, whichever the measured rates say is faster) or transfer (always copied)", "auto");
    a.option("--fast-budget", "", "SIZE", "fast-tier budget (RAM; VRAM on a GPU), e.g. 512M, 4G; auto: what is\n"
             "available at load minus a reserve (a tenth, 512M..4G); none: no budget", "auto");
    a.option("--slow-budget", "", "SIZE", "slow-tier budget; default: none (on a GPU: host RAM, default what is\n"
             "available minus a reserve; below every expert it caches them over the model file)");
    a.option("--expert-cache-fraction", "", "F", "expert cache size as a fraction (0,1] of all expert bytes");
    a.option("--slots", "", "N", "expert cache size in slots (overrides the fraction)");
    a.option("--policy", "", "P", "expert cache policy: lru, lfu, arc, pinned", "lru");
    a.option("--pin-file", "", "FILE", "pin the hot experts listed by 'strata-cli calibrate'");
    a.option("--prefetch", "", "on|off", "prefetch the next layer's predicted experts", "on");
    a.option("--prefetch-width", "", "N", "experts prefetched per layer (0: the model's top-k)", "0");
    a.option("--predictor", "", "P", "prefetch predictor: lookahead, frequency, combined", "lookahead");
    a.option("--io-threads", "", "N", "expert transfer threads", "1");
    a.flag("--no-direct-io", "read experts through the page cache instead of O_DIRECT");
    a.option("--trace", "", "FILE", "record a routing trace to FILE (for 'strata-cli simulate')");
    a.option("--kv-tokens", "", "N", "paged KV cache size in tokens over all sequences (0: one context)", "0");
    a.option("--kv-block", "", "N", "KV block size in tokens", "16");
    a.option("--kv-type", "", "T", "KV element type: f32, or q8 (int8, per-block per-head scales)", "f32");
    a.option("--numa", "", "P", "NUMA placement: auto, off, bind, bind:N, interleave", "auto");
    a.option("--kernel-tuning", "", "M", "CPU kernel knobs: auto (measured once per CPU, type and thread count,\n"
             "then cached), measure (again now), cached (never measure), off (built-in defaults)", "auto");
}

uint64_t parse_fast_budget(const std::string& text, const std::string& what) {
    if (text == "auto") return 0;
    if (text == "none") return kNoBudget;
    const uint64_t b = parse_size(text, what);
    if (b == 0) throw UsageError(what + ": a zero budget holds nothing (auto: from the RAM available; none: no budget)");
    return b;
}

int64_t cpu_moe_layers(const Args& a) { return a.flag_set("--cpu-moe") ? -1 : a.integer("--n-cpu-moe", 0, 1 << 20); }

EngineSettings engine_settings(const Args& a) {
    EngineSettings s;
    const model::ContextParams cp = context_params(a);
    s.n_ctx = cp.n_ctx;
    s.n_batch = cp.n_batch;
    s.threads = cp.n_threads;
    s.fast_budget = parse_fast_budget(a.str("--fast-budget"), "--fast-budget");
    s.device = a.str("--device");
    s.cpu_moe_layers = cpu_moe_layers(a);
    s.placement = a.str("--placement");
    if (s.placement != "auto" && s.placement != "transfer")
        throw UsageError("--placement: '" + s.placement + "' is unknown (use auto or transfer)");
    if (const std::string err = backend::parse_device(s.device, nullptr); !err.empty()) throw UsageError("--device: " + err);
    if (a.has("--slow-budget")) {
        s.slow_budget = parse_size(a.str("--slow-budget"), "--slow-budget");
        if (s.slow_budget == 0) throw UsageError("--slow-budget: 0 bytes leaves no room for the experts (omit the option for no budget)");
    }
    if (a.has("--expert-cache-fraction")) {
        s.expert_cache_fraction = a.number("--expert-cache-fraction", 0.0, 1.0);
        if (s.expert_cache_fraction <= 0.0)
            throw UsageError("--expert-cache-fraction: must be greater than 0 (the cache needs at least one slot)");
    }
    if (a.has("--slots")) {
        s.expert_slots = a.integer("--slots", 0, int64_t{1} << 32);
        if (s.expert_slots == 0) throw UsageError("--slots: zero slots leave no room to compute an expert (use 1 or more)");
    }
    s.policy = a.str("--policy");
    if (a.has("--pin-file")) s.pin_file = a.str("--pin-file");
    const std::string pf = a.str("--prefetch");
    if (pf != "on" && pf != "off") throw UsageError("--prefetch: expected on or off, got '" + pf + "'");
    s.prefetch = pf == "on";
    s.prefetch_width = static_cast<int>(a.integer("--prefetch-width", 0, 4096));
    s.predictor = a.str("--predictor");
    s.io_threads = static_cast<int>(a.integer("--io-threads", 1, 64));
    s.direct_io = !a.flag_set("--no-direct-io");
    if (a.has("--trace")) s.trace_file = a.str("--trace");
    s.kv_tokens = a.integer("--kv-tokens", 0, int64_t{1} << 30);
    s.kv_block_tokens = a.integer("--kv-block", 1, 4096);
    s.kv_type = a.str("--kv-type");
    s.numa = a.str("--numa");
    s.kernel_tuning = a.str("--kernel-tuning");
    if (const std::string err = s.validate(); !err.empty()) throw UsageError(err);
    return s;
}

void add_sampling_options(Args& a, const std::string& default_temp) {
    a.option("--temp", "", "T", "temperature; 0 = greedy", default_temp);
    a.option("--top-k", "", "K", "keep the K most likely tokens; 0 = off", "40");
    a.option("--top-p", "", "P", "nucleus sampling threshold; 1 = off", "0.95");
    a.option("--min-p", "", "P", "drop tokens below P x the top probability; 0 = off", "0.05");
    a.option("--repeat-penalty", "", "X", "penalise repeated tokens; 1 = off", "1.0");
    a.option("--presence-penalty", "", "X", "subtract X from tokens already present; 0 = off", "0");
    a.option("--frequency-penalty", "", "X", "subtract X x count of each present token; 0 = off", "0");
    a.option("--repeat-last-n", "", "N", "penalty window in tokens; -1 = whole context", "64");
    a.option("--seed", "", "S", "random seed", "42");
    a.multi_option("--stop", "TEXT", "stop when TEXT is generated");
}

model::ContextParams context_params(const Args& a) {
    model::ContextParams p;
    p.n_ctx = a.integer("--ctx", 0, 1 << 20);
    p.n_threads = static_cast<int>(a.integer("--threads", 0, 1024));
    p.n_batch = a.integer("--batch", 1, 1 << 16);
    return p;
}

sched::SamplingParams sampling_params(const Args& a) {
    sched::SamplingParams s;
    const double inf = std::numeric_limits<double>::infinity();
    s.temperature = static_cast<float>(a.number("--temp", 0.0, 100.0));
    s.top_k = static_cast<int32_t>(a.integer("--top-k", 0, 1 << 30));
    s.top_p = static_cast<float>(a.number("--top-p", 0.0, 1.0));
    if (s.top_p <= 0.0f) throw UsageError("option --top-p: must be greater than 0 (use 1 to turn it off)");
    s.min_p = static_cast<float>(a.number("--min-p", 0.0, 1.0));
    s.repeat_penalty = static_cast<float>(a.number("--repeat-penalty", 0.0, 100.0));
    if (s.repeat_penalty <= 0.0f) throw UsageError("option --repeat-penalty: must be greater than 0 (use 1 to turn it off)");
    s.presence_penalty = static_cast<float>(a.number("--presence-penalty", -inf, inf));
    s.frequency_penalty = static_cast<float>(a.number("--frequency-penalty", -inf, inf));
    s.penalty_last_n = static_cast<int32_t>(a.integer("--repeat-last-n", -1, 1 << 30));
    s.seed = static_cast<uint64_t>(a.integer("--seed", 0, std::numeric_limits<int64_t>::max()));
    s.stop = a.all("--stop");
    for (const auto& st : s.stop)
        if (st.empty()) throw UsageError("option --stop: the stop text is empty");
    if (const std::string err = s.validate(); !err.empty()) throw UsageError(err);
    return s;
}

int32_t argmax(const float* logits, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
    return best;
}

std::string human_bytes(uint64_t bytes) { return memory::format_bytes(bytes); }

std::string human_count(int64_t n) {
    char buf[32];
    if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
    else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
    else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.1f K", n / 1e3);
    else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
    return buf;
}

bool is_valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || i + len > s.size()) return false;
        uint32_t cp = len == 1 ? c : c & (0x7f >> len);
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        // Overlong forms, surrogates and values past U+10FFFF are invalid.
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

std::string json_escape(const std::string& s) { return json::escape(s); }

std::string read_text_file(const std::string& path, const std::string& what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot read the " + what + " file " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

}  // namespace strata::cli
