// Model hyper-parameters read from GGUF metadata, and the per-architecture
// traits that turn one generic decoder into llama / Mixtral / qwen2moe /
// qwen3moe / olmoe. Adding an architecture means adding a row to the traits
// table (config.cpp), not a new forward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::gguf {
class File;
}

namespace strata::model {

enum class Arch { Llama, Qwen2Moe, Qwen3Moe, Olmoe };

enum class RopeType { Normal, NeoX };  // adjacent pairs vs halves

// How Q/K are normalised before RoPE.
enum class QkNorm { None, PerHead, WholeProjection };

struct ArchTraits {
    Arch arch;
    const char* name;               // general.architecture
    RopeType rope;
    QkNorm qk_norm;
    bool default_expert_weights_norm;  // renormalise top-k router weights
};

const ArchTraits* find_arch(const std::string& name);
std::string supported_arch_names();  // "llama, qwen2moe, ..."

struct ModelConfig {
    ArchTraits traits{};
    std::string arch_name;
    std::string name;          // general.name

    int64_t n_vocab = 0;
    int64_t n_embd = 0;
    int64_t n_layer = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;      // key/value length per head
    int64_t n_ctx_train = 0;
    float norm_eps = 1e-5f;

    int64_t n_rot = 0;         // rotary dims per head (<= head_dim)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // linear scaling: 1 / factor

    int64_t n_ff = 0;              // dense FFN width
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_ff_expert = 0;
    int64_t n_ff_shared = 0;       // qwen2moe shared expert width (0: none)
    int64_t leading_dense_blocks = 0;
    bool expert_weights_norm = false;
    float expert_weights_scale = 1.0f;

    // Reads hyper-parameters. Throws strata::Error naming the key and the file
    // for a missing or inconsistent value.
    static ModelConfig from_gguf(const gguf::File& f);
};

}  // namespace strata::model
