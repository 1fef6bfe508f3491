#include "model/kv_shape.h"

namespace strata::model {

kv::KvCacheParams kv_cache_params(const ModelConfig& c, int64_t n_blocks, int64_t block_tokens, kv::KvType type) {
    kv::KvCacheParams p;
    p.n_layer = c.n_kv_layers();  // a recurrent model's delta nets keep no K/V
    p.n_head_kv = c.n_head_kv;
    p.head_dim = c.head_dim;
    p.keys_only = static_cast<bool>(c.mla);  // MLA: one latent row per token and layer
    p.state_floats = c.recurrent_state_floats();
    p.block_tokens = block_tokens;
    p.n_blocks = n_blocks;
    p.type = type;
    return p;
}

}  // namespace strata::model
