#include "serve/serve_loop.h"

#include <algorithm>
#include <future>

#include "common/log.h"
#include "core/engine.h"
#include "sched/embedding.h"

namespace strata::serve {

ServeLoop::ServeLoop(core::Engine& engine, const ServeLoopConfig& config)
    : eng_(engine),
      cfg_(config),
      core_(std::make_unique<EngineCore>(engine, config.scheduler)),
      seeds_(std::random_device{}()) {
    if (cfg_.max_queue < 0) throw Error("the queue limit must not be negative");
    if (!cfg_.speculation.draft.empty()) core_->prepare_draft(cfg_.speculation.draft);  // fails here, not per request
    publish_gauges();
    thread_ = std::thread([this] { run(); });
}

ServeLoop::~ServeLoop() { shutdown(); }

void ServeLoop::shutdown() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ServeLoop::submit(const CompletionRequest& request, std::shared_ptr<Channel> ch) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) {
            ch->reject(ApiError{503, "the server is shutting down", "server_error", "", ""});
            return;
        }
        inbox_.push_back({request, std::move(ch)});
    }
    cv_.notify_all();
}

std::vector<std::vector<float>> ServeLoop::embed(const EmbeddingRequest& request, int64_t* prompt_tokens) {
    // Computed on the engine thread, which owns the model; this thread waits.
    std::promise<std::vector<std::vector<float>>> done;
    auto result = done.get_future();
    int64_t tokens = 0;
    auto job = [&] {
        try {
            std::vector<std::vector<float>> out;
            for (size_t i = 0; i < request.size(); ++i) {
                const std::vector<int32_t> ids =
                    request.texts.empty() ? request.token_inputs[i] : eng_.vocab().encode(request.texts[i], true);
                if (static_cast<int64_t>(ids.size()) > eng_.context().n_ctx())
                    throw ApiException{ApiError{400, "input " + std::to_string(i) + " has " + std::to_string(ids.size()) +
                                                         " tokens, more than the context holds (" +
                                                         std::to_string(eng_.context().n_ctx()) + ")",
                                                "invalid_request_error", "input", "context_length_exceeded"}};
                if (eng_.kv_cache().params().blocks_for(static_cast<int64_t>(ids.size())) > eng_.kv_cache().available_blocks())
                    throw ApiException{ApiError{503, "the KV cache is busy with the requests running now; retry shortly",
                                                "server_error", "", "server_busy"}};
                out.push_back(sched::embed(eng_.context(), ids));
                tokens += static_cast<int64_t>(ids.size());
            }
            done.set_value(std::move(out));
        } catch (const ApiException&) {
            done.set_exception(std::current_exception());
        } catch (const Error& e) {
            done.set_exception(std::make_exception_ptr(
                ApiException{ApiError{400, e.what(), "invalid_request_error", "input", ""}}));
        }
    };
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) throw ApiException{ApiError{503, "the server is shutting down", "server_error", "", ""}};
        jobs_.push_back(job);
    }
    cv_.notify_all();
    std::vector<std::vector<float>> out = result.get();  // rethrows the job's ApiException
    *prompt_tokens = tokens;
    return out;
}

void ServeLoop::notify_cancelled() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        wake_ = true;
    }
    cv_.notify_all();
}

std::string ServeLoop::metrics_text(bool per_expert) const {
    return metrics_.render(eng_.snapshot(), cfg_.card.id, per_expert);
}

void ServeLoop::run() {
    for (;;) {
        std::deque<Incoming> incoming;
        std::deque<std::function<void()>> jobs;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || wake_ || !inbox_.empty() || !jobs_.empty() || !live_.empty(); });
            if (stop_) break;
            wake_ = false;
            incoming.swap(inbox_);
            jobs.swap(jobs_);
        }
        for (auto& job : jobs) job();
        for (Incoming& in : incoming) admit(in);
        cancel_gone();
        if (!live_.empty()) step();
        publish_gauges();
    }
    // Shutting down: nothing new is accepted; what was queued or running ends.
    std::deque<Incoming> left;
    {
        std::lock_guard<std::mutex> lk(mu_);
        left.swap(inbox_);
    }
    for (Incoming& in : left) in.ch->reject(ApiError{503, "the server is shutting down", "server_error", "", ""});
    std::deque<std::function<void()>> jobs;
    {
        std::lock_guard<std::mutex> lk(mu_);
        jobs.swap(jobs_);
    }
    for (auto& job : jobs) job();  // their callers are waiting: answered, not dropped
    for (Live& l : live_) l.ch->finish("cancelled", 0);
    live_.clear();
    core_.reset();
}

void ServeLoop::admit(Incoming& in) {
    if (in.ch->cancelled()) return;  // the client left before we got to it
    const int limit = cfg_.scheduler.max_batch + cfg_.max_queue;
    if (static_cast<int>(live_.size()) >= limit) {
        metrics_.rejected(429);
        in.ch->reject(ApiError{429,
                               "the server is busy: " + std::to_string(live_.size()) +
                                   " requests are running or queued (the limit); retry shortly",
                               "server_busy", "", "queue_full"});
        return;
    }
    try {
        PreparedRequest p = prepare_request(in.request, eng_.vocab(), core_->chat_template(), eng_.context().n_ctx(), seeds_());
        const int64_t n_prompt = static_cast<int64_t>(p.tokens.size());
        std::shared_ptr<Channel> ch = in.ch;
        auto on_text = [ch](std::string_view text) { ch->text(text); };
        auto on_finish = [this, ch](const sched::RequestResult& r) {
            const std::string finish = openai_finish(r.finish);
            const auto n = static_cast<int64_t>(r.tokens.size());
            metrics_.finished(finish, r.prompt_tokens, n, n > 0 ? r.ttft_s : -1.0);
            // The request's KV blocks are free by now (Scheduler::finish): the
            // gauges say so before its client hears the end, so /metrics read
            // after a response never shows the blocks it held.
            publish_gauges();
            ch->finish(finish, n);
        };
        auto on_failed = [this, ch](const std::string& why) {
            metrics_.rejected(500);
            ch->reject(ApiError{500, "the engine failed: " + why, "server_error", "", ""});
        };
        // A grammar's sampler gives no distribution to verify drafts against: those go to the batch.
        const bool speculate = !cfg_.speculation.draft.empty() && !p.sampling.grammar;
        const int64_t id = core_->submit(std::move(p.tokens), p.sampling,
                                         {on_text, on_finish, on_failed, [ch] { return ch->cancelled(); }},
                                         speculate ? &cfg_.speculation : nullptr);
        live_.push_back({id, ch});
        ch->set_tool_syntax(core_->chat_template().tool_syntax());
        ch->accept(n_prompt);
    } catch (const ApiException& e) {
        metrics_.rejected(e.error.status);
        in.ch->reject(e.error);
    } catch (const Error& e) {
        metrics_.rejected(400);
        in.ch->reject(ApiError{400, e.what(), "invalid_request_error", "", ""});
    } catch (const std::exception& e) {  // a defect, not the client's: that request fails, the server goes on
        metrics_.rejected(500);
        in.ch->reject(ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", ""});
    }
}

void ServeLoop::cancel_gone() {
    for (const Live& l : live_)
        if (l.ch->cancelled()) core_->cancel(l.id);
}

void ServeLoop::step() {
    // A failed forward pass fails every request in flight with the reason
    // (their channels end) and the core starts its scheduler over.
    core_->step();
    const int64_t generated = core_->scheduler().stats().tokens_generated;
    if (generated < generated_seen_) generated_seen_ = 0;  // a fresh scheduler
    metrics_.generated(generated - generated_seen_);
    generated_seen_ = generated;
    // Finished channels leave the live list (the finish callback ran in step()).
    live_.erase(std::remove_if(live_.begin(), live_.end(), [](const Live& l) { return l.ch->ended(); }), live_.end());
}

ServeGauges measure_gauges(core::Engine& engine, const sched::Scheduler* sched) {
    ServeGauges g;
    if (sched) {
        g.running = static_cast<int64_t>(sched->running());
        g.waiting = static_cast<int64_t>(sched->waiting());
    }
    const kv::KvStats kv = engine.kv_cache().stats();
    g.kv_blocks_used = kv.used_blocks;
    g.kv_blocks_total = kv.n_blocks;
    g.kv_block_tokens = engine.kv_cache().params().block_tokens;
    return g;
}

void ServeLoop::publish_gauges() { metrics_.set_gauges(measure_gauges(eng_, core_ ? &core_->scheduler() : nullptr)); }

}  // namespace strata::serve
