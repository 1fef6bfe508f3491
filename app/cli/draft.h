// The draft of speculative decoding, as --draft names it: a GGUF with the
// target's vocabulary, the target itself run cheaper
// (self:layers=N,experts=K[,resident]: fewer layers, fewer experts per token,
// and/or routing only among the experts already in fast memory), or the
// file's own NextN/MTP block (mtp).
#pragma once

#include <memory>
#include <string>

#include "core/engine.h"
#include "experts/expert_store.h"
#include "model/context.h"
#include "model/model.h"
#include "sched/drafter.h"

namespace strata::cli {

struct Draft {
    std::unique_ptr<model::Model> model;             // a separate draft file (null for a self-draft)
    std::unique_ptr<experts::DraftExperts> experts;  // a self-draft's view of the expert cache
    std::unique_ptr<model::Context> ctx;             // a file's or self-draft's context (null for mtp)
    std::unique_ptr<sched::Drafter> drafter;         // what generate_speculative runs
};

// Throws UsageError for a malformed spec, strata::Error for a file that is not
// a model or has another vocabulary.
Draft make_draft(const std::string& spec, core::Engine& engine, int threads);

}  // namespace strata::cli
