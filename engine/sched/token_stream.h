// What happens to each generated token of one request, shared by the
// one-sequence generator, the batching scheduler and speculative decoding:
// end-of-generation check, penalty window, incremental detokenization,
// stop strings, the token limit, and the text handed to the caller's sink.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/constraint.h"
#include "sched/sampler.h"
#include "sched/stop_strings.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

enum class FinishReason { EndOfGeneration, StopString, MaxTokens, ContextFull, Cancelled };
const char* finish_reason_name(FinishReason r);   // "eos", "stop", "length", "context", "cancelled"

// Receives text as it becomes safe to show. Return false to stop generating.
using TextSink = std::function<bool(std::string_view)>;

class TokenStream {
public:
    // Throws strata::Error for invalid params. The prompt's tokens enter the
    // penalty window.
    TokenStream(const tok::Vocab& vocab, const SamplingParams& params, int32_t n_vocab,
                std::span<const int32_t> prompt, TextSink sink = {});

    Sampler& sampler() { return sampler_; }

    // Under a grammar (params.grammar): what it cost the sampler; nullptr without.
    const ConstraintStats* constraint_stats() const {
        return constraint_ ? &sampler_.constraint_stats() : nullptr;
    }

    // Takes one sampled token. Returns true while generation goes on; false
    // when this token ended it (finish() says why). An end-of-generation token
    // is not kept.
    bool push(int32_t token);
    // Ends the stream for an outside reason (context full, cancelled) and
    // flushes held-back text.
    void stop(FinishReason why);

    bool finished() const { return finished_; }
    FinishReason finish() const { return finish_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::string& text() const { return text_; }

private:
    void emit(const std::string& text);
    void end(FinishReason why);

    const tok::Vocab& vocab_;
    std::unique_ptr<GrammarConstraint> constraint_;  // before sampler_, which points at it
    std::vector<int32_t> render_tokens_;             // SamplingParams::render_tokens
    Sampler sampler_;
    StopMatcher stops_;
    tok::StreamDecoder decoder_;
    TextSink sink_;
    int32_t max_tokens_;
    bool ignore_eos_;
    std::vector<int32_t> tokens_;
    std::string text_;
    bool sink_wants_more_ = true;
    bool finished_ = false;
    FinishReason finish_ = FinishReason::MaxTokens;
};

}  // namespace strata::sched
