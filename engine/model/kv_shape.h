// The paged KV cache's shape for a model (kv/kv_cache.h): what a layer keeps
// per token (K and V per KV head, or MLA's one latent row; nothing for a
// delta-net layer, whose recurrent state is per sequence).
#pragma once

#include <cstdint>

#include "kv/kv_cache.h"
#include "model/config.h"

namespace strata::model {

// The paged KV cache shape of a model: n_blocks blocks of block_tokens
// positions, every layer and KV head, elements of `type`.
kv::KvCacheParams kv_cache_params(const ModelConfig& c, int64_t n_blocks, int64_t block_tokens = 16,
                                  kv::KvType type = kv::KvType::F32);

}  // namespace strata::model
