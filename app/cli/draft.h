// --draft for `strata-cli run`, `bench` and `serve`: core::make_draft with
// the command's errors (a malformed spec is a usage error).
#pragma once

#include <string>

#include "core/draft.h"

namespace strata::cli {

using Draft = core::Draft;

class Args;

// --draft, --spec-k and --spec-p-min, as run, bench and serve take them.
void add_draft_options(Args& a);

// Throws UsageError for a malformed spec, strata::Error for a draft the model
// cannot have or a file that is not a model or has another vocabulary.
Draft make_draft(const std::string& spec, core::Engine& engine, int threads);
core::DraftSpec parse_draft_option(const std::string& spec);

}  // namespace strata::cli
