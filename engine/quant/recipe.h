// Quantization recipes: which weight type each class of tensor gets.
//
// A MoE model's tensors are not equal. The router decides which experts run,
// and its errors compound layer by layer; attention is small and read by every
// token; routed experts are most of the bytes and each is read only when chosen.
// So a recipe names a type per tensor class (as llama-quantize's mixes do, but
// with the classes a MoE has), optionally per layer for the routed experts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/quant_types.h"

namespace strata::gguf {
class File;
}

namespace strata::quant {

enum class TensorClass {
    Router,        // blk.N.ffn_gate_inp
    AttnQ,         // attn_q (and attn_q_a/_b, attn_qkv)
    AttnK,         // attn_k (and attn_kv_a_mqa)
    AttnV,         // attn_v (and attn_kv_b)
    AttnOutput,    // attn_output
    SharedExpert,  // ffn_*_shexp (and the shared expert's gate)
    RoutedExpert,  // ffn_{gate,up,down}_exps
    DenseFfn,      // ffn_{gate,up,down} of dense layers
    Embedding,     // token_embd
    OutputHead,    // output
    Other,         // norms, biases, anything 1-D or unknown: kept as they are
};
const char* class_name(TensorClass c);   // "router", "attn_q", ... (the recipe file's keys)
std::optional<TensorClass> parse_class(const std::string& name);

// The class of a tensor by its GGUF name, and its layer (-1 outside blocks).
TensorClass classify(const std::string& tensor_name, int64_t* layer = nullptr);

struct Recipe {
    std::string name;
    // Types per class; a class absent keeps its source type.
    std::map<TensorClass, kernels::WeightType> types;
    // Routed experts of these layers get another type.
    std::map<int64_t, kernels::WeightType> expert_layers;
    // The routed experts' down projections, when they differ (q2-experts).
    std::optional<kernels::WeightType> expert_down;
    // Per layer, types that override all of the above for that layer's
    // tensors of a class, and for its experts' down projections (llama.cpp's
    // mixes give some layers' attn_v and ffn_down more bits).
    struct LayerTypes {
        std::map<TensorClass, kernels::WeightType> types;
        std::optional<kernels::WeightType> expert_down;
    };
    std::map<int64_t, LayerTypes> layers;
    // llama.cpp's general.file_type for the result (its LLAMA_FTYPE), -1: not set.
    int64_t file_type = -1;

    // The type for a tensor; `source` when the recipe keeps it. `down`: the
    // tensor is a down projection (ffn_down_exps).
    kernels::WeightType type_for(TensorClass c, int64_t layer, bool down, kernels::WeightType source) const;
};

// A file's recipe as it is: per tensor class present (1-D tensors left out),
// the bytes of each weight type, largest first.
struct ClassTypes {
    TensorClass cls = TensorClass::Other;
    std::vector<std::pair<kernels::WeightType, uint64_t>> types;
    uint64_t bytes = 0;
    int64_t tensors = 0;
};
std::vector<ClassTypes> file_recipe(const gguf::File& f);
// "q4_k" or "q4_k 88%, q6_k 12%" (shares of the class's bytes).
std::string describe_types(const ClassTypes& c);

// What a user calls the file's quantization: llama.cpp's name for its
// general.file_type ("Q4_K_M"), else the type most of its routed experts'
// (else all its matrices') bytes are in ("Q8_0"); "" for a file without matrices.
std::string file_type_label(const gguf::File& f);

// Built-in recipes:
//   q8           every matrix Q8_0 (router F32)
//   q4-experts   router F32, attention Q8_0, shared experts and dense FFN Q8_0,
//                routed experts Q4_K, embeddings and head Q6_K
//   q4-experts-small  as q4-experts with attention, shared experts and dense FFN Q6_K
//   q2-experts   as q4-experts, routed experts Q2_K (down projections Q3_K)
//   demo         the demo model's: routed experts Q8_0, embeddings F16, the rest F32
std::vector<std::string> builtin_recipe_names();

// A built-in name, or a JSON file:
//   {"name": "mine", "types": {"router": "f32", "attn_q": "q8_0", "routed_expert": "q4_k", ...},
//    "expert_layers": {"0": "q8_0"}, "expert_down": "q3_k", "file_type": 15}
// Throws strata::Error naming what is wrong (unknown class, type, or file).
Recipe load_recipe(const std::string& name_or_path);

}  // namespace strata::quant
