#include "model/plan_model.h"

#include <algorithm>
#include <string>

#include "model/kv_shape.h"

namespace strata::model {

namespace {
uint64_t mat_bytes(const Matrix& m) { return m ? m.slab_bytes() * static_cast<uint64_t>(m.slabs) : 0; }
}  // namespace

uint64_t expert_slot_bytes(const FfnMatrices& x) {
    uint64_t s = 0;
    for (const Matrix* m : {&x.gate, &x.up, &x.down})
        if (*m) s += memory::direct_read_window(m->file_offset, m->slab_bytes() * static_cast<uint64_t>(m->slabs));
    return s;
}

// Forward-pass scratch of a Context for n_batch tokens, mirroring
// backend/cpu/cpu_backend.cpp (4 bytes per element, floats and int32 alike). With
// B = n_batch, E = max(n_expert, 1), U = max(n_expert_used, 1),
// ff = max(n_ff, n_ff_expert, n_ff_shared, 1), q = n_head*head_dim,
// kv = n_head_kv*head_dim, T = threads:
//   B*n_embd*6     x, h, tmp, xe, ye, lookahead h
//   B*q*2          q, attn;        B*kv*2   k, v (this chunk's projections)
//   B*E*2          router logits, lookahead probs
//   B*U*3          route weights, ids, expert token lists;   2E+1 expert counts/offsets
//   B*ff*2         expert gate and up outputs;               B shared-expert gates
//   B*n_vocab      logits of a whole chunk
//   T*(max(n_embd, q, ff) + n_ctx*group)   per-thread row and attention-score scratch
//   (group = n_head / n_head_kv; MLA adds its queries, values and LoRA rows)
uint64_t activation_bytes(const ModelConfig& c, int64_t B, int64_t n_ctx, int64_t T) {
    const int64_t E = std::max<int64_t>(c.n_expert, 1);
    const int64_t U = std::max<int64_t>(c.n_expert_used, 1);
    const int64_t ff = std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}});
    const int64_t q = c.n_head * c.head_dim;
    const int64_t kv = c.n_head_kv * c.head_dim;
    // ... plus per token: each routed expert's output row (U x n_embd, summed in
    // rank order) and the activation row quantized for the weight type (at most
    // 4 bytes per element of the widest input).
    // MLA (deepseek2): the query's LoRA, the per-head queries and values
    // besides the latent ones (q, attn), and wider inputs for the products.
    const int64_t mla = c.mla ? c.mla.q_lora_rank + c.n_head * (c.mla.key_length + c.mla.value_length) : 0;
    const int64_t widest = std::max({c.n_embd, q, ff, c.mla.q_lora_rank, c.n_head * c.mla.value_length});
    const int64_t per_token = 6 * c.n_embd + 2 * q + 2 * kv + 2 * E + 3 * U + 2 * ff + 1 + c.n_vocab +
                              U * c.n_embd + widest + mla;
    // Attention scores: a KV head's query group over n_ctx keys, per thread.
    const int64_t group = c.n_head / std::max<int64_t>(1, c.n_head_kv);
    const int64_t elems = B * per_token + 2 * E + 1 + T * (widest + n_ctx * group);
    return static_cast<uint64_t>(elems) * 4;
}

memory::PlanModel plan_model(const Model& m) {
    const ModelConfig& c = m.config();
    memory::PlanModel p;
    p.description = (c.name.empty() ? std::string("model") : "'" + c.name + "'") + " (" + c.arch_name + ", " +
                    std::to_string(c.n_layer) + " layers";
    p.n_layer = c.n_layer;
    p.n_expert = c.n_expert;
    p.n_expert_used = c.n_expert_used;
    p.n_ctx_train = c.n_ctx_train;
    uint64_t kept_in_file = 0;  // MLA's attn_kv_b: the fast tier holds its f32 split instead (derived_bytes)
    uint64_t routers = 0;
    for (const LayerWeights& L : m.weights().layers) {
        kept_in_file += mat_bytes(L.wkv_b);
        if (L.ffn != FfnKind::Moe) continue;
        memory::PlanModel::MoeLayer ml;
        ml.router_bytes = mat_bytes(L.router);
        ml.experts = L.n_experts();
        for (int64_t e = 0; e < ml.experts; ++e) ml.max_slot_bytes = std::max(ml.max_slot_bytes, expert_slot_bytes(L.expert(e)));
        routers += ml.router_bytes;
        p.moe_layers.push_back(ml);
    }
    const Model::Sizes sz = m.sizes();
    p.experts_bytes = sz.bytes_experts;
    p.shared_bytes = sz.bytes_total - sz.bytes_experts - routers - kept_in_file + m.weights().derived_bytes();
    p.repack_bytes = m.weights().bytes_to_repack();
    p.kv = kv_cache_params(c, 0);
    if (c.mla) {
        p.kv_entry = "MLA latent (" + std::to_string(c.mla.kv_lora_rank) + " + " + std::to_string(c.n_rot) + ")";
        p.kv_entry_elems = c.head_dim;
        p.kv_per_head_elems = c.n_head * (c.mla.key_length + c.mla.value_length);
    } else {
        p.kv_entry = "K+V";
        p.kv_entry_elems = 2 * c.n_head_kv * c.head_dim;
    }
    p.activation_bytes = [c](int64_t n_batch, int64_t n_ctx, int64_t threads) {
        return activation_bytes(c, n_batch, n_ctx, threads);
    };
    return p;
}

}  // namespace strata::model
