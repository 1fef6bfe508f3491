#include "sched/token_stream.h"

#include <algorithm>

namespace strata::sched {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::EndOfGeneration: return "eos";
        case FinishReason::StopString: return "stop";
        case FinishReason::MaxTokens: return "length";
        case FinishReason::ContextFull: return "context";
        case FinishReason::Cancelled: return "cancelled";
    }
    return "?";
}

TokenStream::TokenStream(const tok::Vocab& vocab, const SamplingParams& params, int32_t n_vocab,
                         std::span<const int32_t> prompt, TextSink sink)
    : vocab_(vocab),
      constraint_(params.grammar ? std::make_unique<GrammarConstraint>(params.grammar, vocab, params.render_tokens)
                                 : nullptr),
      render_tokens_(params.render_tokens),
      sampler_(params, n_vocab),
      stops_(params.stop),
      decoder_(vocab),
      sink_(std::move(sink)),
      max_tokens_(params.max_tokens),
      ignore_eos_(params.ignore_eos) {
    sampler_.set_constraint(constraint_.get());
    for (int32_t t : prompt) sampler_.accept(t);
}

void TokenStream::emit(const std::string& text) {
    if (text.empty()) return;
    text_ += text;
    if (sink_ && !sink_(text)) sink_wants_more_ = false;
}

void TokenStream::end(FinishReason why) {
    finished_ = true;
    finish_ = why;
    if (why != FinishReason::StopString) {
        emit(stops_.push(decoder_.flush()).text);
        emit(stops_.flush());
    }
}

bool TokenStream::push(int32_t token) {
    if (finished_) return false;
    if (!ignore_eos_ && vocab_.is_end_of_generation(token)) {
        end(FinishReason::EndOfGeneration);
        return false;
    }
    if (constraint_) constraint_->accept(token);
    tokens_.push_back(token);
    sampler_.accept(token);
    const bool render = std::binary_search(render_tokens_.begin(), render_tokens_.end(), token);
    const StopMatcher::Result res = stops_.push(decoder_.push(token, render));
    emit(res.text);
    if (res.stopped) {
        end(FinishReason::StopString);
        return false;
    }
    if (constraint_ && constraint_->finished()) {  // the grammar is done: nothing may follow
        end(FinishReason::EndOfGeneration);
        return false;
    }
    if (!sink_wants_more_) {
        end(FinishReason::Cancelled);
        return false;
    }
    if (static_cast<int32_t>(tokens_.size()) >= max_tokens_) {
        end(FinishReason::MaxTokens);
        return false;
    }
    return true;
}

void TokenStream::stop(FinishReason why) {
    if (!finished_) end(why);
}

}  // namespace strata::sched
