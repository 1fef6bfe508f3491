#include "draft.h"

#include "args.h"
#include "common/error.h"

namespace strata::cli {

void add_draft_options(Args& a) {
    a.option("--draft", "", "D",
             "speculative decoding: a GGUF with the same vocabulary, the model's own MTP block (mtp), or the model\n"
             "itself with fewer layers or experts (self:layers=N,experts=K), optionally routing only among cached\n"
             "experts (…,resident)");
    a.option("--spec-k", "", "K", "speculative decoding: draft tokens per round (adapts between 1 and 2K)", "4");
    a.option("--spec-p-min", "", "P",
             "speculative decoding: stop a round's draft at a token it gives less than probability P (0: never)", "0");
}

core::DraftSpec parse_draft_option(const std::string& spec) {
    try {
        return core::DraftSpec::parse(spec);
    } catch (const Error& e) {
        throw UsageError(std::string("--draft: ") + e.what());
    }
}

Draft make_draft(const std::string& spec, core::Engine& engine, int threads) {
    const core::DraftSpec d = parse_draft_option(spec);
    if (!d.on()) throw UsageError("--draft '" + spec + "' names no draft: leave --draft out for plain decoding");
    return core::make_draft(d, engine, threads);
}

}  // namespace strata::cli
