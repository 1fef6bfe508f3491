// A grammar as the sampler's constraint: the grammar's matcher (grammar/
// matcher.h) over the vocabulary's token pieces. End-of-generation tokens are
// allowed exactly where the text so far completes the grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/matcher.h"
#include "sched/sampler.h"

namespace strata::tok {
class Vocab;
}

namespace strata::sched {

class GrammarConstraint : public TokenConstraint {
public:
    // Throws grammar::GrammarError when the grammar is too ambiguous to follow.
    // `markers`: control tokens the grammar may use by their text (SamplingParams::render_tokens).
    GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const tok::Vocab& vocab,
                      std::vector<int32_t> markers = {});

    bool allows(int32_t token) override;
    void allowed(std::vector<uint8_t>& allowed) override;
    // The token was appended to the text. Throws strata::Error when the
    // grammar does not allow it (a token that did not come from a sampler
    // under this constraint).
    void accept(int32_t token);
    // The grammar is complete and nothing more can follow.
    bool finished() const { return matcher_.finished(); }
    bool complete() const { return matcher_.complete(); }

private:
    bool is_end(int32_t token) const;
    std::string_view text_of(int32_t token) const;  // "" for a token that cannot be text here

    grammar::Matcher matcher_;
    const tok::Vocab& vocab_;
    grammar::TokenIndex index_;
    std::vector<int32_t> markers_;
    std::vector<std::string> marker_text_;
};

}  // namespace strata::sched
