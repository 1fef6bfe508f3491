// The draft of speculative decoding (sched/speculative.h) for a loaded
// engine, as one spec names it: a GGUF with the target's vocabulary, the
// target itself run cheaper (fewer layers, fewer experts per token, and/or
// routing only among the experts already in fast memory), or the file's own
// NextN/MTP block. Made here for every front end: `strata-cli run/bench
// --draft`, `serve --draft`, and the app's Settings (through EngineCore).
#pragma once

#include <memory>
#include <string>

#include "core/engine.h"
#include "experts/expert_store.h"
#include "runner/context.h"
#include "model/model.h"
#include "sched/drafter.h"

namespace strata::core {

struct DraftSpec {
    enum class Kind { Off, Mtp, Self, File };
    Kind kind = Kind::Off;
    std::string path;                // File
    int64_t layers = 0, experts = 0; // Self: the first N layers, K experts a token (0: the target's)
    bool resident = false;           // Self: route only among experts already in fast memory
    bool on() const { return kind != Kind::Off; }
    // "mtp", "self:layers=N,experts=K[,resident]" or a GGUF path ("off" or "": Off).
    // Throws strata::Error saying what was expected.
    static DraftSpec parse(const std::string& text);
    // Equal keys make the same draft (reused between requests).
    std::string key() const;
};

struct Draft {
    std::unique_ptr<model::Model> model;             // a separate draft file (null for a self-draft)
    std::unique_ptr<experts::DraftExperts> experts;  // a self-draft's view of the expert cache
    std::unique_ptr<model::Context> ctx;             // a file's or self-draft's context (null for mtp)
    std::unique_ptr<sched::Drafter> drafter;         // what generate_speculative runs
};

// Throws strata::Error: a draft the model cannot have (MTP without a block or
// on a GPU, no more layers or experts than the target), a file that is not a
// model or has another vocabulary.
Draft make_draft(const DraftSpec& spec, Engine& engine, int threads);

}  // namespace strata::core
