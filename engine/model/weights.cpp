#include "model/weights.h"

#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"

namespace strata::model {

Matrix Matrix::slab(int64_t e) const {
    Matrix m = *this;
    m.slabs = 1;
    m.data = data + static_cast<uint64_t>(e) * slab_bytes();
    m.file_offset = file_offset + static_cast<uint64_t>(e) * slab_bytes();
    return m;
}

uint64_t repack_for_kernels(Matrix& m, uint8_t* copy, std::vector<uint8_t>& scratch) {
    const kernels::WeightType to = kernels::fast_layout(m.type, m.cols);
    if (!m || to == m.type) return 0;
    if (scratch.size() < m.row_bytes) scratch.resize(m.row_bytes);
    const int64_t rows = m.rows * m.slabs;
    if (!kernels::repack_rows(m.type, to, copy, rows, m.cols, m.row_bytes, scratch.data())) return 0;
    m.type = to;
    return m.row_bytes * static_cast<uint64_t>(rows);
}

uint64_t ModelWeights::bytes_to_repack() const {
    uint64_t total = 0;
    const auto add = [&](const Matrix& m) {
        if (m && kernels::fast_layout(m.type, m.cols) != m.type) total += m.slab_bytes() * static_cast<uint64_t>(m.slabs);
    };
    const auto add_ffn = [&](const FfnMatrices& f) {
        add(f.gate);
        add(f.up);
        add(f.down);
    };
    add(tok_embd);
    if (!output_tied) add(output);
    for (const LayerWeights& L : layers) {
        for (const Matrix* m : L.attention_matrices()) add(*m);
        add(L.router);
        add_ffn(L.dense);
        add_ffn(L.shared);
        add_ffn(L.experts_stacked);
        for (const FfnMatrices& f : L.experts_split) add_ffn(f);
    }
    return total;
}

uint64_t ModelWeights::derived_bytes() const {
    uint64_t total = 0;
    for (const LayerWeights& L : layers)
        for (const auto& v : {L.mla_k_up_t, L.mla_v_up})
            if (v) total += v->size() * sizeof(float);
    return total;
}

int64_t LayerWeights::n_experts() const {
    if (!experts_split.empty()) return static_cast<int64_t>(experts_split.size());
    return experts_stacked.gate ? experts_stacked.gate.slabs : 0;
}

FfnMatrices LayerWeights::expert(int64_t e) const {
    if (!experts_split.empty()) return experts_split[static_cast<size_t>(e)];
    return {experts_stacked.gate.slab(e), experts_stacked.up.slab(e), experts_stacked.down.slab(e)};
}

namespace {

class Binder {
public:
    Binder(const gguf::File& f) : f_(f) {}

    const gguf::TensorInfo* find(const std::string& name) const { return f_.tensor(name); }

    [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
        throw Error(f_.path() + ": tensor '" + tensor + "': " + what);
    }

    void check_type(const gguf::TensorInfo& t) const {
        const kernels::TypeTraits* tr = kernels::type_traits(t.raw_type);
        if (!tr || !tr->supported || !kernels::has_kernels(t.type)) {
            fail(t.name, std::string("weight type ") + (tr ? tr->name : "?") + " (id " + std::to_string(t.raw_type) +
                             ") is not supported (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                             "q2_k, q3_k, q4_k, q5_k, q6_k)");
        }
    }

    static std::string shape(std::initializer_list<int64_t> dims) {
        std::string s = "[";
        bool first = true;
        for (int64_t d : dims) {
            s += (first ? "" : ", ") + std::to_string(d);
            first = false;
        }
        return s + "]";
    }

    void check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> dims) const {
        bool ok = true;
        size_t d = 0;
        for (int64_t want : dims) {
            if (t.ne[d] != want) ok = false;
            ++d;
        }
        for (; d < 4; ++d)
            if (t.ne[d] != 1) ok = false;
        if (!ok) fail(t.name, "expected shape " + shape(dims) + ", found " + t.shape_string());
    }

    Matrix matrix(const std::string& name, std::initializer_list<int64_t> dims, bool required = true) const {
        const gguf::TensorInfo* t = find(name);
        if (!t) {
            if (required) fail(name, "missing from the file");
            return {};
        }
        check_type(*t);
        check_shape(*t, dims);
        Matrix m;
        m.data = t->data;
        m.type = t->type;
        m.cols = t->ne[0];
        m.rows = t->ne[1];
        m.slabs = t->ne[2];
        m.row_bytes = static_cast<uint64_t>(kernels::row_bytes(t->type, t->ne[0]));
        m.file_offset = t->file_offset;
        m.name = t->name;
        return m;
    }

    std::vector<float> vector(const std::string& name, int64_t n, bool required = true) const {
        const gguf::TensorInfo* t = find(name);
        if (!t) {
            if (required) fail(name, "missing from the file");
            return {};
        }
        check_type(*t);
        check_shape(*t, {n});
        std::vector<float> v(static_cast<size_t>(n));
        kernels::dequantize_row(t->type, t->data, v.data(), n);
        return v;
    }

    // A 2-D table of `rows` rows of `cols` floats (gpt-oss's per-expert biases), row after row.
    std::vector<float> table(const std::string& name, int64_t cols, int64_t rows) const {
        const gguf::TensorInfo* t = find(name);
        if (!t) fail(name, "missing from the file");
        check_type(*t);
        check_shape(*t, {cols, rows});
        std::vector<float> v(static_cast<size_t>(cols * rows));
        const int64_t rb = kernels::row_bytes(t->type, cols);
        for (int64_t r = 0; r < rows; ++r) kernels::dequantize_row(t->type, t->data + r * rb, v.data() + r * cols, cols);
        return v;
    }

    const gguf::File& f_;
};

std::string blk(int64_t i, const char* suffix) { return "blk." + std::to_string(i) + "." + suffix; }

// Per-head Q/K/V attention (every architecture but deepseek2).
void bind_attention(const Binder& b, const ModelConfig& c, LayerWeights& L, int64_t q_dim, int64_t kv_dim) {
    const int64_t i = L.index;
    // With an output gate, each head's query rows are followed by its gate's.
    L.wq = b.matrix(blk(i, "attn_q.weight"), {c.n_embd, c.traits.attention_output_gate ? 2 * q_dim : q_dim});
    L.wk = b.matrix(blk(i, "attn_k.weight"), {c.n_embd, kv_dim});
    L.wv = b.matrix(blk(i, "attn_v.weight"), {c.n_embd, kv_dim});
    L.wo = b.matrix(blk(i, "attn_output.weight"), {q_dim, c.n_embd});
    L.bq = b.vector(blk(i, "attn_q.bias"), q_dim, false);
    L.bk = b.vector(blk(i, "attn_k.bias"), kv_dim, false);
    L.bv = b.vector(blk(i, "attn_v.bias"), kv_dim, false);
    L.bo = b.vector(blk(i, "attn_output.bias"), c.n_embd, false);
    switch (c.traits.qk_norm) {
        case QkNorm::None: break;
        case QkNorm::PerHead:
            L.q_norm = b.vector(blk(i, "attn_q_norm.weight"), c.head_dim, !c.traits.qk_norm_optional);
            L.k_norm = b.vector(blk(i, "attn_k_norm.weight"), c.head_dim, !c.traits.qk_norm_optional);
            break;
        case QkNorm::WholeProjection:
            L.q_norm = b.vector(blk(i, "attn_q_norm.weight"), q_dim, !c.traits.qk_norm_optional);
            L.k_norm = b.vector(blk(i, "attn_k_norm.weight"), kv_dim, !c.traits.qk_norm_optional);
            break;
    }
    if (L.q_norm.empty() != L.k_norm.empty())
        b.fail(blk(i, L.q_norm.empty() ? "attn_q_norm.weight" : "attn_k_norm.weight"),
               "missing from the file, which has the other of the Q/K norms");
}

// A gated delta net (qwen35moe's linear attention).
void bind_delta_net(const Binder& b, const ModelConfig& c, LayerWeights& L) {
    const int64_t i = L.index;
    const SsmConfig& s = c.ssm;
    const int64_t C = s.channels(), V = s.value_dim(), H = s.n_v_heads, K = s.conv_kernel;
    L.ssm_qkv = b.matrix(blk(i, "attn_qkv.weight"), {c.n_embd, C});
    L.ssm_z = b.matrix(blk(i, "attn_gate.weight"), {c.n_embd, V});
    L.ssm_beta = b.matrix(blk(i, "ssm_beta.weight"), {c.n_embd, H});
    L.ssm_alpha = b.matrix(blk(i, "ssm_alpha.weight"), {c.n_embd, H});
    L.ssm_out = b.matrix(blk(i, "ssm_out.weight"), {V, c.n_embd});
    L.ssm_conv = b.table(blk(i, "ssm_conv1d.weight"), K, C);
    L.ssm_dt_bias = b.vector(blk(i, "ssm_dt.bias"), H);
    L.ssm_a = b.vector(blk(i, "ssm_a"), H);
    L.ssm_norm = b.vector(blk(i, "ssm_norm.weight"), s.d_state);
}

// DeepSeek's multi-head latent attention; attn_kv_b also as f32, split per
// head for the latent-space attention (LayerWeights::mla_k_up_t, mla_v_up).
void bind_mla(const Binder& b, const ModelConfig& c, LayerWeights& L) {
    const int64_t i = L.index;
    const MlaConfig& m = c.mla;
    const int64_t nope = m.key_length - c.n_rot;
    if (m.q_lora_rank > 0) {
        L.wq_a = b.matrix(blk(i, "attn_q_a.weight"), {c.n_embd, m.q_lora_rank});
        L.q_a_norm = b.vector(blk(i, "attn_q_a_norm.weight"), m.q_lora_rank);
        L.wq = b.matrix(blk(i, "attn_q_b.weight"), {m.q_lora_rank, c.n_head * m.key_length});
    } else {
        if (b.find(blk(i, "attn_q_a.weight")))
            b.fail(blk(i, "attn_q_a.weight"), "present, but the file has no '" + c.arch_name + ".attention.q_lora_rank'");
        L.wq = b.matrix(blk(i, "attn_q.weight"), {c.n_embd, c.n_head * m.key_length});
    }
    L.wkv_a = b.matrix(blk(i, "attn_kv_a_mqa.weight"), {c.n_embd, m.kv_lora_rank + c.n_rot});
    L.kv_a_norm = b.vector(blk(i, "attn_kv_a_norm.weight"), m.kv_lora_rank);
    L.wkv_b = b.matrix(blk(i, "attn_kv_b.weight"), {m.kv_lora_rank, c.n_head * (nope + m.value_length)});
    L.wo = b.matrix(blk(i, "attn_output.weight"), {c.n_head * m.value_length, c.n_embd});
    L.bo = b.vector(blk(i, "attn_output.bias"), c.n_embd, false);
    // Rows of attn_kv_b per head: nope rows of the key's up-projection, then value_length rows of the value's.
    const int64_t r = m.kv_lora_rank;
    std::vector<float> row(static_cast<size_t>(r));
    auto k_up_t = std::make_shared<std::vector<float>>(static_cast<size_t>(c.n_head * r * nope), 0.0f);
    auto v_up = std::make_shared<std::vector<float>>(static_cast<size_t>(c.n_head * m.value_length * r), 0.0f);
    for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t first = h * (nope + m.value_length);
        for (int64_t j = 0; j < nope; ++j) {
            kernels::dequantize_row(L.wkv_b.type, L.wkv_b.row(first + j), row.data(), r);
            for (int64_t l = 0; l < r; ++l) (*k_up_t)[static_cast<size_t>((h * r + l) * nope + j)] = row[static_cast<size_t>(l)];
        }
        for (int64_t j = 0; j < m.value_length; ++j)
            kernels::dequantize_row(L.wkv_b.type, L.wkv_b.row(first + nope + j), v_up->data() + (h * m.value_length + j) * r, r);
    }
    L.mla_k_up_t = std::move(k_up_t);
    L.mla_v_up = std::move(v_up);
}

// Layer i's tensors (blk.i.*): its attention or delta net, its FFN kind
// (from the tensors present, cross-checked with the metadata) and weights.
void bind_layer(const Binder& b, const gguf::File& f, ModelConfig& c, LayerWeights& L, bool recurrent) {
    const int64_t i = L.index;
    const int64_t q_dim = c.n_head * c.head_dim;
    const int64_t kv_dim = c.n_head_kv * c.head_dim;
    L.attn_norm = b.vector(blk(i, "attn_norm.weight"), c.n_embd);
    if (recurrent) {
        bind_delta_net(b, c, L);
    } else if (c.mla) {
        bind_mla(b, c, L);
    } else {
        bind_attention(b, c, L, q_dim, kv_dim);
    }
    L.ffn_norm = b.vector(blk(i, c.traits.ffn_norm_tensor), c.n_embd);
    if (c.attention_sinks) L.attn_sinks = b.vector(blk(i, "attn_sinks.weight"), c.n_head);

    // FFN kind: from the tensors present, cross-checked with
    // leading_dense_block_count when the file states it.
    const bool has_router = f.tensor(blk(i, "ffn_gate_inp.weight")) != nullptr;
    if (has_router && i < c.leading_dense_blocks) {
        b.fail(blk(i, "ffn_gate_inp.weight"), "layer " + std::to_string(i) +
                                                  " has a router but leading_dense_block_count is " +
                                                  std::to_string(c.leading_dense_blocks));
    }
    if (c.traits.routes_experts && c.traits.routes_experts(c, i) != has_router) {
        b.fail(blk(i, "ffn_gate_inp.weight"),
               has_router ? "present, but layer " + std::to_string(i) + " of a " + c.arch_name + " file is a dense layer"
                          : "missing from the file (layer " + std::to_string(i) + " of a " + c.arch_name +
                                " file routes experts)");
    }
    if (!has_router && c.leading_dense_stated && c.n_expert > 0 && i >= c.leading_dense_blocks) {
        b.fail(blk(i, "ffn_gate_inp.weight"), "missing from the file (layer " + std::to_string(i) +
                                                  " comes after the leading_dense_block_count " +
                                                  std::to_string(c.leading_dense_blocks) + " dense layers, so it routes experts)");
    }
    if (!has_router) {
        if (c.n_ff <= 0) {
            const gguf::TensorInfo* g = f.tensor(blk(i, "ffn_gate.weight"));
            if (!g)
                b.fail(blk(i, "ffn_gate.weight"), "missing from the file (the layer has neither a dense FFN nor a router, " +
                                                      blk(i, "ffn_gate_inp.weight") + ")");
            c.n_ff = g->ne[1];
        }
        L.ffn = FfnKind::Dense;
        L.dense.gate = b.matrix(blk(i, "ffn_gate.weight"), {c.n_embd, c.n_ff});
        L.dense.up = b.matrix(blk(i, "ffn_up.weight"), {c.n_embd, c.n_ff});
        L.dense.down = b.matrix(blk(i, "ffn_down.weight"), {c.n_ff, c.n_embd});
        return;
    }
    if (c.n_expert <= 0) {
        b.fail(blk(i, "ffn_gate_inp.weight"), "the file has a router but no '" + c.arch_name + ".expert_count'");
    }
    L.ffn = FfnKind::Moe;
    L.router = b.matrix(blk(i, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
    L.router_select_bias = b.vector(blk(i, "exp_probs_b.bias"), c.n_expert, c.traits.router_select_bias_required);
    L.router_bias = b.vector(blk(i, "ffn_gate_inp.bias"), c.n_expert, c.traits.router_bias);
    const gguf::TensorInfo* ge = f.tensor(blk(i, "ffn_gate_exps.weight"));
    if (ge) {
        const int64_t ff = ge->ne[1];
        if (c.n_ff_expert == 0) c.n_ff_expert = ff;
        L.n_ff_expert = c.n_ff_expert;
        L.experts_stacked.gate = b.matrix(blk(i, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
        L.experts_stacked.up = b.matrix(blk(i, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
        L.experts_stacked.down = b.matrix(blk(i, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
        if (c.ffn_act == FfnAct::SwigluOai) {
            L.expert_bias_gate = b.table(blk(i, "ffn_gate_exps.bias"), c.n_ff_expert, c.n_expert);
            L.expert_bias_up = b.table(blk(i, "ffn_up_exps.bias"), c.n_ff_expert, c.n_expert);
            L.expert_bias_down = b.table(blk(i, "ffn_down_exps.bias"), c.n_embd, c.n_expert);
        }
    } else {
        // Older Mixtral conversions store each expert as its own tensors.
        if (f.tensor(blk(i, "ffn_gate_up_exps.weight")))
            b.fail(blk(i, "ffn_gate_up_exps.weight"),
                   "gate and up experts fused in one tensor are not supported yet; convert the model without "
                   "--fuse-gate-up-exps (separate ffn_gate_exps and ffn_up_exps)");
        const std::string g0 = blk(i, "ffn_gate.0.weight");
        const gguf::TensorInfo* t0 = f.tensor(g0);
        if (!t0) b.fail(blk(i, "ffn_gate_exps.weight"), "missing from the file (no expert tensors for this MoE layer)");
        if (c.n_ff_expert == 0) c.n_ff_expert = t0->ne[1];
        L.n_ff_expert = c.n_ff_expert;
        for (int64_t e = 0; e < c.n_expert; ++e) {
            const std::string x = std::to_string(e);
            FfnMatrices m;
            m.gate = b.matrix(blk(i, ("ffn_gate." + x + ".weight").c_str()), {c.n_embd, c.n_ff_expert});
            m.up = b.matrix(blk(i, ("ffn_up." + x + ".weight").c_str()), {c.n_embd, c.n_ff_expert});
            m.down = b.matrix(blk(i, ("ffn_down." + x + ".weight").c_str()), {c.n_ff_expert, c.n_embd});
            L.experts_split.push_back(std::move(m));
        }
    }
    if (f.tensor(blk(i, "ffn_gate_shexp.weight"))) {
        const int64_t sff = f.tensor(blk(i, "ffn_gate_shexp.weight"))->ne[1];
        if (c.n_ff_shared == 0) c.n_ff_shared = sff;
        L.shared.gate = b.matrix(blk(i, "ffn_gate_shexp.weight"), {c.n_embd, c.n_ff_shared});
        L.shared.up = b.matrix(blk(i, "ffn_up_shexp.weight"), {c.n_embd, c.n_ff_shared});
        L.shared.down = b.matrix(blk(i, "ffn_down_shexp.weight"), {c.n_ff_shared, c.n_embd});
        L.shared_gate = b.vector(blk(i, "ffn_gate_inp_shexp.weight"), c.n_embd, false);
    }
}

// NextN/MTP block j (blk.{n_layer + j}): a decoder layer of the trunk's kind
// (attention, never a delta net) and the tensors that feed and read it.
NextnWeights bind_nextn(const Binder& b, const gguf::File& f, ModelConfig& c, int64_t j) {
    NextnWeights n;
    const int64_t i = c.n_layer + j;
    n.block.index = i;
    bind_layer(b, f, c, n.block, /*recurrent=*/false);
    n.eh_proj = b.matrix(blk(i, "nextn.eh_proj.weight"), {2 * c.n_embd, c.n_embd});
    n.enorm = b.vector(blk(i, "nextn.enorm.weight"), c.n_embd);
    n.hnorm = b.vector(blk(i, "nextn.hnorm.weight"), c.n_embd);
    n.embed = b.matrix(blk(i, "nextn.embed_tokens.weight"), {c.n_embd, c.n_vocab}, false);
    n.head_norm = b.vector(blk(i, "nextn.shared_head_norm.weight"), c.n_embd, false);
    n.head = b.matrix(blk(i, "nextn.shared_head_head.weight"), {c.n_embd, c.n_vocab}, false);
    return n;
}

}  // namespace

ModelWeights ModelWeights::bind(const gguf::File& f, ModelConfig& c) {
    Binder b(f);
    ModelWeights w;

    const gguf::TensorInfo* emb = f.tensor("token_embd.weight");
    if (!emb) b.fail("token_embd.weight", "missing from the file");
    if (c.n_vocab == 0) c.n_vocab = emb->ne[1];
    if (emb->ne[1] != c.n_vocab) {
        b.fail("token_embd.weight", "has " + std::to_string(emb->ne[1]) + " rows but the vocabulary has " +
                                        std::to_string(c.n_vocab) + " tokens; the tokenizer does not belong to these weights");
    }
    w.tok_embd = b.matrix("token_embd.weight", {c.n_embd, c.n_vocab});
    w.output_norm = b.vector("output_norm.weight", c.n_embd);
    w.output = b.matrix("output.weight", {c.n_embd, c.n_vocab}, false);
    if (!w.output) {
        w.output = w.tok_embd;
        w.output_tied = true;
    }

    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int64_t i = 0; i < c.n_layer; ++i) {
        LayerWeights& L = w.layers[static_cast<size_t>(i)];
        L.index = i;
        bind_layer(b, f, c, L, c.recurrent(i));
    }
    // The MTP blocks where the file has them (llama.cpp loads a file without
    // them too: a trunk-only conversion); then all of each is required.
    if (c.n_nextn > 0 && f.tensor(blk(c.n_layer, "nextn.eh_proj.weight")))
        for (int64_t j = 0; j < c.n_nextn; ++j) w.nextn.push_back(bind_nextn(b, f, c, j));
    return w;
}

}  // namespace strata::model
