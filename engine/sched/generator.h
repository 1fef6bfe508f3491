// One prompt -> streamed text: prefill the prompt in one pass, then decode one
// token at a time through the Sampler, detokenizing incrementally (a UTF-8
// character split across tokens is emitted whole), stopping on an
// end-of-generation token, a stop string, max_tokens, a full context, or the
// caller's stop flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/sampler.h"
#include "sched/token_stream.h"

namespace strata::model {
class Context;
}
namespace strata::tok {
class Vocab;
}

namespace strata::sched {

struct GenerationResult {
    std::vector<int32_t> tokens;      // generated ids (the EOG token excluded)
    std::string text;                 // everything emitted
    FinishReason finish = FinishReason::MaxTokens;
    int64_t prompt_tokens = 0;
    int64_t prefix_reused = 0;        // prompt tokens attached from cached KV blocks, not computed
    double prompt_seconds = 0.0;      // prefill wall time (time to first token)
    double decode_seconds = 0.0;      // wall time of the generation after the first token
    std::optional<ConstraintStats> constraint;  // what a grammar (params.grammar) cost the sampler
    double prompt_tok_s() const { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0.0; }
    double decode_tok_s() const {
        return decode_seconds > 0 && tokens.size() > 1 ? (tokens.size() - 1) / decode_seconds : 0.0;
    }
};

// Generates from `prompt` appended to whatever the context already holds.
// Throws strata::Error for an empty prompt or one longer than the context.
GenerationResult generate(model::Context& ctx, const tok::Vocab& vocab, const SamplingParams& params,
                          const std::vector<int32_t>& prompt, const TextSink& sink = {},
                          const std::atomic<bool>* cancel = nullptr);

}  // namespace strata::sched
