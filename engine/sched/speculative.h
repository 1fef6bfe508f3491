// Speculative decoding (Leviathan et al. 2023; llama.cpp's speculative
// example): a cheap draft proposes k tokens, the target checks all of them in
// one batched forward pass, so one pass over the target's weights (and one
// fetch of each expert it needs) yields up to k+1 tokens.
//
// - Greedy (temperature 0): a draft token is kept while it equals the target's
//   argmax; the first mismatch is replaced by the target's token. Because the
//   target computes each token the same way alone or batched, the output is
//   token for token the one plain decoding gives.
// - Sampling (temperature > 0): the standard rejection rule: keep draft token d
//   with probability min(1, p(d)/q(d)), else draw from max(0, p - q)
//   renormalized; after k kept tokens draw a bonus token from p. p is the
//   target's distribution after the sampler's whole chain (penalties,
//   filters, temperature), so the output distribution is that of plain
//   sampling.
// - k adapts: up after a fully accepted round, down after a round that kept
//   less than half, within [k_min, k_max]; a round proposes fewer where the
//   draft is unsure (p_min), none at all where it is unsure of the first.
//
// The draft is any Context over a model with the same vocabulary: a smaller
// GGUF, or the target's own weights run with fewer layers or fewer experts
// (ContextParams::max_layers / n_expert_used), which costs no extra memory;
// or the file's own NextN/MTP block (sched/drafter.h MtpDrafter).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "sched/generator.h"

namespace strata::model {
class Context;
}

namespace strata::sched {

struct SpeculativeParams {
    int k = 4;            // draft tokens per round (start value when adaptive)
    bool adaptive = true;
    int k_min = 1;
    int k_max = 8;
    // Stop proposing in a round at a token the draft gives less than this
    // probability (its argmax's softmax when greedy; llama.cpp's
    // --spec-draft-p-min): an unsure draft costs a verification for nothing.
    // 0: always k tokens.
    float p_min = 0.0f;
    std::string validate() const;
};

struct SpeculativeStats {
    int64_t rounds = 0;          // target verification passes
    int64_t drafted = 0;         // draft tokens proposed
    int64_t accepted = 0;        // draft tokens kept
    double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
    double tokens_per_round() const;
    int64_t generated = 0;
};

// Throws strata::Error when the two models' vocabularies differ (size or any
// token's text), for bad params, and as generate() does for a bad prompt.
// Both contexts' default sequences are used from their current contents
// (normally both empty). An empty target first attaches the cached KV blocks
// that match the prompt's start (GenerationResult::prefix_reused).
GenerationResult generate_speculative(model::Context& target, model::Context& draft, const tok::Vocab& vocab,
                                      const SamplingParams& params, const std::vector<int32_t>& prompt,
                                      const SpeculativeParams& spec, SpeculativeStats* stats = nullptr,
                                      const TextSink& sink = {}, const std::atomic<bool>* cancel = nullptr);

// The same with any draft (sched/drafter.h: a Context, the file's own MTP
// block). A recurrent target (or draft) gets the state slots to be rewound
// by k_max tokens (kv::KvCache::set_state_rollback): it must start empty.
class Drafter;
GenerationResult generate_speculative(model::Context& target, Drafter& draft, const tok::Vocab& vocab,
                                      const SamplingParams& params, const std::vector<int32_t>& prompt,
                                      const SpeculativeParams& spec, SpeculativeStats* stats = nullptr,
                                      const TextSink& sink = {}, const std::atomic<bool>* cancel = nullptr);

// Same vocabulary? Empty when yes, else what differs.
std::string vocab_mismatch(const tok::Vocab& a, const tok::Vocab& b);

}  // namespace strata::sched
