// The engine as the app and the CLI use it: a model loaded under a memory plan,
// its shared weights resident in the fast tier, its experts behind a budgeted
// cache filled from the slow tier with prefetch, one sequence context, and the
// telemetry that describes all of it.
//
// Loading goes: open and validate the file -> plan (does it fit, and why) ->
// copy the shared weights into the fast tier -> create the expert store ->
// create the context. Nothing is allocated before the plan says it fits.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chat/chat_template.h"
#include "common/error.h"
#include "core/kernel_tuning.h"
#include "core/resident_weights.h"
#include "experts/expert_store.h"
#include "memory/ledger.h"
#include "plan/plan.h"
#include "runner/context.h"
#include "model/model.h"
#include "strata/settings.h"
#include "strata/telemetry.h"

#include "experts/predictor.h"
#include "experts/trace.h"

namespace strata::core {

class Engine {
public:
    // Called during loading with the stage ("opening", "planning", "weights",
    // "experts", "ready") and the fraction done in [0, 1]; return false to
    // cancel (load() then throws strata::Cancelled and frees everything).
    using LoadProgress = std::function<bool(std::string_view stage, double fraction)>;

    // Throws strata::Error: bad file, bad settings, or a plan that does not fit
    // (the plan's reason, which says what to change).
    static std::unique_ptr<Engine> load(const std::string& path, const EngineSettings& settings,
                                        const LoadProgress& progress = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const model::Model& model() const { return *model_; }
    // The model's chat template: detected from its GGUF at load, or the fallback.
    const chat::ChatTemplate& chat_template() const { return *chat_template_; }
    const tok::Vocab& vocab() const { return model_->vocab(); }
    model::Context& context() { return *ctx_; }
    kv::KvCache& kv_cache() { return *kv_; }
    const memory::Plan& plan() const { return plan_; }
    const memory::Ledger& ledger() const { return ledger_; }
    experts::ExpertStore* expert_store() { return store_.get(); }
    // On a GPU with three tiers: host RAM's cache over the model file; else null.
    const experts::ExpertStore* host_cache() const { return host_cache_.get(); }
    const EngineSettings& settings() const { return settings_; }
    // Weight bytes rewritten in place into the CPU kernels' layout
    // (kernels::fast_layout): the shared weights on load, plus every expert
    // load so far (each reload counts again). 0 where the file's layout is kept.
    uint64_t repacked_bytes() const;

    // Run-time changes, between forward passes; throw strata::Error with the
    // reason and leave the previous setting in force.
    void set_expert_slots(int64_t slots);
    void set_expert_cache_fraction(double fraction);
    void set_policy(const std::string& policy);
    void set_pin_file(const std::string& path);  // "" unpins everything
    void set_prefetch(bool on, int width);

    TelemetrySnapshot snapshot() const;
    // The RAM this engine gives back when it is destroyed, which the system
    // does not count as available while it lives: what a plan for the next
    // load adds to available_ram_bytes() (PlanSettings::fast_returned). On
    // the CPU the fast tier's used bytes: the weights copied out of the file,
    // the expert slots filled, the KV blocks in use, the scratch; reserved
    // bytes never filled are mostly untouched pages the kernel counts as
    // available already (so this errs low, never promising memory twice).
    // On a GPU: the host RAM the slow tier reserved (pinned, so touched).
    uint64_t ram_returned_on_unload() const;
    // The predictor's running counts (zero without prefetch), for benchmarks
    // that measure a phase by difference.
    experts::PredictionCounts prediction_counts() const;

    // Extra observers of the forward pass (routing statistics, calibration,
    // traces). The engine keeps its own (telemetry, prefetch) and fans out.
    // Each add returns an id for remove_listener (a calibration run from the
    // app removes its own when done; unknown ids are ignored).
    using ListenerId = uint64_t;
    ListenerId add_routing_listener(model::RoutingObserver obs);
    ListenerId add_lookahead_listener(model::LookaheadObserver obs);
    void remove_listener(ListenerId id);
    size_t listener_count() const { return route_listeners_.size() + lookahead_listeners_.size(); }

    // With settings.trace_file: the token ids of the next forward pass (from
    // position first_pos on) go into the trace with it. Without: nothing.
    void trace_tokens(int64_t first_pos, std::span<const int32_t> ids);
    // Ends the trace now: writes its end record and closes it (the destructor
    // does the same but can only log a failure). Throws strata::Error when a
    // write failed. Returns what it holds; all zero without a trace.
    struct TraceCounts {
        int64_t routes = 0, lookaheads = 0;
        uint64_t bytes = 0;
    };
    TraceCounts finish_trace();

    // Warm-up for benchmarks: loads every pinned expert and waits for the
    // transfer threads to go idle.
    void wait_idle();

    // Which device computes and why ("device auto: the CPU, because ...").
    const std::string& device() const { return device_; }
    // The GPU the forward pass runs on, or -1 (the CPU).
    int gpu_index() const { return gpu_index_; }
    // The expert cache's counts, from the CPU's expert store or the GPU's cache.
    experts::ExpertStoreStats expert_stats() const;
    // The GPU forward pass's own counts (hybrid placement's paths, its rates);
    // zeros on the CPU.
    model::DeviceExpertStats device_expert_stats() const;
    // What the CPU kernels were tuned to at load, and whether measured or cached.
    const KernelTuningReport& kernel_tuning() const { return kernel_tuning_; }

private:
    Engine() = default;
    using Report = std::function<void(std::string_view stage, double fraction)>;
    // What every load does once the forward pass exists: observers, trace, prefetch.
    void finish_load(const std::string& path, const Report& report);
    // Measures (or reads the cached) CPU kernel knobs for the model's bulk weight type.
    void tune_cpu_kernels();
    // The GPU's part of load(): plan against VRAM, the KV tables, the CUDA
    // forward pass, then its self-check against the CPU, whose mismatch goes
    // to *mismatch (the caller then loads on the CPU). engine_gpu.cpp.
    Error no_cache_error() const;
    static void load_on_gpu(Engine& eng, const std::string& path, const std::vector<experts::ExpertKey>& pinned,
                            int device, const Report& report, std::string* mismatch);
    void on_route(const model::RoutingEvent& e);
    void on_lookahead(const model::LookaheadEvent& e);
    void on_step(int64_t n_tokens, double seconds);
    void on_step_begin(int64_t n_tokens);
    // `key`: token_key(sequence, position) of the token the prediction is for.
    void issue_prefetch(int64_t layer, int64_t key);
    static int64_t token_key(int32_t seq, int64_t pos) { return (static_cast<int64_t>(seq) << 40) | pos; }
    // Only one-token steps prefetch. Measured on the demo model at 50% cache:
    // prefetching in batched decode steps too (up to 16 tokens) raised the hit
    // rate (0.595 -> 0.651 at 4 sequences) but cost 13% more disk reads and
    // 20-30% of the throughput, the disk being the bound.
    static constexpr int64_t kMaxPrefetchStep = 1;
    void install_lookahead();

    EngineSettings settings_;
    std::string device_;
    KernelTuningReport kernel_tuning_;
    int gpu_index_ = -1;
    std::unique_ptr<model::Model> model_;
    std::optional<chat::ChatTemplate> chat_template_;
    memory::Plan plan_;
    memory::Ledger ledger_;
    std::unique_ptr<ResidentWeights> resident_;
    std::unique_ptr<kv::KvCache> kv_;
    std::unique_ptr<experts::ExpertStore> store_;
    // The expert cache, whichever device holds it: store_ (RAM) or the GPU
    // pass's VRAM slots (in ctx_); null for a dense model or every expert resident in RAM.
    experts::ExpertCache* cache_ = nullptr;
    // On a GPU with three tiers: host RAM's cache of experts over the model
    // file, which the GPU forward pass (in ctx_, destroyed first) reads.
    std::unique_ptr<experts::ExpertStore> host_cache_;
    std::unique_ptr<model::Context> ctx_;
    std::unique_ptr<experts::Predictor> predictor_;
    std::unique_ptr<experts::TraceWriter> trace_;
    int prefetch_width_ = 0;
    // NUMA bind pinned the loading thread (the one that computes): its mask
    // before, restored when the engine goes.
    bool pinned_thread_ = false;
    std::vector<int> saved_cpus_;
    // issue_prefetch()'s buffers, kept so the per-token path allocates nothing.
    std::vector<experts::ExpertPrediction> predictions_;
    std::vector<experts::ExpertKey> prefetch_keys_;
    // Noticing a sequence that starts over (a cleared context, or a sequence
    // id reused by the scheduler): its first routing or lookahead event in a
    // forward pass (whichever layer comes first) is at a position not past
    // those of its earlier passes. Noticed there, before that event reaches
    // the trace, so the trace's sequence record precedes the pass. Per
    // sequence: the pass it was last seen in and the highest position since
    // it (re)started.
    struct SeqMark {
        int64_t step = -1, max = -1;
    };
    void note_token(int32_t seq, int64_t pos);
    std::unordered_map<int32_t, SeqMark> seq_marks_;
    int64_t step_index_ = 0;      // forward passes begun
    int64_t step_tokens_ = 0;     // tokens in the forward pass under way
    std::vector<std::pair<ListenerId, model::RoutingObserver>> route_listeners_;
    std::vector<std::pair<ListenerId, model::LookaheadObserver>> lookahead_listeners_;
    ListenerId next_listener_ = 1;

    // Telemetry state (engine thread writes, snapshot() reads).
    mutable std::mutex tele_mu_;
    std::vector<float> heat_;
    int64_t heat_layer_ = -1;     // the first MoE layer: one event there = one token
    int64_t tokens_ = 0;
    double compute_seconds_ = 0.0;
    struct Window {
        uint64_t demanded, hits;
        int64_t tokens;
    };
    // The last >= 64 tokens' windows, oldest first: a vector used as a short
    // queue (at most kRecentMax entries, reserved at load, so pushing and
    // popping never allocates; a deque allocates and frees blocks as it moves).
    static constexpr size_t kRecentMax = 128;
    std::vector<Window> recent_;
    experts::ExpertStoreStats last_stats_{};
};

// The plan settings Engine::load uses for these engine settings and this many
// pinned experts (so the app and the CLI show the plan the engine will make).
memory::PlanSettings plan_settings(const EngineSettings& s, int64_t pinned_experts);

// Reads a calibration file (strata-cli calibrate) and returns the pinned
// experts as keys (layer * n_expert + expert). Throws strata::Error for an
// unreadable file or one made for another model.
std::vector<experts::ExpertKey> read_pin_file(const std::string& path, const model::Model& m);

}  // namespace strata::core
