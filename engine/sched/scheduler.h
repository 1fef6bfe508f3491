// Continuous batching over one Context and its paged KV cache (vLLM's
// scheduler, as one plain object): requests wait in a queue, up to max_batch
// run at once, and every step() is one forward pass that carries one token for
// each decoding request plus chunks of the prompts being prefilled, within a
// token budget. A request's KV blocks are released in the step it finishes.
//
// Policies:
// - Admission order: effective priority (the request's priority, minus one
//   while its sequence is longer than long_threshold tokens), then, with
//   group_by_experts, the waiting request whose predicted experts overlap most
//   with those of the running batch (so one fetched expert serves more
//   tokens), then arrival order.
// - Batch forming: with an empty running set, admission waits up to
//   batch_timeout for the queue to fill the batch (0: never waits).
// - KV exhaustion: when the next step's blocks are not free, the running
//   request with the lowest effective priority (the latest admitted among
//   equals) is preempted: its blocks are freed and it goes back to the front
//   of the queue with what it has generated; it is recomputed when admitted
//   again and continues where it was, without re-emitting text. A request
//   that cannot fit even alone ends with finish reason "context".
// - Prefix sharing: an admitted request first attaches the cached KV blocks
//   of any earlier request that began with the same tokens.
//
// Threads: submit() and cancel() may be called from any thread; step() and
// run() belong to the engine thread, which is where callbacks are made.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <vector>

#include "kv/kv_cache.h"
#include "sched/sampler.h"
#include "sched/token_stream.h"

namespace strata::model {
class Context;
}
namespace strata::tok {
class Vocab;
}

namespace strata::sched {

struct SchedulerConfig {
    int max_batch = 16;                  // requests running at once
    int64_t max_step_tokens = 0;         // tokens per forward pass; 0: the context's n_batch
    int64_t prefill_chunk = 0;           // most prompt tokens of one request per step; 0: no limit
    int64_t long_threshold = 0;          // sequences longer than this lose one priority level; 0: off
    double batch_timeout_s = 0.0;        // admission wait to fill an empty batch
    bool group_by_experts = true;
    bool prefix_sharing = true;

    std::string validate() const;        // empty when valid
};

struct RequestResult {
    int64_t id = 0;
    std::vector<int32_t> tokens;
    std::string text;
    FinishReason finish = FinishReason::MaxTokens;
    int64_t prompt_tokens = 0;
    int64_t prefix_reused = 0;           // prompt tokens taken from shared KV blocks
    int preemptions = 0;
    double queue_s = 0.0;                // submit -> first admitted
    double ttft_s = 0.0;                 // submit -> first token
    std::vector<double> itl_s;           // gaps between consecutive tokens
    double total_s = 0.0;                // submit -> finished
    // Set when this request alone failed (its grammar could not go on): it
    // ended there; the others in the batch were not disturbed.
    std::string error;
    // A speculative request (strata::EngineCore): its tokens come in rounds,
    // so itl_s is empty; the decode rate and the draft's figures instead.
    double decode_tok_s = 0.0;
    double spec_acceptance = -1.0;  // share of draft tokens kept; -1: not speculative
    int64_t spec_drafted = 0;
};

struct SchedulerStats {
    int64_t steps = 0;
    int64_t tokens_forwarded = 0;        // prompt + generated tokens through the model
    int64_t tokens_generated = 0;
    int64_t preemptions = 0;
    int64_t finished = 0;
    double busy_s = 0.0;                 // time inside forward passes
};

class Scheduler {
public:
    using TokenCallback = std::function<void(int64_t id, std::string_view text)>;
    using FinishCallback = std::function<void(const RequestResult&)>;

    // Throws strata::Error for an invalid config.
    Scheduler(model::Context& ctx, const tok::Vocab& vocab, const SchedulerConfig& config);
    ~Scheduler();

    // Queues a request and returns its id. Throws strata::Error for an empty
    // prompt, one that leaves no room to generate within the context, or bad
    // sampling parameters.
    int64_t submit(std::vector<int32_t> prompt, const SamplingParams& params, int priority = 0,
                   TokenCallback on_text = {}, FinishCallback on_finish = {});
    // Ends a request at the next step (waiting or running); unknown ids are ignored.
    void cancel(int64_t id);

    // One scheduling round and (if anything is runnable) one forward pass.
    // Returns false when there is nothing left to do.
    bool step();
    // step() until every submitted request has finished.
    void run();

    size_t waiting() const;
    size_t running() const { return running_.size(); }
    // How far request `id` has read its prompt: tokens in its KV cache (a
    // reused prefix counts) of the prompt's; {0, n} while it waits; nullopt
    // once it has a first token, or for an unknown id. Same thread as step().
    struct PromptProgress {
        int64_t done = 0, total = 0;
    };
    std::optional<PromptProgress> prompt_progress(int64_t id) const;
    bool idle() const;
    const SchedulerStats& stats() const { return stats_; }
    const SchedulerConfig& config() const { return cfg_; }

private:
    struct Request;
    using Clock = std::chrono::steady_clock;

    void take_inbox();
    void admit();
    bool build_batch();
    void preempt_one();
    void finish(Request& r, FinishReason why);
    int effective_priority(const Request& r) const;
    std::vector<float> expert_signature(const std::vector<int32_t>& prompt) const;
    double overlap(const Request& r) const;

    model::Context& ctx_;
    const tok::Vocab& vocab_;
    SchedulerConfig cfg_;
    int64_t step_tokens_ = 0;

    mutable std::mutex inbox_mu_;
    std::vector<std::unique_ptr<Request>> inbox_;
    std::vector<int64_t> cancels_;
    int64_t next_id_ = 1;

    std::deque<std::unique_ptr<Request>> waiting_;
    std::vector<std::unique_ptr<Request>> running_;
    int64_t admit_counter_ = 0;

    // The batch being formed.
    std::vector<int32_t> batch_tokens_;
    std::vector<kv::SeqId> batch_seqs_;
    std::vector<uint8_t> batch_want_;
    std::vector<Request*> batch_owner_;      // per logits row

    SchedulerStats stats_;
};

}  // namespace strata::sched
