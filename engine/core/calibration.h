// Hot-expert calibration (strata-cli calibrate, and the app's "Calibrate hot
// experts…"): runs prompts through the engine's context (each prompt, then N
// greedy tokens one at a time, as decoding routes), counts how often each
// (layer, expert) is routed to, and writes the counts and the pin list (the
// most used experts) in the format read_pin_file() and --pin-file read.
//
// Uses the engine's default sequence; the caller makes sure nothing else runs
// on the context meanwhile (the default sequence is cleared before and after).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::core {

class Engine;

struct CalibrationOptions {
    int64_t n_greedy = 32;         // greedy tokens decoded after each prompt
    int64_t n_pin = -1;            // experts to pin; < 0: pin_fraction of all routed experts
    double pin_fraction = 0.125;
};

struct Calibration {
    std::string model;             // the model's name
    int64_t n_layer = 0, n_expert = 0, n_expert_used = 0;
    int64_t tokens = 0;            // tokens run through the model
    std::vector<int64_t> counts;   // [layer * n_expert + expert]
    std::vector<int64_t> moe_layers;
    std::vector<int64_t> pinned;   // keys (layer * n_expert + expert), most used first
    int64_t experts_total = 0;     // routed experts (MoE layers x experts)
    double pinned_share = 0.0;     // share of all expert uses that went to pinned experts
    std::string to_json() const;
};

// `progress(prompts_done, prompts_total)` is called before each prompt and at
// the end; returning false cancels (throws strata::Cancelled). Throws
// strata::Error for a model without experts or no prompts.
Calibration calibrate(Engine& engine, const std::vector<std::string>& prompts, const CalibrationOptions& options,
                      const std::function<bool(size_t done, size_t total)>& progress = {});

// Writes to.json() atomically (a temporary file renamed over `path`). Throws strata::Error.
void write_calibration(const std::string& path, const Calibration& c);

}  // namespace strata::core
