#include "serve/backend.h"

#include <algorithm>

#include "common/error.h"
#include "chat/prompt.h"
#include "serve/output_grammar.h"
#include "serve/tool_calls.h"
#include "tokenizer/vocab.h"

namespace strata::serve {

void Channel::accept(int64_t prompt_tokens) {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ != State::Pending) return;
    state_ = State::Running;
    prompt_tokens_ = prompt_tokens;
    cv_.notify_all();
}

void Channel::reject(const ApiError& e) {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == State::Done || state_ == State::Failed) return;
    state_ = State::Failed;
    error_ = e;
    cv_.notify_all();
}

void Channel::text(std::string_view piece) {
    std::lock_guard<std::mutex> lk(mu_);
    pending_.append(piece);
    cv_.notify_all();
}

void Channel::finish(const std::string& reason, int64_t completion_tokens) {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == State::Done || state_ == State::Failed) return;
    state_ = State::Done;
    finish_ = reason;
    completion_tokens_ = completion_tokens;
    cv_.notify_all();
}

Channel::State Channel::wait_accepted() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return state_ != State::Pending; });
    return state_;
}

Channel::State Channel::take(std::string* out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, timeout,
                 [&] { return !pending_.empty() || state_ == State::Done || state_ == State::Failed; });
    out->append(pending_);
    pending_.clear();
    return state_;
}

Channel::State Channel::wait_done(std::string* all_text) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return state_ == State::Done || state_ == State::Failed; });
    all_text->append(pending_);
    pending_.clear();
    return state_;
}

bool Channel::ended() const {
    std::lock_guard<std::mutex> lk(mu_);
    return state_ == State::Done || state_ == State::Failed;
}

ApiError Channel::error() const {
    std::lock_guard<std::mutex> lk(mu_);
    return error_;
}
std::string Channel::finish_reason() const {
    std::lock_guard<std::mutex> lk(mu_);
    return finish_;
}
int64_t Channel::prompt_tokens() const {
    std::lock_guard<std::mutex> lk(mu_);
    return prompt_tokens_;
}
int64_t Channel::completion_tokens() const {
    std::lock_guard<std::mutex> lk(mu_);
    return completion_tokens_;
}

PreparedRequest prepare_request(const CompletionRequest& r, const tok::Vocab& vocab, const chat::ChatTemplate& tmpl,
                                int64_t n_ctx, uint64_t random_seed) {
    PreparedRequest p;
    p.sampling = r.sampling;
    if (!r.seed_given) p.sampling.seed = random_seed;
    p.sampling.stop = r.stop;
    const char* param = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
    try {
        if (r.endpoint == Endpoint::Chat) {
            // As the app prepares a conversation, less dropping old turns: an
            // API request that does not fit is refused.
            chat::Prompt prompt = chat::prepare_prompt(r.messages, tmpl, vocab, {n_ctx, false, 1}, &r.tools);
            p.tokens = std::move(prompt.tokens);
            chat::add_stop_strings(p.sampling.stop, prompt.stop);
        } else {
            // As `strata-cli run -p` tokenizes: BOS as the vocabulary says, text as text.
            p.tokens = vocab.encode(r.prompt, true);
            chat::check_prompt(p.tokens, vocab, n_ctx);
        }
    } catch (const chat::PromptError& e) {
        const bool too_long = e.kind() == chat::PromptError::Kind::TooLong;
        throw ApiException{ApiError{400, too_long ? std::string(e.what()) + ": shorten it" : std::string(e.what()),
                                    "invalid_request_error", param, too_long ? "context_length_exceeded" : ""}};
    }
    // A constrained call in the template's own syntax (parse_request chose Hermes, not knowing it).
    if ((r.tool_choice == "required" || r.tool_choice == "function") && tmpl.tool_syntax() != ToolSyntax::Hermes)
        p.sampling.grammar = tool_call_grammar(r, tmpl.tool_syntax());
    // Its markers where the vocabulary has them as control tokens: shown, so the call can be read.
    if (r.wants_tool_calls()) {
        for (std::string_view marker : special_markers(tmpl.tool_syntax()))
            if (const auto id = vocab.find(marker); id && vocab.is_control(*id)) p.sampling.render_tokens.push_back(*id);
        std::sort(p.sampling.render_tokens.begin(), p.sampling.render_tokens.end());
    }
    const int64_t n = static_cast<int64_t>(p.tokens.size());
    const int64_t room = n_ctx - n;
    if (p.sampling.max_tokens <= 0 || p.sampling.max_tokens > room) p.sampling.max_tokens = static_cast<int32_t>(room);
    if (const std::string err = p.sampling.validate(); !err.empty())
        throw ApiException{ApiError{400, err, "invalid_request_error", "", ""}};
    return p;
}

std::string openai_finish(sched::FinishReason reason) {
    switch (reason) {
        case sched::FinishReason::EndOfGeneration:
        case sched::FinishReason::StopString:
            return "stop";
        case sched::FinishReason::MaxTokens:
        case sched::FinishReason::ContextFull:
            return "length";
        case sched::FinishReason::Cancelled:
            return "cancelled";
    }
    return "stop";
}

}  // namespace strata::serve
