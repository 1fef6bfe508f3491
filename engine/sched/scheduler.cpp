#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "runner/context.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

std::string SchedulerConfig::validate() const {
    if (max_batch < 1 || max_batch > 4096) return "max_batch " + std::to_string(max_batch) + " is out of range (1..4096)";
    if (max_step_tokens < 0) return "max_step_tokens must not be negative (0: the context's batch size)";
    if (prefill_chunk < 0) return "prefill_chunk must not be negative (0: no limit)";
    if (long_threshold < 0) return "long_threshold must not be negative (0: off)";
    if (!(batch_timeout_s >= 0.0 && batch_timeout_s <= 60.0)) return "batch_timeout_s must be within 0..60 seconds";
    return "";
}

struct Scheduler::Request {
    int64_t id = 0;
    int priority = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> all;          // prompt + generated: what the sequence holds once fed
    std::unique_ptr<TokenStream> stream;
    TokenCallback on_text;
    FinishCallback on_finish;
    std::vector<float> signature;      // predicted expert shares (first MoE layer)
    kv::SeqId seq = -1;                // -1 while waiting
    int64_t admitted_order = 0;
    bool cancelled = false;
    RequestResult result;
    Clock::time_point submitted, last_token;
    bool admitted_once = false;
    int64_t chunk = 0;                 // tokens of this request in the batch being formed
};

Scheduler::Scheduler(model::Context& ctx, const tok::Vocab& vocab, const SchedulerConfig& config)
    : ctx_(ctx), vocab_(vocab), cfg_(config) {
    if (const std::string err = cfg_.validate(); !err.empty()) throw Error("scheduler: " + err);
    step_tokens_ = cfg_.max_step_tokens > 0 ? std::min(cfg_.max_step_tokens, ctx.n_batch()) : ctx.n_batch();
}

Scheduler::~Scheduler() {
    for (auto& r : running_)
        if (r->seq >= 0 && ctx_.kv_cache().has_sequence(r->seq)) ctx_.kv_cache().free_sequence(r->seq);
}

int64_t Scheduler::submit(std::vector<int32_t> prompt, const SamplingParams& params, int priority, TokenCallback on_text,
                          FinishCallback on_finish) {
    if (prompt.empty()) throw Error("the prompt is empty: nothing to generate from");
    if (static_cast<int64_t>(prompt.size()) >= ctx_.n_ctx()) {
        throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens but a sequence holds at most " +
                    std::to_string(ctx_.n_ctx()) + "; shorten the prompt or raise the context size");
    }
    const int32_t n_vocab = static_cast<int32_t>(ctx_.model().config().n_vocab);
    for (int32_t t : prompt)
        if (t < 0 || t >= n_vocab) throw Error("prompt token id " + std::to_string(t) + " is out of range");
    auto r = std::make_unique<Request>();
    r->priority = priority;
    r->prompt = std::move(prompt);
    r->all = r->prompt;
    r->on_text = std::move(on_text);
    r->on_finish = std::move(on_finish);
    r->submitted = Clock::now();
    r->result.prompt_tokens = static_cast<int64_t>(r->prompt.size());
    Request* raw = r.get();
    r->stream = std::make_unique<TokenStream>(vocab_, params, n_vocab, r->prompt, [raw](std::string_view text) {
        if (raw->on_text) raw->on_text(raw->id, text);
        return true;
    });
    if (cfg_.group_by_experts) r->signature = expert_signature(r->prompt);
    std::lock_guard<std::mutex> lk(inbox_mu_);
    r->id = next_id_++;
    r->result.id = r->id;
    const int64_t id = r->id;
    inbox_.push_back(std::move(r));
    return id;
}

void Scheduler::cancel(int64_t id) {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    cancels_.push_back(id);
}

size_t Scheduler::waiting() const {
    std::lock_guard<std::mutex> lk(inbox_mu_);
    return waiting_.size() + inbox_.size();
}

bool Scheduler::idle() const { return running_.empty() && waiting() == 0; }

std::optional<Scheduler::PromptProgress> Scheduler::prompt_progress(int64_t id) const {
    for (const auto& r : running_) {
        if (r->id != id) continue;
        if (r->all.size() > r->prompt.size()) return std::nullopt;  // it has generated
        const int64_t total = static_cast<int64_t>(r->prompt.size());
        const int64_t done = r->seq >= 0 ? std::min(ctx_.kv_cache().n_tokens(r->seq), total) : 0;
        if (done >= total) return std::nullopt;
        return PromptProgress{done, total};
    }
    // Waiting: nothing read yet, unless it ran and was preempted after its first token.
    auto waiting = [&](const Request& r) -> std::optional<PromptProgress> {
        if (r.all.size() > r.prompt.size()) return std::nullopt;
        return PromptProgress{0, static_cast<int64_t>(r.prompt.size())};
    };
    for (const auto& r : waiting_)
        if (r->id == id) return waiting(*r);
    std::lock_guard<std::mutex> lk(inbox_mu_);
    for (const auto& r : inbox_)
        if (r->id == id) return waiting(*r);
    return std::nullopt;
}

void Scheduler::take_inbox() {
    std::vector<int64_t> cancels;
    {
        std::lock_guard<std::mutex> lk(inbox_mu_);
        for (auto& r : inbox_) waiting_.push_back(std::move(r));
        inbox_.clear();
        cancels.swap(cancels_);
    }
    for (int64_t id : cancels) {
        for (auto& r : running_)
            if (r->id == id) r->cancelled = true;
        for (auto& r : waiting_)
            if (r->id == id) r->cancelled = true;
    }
    // Cancelled requests end now, whether waiting or running.
    auto end_cancelled = [this](auto& requests) {
        for (auto it = requests.begin(); it != requests.end();) {
            if ((*it)->cancelled) {
                finish(**it, FinishReason::Cancelled);
                it = requests.erase(it);
            } else {
                ++it;
            }
        }
    };
    end_cancelled(waiting_);
    end_cancelled(running_);
}

int Scheduler::effective_priority(const Request& r) const {
    const bool is_long = cfg_.long_threshold > 0 && static_cast<int64_t>(r.all.size()) > cfg_.long_threshold;
    return r.priority - (is_long ? 1 : 0);
}

// The experts the first MoE layer's router picks for each prompt token's own
// embedding: a cheap forecast (no attention context) of which experts a
// request will keep using, to batch requests that share them.
std::vector<float> Scheduler::expert_signature(const std::vector<int32_t>& prompt) const {
    const model::ModelConfig& c = ctx_.model().config();
    const model::ModelWeights& w = ctx_.weights();
    const model::LayerWeights* moe = nullptr;
    for (const model::LayerWeights& L : w.layers)
        if (L.ffn == model::FfnKind::Moe) {
            moe = &L;
            break;
        }
    if (!moe || c.n_expert <= 0) return {};
    const int64_t d = c.n_embd, E = c.n_expert, U = std::max<int64_t>(c.n_expert_used, 1);
    std::vector<float> x(static_cast<size_t>(d)), h(static_cast<size_t>(d)), row(static_cast<size_t>(d));
    std::vector<float> logits(static_cast<size_t>(E)), sig(static_cast<size_t>(E), 0.0f);
    const size_t first = prompt.size() > 64 ? prompt.size() - 64 : 0;  // the recent part of the prompt
    for (size_t i = first; i < prompt.size(); ++i) {
        kernels::dequantize_row(w.tok_embd.type, w.tok_embd.row(prompt[i]), x.data(), d);
        kernels::ops::rmsnorm(x.data(), moe->ffn_norm.data(), h.data(), d, c.norm_eps);
        for (int64_t e = 0; e < E; ++e) {
            kernels::dequantize_row(moe->router.type, moe->router.row(e), row.data(), d);
            logits[static_cast<size_t>(e)] = kernels::ops::dot_f32(row.data(), h.data(), d);
        }
        for (int64_t k = 0; k < U; ++k) {
            const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
            sig[static_cast<size_t>(best)] += 1.0f;
            logits[static_cast<size_t>(best)] = -INFINITY;
        }
    }
    const float total = static_cast<float>((prompt.size() - first) * static_cast<size_t>(U));
    for (float& s : sig) s /= total;
    return sig;
}

double Scheduler::overlap(const Request& r) const {
    if (r.signature.empty() || running_.empty()) return 0.0;
    double score = 0.0;
    for (size_t e = 0; e < r.signature.size(); ++e) {
        double mean = 0.0;
        for (const auto& q : running_) mean += q->signature.empty() ? 0.0 : q->signature[e];
        score += std::min<double>(r.signature[e], mean / static_cast<double>(running_.size()));
    }
    return score;
}

void Scheduler::admit() {
    if (waiting_.empty() || static_cast<int>(running_.size()) >= cfg_.max_batch) return;
    if (running_.empty() && cfg_.batch_timeout_s > 0.0 && static_cast<int>(waiting_.size()) < cfg_.max_batch) {
        const double age = std::chrono::duration<double>(Clock::now() - waiting_.front()->submitted).count();
        if (age < cfg_.batch_timeout_s) return;  // give the batch a moment to fill
    }
    kv::KvCache& kv = ctx_.kv_cache();
    while (!waiting_.empty() && static_cast<int>(running_.size()) < cfg_.max_batch) {
        // Best waiting request: priority, then expert overlap, then arrival.
        auto best = waiting_.begin();
        double best_overlap = cfg_.group_by_experts ? overlap(**best) : 0.0;
        for (auto it = std::next(waiting_.begin()); it != waiting_.end(); ++it) {
            const int pa = effective_priority(**it), pb = effective_priority(**best);
            if (pa < pb) continue;
            const double ov = cfg_.group_by_experts ? overlap(**it) : 0.0;
            if (pa > pb || ov > best_overlap + 1e-9) {
                best = it;
                best_overlap = ov;
            }
        }
        Request& r = **best;
        // Room for at least its first token (or it waits for blocks to free up).
        if (kv.available_blocks() < 1 && !running_.empty()) break;
        r.seq = kv.create_sequence(static_cast<int64_t>(r.all.size()) + r.stream->sampler().params().max_tokens);
        if (cfg_.prefix_sharing) {
            const int64_t reused = kv.attach_prefix(r.seq, r.all);
            if (!r.admitted_once) r.result.prefix_reused = reused;
        }
        if (!r.admitted_once) {
            r.admitted_once = true;
            r.result.queue_s = std::chrono::duration<double>(Clock::now() - r.submitted).count();
        }
        r.admitted_order = ++admit_counter_;
        running_.push_back(std::move(*best));
        waiting_.erase(best);
    }
}

void Scheduler::preempt_one() {
    // Lowest effective priority; among equals the latest admitted.
    auto victim = std::min_element(running_.begin(), running_.end(), [&](const auto& a, const auto& b) {
        const int pa = effective_priority(*a), pb = effective_priority(*b);
        if (pa != pb) return pa < pb;
        return a->admitted_order > b->admitted_order;
    });
    Request& r = **victim;
    ctx_.kv_cache().free_sequence(r.seq);
    r.seq = -1;
    ++r.result.preemptions;
    ++stats_.preemptions;
    waiting_.push_front(std::move(*victim));
    running_.erase(victim);
}

bool Scheduler::build_batch() {
    kv::KvCache& kv = ctx_.kv_cache();
    for (;;) {
        batch_tokens_.clear();
        batch_seqs_.clear();
        batch_want_.clear();
        batch_owner_.clear();
        // Decoding requests first (one token each, latency matters), then
        // prompt chunks in priority and admission order.
        std::vector<Request*> order;
        for (auto& r : running_) order.push_back(r.get());
        std::stable_sort(order.begin(), order.end(), [&](const Request* a, const Request* b) {
            const int64_t fa = static_cast<int64_t>(a->all.size()) - kv.n_tokens(a->seq);
            const int64_t fb = static_cast<int64_t>(b->all.size()) - kv.n_tokens(b->seq);
            if ((fa == 1) != (fb == 1)) return fa == 1;
            const int pa = effective_priority(*a), pb = effective_priority(*b);
            if (pa != pb) return pa > pb;
            return a->admitted_order < b->admitted_order;
        });
        int64_t budget = step_tokens_;
        for (Request* r : order) {
            const int64_t have = kv.n_tokens(r->seq);
            int64_t take = static_cast<int64_t>(r->all.size()) - have;
            if (cfg_.prefill_chunk > 0) take = std::min(take, std::max<int64_t>(1, cfg_.prefill_chunk));
            take = std::min(take, budget);
            r->chunk = take;
            if (take <= 0) continue;
            budget -= take;
            const bool completes = have + take == static_cast<int64_t>(r->all.size());
            for (int64_t i = 0; i < take; ++i) {
                batch_tokens_.push_back(r->all[static_cast<size_t>(have + i)]);
                batch_seqs_.push_back(r->seq);
                const bool want = completes && i == take - 1;
                batch_want_.push_back(want ? 1 : 0);
                if (want) batch_owner_.push_back(r);
            }
        }
        if (batch_tokens_.empty()) return false;
        const int64_t need = ctx_.kv_blocks_needed(batch_seqs_);
        if (need <= kv.available_blocks()) return true;
        if (running_.size() == 1) {
            // Alone and still no room: the cache cannot hold this sequence.
            Request& r = *running_.front();
            finish(r, FinishReason::ContextFull);
            running_.clear();
            continue;
        }
        preempt_one();
    }
}

void Scheduler::finish(Request& r, FinishReason why) {
    r.stream->stop(why);
    if (r.seq >= 0) {
        ctx_.kv_cache().free_sequence(r.seq);
        r.seq = -1;
    }
    r.result.tokens = r.stream->tokens();
    r.result.text = r.stream->text();
    r.result.finish = r.stream->finish();
    r.result.total_s = std::chrono::duration<double>(Clock::now() - r.submitted).count();
    ++stats_.finished;
    if (r.on_finish) r.on_finish(r.result);
}

bool Scheduler::step() {
    take_inbox();
    admit();
    if (running_.empty()) {
        if (waiting() == 0) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // batch-forming timeout
        return true;
    }
    if (!build_batch()) return !idle();

    const auto t0 = Clock::now();
    const float* logits = ctx_.decode_batch(batch_tokens_, batch_seqs_, batch_want_);
    const auto t1 = Clock::now();
    ++stats_.steps;
    stats_.tokens_forwarded += static_cast<int64_t>(batch_tokens_.size());
    stats_.busy_s += std::chrono::duration<double>(t1 - t0).count();

    const int64_t n_vocab = ctx_.model().config().n_vocab;
    for (size_t row = 0; row < batch_owner_.size(); ++row) {
        Request& r = *batch_owner_[row];
        const bool first = r.stream->tokens().empty();
        int32_t tok = -1;
        bool more = false;
        try {
            tok = r.stream->sampler().sample(logits + row * n_vocab);
            more = r.stream->push(tok);
        } catch (const Error& e) {
            // A request's own sampling failed (its grammar cannot go on): it
            // ends with the reason; the batch goes on.
            r.result.error = e.what();
            r.stream->stop(FinishReason::Cancelled);
            continue;
        }
        if (first) r.result.ttft_s = std::chrono::duration<double>(t1 - r.submitted).count();
        else r.result.itl_s.push_back(std::chrono::duration<double>(t1 - r.last_token).count());
        r.last_token = t1;
        ++stats_.tokens_generated;
        if (more) {
            if (static_cast<int64_t>(r.all.size()) + 1 > ctx_.n_ctx()) {
                r.stream->stop(FinishReason::ContextFull);
            } else {
                r.all.push_back(tok);  // fed in the next step
            }
        }
    }
    // Release finished requests' blocks in the step they finish.
    for (auto it = running_.begin(); it != running_.end();) {
        if ((*it)->stream->finished()) {
            finish(**it, (*it)->stream->finish());
            it = running_.erase(it);
        } else {
            ++it;
        }
    }
    return true;
}

void Scheduler::run() {
    while (step()) {
    }
}

}  // namespace strata::sched
