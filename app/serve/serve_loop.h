// `strata-cli serve`'s backend: one engine, one continuous-batching scheduler,
// and the engine thread that owns both. HTTP threads hand requests over
// through a locked inbox and wait on their channels; everything that touches
// the model (tokenizing, the template, the scheduler) happens on the engine
// thread, so concurrent requests are batched into shared forward passes.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "sched/scheduler.h"
#include "strata/engine_core.h"
#include "serve/backend.h"
#include "serve/metrics.h"

namespace strata::core {
class Engine;
}

namespace strata::serve {

struct ServeLoopConfig {
    sched::SchedulerConfig scheduler;
    // Requests waiting beyond the running batch; one more is answered 429.
    int max_queue = 64;
    ModelCard card;
    // Speculative decoding (draft "" for none): requests then run one at a
    // time with the draft, except those with a grammar (JSON output,
    // required tool calls), which the batch serves as before.
    EngineCore::Speculation speculation;
};

class ServeLoop final : public Backend {
public:
    // Starts the engine thread. The engine must outlive the loop.
    ServeLoop(core::Engine& engine, const ServeLoopConfig& config);
    ~ServeLoop() override;  // shutdown()
    // Ends what is queued (503) and running (finish "cancelled", so streams
    // close at once) and joins the engine thread; later requests get 503.
    void shutdown();

    std::vector<ModelCard> models() const override { return {cfg_.card}; }
    void submit(const CompletionRequest& request, std::shared_ptr<Channel> ch) override;
    void notify_cancelled() override;
    std::string metrics_text(bool per_expert) const override;
    std::vector<std::vector<float>> embed(const EmbeddingRequest& request, int64_t* prompt_tokens) override;

    const ServeMetrics& metrics() const { return metrics_; }

private:
    struct Live {
        int64_t id = 0;
        std::shared_ptr<Channel> ch;
    };
    struct Incoming {
        CompletionRequest request;
        std::shared_ptr<Channel> ch;
    };
    void run();
    void admit(Incoming& in);
    void cancel_gone();
    void step();
    void publish_gauges();

    core::Engine& eng_;
    ServeLoopConfig cfg_;
    std::unique_ptr<EngineCore> core_;
    std::mt19937_64 seeds_;
    ServeMetrics metrics_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Incoming> inbox_;
    std::deque<std::function<void()>> jobs_;  // run on the engine thread between steps (embeddings)
    bool stop_ = false;
    bool wake_ = false;

    std::vector<Live> live_;  // engine thread only
    int64_t generated_seen_ = 0;
    std::thread thread_;
};

// The queue and KV cache as /metrics shows them; `sched` may be null (none yet).
ServeGauges measure_gauges(core::Engine& engine, const sched::Scheduler* sched);

}  // namespace strata::serve
