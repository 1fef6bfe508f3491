// The inputs' second moments for error compensation (quantize --gptq),
// collected in passes that each fit a memory budget.
//
// The sums take cols^2 doubles per matrix and expert: about 74 GiB for all of
// OLMoE-1B-7B's, more than most machines hold. So the compensated tensors, in
// file order, are split into runs of at most `max_bytes`, and a run's sums are
// collected by one pass over the calibration prompts when the quantizer first
// asks for one of its tensors. The quantizer asks in file order, so each pass
// runs once and only one run is in memory at a time; the sums are the same as
// one pass would collect (each tensor's tokens arrive in the same order).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "quant/activation_stats.h"

namespace strata::gguf {
class File;
}

namespace strata::quant {

// The tensors of `file` that `wanted` names, in file order, split into runs
// whose second moments take at most max_bytes each. Throws strata::Error
// naming a tensor whose own sums are over the budget.
std::vector<std::vector<std::string>> second_moment_runs(const gguf::File& file,
                                                         const std::function<bool(const std::string&)>& wanted,
                                                         uint64_t max_bytes);

class SecondMomentPasses {
public:
    // `options.covariance` names the tensors to compensate; the model and the
    // prompts are kept (by reference and by value) for the later passes.
    SecondMomentPasses(const model::Model& m, std::vector<std::string> prompts, CalibrationOptions options,
                       uint64_t max_bytes);

    int64_t runs() const { return static_cast<int64_t>(runs_.size()); }
    int64_t passes_run() const { return passes_; }
    // `options` made to collect the first run's sums too (its tensors and this
    // budget), for the pass that collects the importance statistics; hand its
    // result to adopt_first_run().
    CalibrationOptions first_pass(CalibrationOptions options) const;
    void adopt_first_run(ActivationStats stats);
    // The sums of tensor `name`, running its run's pass when that run is not
    // the one in memory; null for a tensor not compensated. Throws what
    // collect_activation_stats throws (strata::Cancelled included).
    const ActivationStats::Entry* find(const std::string& name);

private:
    const model::Model& model_;
    std::vector<std::string> prompts_;
    CalibrationOptions options_;
    std::vector<std::vector<std::string>> runs_;
    std::map<std::string, int64_t, std::less<>> run_of_;
    int64_t loaded_ = -1;   // the run whose sums are in stats_
    int64_t passes_ = 0;    // passes run here (adopt_first_run's not counted)
    ActivationStats stats_;
};

}  // namespace strata::quant
