// Activation-aware channel scaling (Lin et al., "AWQ: Activation-aware Weight
// Quantization for LLM Compression and Acceleration", 2023), folded into the
// model so the result is still a standard GGUF with the same tensors.
//
// A few input channels carry most of the signal (the outliers); in a block
// format they share a scale with the rest, so their relative error is that of
// the block. Multiplying column j of every matrix that reads an input by s_j,
// and dividing the input itself by s_j, leaves the products unchanged but
// gives the salient channels more of the grid. The division is folded where
// it costs nothing:
//   - into the RMSNorm weight before attention (Q/K/V read it) and before the
//     FFN (the router, the routed and shared experts' gate and up read it; a
//     router kept in F32, as every built-in recipe keeps it, is scaled
//     exactly; F16/BF16 norms and readers take one more rounding);
//   - into an FFN's up-projection rows before its down projection (SwiGLU is
//     linear in up), per expert.
// s_j = m_j^alpha (normalised), m_j the channel's RMS activation over the
// calibration text; alpha is searched on a grid per group to minimise the
// importance-weighted error of the group's matrices quantized to their
// recipe types, alpha = 0 (no scaling) included, so a group never gets worse
// on that measure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "quant/importance.h"
#include "quant/recipe.h"

namespace strata::gguf {
class File;
}

namespace strata::quant {

struct ChannelScaling {
    // Matrices: column j of slab e (an expert of a 3-D tensor) multiplied by
    // columns[name][e * cols + j].
    std::map<std::string, std::vector<float>> columns;
    // Matrices: row i of slab e divided by rows[name][e * rows + i].
    std::map<std::string, std::vector<float>> rows;
    // 1-D tensors (norm weights): element j divided by norms[name][j]. A 1-D
    // tensor in `columns` (qwen2moe's shared-expert gate) is multiplied.
    std::map<std::string, std::vector<float>> norms;

    struct Group {
        std::string what;      // "blk.3 ffn input", "blk.3 down (per expert)"
        float alpha = 0;       // the mean over the group's searches for per-expert groups
        double error_before = 0, error_after = 0;  // the weighted error at alpha 0 and at the choice
    };
    std::vector<Group> groups;
};

struct AwqOptions {
    int threads = 1;
    int64_t sample_rows = 64;   // rows per matrix (per expert) the search quantizes
    int alpha_steps = 10;       // alpha in {0, 1/steps, ..., 1}
};

// Searches the scales for every group of `in` whose matrices the recipe
// quantizes, from the importance matrix's mean squares.
ChannelScaling awq_search(const gguf::File& in, const Recipe& recipe, const ImportanceMatrix& importance,
                          const AwqOptions& options);

}  // namespace strata::quant
