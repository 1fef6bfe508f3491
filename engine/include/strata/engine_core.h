// One engine core for every front end: the app's worker (app/desktop) and
// the HTTP server (app/serve) are thin adapters over it. It owns the
// scheduler (continuous batching) over a loaded engine's context, prepares a
// conversation's prompt the same way for both (the model's template, the
// oldest turns left out where the front end allows, one BOS), steps, cancels,
// and recovers from a failed forward pass: every request in flight is told
// why and the scheduler starts afresh.
//
// One thread drives it (the worker's, the server loop's): every call from there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "strata/telemetry.h"

namespace strata {
namespace core {
class Engine;
}
namespace sched {
struct SamplingParams;
struct RequestResult;
struct SchedulerConfig;
class Scheduler;
}  // namespace sched
namespace chat {
struct Message;
struct Prompt;
class ChatTemplate;
}  // namespace chat

namespace core {
struct Calibration;
struct CalibrationOptions;
}  // namespace core

class EngineCore {
public:
    struct Callbacks {
        std::function<void(std::string_view text)> text;              // each piece of the answer
        std::function<void(const sched::RequestResult&)> finished;    // it ended (stop, length, cancelled)
        // The engine failed while it ran (a device or I/O error): it is over.
        std::function<void(const std::string& why)> failed;
        // Polled while a speculative request runs (it holds the engine for
        // its whole answer, so cancel() cannot reach it): true ends it, cancelled.
        std::function<bool()> cancelled;
    };

    // Speculative decoding for one request (sched/speculative.h), run when
    // no other request is in flight, one at a time: `draft` as
    // core::DraftSpec::parse reads it ("mtp", "self:layers=N,experts=K", a
    // GGUF path; made once and kept while requests name the same), k draft
    // tokens a round (adapting in 1..2k), p_min as --spec-p-min.
    struct Speculation {
        std::string draft;
        int k = 4;
        float p_min = 0.0f;
    };

    // Throws strata::Error for a bad scheduler config.
    EngineCore(core::Engine& engine, const sched::SchedulerConfig& config);
    ~EngineCore();
    EngineCore(const EngineCore&) = delete;
    EngineCore& operator=(const EngineCore&) = delete;

    // The model's chat template (detected from the GGUF, or the fallback).
    const chat::ChatTemplate& chat_template() const;
    // A conversation's prompt, as every front end prepares it
    // (chat::prepare_prompt): with drop_oldest (a conversation that goes on)
    // the oldest turns give way until the prompt and answer_room tokens fit;
    // without, a prompt too long is a chat::PromptError. `tools`: OpenAI
    // function definitions offered to the model (nullptr: none).
    chat::Prompt prepare(const std::vector<chat::Message>& messages, bool drop_oldest, int64_t answer_room,
                         const nlohmann::ordered_json* tools = nullptr) const;

    // Queues a request; returns its id. Throws strata::Error for an empty
    // prompt, one with no room to answer, or bad sampling parameters.
    // `speculation`: decode it speculatively (a draft that cannot be made
    // fails the request through `failed`, saying why).
    int64_t submit(std::vector<int32_t> prompt, const sched::SamplingParams& params, Callbacks callbacks,
                   const Speculation* speculation = nullptr);
    // Makes (and keeps) the draft `draft` names now, so a draft this model
    // cannot have is an error at start rather than at the first request.
    // Throws strata::Error saying why.
    void prepare_draft(const std::string& draft);
    // Ends a request at the next step (its `finished` reports cancelled); unknown ids are ignored.
    void cancel(int64_t id);
    // One scheduling round and forward pass, or, with nothing else in
    // flight, a whole speculative request. False: nothing ran, or the pass
    // failed (every request in flight got `failed`).
    bool step();
    bool idle() const;
    size_t running() const;
    size_t waiting() const;
    // How far request `id` has read its prompt (done, total), until its first token.
    std::optional<std::pair<int64_t, int64_t>> prompt_progress(int64_t id) const;
    // Requests running at once: at once when idle, else when the running ones are done.
    void set_max_batch(int n);
    int max_batch() const;
    // Starts the scheduler afresh (the context was used by something else):
    // requests in flight get `failed` with `why`.
    void restart(const std::string& why);

    // Hot-expert calibration (core/calibration.h) over `prompts`, on the
    // context the requests use: refused (strata::Error) while any request is
    // in flight; the scheduler starts afresh after it. `progress` as
    // core::calibrate's (false cancels: strata::Cancelled).
    core::Calibration calibrate(const std::vector<std::string>& prompts, const core::CalibrationOptions& options,
                                const std::function<bool(size_t done, size_t total)>& progress = {});

    TelemetrySnapshot snapshot() const;
    const sched::Scheduler& scheduler() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata
