#include "sched/constraint.h"

#include "common/error.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const tok::Vocab& vocab)
    : matcher_(std::move(g)), vocab_(vocab) {
    const tok::Vocab::PieceIndex& ix = vocab.piece_index();
    index_ = grammar::TokenIndex{ix.pieces, ix.sorted, ix.max_len};
}

bool GrammarConstraint::is_end(int32_t token) const { return vocab_.is_end_of_generation(token); }

bool GrammarConstraint::allows(int32_t token) {
    if (token < 0 || size_t(token) >= index_.pieces.size()) return false;
    if (is_end(token)) return matcher_.complete();
    const std::string_view piece = index_.pieces[size_t(token)];
    return !piece.empty() && matcher_.allows(piece);
}

void GrammarConstraint::allowed(std::vector<uint8_t>& allowed) {
    matcher_.allowed_tokens(index_, allowed);
    const bool done = matcher_.complete();
    for (int32_t id : vocab_.end_of_generation_ids())
        if (id >= 0 && size_t(id) < allowed.size()) allowed[size_t(id)] = done ? 1 : 0;
}

void GrammarConstraint::accept(int32_t token) {
    if (is_end(token)) return;
    const bool known = token >= 0 && size_t(token) < index_.pieces.size();
    const std::string_view piece = known ? index_.pieces[size_t(token)] : std::string_view();
    if (piece.empty() || !matcher_.accept(piece))
        throw Error("grammar: token " + std::to_string(token) + " does not fit the grammar here");
}

}  // namespace strata::sched
