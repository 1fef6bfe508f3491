#include "serve/metrics.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace strata::serve {
namespace {

// Label values escape backslash, quote and newline (the exposition format's rule).
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += ' ';
    out += num(v);
    out += '\n';
}

// The snapshot's single-valued figures, one gauge or counter each: render()
// writes them from a snapshot and read_metrics() sets them back.
using Snap = TelemetrySnapshot;
struct SnapshotFigure {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const Snap&);
    void (*set)(Snap&, double);
};
const SnapshotFigure kSnapshotFigures[] = {
    {"strata_forward_tokens_total", "counter", "Tokens through the forward pass since load.",
     [](const Snap& t) { return double(t.tokens_processed); }, [](Snap& t, double v) { t.tokens_processed = int64_t(v); }},
    {"strata_forward_seconds_total", "counter", "Wall time inside the forward pass since load.",
     [](const Snap& t) { return t.compute_seconds; }, [](Snap& t, double v) { t.compute_seconds = v; }},
    {"strata_repacked_bytes", "gauge", "Weight bytes rewritten into the CPU kernels' layout as they load.",
     [](const Snap& t) { return double(t.repacked_bytes); }, [](Snap& t, double v) { t.repacked_bytes = uint64_t(v); }},
    {"strata_expert_layers", "gauge", "MoE layers of the model (0: a dense model).",
     [](const Snap& t) { return double(t.n_layer); }, [](Snap& t, double v) { t.n_layer = int64_t(v); }},
    {"strata_experts_per_layer", "gauge", "Routed experts per MoE layer.",
     [](const Snap& t) { return double(t.n_expert); }, [](Snap& t, double v) { t.n_expert = int64_t(v); }},
    {"strata_expert_cache_slots", "gauge", "Expert slots in the fast tier.",
     [](const Snap& t) { return double(t.expert_slots); }, [](Snap& t, double v) { t.expert_slots = int64_t(v); }},
    {"strata_expert_slot_bytes", "gauge", "Bytes of one expert slot.",
     [](const Snap& t) { return double(t.expert_slot_bytes); }, [](Snap& t, double v) { t.expert_slot_bytes = uint64_t(v); }},
    {"strata_expert_prefetch_precision", "gauge", "Prefetched experts the router then chose.",
     [](const Snap& t) { return t.prefetch_precision; }, [](Snap& t, double v) { t.prefetch_precision = v; }},
    {"strata_expert_prefetch_recall", "gauge", "Chosen experts that had been prefetched.",
     [](const Snap& t) { return t.prefetch_recall; }, [](Snap& t, double v) { t.prefetch_recall = v; }},
    {"strata_expert_cache_hit_rate", "gauge", "Expert cache hit rate since load.",
     [](const Snap& t) { return t.hit_rate_total; }, [](Snap& t, double v) { t.hit_rate_total = v; }},
    {"strata_expert_cache_hit_rate_recent", "gauge", "Expert cache hit rate over the last ~64 tokens.",
     [](const Snap& t) { return t.hit_rate_recent; }, [](Snap& t, double v) { t.hit_rate_recent = v; }},
    {"strata_expert_bytes_loaded_per_token", "gauge", "Expert bytes moved into the fast tier per token.",
     [](const Snap& t) { return t.bytes_loaded_per_token; }, [](Snap& t, double v) { t.bytes_loaded_per_token = v; }},
    {"strata_expert_bytes_loaded_total", "counter", "Expert bytes moved into the fast tier since load.",
     [](const Snap& t) { return double(t.bytes_loaded); }, [](Snap& t, double v) { t.bytes_loaded = uint64_t(v); }},
    {"strata_expert_stall_fraction", "gauge", "Share of forward-pass time blocked on expert loads.",
     [](const Snap& t) { return t.stall_fraction; }, [](Snap& t, double v) { t.stall_fraction = v; }},
};

std::string cell_labels(const std::string& m, size_t i, int64_t n_expert) {
    return m + ",layer=\"" + std::to_string(i / static_cast<size_t>(n_expert)) + "\",expert=\"" +
           std::to_string(i % static_cast<size_t>(n_expert)) + "\"";
}

// One sample of the text format: name{labels} value.
struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0.0;
};

// Parses one sample line; false for anything else. Timestamps after the
// value are allowed and ignored.
bool parse_sample(const std::string& line, Sample* s) {
    size_t i = 0;
    while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':')) ++i;
    if (i == 0) return false;
    s->name = line.substr(0, i);
    s->labels.clear();
    if (i < line.size() && line[i] == '{') {
        ++i;
        while (i < line.size() && line[i] != '}') {
            const size_t eq = line.find('=', i);
            if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
            const std::string key = line.substr(i, eq - i);
            std::string value;
            size_t j = eq + 2;
            for (; j < line.size() && line[j] != '"'; ++j) {
                if (line[j] == '\\' && j + 1 < line.size()) {
                    ++j;
                    value += line[j] == 'n' ? '\n' : line[j];
                } else {
                    value += line[j];
                }
            }
            if (j >= line.size()) return false;
            s->labels[key] = value;
            i = j + 1;
            if (i < line.size() && line[i] == ',') ++i;
        }
        if (i >= line.size()) return false;
        ++i;
    }
    while (i < line.size() && line[i] == ' ') ++i;
    const std::string rest = line.substr(i);
    if (rest.empty()) return false;
    char* end = nullptr;
    s->value = std::strtod(rest.c_str(), &end);
    return end != rest.c_str() && (*end == '\0' || *end == ' ');
}

}  // namespace

void ServeMetrics::finished(const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens,
                            double ttft_s) {
    std::lock_guard<std::mutex> lk(mu_);
    ++finished_[finish];
    prompt_tokens_ += prompt_tokens;
    completion_tokens_ += completion_tokens;
    if (completion_tokens > 0 && ttft_s >= 0.0) {
        ++ttft_count_;
        ttft_sum_ += ttft_s;
        for (size_t i = 0; i < kTtftBuckets.size(); ++i)
            if (ttft_s <= kTtftBuckets[i]) ++ttft_le_[i];
    }
}

void ServeMetrics::rejected(int status) {
    std::lock_guard<std::mutex> lk(mu_);
    ++rejected_[status];
}

void ServeMetrics::generated(int64_t tokens) {
    if (tokens <= 0) return;
    std::lock_guard<std::mutex> lk(mu_);
    const auto now = Clock::now();
    recent_.emplace_back(now, tokens);
    while (!recent_.empty() && now - recent_.front().first > kWindow) recent_.pop_front();
}

void ServeMetrics::set_gauges(const ServeGauges& g) {
    std::lock_guard<std::mutex> lk(mu_);
    gauges_ = g;
}

double ServeMetrics::recent_tokens_per_second() const {
    std::lock_guard<std::mutex> lk(mu_);
    const auto now = Clock::now();
    while (!recent_.empty() && now - recent_.front().first > kWindow) recent_.pop_front();
    int64_t n = 0;
    for (const auto& [t, k] : recent_) n += k;
    return static_cast<double>(n) / std::chrono::duration<double>(kWindow).count();
}

std::string ServeMetrics::render(const TelemetrySnapshot& t, const std::string& model, bool per_expert) const {
    const double rate = recent_tokens_per_second();
    std::lock_guard<std::mutex> lk(mu_);
    std::string o;
    const std::string m = "model=\"" + label(model) + "\"";
    family(o, "strata_requests_finished_total", "counter", "Requests finished, by finish reason.");
    for (const char* f : {"stop", "length", "cancelled"}) {
        auto it = finished_.find(f);
        sample(o, "strata_requests_finished_total", m + ",finish=\"" + f + "\"", it == finished_.end() ? 0 : it->second);
    }
    family(o, "strata_requests_rejected_total", "counter", "Requests refused before generating, by HTTP status.");
    for (const auto& [status, n] : rejected_)
        sample(o, "strata_requests_rejected_total", m + ",status=\"" + std::to_string(status) + "\"", n);
    family(o, "strata_requests_running", "gauge", "Requests generating now.");
    sample(o, "strata_requests_running", m, gauges_.running);
    family(o, "strata_queue_depth", "gauge", "Requests waiting for a place in the batch.");
    sample(o, "strata_queue_depth", m, gauges_.waiting);
    family(o, "strata_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    sample(o, "strata_prompt_tokens_total", m, prompt_tokens_);
    family(o, "strata_generated_tokens_total", "counter", "Tokens generated for finished requests.");
    sample(o, "strata_generated_tokens_total", m, completion_tokens_);
    family(o, "strata_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.");
    sample(o, "strata_generation_tokens_per_second", m, rate);
    family(o, "strata_time_to_first_token_seconds", "histogram", "From arrival to the first generated token.");
    for (size_t i = 0; i < kTtftBuckets.size(); ++i)
        sample(o, "strata_time_to_first_token_seconds_bucket", m + ",le=\"" + num(kTtftBuckets[i]) + "\"", ttft_le_[i]);
    sample(o, "strata_time_to_first_token_seconds_bucket", m + ",le=\"+Inf\"", ttft_count_);
    sample(o, "strata_time_to_first_token_seconds_sum", m, ttft_sum_);
    sample(o, "strata_time_to_first_token_seconds_count", m, ttft_count_);
    family(o, "strata_kv_blocks_used", "gauge", "KV cache blocks held by sequences.");
    sample(o, "strata_kv_blocks_used", m, gauges_.kv_blocks_used);
    family(o, "strata_kv_blocks_total", "gauge", "KV cache blocks in the pool.");
    sample(o, "strata_kv_blocks_total", m, gauges_.kv_blocks_total);
    family(o, "strata_kv_block_tokens", "gauge", "Tokens per KV block.");
    sample(o, "strata_kv_block_tokens", m, gauges_.kv_block_tokens);
    family(o, "strata_engine_info", "gauge", "What computes the model: the device, the CPU kernels, the expert policy, the tiers.");
    sample(o, "strata_engine_info",
           m + ",device=\"" + label(t.device) + "\",kernels=\"" + label(t.kernels) + "\",policy=\"" + label(t.policy) +
               "\",fast_tier=\"" + label(t.fast_tier) + "\",slow_tier=\"" + label(t.slow_tier) + "\"",
           1);
    for (const SnapshotFigure& x : kSnapshotFigures) {
        family(o, x.name, x.type, x.help);
        sample(o, x.name, m, x.get(t));
    }
    family(o, "strata_ledger_bytes", "gauge", "The memory ledger: bytes reserved and used per account and tier.");
    for (const LedgerEntry& e : t.ledger) {
        const std::string l = m + ",account=\"" + label(e.account) + "\",tier=\"" + label(e.tier) + "\"";
        sample(o, "strata_ledger_bytes", l + ",kind=\"reserved\"", static_cast<double>(e.reserved));
        sample(o, "strata_ledger_bytes", l + ",kind=\"used\"", static_cast<double>(e.used));
    }
    family(o, "strata_tier_budget_bytes", "gauge", "Budget of each tier (0: none).");
    sample(o, "strata_tier_budget_bytes", m + ",tier=\"fast\",name=\"" + label(t.fast_tier) + "\"",
           static_cast<double>(t.fast_budget));
    sample(o, "strata_tier_budget_bytes", m + ",tier=\"slow\",name=\"" + label(t.slow_tier) + "\"",
           static_cast<double>(t.slow_budget));
    const size_t cells = static_cast<size_t>(std::max<int64_t>(0, t.n_layer) * std::max<int64_t>(0, t.n_expert));
    if (per_expert && t.heat.size() == cells && t.residency.size() == cells) {
        family(o, "strata_expert_heat", "gauge", "Recent share of each expert's activations (halves every ~32 tokens).");
        for (size_t i = 0; i < cells; ++i)
            sample(o, "strata_expert_heat", cell_labels(m, i, t.n_expert), t.heat[i]);
        family(o, "strata_expert_residency", "gauge", "Where each expert is: 0 absent, 1 loading, 2 resident, 3 pinned.");
        for (size_t i = 0; i < cells; ++i)
            sample(o, "strata_expert_residency", cell_labels(m, i, t.n_expert), t.residency[i]);
    }
    return o;
}

bool read_metrics(const std::string& text, TelemetrySnapshot* t, ServeFigures* f, std::string* error) {
    *t = TelemetrySnapshot{};
    *f = ServeFigures{};
    std::map<std::string, double> scalar;   // unlabelled beyond the model
    std::vector<Sample> heat, residency;
    bool strata = false;
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) nl = text.size();
        std::string line = text.substr(pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        Sample s;
        if (!parse_sample(line, &s)) {
            *error = "line " + std::to_string(line_no) + " is not a Prometheus sample: " + line.substr(0, 80);
            return false;
        }
        if (s.name.rfind("strata_", 0) != 0) continue;
        strata = true;
        const auto lab = [&](const char* k) {
            auto it = s.labels.find(k);
            return it == s.labels.end() ? std::string() : it->second;
        };
        if (s.name == "strata_ledger_bytes") {
            const std::string account = lab("account"), tier = lab("tier");
            auto it = std::find_if(t->ledger.begin(), t->ledger.end(),
                                   [&](const LedgerEntry& e) { return e.account == account && e.tier == tier; });
            if (it == t->ledger.end()) it = t->ledger.insert(t->ledger.end(), LedgerEntry{account, tier, 0, 0});
            (lab("kind") == "used" ? it->used : it->reserved) = static_cast<uint64_t>(s.value);
        } else if (s.name == "strata_tier_budget_bytes") {
            (lab("tier") == "fast" ? t->fast_budget : t->slow_budget) = static_cast<uint64_t>(s.value);
        } else if (s.name == "strata_engine_info") {
            t->device = lab("device");
            t->kernels = lab("kernels");
            t->policy = lab("policy");
            t->fast_tier = lab("fast_tier");
            t->slow_tier = lab("slow_tier");
        } else if (s.name == "strata_requests_finished_total") {
            f->finished += static_cast<int64_t>(s.value);
        } else if (s.name == "strata_expert_heat") {
            heat.push_back(std::move(s));
        } else if (s.name == "strata_expert_residency") {
            residency.push_back(std::move(s));
        } else if (s.labels.size() == 1) {
            scalar[s.name] = s.value;
        }
    }
    if (!strata) {
        *error = "no strata_ metrics: not a Strata server";
        return false;
    }
    const auto get = [&](const char* name) {
        auto it = scalar.find(name);
        return it == scalar.end() ? 0.0 : it->second;
    };
    for (const SnapshotFigure& x : kSnapshotFigures) x.set(*t, get(x.name));
    f->tokens_per_second = get("strata_generation_tokens_per_second");
    f->ttft_count = static_cast<int64_t>(get("strata_time_to_first_token_seconds_count"));
    f->ttft_sum_s = get("strata_time_to_first_token_seconds_sum");
    f->running = static_cast<int64_t>(get("strata_requests_running"));
    f->waiting = static_cast<int64_t>(get("strata_queue_depth"));
    f->kv_blocks_used = static_cast<int64_t>(get("strata_kv_blocks_used"));
    f->kv_blocks_total = static_cast<int64_t>(get("strata_kv_blocks_total"));
    // The heat map, when the server was asked for it and its grid is whole.
    const int64_t cells = t->n_layer > 0 && t->n_expert > 0 ? t->n_layer * t->n_expert : 0;
    if (cells > 0 && static_cast<int64_t>(heat.size()) == cells && static_cast<int64_t>(residency.size()) == cells) {
        t->heat.assign(static_cast<size_t>(cells), 0.0f);
        t->residency.assign(static_cast<size_t>(cells), 0);
        const auto index = [&](const Sample& s) -> int64_t {
            const int64_t l = std::atoll(s.labels.count("layer") ? s.labels.at("layer").c_str() : "-1");
            const int64_t e = std::atoll(s.labels.count("expert") ? s.labels.at("expert").c_str() : "-1");
            return l >= 0 && l < t->n_layer && e >= 0 && e < t->n_expert ? l * t->n_expert + e : -1;
        };
        for (const Sample& s : heat)
            if (const int64_t i = index(s); i >= 0) t->heat[static_cast<size_t>(i)] = static_cast<float>(s.value);
        for (const Sample& s : residency)
            if (const int64_t i = index(s); i >= 0) t->residency[static_cast<size_t>(i)] = static_cast<uint8_t>(s.value);
    }
    return true;
}

}  // namespace strata::serve
