#include "sched/constraint.h"

#include "common/error.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> g, const tok::Vocab& vocab,
                                     std::vector<int32_t> markers)
    : matcher_(std::move(g)), vocab_(vocab), markers_(std::move(markers)) {
    const tok::Vocab::PieceIndex& ix = vocab.piece_index();
    index_ = grammar::TokenIndex{ix.pieces, ix.sorted, ix.max_len};
    for (int32_t id : markers_) marker_text_.push_back(vocab.token_to_piece(id, /*render_special=*/true));
}

std::string_view GrammarConstraint::text_of(int32_t token) const {
    if (token < 0 || size_t(token) >= index_.pieces.size()) return {};
    if (!index_.pieces[size_t(token)].empty()) return index_.pieces[size_t(token)];
    for (size_t i = 0; i < markers_.size(); ++i)
        if (markers_[i] == token) return marker_text_[i];
    return {};
}

bool GrammarConstraint::is_end(int32_t token) const { return vocab_.is_end_of_generation(token); }

bool GrammarConstraint::allows(int32_t token) {
    if (token < 0 || size_t(token) >= index_.pieces.size()) return false;
    if (is_end(token)) return matcher_.complete();
    const std::string_view piece = text_of(token);
    return !piece.empty() && matcher_.allows(piece);
}

void GrammarConstraint::allowed(std::vector<uint8_t>& allowed) {
    matcher_.allowed_tokens(index_, allowed);
    for (size_t i = 0; i < markers_.size(); ++i)
        if (markers_[i] >= 0 && size_t(markers_[i]) < allowed.size() && !is_end(markers_[i]))
            allowed[size_t(markers_[i])] = matcher_.allows(marker_text_[i]) ? 1 : 0;
    const bool done = matcher_.complete();
    for (int32_t id : vocab_.end_of_generation_ids())
        if (id >= 0 && size_t(id) < allowed.size()) allowed[size_t(id)] = done ? 1 : 0;
}

void GrammarConstraint::accept(int32_t token) {
    if (is_end(token)) return;
    const std::string_view piece = text_of(token);
    if (piece.empty() || !matcher_.accept(piece))
        throw Error("grammar: token " + std::to_string(token) + " does not fit the grammar here");
}

}  // namespace strata::sched
