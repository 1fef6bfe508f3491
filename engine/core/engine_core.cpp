#include "strata/engine_core.h"

#include <map>
#include <mutex>

#include "chat/chat_template.h"
#include "chat/prompt.h"
#include "common/error.h"
#include "common/log.h"
#include "core/engine.h"
#include "sched/scheduler.h"

namespace strata {


struct EngineCore::Impl {
    core::Engine& engine;
    sched::SchedulerConfig config;
    const chat::ChatTemplate& tmpl;  // the engine's
    std::unique_ptr<sched::Scheduler> sched;
    int pending_max_batch = 0;
    // Each live request's failure callback (finished ones leave in their finish callback).
    std::map<int64_t, std::function<void(const std::string&)>> live;

    Impl(core::Engine& e, const sched::SchedulerConfig& c)
        : engine(e), config(c), tmpl(e.chat_template()),
          sched(std::make_unique<sched::Scheduler>(e.context(), e.vocab(), c)) {}

    void fail_all(const std::string& why) {
        std::map<int64_t, std::function<void(const std::string&)>> gone;
        gone.swap(live);
        sched = std::make_unique<sched::Scheduler>(engine.context(), engine.vocab(), config);
        for (auto& [id, failed] : gone)
            if (failed) failed(why);
    }
};

EngineCore::EngineCore(core::Engine& engine, const sched::SchedulerConfig& config)
    : impl_(std::make_unique<Impl>(engine, config)) {}

EngineCore::~EngineCore() = default;

const chat::ChatTemplate& EngineCore::chat_template() const { return impl_->tmpl; }

chat::Prompt EngineCore::prepare(const std::vector<chat::Message>& messages, bool drop_oldest, int64_t answer_room,
                                 const nlohmann::ordered_json* tools) const {
    const int64_t n_ctx = impl_->engine.context().n_ctx();
    return chat::prepare_prompt(messages, impl_->tmpl, impl_->engine.vocab(), {n_ctx, drop_oldest, answer_room}, tools);
}

int64_t EngineCore::submit(std::vector<int32_t> prompt, const sched::SamplingParams& params, Callbacks cb) {
    Impl& s = *impl_;
    // The id is known only once submitted; the finish callback looks it up then.
    auto id_box = std::make_shared<int64_t>(-1);
    auto finished = [&s, id_box, done = std::move(cb.finished)](const sched::RequestResult& r) {
        auto it = s.live.find(*id_box);
        std::function<void(const std::string&)> failed;
        if (it != s.live.end()) {
            failed = std::move(it->second);
            s.live.erase(it);
        }
        if (!r.error.empty() && failed) return failed(r.error);
        if (done) done(r);
    };
    auto text = [t = std::move(cb.text)](int64_t, std::string_view piece) {
        if (t) t(piece);
    };
    const int64_t id = s.sched->submit(std::move(prompt), params, 0, std::move(text), std::move(finished));
    *id_box = id;
    s.live[id] = std::move(cb.failed);
    return id;
}

void EngineCore::cancel(int64_t id) { impl_->sched->cancel(id); }

bool EngineCore::step() {
    Impl& s = *impl_;
    if (s.sched->idle()) return false;
    try {
        s.sched->step();
    } catch (const std::exception& e) {
        // The forward pass failed (a device error, an I/O error on the model
        // file): the scheduler's state is unknown, so every request in flight
        // ends with the reason and the scheduler starts over, its KV blocks freed.
        logger("engine")->error("a forward pass failed: {}", e.what());
        s.fail_all(e.what());
        return false;
    }
    if (s.pending_max_batch > 0 && s.sched->idle()) {
        s.config.max_batch = s.pending_max_batch;
        s.pending_max_batch = 0;
        s.sched = std::make_unique<sched::Scheduler>(s.engine.context(), s.engine.vocab(), s.config);
    }
    return true;
}

bool EngineCore::idle() const { return impl_->sched->idle(); }
size_t EngineCore::running() const { return impl_->sched->running(); }
size_t EngineCore::waiting() const { return impl_->sched->waiting(); }

std::optional<std::pair<int64_t, int64_t>> EngineCore::prompt_progress(int64_t id) const {
    const auto p = impl_->sched->prompt_progress(id);
    if (!p) return std::nullopt;
    return std::make_pair(p->done, p->total);
}

void EngineCore::set_max_batch(int n) {
    Impl& s = *impl_;
    if (n < 1 || n > 4096) throw Error("max batch " + std::to_string(n) + " is out of range (1..4096)");
    if (s.sched->idle()) {
        s.config.max_batch = n;
        s.pending_max_batch = 0;
        s.sched = std::make_unique<sched::Scheduler>(s.engine.context(), s.engine.vocab(), s.config);
    } else {
        s.pending_max_batch = n;
    }
}

int EngineCore::max_batch() const { return impl_->config.max_batch; }

void EngineCore::restart(const std::string& why) { impl_->fail_all(why); }

TelemetrySnapshot EngineCore::snapshot() const { return impl_->engine.snapshot(); }

const sched::Scheduler& EngineCore::scheduler() const { return *impl_->sched; }

}  // namespace strata
