// Calibration statistics for the quantizer (strata-cli quantize
// --calibration): run the model over calibration prompts and record, for
// every weight matrix, the mean square of each input channel over the tokens
// that reached it; for the routed experts' stacked tensors, per expert over
// the tokens routed to that expert. They are the importance weights of the
// scale search (ImportanceMatrix, as llama.cpp's imatrix), and are saved in
// llama.cpp's imatrix file format so either tool can reuse them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "quant/importance.h"

namespace strata::model {
class Model;
}
namespace strata::gguf {
struct TensorInfo;
}

namespace strata::quant {

struct ActivationStats {
    struct Entry {
        int64_t cols = 0;              // input channels of one matrix
        std::vector<double> sum_sq;    // cols per slab (expert), summed over tokens
        std::vector<int64_t> tokens;   // per slab: the tokens that reached it
        // With CalibrationOptions::covariance: per slab the cols x cols sums
        // of x x^T (the input's second moments, for error compensation);
        // only the upper triangle (j >= i) is summed.
        std::vector<double> cov;
    };
    std::map<std::string, Entry, std::less<>> entries;  // by tensor name
    int64_t prompts = 0, tokens = 0;
    std::string dataset;                   // the prompts file's name

    // The mean squares by tensor; an expert no token reached gets ones
    // (no preference among its channels), and is counted in *unreached.
    ImportanceMatrix importance(int64_t* unreached = nullptr) const;
};

// The bytes of tensor t's second moments as collected (cols x cols doubles
// per matrix, an expert each for the stacked experts).
uint64_t second_moment_bytes(const gguf::TensorInfo& t);

struct CalibrationOptions {
    int threads = 1;
    int64_t max_tokens_per_prompt = 512;   // longer prompts are cut (each is one chunk)
    // Tensors whose inputs' full second moments (x x^T) are also collected
    // (quantize --gptq); null: none. They take cols^2 doubles per matrix, so
    // more than max_covariance_bytes in all is refused up front.
    std::function<bool(const std::string& tensor)> covariance;
    uint64_t max_covariance_bytes = uint64_t{8} << 30;
    // Called after each prompt with prompts done and in all; false cancels
    // (collect_activation_stats then throws strata::Cancelled).
    std::function<bool(int64_t done, int64_t total)> progress;
};

// Runs each prompt through the model from an empty context (BOS first where
// the vocabulary has one) and records every matrix product's input. Throws
// strata::Error for an empty prompt list or a model that cannot run.
ActivationStats collect_activation_stats(const model::Model& m, const std::vector<std::string>& prompts,
                                         const CalibrationOptions& options);

// Writes `m` as llama.cpp's imatrix file (the legacy binary format
// llama-quantize --imatrix and read_llama_imatrix read): per entry the mean
// squares with a call count of 1, then the chunk count and the dataset name.
// Atomic: the file appears whole or not at all. Throws strata::Error.
void write_llama_imatrix(const ImportanceMatrix& m, const std::string& path);

}  // namespace strata::quant
