#include "model/model.h"

#include "common/error.h"
#include "common/log.h"

namespace strata::model {

std::unique_ptr<Model> Model::load(const std::string& path, bool random_access) {
    std::unique_ptr<Model> m(new Model());
    m->file_ = gguf::File::open(path);
    if (random_access) m->file_->advise_random();
    m->config_ = ModelConfig::from_gguf(*m->file_);
    m->weights_ = ModelWeights::bind(*m->file_, m->config_);
    m->vocab_ = tok::Vocab::from_gguf(*m->file_);
    if (m->vocab_->n_tokens() != m->config_.n_vocab) {
        throw Error(path + ": the vocabulary has " + std::to_string(m->vocab_->n_tokens()) +
                    " tokens but token_embd.weight has " + std::to_string(m->config_.n_vocab) + " rows");
    }
    if (!m->weights_.nextn.empty()) m->make_nextn_view();
    const ModelConfig& c = m->config_;
    logger("model")->info("{}: {} '{}', {} layers, d={}, {} heads ({} kv), {} experts (top-{}), vocab {}", path,
                          c.arch_name, c.name, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.n_expert,
                          c.n_expert_used, c.n_vocab);
    return m;
}

void Model::make_nextn_view() {
    const NextnWeights& n = weights_.nextn.front();
    std::unique_ptr<Model> v(new Model());
    v->file_ = file_;
    v->vocab_ = vocab_;
    ModelConfig& c = v->config_;
    c = config_;
    c.n_layer = 1;
    c.n_nextn = 0;
    c.leading_dense_blocks = 0;
    if (!c.recurrent_index.empty()) {  // the block attends: no recurrent state, one KV layer
        c.recurrent_index.assign(1, -1);
        c.kv_index.assign(1, 0);
    }
    ModelWeights& w = v->weights_;
    w.tok_embd = n.embed ? n.embed : weights_.tok_embd;
    w.output_norm = n.head_norm.empty() ? weights_.output_norm : n.head_norm;
    w.output = n.head ? n.head : weights_.output;
    w.layers.push_back(n.block);
    w.layers.back().index = 0;
    auto in = std::make_shared<NextnInput>();
    in->eh_proj = n.eh_proj;
    in->enorm = n.enorm;
    in->hnorm = n.hnorm;
    w.nextn_input = std::move(in);
    nextn_ = std::move(v);
}

namespace {
int64_t mat_params(const Matrix& m) { return m ? m.cols * m.rows * m.slabs : 0; }
uint64_t mat_bytes(const Matrix& m) { return m ? m.slab_bytes() * static_cast<uint64_t>(m.slabs) : 0; }
int64_t ffn_params(const FfnMatrices& f) { return mat_params(f.gate) + mat_params(f.up) + mat_params(f.down); }
uint64_t ffn_bytes(const FfnMatrices& f) { return mat_bytes(f.gate) + mat_bytes(f.up) + mat_bytes(f.down); }
}  // namespace

Model::Sizes Model::sizes() const {
    Sizes s;
    const ModelConfig& c = config_;
    const ModelWeights& w = weights_;
    auto add_shared = [&](int64_t p, uint64_t b) {
        s.params_total += p;
        s.params_active += p;
        s.bytes_total += b;
        s.bytes_active += b;
    };
    // The embedding reads one row per token, but it is resident and counted in
    // full toward the total; toward active bytes only the row is counted.
    s.params_total += mat_params(w.tok_embd);
    s.bytes_total += mat_bytes(w.tok_embd);
    s.params_active += c.n_embd;
    s.bytes_active += w.tok_embd.row_bytes;
    if (!w.output_tied) add_shared(mat_params(w.output), mat_bytes(w.output));
    else {
        s.params_active += mat_params(w.output);
        s.bytes_active += mat_bytes(w.output);
    }
    add_shared(c.n_embd, c.n_embd * 4);
    int64_t moe_layers = 0, experts_seen = 0;
    for (const LayerWeights& L : w.layers) {
        const int64_t vec = static_cast<int64_t>(L.attn_norm.size() + L.ffn_norm.size() + L.bq.size() + L.bk.size() +
                                                 L.bv.size() + L.bo.size() + L.q_norm.size() + L.k_norm.size() +
                                                 L.shared_gate.size());
        add_shared(vec, static_cast<uint64_t>(vec) * 4);
        add_shared(mat_params(L.wq) + mat_params(L.wk) + mat_params(L.wv) + mat_params(L.wo),
                   mat_bytes(L.wq) + mat_bytes(L.wk) + mat_bytes(L.wv) + mat_bytes(L.wo));
        if (L.ffn == FfnKind::Dense) {
            add_shared(ffn_params(L.dense), ffn_bytes(L.dense));
            continue;
        }
        add_shared(mat_params(L.router), mat_bytes(L.router));
        add_shared(ffn_params(L.shared), ffn_bytes(L.shared));
        const int64_t n_exp = L.n_experts();
        for (int64_t e = 0; e < n_exp; ++e) {
            const FfnMatrices x = L.expert(e);
            const int64_t p = ffn_params(x);
            const uint64_t b = ffn_bytes(x);
            s.params_total += p;
            s.bytes_total += b;
            s.bytes_experts += b;
            if (e < c.n_expert_used) {
                s.params_active += p;
                s.bytes_active += b;
            }
        }
        ++moe_layers;
        experts_seen += n_exp;
    }
    // Quantization mixes can give layers different expert sizes: report the mean.
    if (experts_seen > 0) s.bytes_per_expert = s.bytes_experts / static_cast<uint64_t>(experts_seen);
    return s;
}

}  // namespace strata::model
