#include "quant/second_moments.h"

#include <set>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace strata::quant {

std::vector<std::vector<std::string>> second_moment_runs(const gguf::File& file,
                                                         const std::function<bool(const std::string&)>& wanted,
                                                         uint64_t max_bytes) {
    std::vector<std::vector<std::string>> runs;
    uint64_t in_run = 0;
    for (const gguf::TensorInfo& t : file.tensors()) {
        if (t.n_dims < 2 || !wanted(t.name)) continue;
        const uint64_t bytes = second_moment_bytes(t);
        if (bytes > max_bytes)
            throw Error(t.name + ": its inputs' second moments alone take " + std::to_string((bytes + (1 << 20) - 1) >> 20) +
                        " MiB, over the memory budget of " + std::to_string(max_bytes >> 20) +
                        " MiB for error compensation: raise it (--gptq-memory) or quantize without --gptq");
        if (runs.empty() || in_run + bytes > max_bytes) {
            runs.emplace_back();
            in_run = 0;
        }
        runs.back().push_back(t.name);
        in_run += bytes;
    }
    return runs;
}

SecondMomentPasses::SecondMomentPasses(const model::Model& m, std::vector<std::string> prompts,
                                       CalibrationOptions options, uint64_t max_bytes)
    : model_(m), prompts_(std::move(prompts)), options_(std::move(options)) {
    if (!options_.covariance) throw Error("error compensation: no tensors named to compensate");
    runs_ = second_moment_runs(m.file(), options_.covariance, max_bytes);
    options_.max_covariance_bytes = max_bytes;
    for (size_t r = 0; r < runs_.size(); ++r)
        for (const std::string& name : runs_[r]) run_of_.emplace(name, static_cast<int64_t>(r));
}

CalibrationOptions SecondMomentPasses::first_pass(CalibrationOptions options) const {
    std::set<std::string, std::less<>> names;
    if (!runs_.empty()) names.insert(runs_.front().begin(), runs_.front().end());
    options.covariance = [names = std::move(names)](const std::string& n) { return names.count(n) > 0; };
    options.max_covariance_bytes = options_.max_covariance_bytes;
    return options;
}

void SecondMomentPasses::adopt_first_run(ActivationStats stats) {
    stats_ = std::move(stats);
    loaded_ = 0;
}

const ActivationStats::Entry* SecondMomentPasses::find(const std::string& name) {
    const auto r = run_of_.find(name);
    if (r == run_of_.end()) return nullptr;
    if (r->second != loaded_) {
        stats_ = ActivationStats{};  // the previous run's sums go before the next ones come
        loaded_ = -1;
        CalibrationOptions o = options_;
        std::set<std::string, std::less<>> names(runs_[static_cast<size_t>(r->second)].begin(),
                                                 runs_[static_cast<size_t>(r->second)].end());
        o.covariance = [&names](const std::string& n) { return names.count(n) > 0; };
        stats_ = collect_activation_stats(model_, prompts_, o);
        loaded_ = r->second;
        ++passes_;
    }
    const auto e = stats_.entries.find(name);
    return e != stats_.entries.end() && !e->second.cov.empty() ? &e->second : nullptr;
}

}  // namespace strata::quant
