// What quantization did to a model (strata-cli quality BASE QUANT): the same
// prompts through both, teacher-forced, compared position by position:
//   - perplexity of each over the prompts' next tokens, and the log of their
//     ratio with its standard error;
//   - KL(base || quant) of the next-token distributions: mean, p95, p99;
//   - top-1 agreement;
//   - per MoE layer, routing drift: how often the top-k expert sets agree
//     exactly, their Jaccard overlap, and KL between the router probabilities
//     (the seeds' warning: "the same question selects a very different set of
//     experts before and after quantization").
// llama.cpp's llama-perplexity --kl-divergence reports the first three; the
// routing figures are Strata's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::model {
class Model;
}

namespace strata::quant {

struct LayerDrift {
    int64_t layer = 0;
    int64_t tokens = 0;
    double exact_set = 0;    // share of tokens whose top-k sets are equal
    double jaccard = 0;      // mean |A & B| / |A | B|
    double router_kl = 0;    // mean KL(base || quant) of the router probabilities
};

struct QualityReport {
    int64_t prompts = 0, positions = 0, predicted = 0;  // predicted: positions with a next token
    double ppl_base = 0, ppl_quant = 0;
    // ln(ppl_quant / ppl_base), the mean over predicted positions of the
    // per-position NLL difference, and that mean's standard error (positions
    // taken as independent, as llama-perplexity's "Mean ln(PPL(Q)/PPL(base))"
    // does): a rise within about two of these is not told apart from none.
    double ln_ppl_ratio = 0, ln_ppl_ratio_se = 0;
    double kl_mean = 0, kl_p95 = 0, kl_p99 = 0, kl_max = 0;
    double top1 = 0;
    std::vector<LayerDrift> layers;  // MoE layers, in order
};

// Runs every token list (BOS included) through both models on `threads`
// threads. Throws strata::Error when the models do not share a vocabulary and
// MoE shape, or a list is longer than the context.
QualityReport measure_quality(const model::Model& base, const model::Model& quant,
                              const std::vector<std::vector<int32_t>>& token_lists, int threads = 0);

}  // namespace strata::quant
