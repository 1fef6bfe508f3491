#include "serve/metrics.h"

#include <cstdio>

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

std::string ServeMetrics::render(const TelemetrySnapshot& t, const std::string& model) const {
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
    family(o, "strata_forward_tokens_total", "counter", "Tokens through the forward pass since load.");
    sample(o, "strata_forward_tokens_total", m, t.tokens_processed);
    family(o, "strata_expert_cache_hit_rate", "gauge", "Expert cache hit rate since load.");
    sample(o, "strata_expert_cache_hit_rate", m, t.hit_rate_total);
    family(o, "strata_expert_cache_hit_rate_recent", "gauge", "Expert cache hit rate over the last ~64 tokens.");
    sample(o, "strata_expert_cache_hit_rate_recent", m, t.hit_rate_recent);
    family(o, "strata_expert_bytes_loaded_per_token", "gauge", "Expert bytes moved into the fast tier per token.");
    sample(o, "strata_expert_bytes_loaded_per_token", m, t.bytes_loaded_per_token);
    family(o, "strata_expert_bytes_loaded_total", "counter", "Expert bytes moved into the fast tier since load.");
    sample(o, "strata_expert_bytes_loaded_total", m, static_cast<double>(t.bytes_loaded));
    family(o, "strata_expert_stall_fraction", "gauge", "Share of forward-pass time blocked on expert loads.");
    sample(o, "strata_expert_stall_fraction", m, t.stall_fraction);
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
    return o;
}

}  // namespace strata::serve
