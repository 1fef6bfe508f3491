// A text's embedding from the loaded model (the server's /v1/embeddings): its
// tokens run through the model in a sequence of their own, and the final
// hidden states (after the output norm, what the head reads) mean-pooled
// over the tokens, then scaled to unit length (llama.cpp's --pooling mean with
// its default L2 normalisation, what OpenAI's embeddings are).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata::model {
class Context;
}

namespace strata::sched {

// n_embd floats of unit length. The sequence is freed again, so the KV cache
// is as it was. Throws strata::Error for no tokens, more than the context
// holds, a KV cache without room for them now, or a device that does not
// return hidden states.
std::vector<float> embed(model::Context& ctx, std::span<const int32_t> tokens);

}  // namespace strata::sched
