#include "model/config.h"

#include <cmath>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/unsupported_architecture.h"

namespace strata::model {

const ArchTraits* find_arch(const std::string& name) {
    for (const ArchTraits* a : arch::all())
        if (name == a->name) return a;
    return nullptr;
}

std::string supported_arch_names() {
    std::string s;
    for (const ArchTraits* a : arch::all()) s += (s.empty() ? "" : ", ") + std::string(a->name);
    return s;
}

int64_t metadata_in_range(const gguf::File& f, const std::string& key, uint64_t v, uint64_t max) {
    if (v == 0 || v > max)
        throw Error(f.path() + ": metadata '" + key + "' is " + std::to_string(v) + " (expected 1.." + std::to_string(max) + ")");
    return static_cast<int64_t>(v);
}

int64_t ModelConfig::n_recurrent_layers() const {
    int64_t n = 0;
    for (int64_t i : recurrent_index) n += i >= 0;
    return n;
}

float ModelConfig::attention_scale() const {
    const int64_t key = mla ? mla.key_length : head_dim;
    float scale = 1.0f / std::sqrt(static_cast<float>(key));
    if (mla && yarn && yarn.log_multiplier != 0.0f) {
        // llama.cpp's deepseek2: mscale = 1 + log_mul * ln(factor), applied squared to the scores.
        const float mscale = 1.0f + yarn.log_multiplier * std::log(yarn.factor);
        scale *= mscale * mscale;
    }
    return scale;
}

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
    ModelConfig c;
    const std::string& path = f.path();
    c.arch_name = f.get_string("general.architecture");
    const ArchTraits* traits = find_arch(c.arch_name);
    if (!traits) {
        throw UnsupportedArchitecture(path + ": architecture '" + c.arch_name + "' is not supported (supported: " +
                                          supported_arch_names() + ")",
                                      c.arch_name, supported_arch_names());
    }
    c.traits = *traits;
    c.name = f.get_string_or("general.name", "");
    const std::string a = c.arch_name + ".";

    auto positive = [&](const std::string& key, uint64_t v, uint64_t max) { return metadata_in_range(f, key, v, max); };
    c.n_embd = positive(a + "embedding_length", f.get_uint(a + "embedding_length"), 1 << 20);
    c.n_layer = positive(a + "block_count", f.get_uint(a + "block_count"), 4096);
    c.n_nextn = static_cast<int64_t>(f.get_uint_or(a + "nextn_predict_layers", 0));
    if (c.n_nextn >= c.n_layer) {
        throw Error(path + ": metadata '" + a + "nextn_predict_layers' " + std::to_string(c.n_nextn) +
                    " leaves no layers of block_count " + std::to_string(c.n_layer) + " for the model itself");
    }
    c.n_layer -= c.n_nextn;  // the MTP blocks come after the trunk
    c.n_head = positive(a + "attention.head_count", f.get_uint(a + "attention.head_count"), 4096);
    c.n_head_kv = positive(a + "attention.head_count_kv",
                           f.get_uint_or(a + "attention.head_count_kv", static_cast<uint64_t>(c.n_head)), 4096);
    if (c.n_head % c.n_head_kv != 0) {
        throw Error(path + ": attention.head_count " + std::to_string(c.n_head) +
                    " is not a multiple of attention.head_count_kv " + std::to_string(c.n_head_kv));
    }
    const uint64_t default_head_dim = static_cast<uint64_t>(c.n_embd / c.n_head);
    c.head_dim = positive(a + "attention.key_length", f.get_uint_or(a + "attention.key_length", default_head_dim),
                          1 << 16);
    const uint64_t v_len = f.get_uint_or(a + "attention.value_length", static_cast<uint64_t>(c.head_dim));
    if (traits->read_attention) {
        traits->read_attention(f, c);
    } else if (static_cast<int64_t>(v_len) != c.head_dim) {
        throw Error(path + ": attention.value_length " + std::to_string(v_len) + " differs from key_length " +
                    std::to_string(c.head_dim) + "; this engine needs them equal");
    }
    c.n_ctx_train = static_cast<int64_t>(f.get_uint_or(a + "context_length", 2048));
    c.norm_eps = static_cast<float>(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
    if (!(c.norm_eps > 0.0f) || c.norm_eps > 1.0f) {
        throw Error(path + ": metadata '" + a + "attention.layer_norm_rms_epsilon' is " +
                    std::to_string(c.norm_eps) + " (expected 0 < eps <= 1)");
    }

    c.n_rot = static_cast<int64_t>(f.get_uint_or(a + "rope.dimension_count", static_cast<uint64_t>(c.head_dim)));
    if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
        throw Error(path + ": metadata '" + a + "rope.dimension_count' is " + std::to_string(c.n_rot) +
                    " (expected an even number <= head dim " + std::to_string(c.head_dim) + ")");
    }
    c.rope_freq_base = static_cast<float>(f.get_float_or(a + "rope.freq_base", 10000.0));
    if (!(c.rope_freq_base > 0.0f)) throw Error(path + ": metadata '" + a + "rope.freq_base' must be positive");
    const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
    if (scaling == "linear" || scaling == "yarn") {
        const double factor = f.get_float_or(a + "rope.scaling.factor", 1.0);
        if (!(factor > 0.0)) throw Error(path + ": metadata '" + a + "rope.scaling.factor' must be positive");
        c.rope_freq_scale = static_cast<float>(1.0 / factor);
        if (scaling == "yarn" && factor != 1.0) {
            c.yarn.factor = static_cast<float>(factor);
            const std::string orig = a + "rope.scaling.original_context_length";
            if (!f.has(orig)) throw Error(path + ": YaRN scaling without metadata '" + orig + "'");
            c.yarn.orig_ctx = positive(orig, f.get_uint(orig), 1u << 30);
            c.yarn.log_multiplier = static_cast<float>(f.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0));
        }
    } else if (scaling != "none") {
        throw Error(path + ": rope scaling type '" + scaling + "' is not supported (supported: none, linear, yarn)");
    }
    if (c.mla && c.n_rot >= c.mla.key_length) {
        throw Error(path + ": metadata '" + a + "rope.dimension_count' " + std::to_string(c.n_rot) +
                    " leaves no no-RoPE part of attention.key_length " + std::to_string(c.mla.key_length));
    }
    if (f.has(a + "rope.scale_linear")) c.rope_freq_scale = static_cast<float>(1.0 / f.get_float(a + "rope.scale_linear"));
    if (const gguf::TensorInfo* t = f.tensor("rope_freqs.weight")) {
        const int64_t pairs = c.n_rot / 2;
        if (t->ne[0] != pairs || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 || t->type != kernels::WeightType::F32)
            throw Error(path + ": tensor 'rope_freqs.weight': expected " + std::to_string(pairs) +
                        " f32 factors (one per rotated pair), found " + t->shape_string());
        c.rope_freq_factors.resize(static_cast<size_t>(pairs));
        kernels::dequantize_row(t->type, t->data, c.rope_freq_factors.data(), pairs);
        for (float v : c.rope_freq_factors)
            if (!(v > 0.0f)) throw Error(path + ": tensor 'rope_freqs.weight' holds a factor that is not positive");
    }

    c.n_ff = static_cast<int64_t>(f.get_uint_or(a + "feed_forward_length", 0));
    c.n_expert = static_cast<int64_t>(f.get_uint_or(a + "expert_count", 0));
    c.n_expert_used = static_cast<int64_t>(f.get_uint_or(a + "expert_used_count", 0));
    if (c.n_expert > 4096) throw Error(path + ": metadata '" + a + "expert_count' is absurd: " + std::to_string(c.n_expert));
    if (c.n_expert > 0 && (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)) {
        throw Error(path + ": metadata '" + a + "expert_used_count' is " + std::to_string(c.n_expert_used) +
                    " (expected 1.." + std::to_string(c.n_expert) + ")");
    }
    c.n_ff_expert = static_cast<int64_t>(f.get_uint_or(a + "expert_feed_forward_length", 0));
    c.n_ff_shared = static_cast<int64_t>(f.get_uint_or(a + "expert_shared_feed_forward_length", 0));
    c.leading_dense_blocks = static_cast<int64_t>(f.get_uint_or(a + "leading_dense_block_count", 0));
    c.leading_dense_stated = f.has(a + "leading_dense_block_count");
    if (c.leading_dense_blocks > c.n_layer) {
        throw Error(path + ": metadata '" + a + "leading_dense_block_count' " + std::to_string(c.leading_dense_blocks) +
                    " exceeds block_count " + std::to_string(c.n_layer));
    }
    const uint64_t gating = f.get_uint_or(a + "expert_gating_func", 1);
    if (gating != 1 && gating != 2) {
        throw Error(path + ": metadata '" + a + "expert_gating_func' is " + std::to_string(gating) +
                    " (supported: 1 softmax, 2 sigmoid)");
    }
    c.gating = gating == 2 ? Gating::Sigmoid : Gating::Softmax;
    c.n_expert_groups = static_cast<int64_t>(f.get_uint_or(a + "expert_group_count", 0));
    c.n_group_used = static_cast<int64_t>(f.get_uint_or(a + "expert_group_used_count", 0));
    if (c.n_expert_groups > 1) {
        if (c.n_expert % c.n_expert_groups != 0 || c.n_group_used < 1 || c.n_group_used > c.n_expert_groups ||
            c.n_group_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used) {
            throw Error(path + ": expert groups do not fit: " + std::to_string(c.n_expert) + " experts in " +
                        std::to_string(c.n_expert_groups) + " groups ('" + a + "expert_group_count'), " +
                        std::to_string(c.n_group_used) + " used ('" + a + "expert_group_used_count'), top-" +
                        std::to_string(c.n_expert_used));
        }
    }
    c.expert_weights_norm = f.get_bool_or(a + "expert_weights_norm", traits->default_expert_weights_norm);
    c.expert_weights_scale = static_cast<float>(f.get_float_or(a + "expert_weights_scale", 1.0));
    if (!(c.expert_weights_scale > 0.0f)) {
        throw Error(path + ": metadata '" + a + "expert_weights_scale' must be positive");
    }
    if (traits->read_metadata) traits->read_metadata(f, c);
    if (traits->recurrent_layer) {
        c.recurrent_index.assign(static_cast<size_t>(c.n_layer), -1);
        c.kv_index.assign(static_cast<size_t>(c.n_layer), -1);
        int64_t k = 0, a = 0;
        for (int64_t il = 0; il < c.n_layer; ++il) {
            if (traits->recurrent_layer(c, il)) c.recurrent_index[static_cast<size_t>(il)] = k++;
            else c.kv_index[static_cast<size_t>(il)] = a++;
        }
        if (a == 0) throw Error(path + ": every layer of this " + c.arch_name + " file is recurrent; it needs an attention layer");
    }
    // n_vocab comes from the token table (checked against the embedding by the weights).
    if (const auto* toks = f.get_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int64_t>(toks->size());
    c.n_vocab = static_cast<int64_t>(f.get_uint_or(a + "vocab_size", static_cast<uint64_t>(c.n_vocab)));
    return c;
}

void rope_tables(const ModelConfig& c, const int64_t* pos, int64_t n, int64_t stride, float* out) {
    const float* factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
    if (!c.yarn) {
        for (int64_t t = 0; t < n; ++t)
            kernels::ops::rope_table(c.n_rot, pos[t], c.rope_freq_base, c.rope_freq_scale, out + t * stride, factors);
        return;
    }
    // YaRN as llama.cpp applies it (ext_factor 1): deepseek2 folds the
    // magnitude correction into the attention scale instead
    // (ModelConfig::attention_scale), so its cos/sin stay unscaled.
    float corr[2];
    kernels::ops::rope_yarn_corr_dims(c.n_rot, c.yarn.orig_ctx, c.rope_freq_base, c.yarn.beta_fast, c.yarn.beta_slow,
                                      corr);
    const float mscale = c.mla ? 1.0f : 1.0f + 0.1f * std::log(c.yarn.factor);
    for (int64_t t = 0; t < n; ++t)
        kernels::ops::rope_table_yarn(c.n_rot, pos[t], c.rope_freq_base, c.rope_freq_scale, 1.0f, corr, mscale,
                                      out + t * stride, factors);
}

}  // namespace strata::model
