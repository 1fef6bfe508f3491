// The architectures: one file each in this folder, each an ArchTraits
// (model/config.h) whose layer composes the ops of model/backend.h. What
// they share is here: the decoder around the layers, and the specs most of
// them build from the file's metadata. README.md says how to add one.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/config.h"
#include "model/weights.h"

namespace strata::model::arch {

// Every architecture, in the order `supported_arch_names` lists them.
std::span<const ArchTraits* const> all();

// One step of the decoder: the embedding, the first n_layers layers
// (c.traits.layer), the output head where the step wants logits.
// predict_routes: each MoE layer's routes are predicted one layer early.
void forward(Backend& b, const ModelConfig& c, const ModelWeights& w, int64_t n_layers, bool predict_routes);

// The ops the architecture composes for this model (its layers' kinds,
// dense or MoE, and specs), each once, in the order first used: what the
// layers would call, recorded without computing anything.
std::vector<Op> ops_used(const ModelConfig& c, const ModelWeights& w);

// The router as the file's metadata states it: top-k of the softmax over all
// experts, or (a sigmoid gating or expert groups) deepseek2's scoring.
RouterSpec router_spec(const ModelConfig& c);

// The ops around attention and FFN that most architectures share (pre-norm
// residual blocks): Residual += attention(RMSNorm(Residual)) and
// Residual += ffn(RMSNorm(Residual)), where ffn is the layer's dense FFN
// or its routed experts (and shared expert, where the layer has one); a
// layer with a selection bias routes through the scored router, which reads it.
void attention_block(Backend& b, const LayerWeights& L, const AttentionSpec& spec);
void ffn_block(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next,
               const RouterSpec& router, const ExpertSpec& experts);

}  // namespace strata::model::arch
