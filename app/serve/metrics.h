// Serving figures in Prometheus' text exposition format (version 0.0.4):
// what a request did (counts, tokens, time to first token), what the engine
// holds (KV blocks, expert cache, the ledger per tier). The backend keeps a
// ServeMetrics, its engine thread records into it, and /metrics renders it.
// read_metrics() is the inverse: the app reads a Strata server's /metrics
// back into a TelemetrySnapshot, so its panels show the server's engine.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "strata/telemetry.h"

namespace strata::serve {

// The state of the queue and the KV cache as the engine thread last saw it.
struct ServeGauges {
    int64_t running = 0;
    int64_t waiting = 0;
    int64_t kv_blocks_used = 0;
    int64_t kv_blocks_total = 0;
    int64_t kv_block_tokens = 0;
};

class ServeMetrics {
public:
    static constexpr std::array<double, 10> kTtftBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

    void finished(const std::string& finish, int64_t prompt_tokens, int64_t completion_tokens, double ttft_s);
    void rejected(int status);
    // Tokens generated in one engine step (for the recent tokens/s).
    void generated(int64_t tokens);
    void set_gauges(const ServeGauges& g);

    // Rendered with the engine's telemetry (ledger, expert cache) and the
    // model's id. per_expert adds each expert's heat and residency (the heat
    // map: n_layer x n_expert samples each, so only when asked: /metrics?experts=1).
    std::string render(const TelemetrySnapshot& t, const std::string& model, bool per_expert = false) const;

    // Generation rate over the last kWindow (0 with no tokens in it).
    double recent_tokens_per_second() const;

private:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::seconds kWindow{10};
    mutable std::mutex mu_;
    std::map<std::string, int64_t> finished_;      // by finish reason
    std::map<int, int64_t> rejected_;              // by HTTP status
    int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
    std::array<int64_t, kTtftBuckets.size()> ttft_le_{};  // cumulative counts per bucket
    int64_t ttft_count_ = 0;
    double ttft_sum_ = 0.0;
    mutable std::deque<std::pair<Clock::time_point, int64_t>> recent_;
    ServeGauges gauges_;
};

// The serving figures of a Strata server's /metrics, read back.
struct ServeFigures {
    double tokens_per_second = 0.0;   // generated over the server's last 10 s
    int64_t ttft_count = 0;           // requests with a first token
    double ttft_sum_s = 0.0;
    int64_t finished = 0;             // requests finished, any reason
    int64_t running = 0, waiting = 0;
    int64_t kv_blocks_used = 0, kv_blocks_total = 0;
};

// Reads a /metrics text that render() wrote. False, with *error saying why,
// when the text is not a Strata server's (another server's Prometheus text,
// an HTML page, a line that is not "name{labels} value").
bool read_metrics(const std::string& text, TelemetrySnapshot* t, ServeFigures* f, std::string* error);

}  // namespace strata::serve
