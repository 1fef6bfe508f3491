// The shared weights (everything but the routed experts) copied out of the
// model file into the fast tier, through the ledger (weights.shared and
// weights.router), so the engine's RAM budget is real: nothing it computes
// with lives in the file mapping, whose pages are dropped after loading.
#pragma once

#include <functional>
#include <memory>

#include "experts/slow_tier.h"
#include "memory/aligned_buffer.h"
#include "memory/ledger.h"
#include "model/model.h"

namespace strata::core {

class ResidentWeights {
public:
    // Reads through `source` (O_DIRECT on the file), so loading does not fill
    // the page cache either. Throws strata::Error (the ledger's message when the
    // budget does not hold them).
    // `progress(bytes_done, bytes_total)` is called after each matrix; it returns
    // false to stop, and the constructor then throws strata::Cancelled.
    using Progress = std::function<bool(uint64_t done, uint64_t total)>;
    ResidentWeights(const model::Model& m, memory::Ledger& ledger, memory::Tier tier, experts::SlowTier& source,
                    const Progress& progress = {});
    ~ResidentWeights();
    ResidentWeights(const ResidentWeights&) = delete;
    ResidentWeights& operator=(const ResidentWeights&) = delete;

    // The model's weight description with every shared matrix pointing into
    // the fast-tier copy; expert matrices keep their file offsets (the expert
    // store serves them).
    const model::ModelWeights& weights() const { return weights_; }
    uint64_t shared_bytes() const { return shared_.size(); }
    uint64_t router_bytes() const { return router_.size(); }
    // Bytes rewritten in place into the CPU kernels' layout on load
    // (model::repack_for_kernels; no extra memory).
    uint64_t repacked_bytes() const { return repacked_; }

private:
    memory::AlignedBuffer shared_, router_;
    model::ModelWeights weights_;
    uint64_t repacked_ = 0;
    // Weights derived on load (model::ModelWeights::derived_bytes), reserved
    // in the ledger as weights.shared for as long as these weights live.
    memory::Ledger* ledger_ = nullptr;
    memory::Tier tier_;
    uint64_t derived_ = 0;
};

}  // namespace strata::core
