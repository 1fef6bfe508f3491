// strata-cli quantize: a GGUF in, a GGUF out, each tensor converted to the
// type its class gets in a recipe (recipe.h), with ggml's reference quantizers
// (kernels::quantize_row: the bytes llama-quantize writes without an importance
// matrix), so the result is a standard GGUF llama.cpp reads.
//
// Deterministic (rows are independent, whatever the thread count) and atomic:
// the output appears complete or not at all, and a cancel (the progress
// callback returning false) writes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/activation_stats.h"
#include "quant/awq.h"
#include "quant/importance.h"
#include "quant/recipe.h"

namespace strata::quant {

struct QuantizeOptions {
    Recipe recipe;
    int threads = 1;
    // Importance per input channel (llama.cpp's imatrix): q4_0, q4_1, q5_0,
    // q5_1 and q2_K..q6_K matrices with an entry are quantized with it (the
    // bytes llama-quantize --imatrix writes); other types, and tensors without
    // an entry, without.
    const ImportanceMatrix* importance = nullptr;
    // Activation-aware channel scaling (awq_search's result) applied to the
    // tensors it names before they are quantized; null: none.
    const ChannelScaling* scaling = nullptr;
    // Error compensation (gptq.h) for the matrices whose inputs' second
    // moments this finds (an entry with cov), in types that support it; null:
    // none. Called from one thread, in file order, once per tensor:
    // SecondMomentPasses::find collects them pass by pass, or see
    // second_moments_of for statistics already collected.
    std::function<const ActivationStats::Entry*(const std::string& tensor)> second_moments;
    double gptq_damp = 0.01;   // GPTQ's dampening, a fraction of the mean diagonal
    // Called as tensors are converted, with the source bytes done and in all;
    // return false to cancel (quantize_file then throws strata::Cancelled).
    std::function<bool(uint64_t done, uint64_t total)> progress;
};

struct TensorReport {
    std::string name;
    TensorClass cls = TensorClass::Other;
    kernels::WeightType from = kernels::WeightType::F32, to = kernels::WeightType::F32;
    uint64_t bytes_in = 0, bytes_out = 0;
    std::string note;  // why the type differs from the recipe's, if it does
    bool weighted = false;  // quantized with the importance matrix
    bool scaled = false;    // channel scaling applied
    int64_t compensated = 0;  // matrices (experts) quantized with error compensation
};

struct QuantizeReport {
    std::vector<TensorReport> tensors;
    uint64_t bytes_in = 0, bytes_out = 0;   // tensor data
    uint64_t file_bytes = 0;                // the output file
    bool input_quantized = false;           // some source tensor was already quantized
    std::vector<std::string> warnings;
};

// The type tensor t gets under the recipe: its class's type, or a fallback
// (with the reason in *note) for rows that do not fit its blocks, as
// llama-quantize falls back; t's own type for 1-D tensors and kept classes.
kernels::WeightType target_type(const Recipe& recipe, const gguf::TensorInfo& t, std::string* note);

// F32, F16 or BF16.
bool is_float_type(kernels::WeightType t);

// Whether --gptq compensates tensor t under the recipe: a matrix (not the
// looked-up token embeddings) converted to a type with block levels. The
// calibration collects second moments for exactly these.
bool compensated_by_gptq(const Recipe& recipe, const gguf::TensorInfo& t);

// QuantizeOptions::second_moments from statistics collected with
// CalibrationOptions::covariance (kept by reference).
std::function<const ActivationStats::Entry*(const std::string&)> second_moments_of(const ActivationStats& stats);

// Throws strata::Error (unreadable input, unsupported source type, a write
// that failed) or strata::Cancelled.
QuantizeReport quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opt);

}  // namespace strata::quant
