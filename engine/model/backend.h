// The ops a decoder layer is made of (DESIGN.md §9): what an architecture
// (model/arch/) composes and what a device implements. An op names weights
// (model/weights.h) and says what it computes; where the activations live
// and how the op runs (fused regions on the CPU, kernels on a GPU) is the
// backend's. Ops act on a chunk of n tokens begun with begin(), on three
// activations of n rows of n_embd floats each, held in the backend's memory:
//
//   Residual  the residual stream (embed() fills it)
//   Normed    a layer's input, normalised (what attention and the FFNs read)
//   Out       a block's output (what add() puts into the residual stream)
//
// Each op's reference (kernels/ref) and tolerance is the CPU backend's: its
// F32 results are the file's reference forward pass's within the fixtures'
// tolerances (../shared/fixtures/README.md), and other backends match it
// within those.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/device_forward.h"
#include "model/weights.h"

namespace strata::model {

class ExpertProvider;

enum class Act : uint8_t { Residual, Normed, Out };

// Attention over the paged KV cache, Normed -> Out: the Q/K/V projections
// (+ biases), Q/K norms, RoPE, the K/V written to the cache, causal attention
// within each token's sequence, the output projection (+ bias).
struct AttentionSpec {
    RopeType rope = RopeType::Normal;
    QkNorm qk_norm = QkNorm::None;  // the layer's q_norm/k_norm, per head or over the whole projection
    // Multi-head latent attention (MLA): the cache holds one latent row
    // per token, queries are taken into the latent space (model/config.h MlaConfig).
    bool latent = false;
    int64_t window = 0;  // a sliding window: the last `window` positions, its own included (0: all)
    bool sinks = false;  // a learned sink logit per head (LayerWeights::attn_sinks) in each softmax
    float scale = 1.0f;  // the scores' scale
    // Q and K per head RMSNorm'ed without a weight after RoPE (Llama 4's "L2 norm").
    bool norm_after_rope = false;
    // Chunked attention: a query sees the keys of its own chunk of `chunk`
    // positions, up to itself (0: none).
    int64_t chunk = 0;
    // The queries at position p times attention_temperature(spec, p) (Llama
    // 4's NoPE layers; temperature_floor 0: none).
    int64_t temperature_floor = 0;
    float temperature_scale = 0.0f;
    // attn_q's rows are each head's query then its gate
    // (ArchTraits::attention_output_gate): the attention's output times
    // sigmoid(gate) before the output projection (qwen35moe).
    bool output_gate = false;
};

// 1 + temperature_scale * ln(floor((p + 1) / temperature_floor) + 1), as
// llama.cpp's llm_graph_input_attn_temp (1 where the spec has none).
float attention_temperature(const AttentionSpec& spec, int64_t pos);

// The first key a query at `n_keys` keys (its own included) sees: a sliding
// window's oldest, its chunk's first, else 0.
int64_t first_visible_key(const AttentionSpec& spec, int64_t n_keys);

// The router, Normed -> each token's experts and their weights.
struct RouterSpec {
    // false: top-k of the softmax over all experts (ops::router_topk).
    // true: scoring (DeepSeek-V3's): probabilities by `gating`, the choice by
    // probability plus the layer's selection bias (router_select_bias), among
    // the best `groups_used` of `groups` expert groups (0 or 1 group: none);
    // each chosen expert weighted by its probability.
    bool scored = false;
    Gating gating = Gating::Softmax;
    int64_t groups = 0, groups_used = 0;
    bool renormalise = false;  // the chosen weights sum to 1
    float scale = 1.0f;        // then times this
};

// The routed experts, Normed -> Out: each token's experts applied to it,
// summed by their router weights in router-rank order.
struct ExpertSpec {
    FfnAct act = FfnAct::Swiglu;  // SwigluOai: the layer's expert biases around the clamped SwiGLU
    // Each expert's input times its router weight and its output summed
    // unweighted (Llama 4: E(w x), not w E(x)).
    bool weight_before = false;
};

// One chunk: token i goes to sequence seqs[i] at position pos[i] (already in
// the KV cache's tables); logits gets a row of n_vocab floats per token with
// want[i] != 0, in order (null: none wanted).
struct Step {
    const int32_t* tokens = nullptr;
    int64_t n = 0;
    const kv::SeqId* seqs = nullptr;
    const int64_t* pos = nullptr;
    const uint8_t* want = nullptr;
    float* logits = nullptr;
    kv::KvCache* kv = nullptr;
    ExpertProvider* experts = nullptr;
    int64_t n_expert_used = 0;           // experts per token (a draft may use fewer than the model)
    bool resident_experts_only = false;  // route only among the experts the provider holds in fast memory
    const RoutingObserver* routing = nullptr;      // each set one is called
    const LookaheadObserver* lookahead = nullptr;
    // A NextN view's input: a row of n_embd floats per token, the trunk's
    // hidden state the token is mixed with (nextn_input).
    const float* hidden_in = nullptr;
    // Where set: output_head writes every token's normed row (what the head
    // reads: RMSNorm(Residual) * norm), n rows of n_embd, here.
    float* hidden_out = nullptr;
};

// The step for one device chunk: its tokens, positions and outputs over `kv`'s
// block tables, `n_expert_used` experts per token. The expert provider, the
// observers and a NextN input are the caller's to add. `kv` is const to the
// callers of DeviceForward::run (a device pass only reads its tables); Step
// holds it mutable because the CPU backend writes its K/V rows there.
inline Step chunk_step(const DeviceChunk& c, const kv::KvCache& kv, int64_t n_expert_used) {
    Step s;
    s.tokens = c.tokens;
    s.n = c.n;
    s.seqs = c.seqs;
    s.pos = c.pos;
    s.want = c.want;
    s.logits = c.logits;
    s.hidden_out = c.hidden;
    s.kv = const_cast<kv::KvCache*>(&kv);
    s.n_expert_used = n_expert_used;
    return s;
}

// The ops by name: what supports() is asked and what a load-time error names.
enum class Op {
    Embed,
    RmsNorm,
    Add,
    Attention,
    LatentAttention,
    AttentionSinks,
    SlidingWindow,
    ChunkedAttention,
    NormAfterRope,
    AttentionTemperature,
    AttentionOutputGate,
    DeltaNet,
    NextnInput,
    Route,
    ScoredRoute,
    Experts,
    ClampedExperts,
    WeightedExpertInput,
    SharedExpert,
    DenseFfn,
    OutputHead,
};
const char* op_name(Op op);
// Whether another backend can compute `op` for a device that lacks it
// (model/op_fallback.h): ops that read and write the step's activations and
// weights alone. The others keep state in the device's memory (the KV
// cache, the recurrent state, the routing and the expert cache), so a
// device that lacks one cannot run the model.
bool can_fall_back(Op op);

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    virtual bool supports(Op op) const = 0;

    virtual void begin(const Step& step) = 0;
    // Residual = the rows of `table` (the token embedding) of the chunk's tokens.
    virtual void embed(const Matrix& table) = 0;
    // out = RMSNorm(in) * weight, per token.
    virtual void rms_norm(Act in, const std::vector<float>& weight, Act out) = 0;
    // dst += src.
    virtual void add(Act dst, Act src) = 0;
    virtual void attention(const LayerWeights& L, const AttentionSpec& spec) = 0;
    // A gated delta net, Normed -> Out (qwen35moe's linear attention, as
    // llama.cpp's build_layer_attn_linear): mixed = attn_qkv x through the
    // causal conv and SiLU; q, k L2-normed per head; the gated delta rule
    // (kernels/ref: gated_delta_step) over each token's sequence state
    // (kv::KvCache::recurrent_state, this layer's part); per value head
    // RMSNorm(o) * ssm_norm * silu(z), z = attn_gate x; then ssm_out.
    virtual void delta_net(const LayerWeights& L) = 0;
    // What the router of `next` (a MoE layer) would choose from Residual,
    // normalised with its FFN norm: the step's lookahead observer sees it.
    virtual void predict_route(const LayerWeights& next) = 0;
    virtual void route(const LayerWeights& L, const RouterSpec& spec) = 0;
    // The experts route() chose, from the step's expert provider.
    virtual void experts(const LayerWeights& L, const ExpertSpec& spec) = 0;
    // Out += gate(Normed) * FFN(Normed) with the layer's shared expert (its
    // sigmoid gate where it has one, else 1).
    virtual void shared_expert(const LayerWeights& L) = 0;
    // Out = down(silu(gate Normed) * up Normed) with the layer's dense FFN.
    virtual void dense_ffn(const LayerWeights& L) = 0;
    // The step's logits: RMSNorm(Residual) * norm times `head`, for the wanted
    // tokens; every token's RMSNorm(Residual) * norm into Step::hidden_out where set.
    virtual void output_head(const std::vector<float>& norm, const Matrix& head) = 0;
    // A NextN/MTP block's input (model/weights.h NextnWeights), Residual ->
    // Residual: eh_proj [RMSNorm(Residual) enorm ; RMSNorm(hidden) hnorm]
    // with hidden the step's hidden_in rows.
    virtual void nextn_input(const NextnInput& in) = 0;

    // The step's n rows of n_embd floats of an activation, to and from host
    // memory: how an op another backend computes (model/op_fallback.h) gets
    // its input and gives back its output.
    virtual void read(Act a, float* host) = 0;
    virtual void write(Act a, const float* host) = 0;

    // Bytes of the backend's scratch (activations, per-thread buffers).
    virtual uint64_t scratch_bytes() const = 0;
};

}  // namespace strata::model
