#include "strata/engine_core.h"

#include <chrono>
#include <deque>
#include <map>
#include <mutex>

#include "chat/chat_template.h"
#include "chat/prompt.h"
#include "common/error.h"
#include "common/log.h"
#include "core/calibration.h"
#include "core/draft.h"
#include "core/engine.h"
#include "sched/scheduler.h"
#include "sched/speculative.h"

namespace strata {


struct EngineCore::Impl {
    core::Engine& engine;
    sched::SchedulerConfig config;
    const chat::ChatTemplate& tmpl;  // the engine's
    std::unique_ptr<sched::Scheduler> sched;
    int pending_max_batch = 0;
    // Each live request's failure callback (finished ones leave in their finish callback).
    std::map<int64_t, std::function<void(const std::string&)>> live;

    // Speculative requests, run one at a time when the scheduler is idle
    // (their own id range), and the draft the last one used.
    struct SpecRequest {
        int64_t id = 0;
        std::vector<int32_t> prompt;
        sched::SamplingParams params;
        Speculation spec;
        Callbacks cb;
        std::chrono::steady_clock::time_point submitted;
    };
    std::deque<SpecRequest> spec_queue;
    int64_t next_spec_id = int64_t(1) << 48;
    core::Draft draft;
    std::string draft_key;

    Impl(core::Engine& e, const sched::SchedulerConfig& c)
        : engine(e), config(c), tmpl(e.chat_template()),
          sched(std::make_unique<sched::Scheduler>(e.context(), e.vocab(), c)) {}

    void fail_all(const std::string& why) {
        std::map<int64_t, std::function<void(const std::string&)>> gone;
        gone.swap(live);
        std::deque<SpecRequest> queued;
        queued.swap(spec_queue);
        sched = std::make_unique<sched::Scheduler>(engine.context(), engine.vocab(), config);
        for (auto& [id, failed] : gone)
            if (failed) failed(why);
        for (SpecRequest& r : queued)
            if (r.cb.failed) r.cb.failed(why);
    }

    void run_speculative(SpecRequest& r);
    // The draft `text` names, made unless it is the one kept. Throws strata::Error.
    void use_draft(const std::string& text) {
        const core::DraftSpec d = core::DraftSpec::parse(text);
        if (!d.on()) throw Error("no draft named for speculative decoding");
        if (d.key() == draft_key && draft.drafter) return;
        draft = {};
        draft_key.clear();
        draft = core::make_draft(d, engine, engine.settings().threads);
        draft_key = d.key();
    }
};

// The whole answer of one speculative request, on the context's default
// sequence (the scheduler is idle), then the context cleared again.
void EngineCore::Impl::run_speculative(SpecRequest& r) {
    model::Context& ctx = engine.context();
    try {
        use_draft(r.spec.draft);
        ctx.clear();
        if (draft.ctx) draft.ctx->clear();
        sched::SpeculativeParams sp;
        sp.k = std::max(1, r.spec.k);
        sp.k_max = std::max(2 * sp.k, 1);
        sp.p_min = r.spec.p_min;
        sched::SpeculativeStats st;
        auto sink = [&r](std::string_view piece) {
            if (r.cb.text) r.cb.text(piece);
            return !(r.cb.cancelled && r.cb.cancelled());
        };
        const sched::GenerationResult g =
            sched::generate_speculative(ctx, *draft.drafter, engine.vocab(), r.params, r.prompt, sp, &st, sink);
        ctx.clear();
        if (draft.ctx) draft.ctx->clear();
        sched::RequestResult res;
        res.id = r.id;
        res.tokens = g.tokens;
        res.text = g.text;
        res.finish = g.finish;
        res.prompt_tokens = g.prompt_tokens;
        res.prefix_reused = g.prefix_reused;
        res.ttft_s = g.prompt_seconds;
        res.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.submitted).count();
        res.decode_tok_s = g.decode_tok_s();
        res.spec_acceptance = st.acceptance();
        res.spec_drafted = st.drafted;
        if (r.cb.finished) r.cb.finished(res);
    } catch (const std::exception& e) {
        ctx.clear();
        if (draft.ctx) draft.ctx->clear();
        logger("engine")->warn("speculative generation failed: {}", e.what());
        if (r.cb.failed) r.cb.failed(e.what());
    }
}

EngineCore::EngineCore(core::Engine& engine, const sched::SchedulerConfig& config)
    : impl_(std::make_unique<Impl>(engine, config)) {}

EngineCore::~EngineCore() = default;

const chat::ChatTemplate& EngineCore::chat_template() const { return impl_->tmpl; }

chat::Prompt EngineCore::prepare(const std::vector<chat::Message>& messages, bool drop_oldest, int64_t answer_room,
                                 const nlohmann::ordered_json* tools) const {
    const int64_t n_ctx = impl_->engine.context().n_ctx();
    return chat::prepare_prompt(messages, impl_->tmpl, impl_->engine.vocab(), {n_ctx, drop_oldest, answer_room}, tools);
}

int64_t EngineCore::submit(std::vector<int32_t> prompt, const sched::SamplingParams& params, Callbacks cb,
                           const Speculation* speculation) {
    Impl& s = *impl_;
    if (speculation) {
        if (prompt.empty()) throw Error("empty prompt");
        if (const std::string err = params.validate(); !err.empty()) throw Error(err);
        Impl::SpecRequest r;
        r.id = s.next_spec_id++;
        r.prompt = std::move(prompt);
        r.params = params;
        r.spec = *speculation;
        r.cb = std::move(cb);
        r.submitted = std::chrono::steady_clock::now();
        s.spec_queue.push_back(std::move(r));
        return s.spec_queue.back().id;
    }
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

void EngineCore::prepare_draft(const std::string& draft) { impl_->use_draft(draft); }

void EngineCore::cancel(int64_t id) {
    Impl& s = *impl_;
    for (auto it = s.spec_queue.begin(); it != s.spec_queue.end(); ++it) {
        if (it->id != id) continue;
        Impl::SpecRequest r = std::move(*it);
        s.spec_queue.erase(it);
        sched::RequestResult res;  // still queued: ends with nothing said
        res.id = id;
        res.finish = sched::FinishReason::Cancelled;
        res.prompt_tokens = static_cast<int64_t>(r.prompt.size());
        if (r.cb.finished) r.cb.finished(res);
        return;
    }
    s.sched->cancel(id);
}

bool EngineCore::step() {
    Impl& s = *impl_;
    if (s.sched->idle()) {
        if (s.spec_queue.empty()) return false;
        Impl::SpecRequest r = std::move(s.spec_queue.front());
        s.spec_queue.pop_front();
        s.run_speculative(r);
        return true;
    }
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

bool EngineCore::idle() const { return impl_->sched->idle() && impl_->spec_queue.empty(); }
size_t EngineCore::running() const { return impl_->sched->running(); }
size_t EngineCore::waiting() const { return impl_->sched->waiting() + impl_->spec_queue.size(); }

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

core::Calibration EngineCore::calibrate(const std::vector<std::string>& prompts, const core::CalibrationOptions& options,
                                        const std::function<bool(size_t, size_t)>& progress) {
    if (!idle()) throw Error("answers are being generated: calibrate when they are done");
    struct Fresh {  // the context's default sequence was used: the scheduler starts afresh, however it ended
        Impl& s;
        ~Fresh() { s.fail_all("the engine calibrated"); }
    } fresh{*impl_};
    return core::calibrate(impl_->engine, prompts, options, progress);
}

TelemetrySnapshot EngineCore::snapshot() const { return impl_->engine.snapshot(); }

const sched::Scheduler& EngineCore::scheduler() const { return *impl_->sched; }

}  // namespace strata
