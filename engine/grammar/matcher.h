// Where a grammar is in the text generated so far, and which tokens may come
// next.
//
// The state is the set of parse stacks that are still alive (llama.cpp's
// grammar stacks): each stack's top is a byte set the next byte must be in,
// and below it the places to continue once the rule on top is done. Stacks
// are linked frames interned in an arena, so equal stacks are one frame and
// the set stays small on unambiguous grammars such as JSON's.
//
// Which tokens may come next is a walk of the vocabulary in byte order
// (TokenIndex): tokens sharing a prefix share the work of matching it, and a
// prefix the grammar refuses cuts off every token below it.
//
// Not thread-safe; one Matcher per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace strata::grammar {

// The vocabulary as the matcher needs it (a view): each token's bytes by id,
// and the ids of the tokens that may be generated as text sorted by those
// bytes (unsigned; a prefix before its extensions), with the longest length.
struct TokenIndex {
    std::span<const std::string_view> pieces;
    std::span<const int32_t> sorted;
    size_t max_len = 0;
};

// A TokenIndex that owns its pieces (tests, tools); "" pieces are left out of
// `sorted`.
class TokenTable {
public:
    explicit TokenTable(std::vector<std::string> pieces);
    TokenIndex index() const { return {views_, sorted_, max_len_}; }

private:
    std::vector<std::string> storage_;
    std::vector<std::string_view> views_;
    std::vector<int32_t> sorted_;
    size_t max_len_ = 0;
};

class Matcher {
public:
    // Throws GrammarError when the grammar is too ambiguous to follow.
    explicit Matcher(std::shared_ptr<const Grammar> grammar);

    // Appends bytes. Returns false, and changes nothing, when the grammar
    // does not allow them here.
    bool accept(std::string_view bytes);
    // Whether accept(bytes) would succeed; changes nothing.
    bool allows(std::string_view bytes);
    // The text so far is a complete sentence of the grammar.
    bool complete() const { return !heads_.empty() && heads_.back() == kAccept; }
    // Nothing more can be appended (the grammar is complete and closed).
    bool finished() const { return heads_.size() == 1 && heads_[0] == kAccept; }

    // Sets allowed[id] = 1 for each token of `index` whose whole piece may
    // come next, 0 for the others (allowed has pieces.size() entries).
    // End-of-generation tokens are the caller's: they are allowed when complete().
    void allowed_tokens(const TokenIndex& index, std::vector<uint8_t>& allowed);

    // Live stacks (for tests and the cost report).
    size_t stacks() const { return heads_.size(); }
    const Grammar& grammar() const { return *g_; }

    // The most stacks one step may hold before the grammar counts as too
    // ambiguous to follow.
    static constexpr size_t kMaxStacks = 4096;

private:
    static constexpr uint32_t kAccept = UINT32_MAX;  // the empty stack: the root is done
    static constexpr uint32_t kNone = UINT32_MAX;    // no parent frame
    struct Frame {
        uint32_t pos;     // the element to match next
        uint32_t parent;  // the frame to return to after this rule, or kNone
    };

    uint32_t intern(uint32_t pos, uint32_t parent);
    void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth);
    // The heads after one more byte (sorted, unique) into out; empty: refused.
    void advance(const std::vector<uint32_t>& heads, uint8_t byte, std::vector<uint32_t>& out);
    ByteSet next_bytes(const std::vector<uint32_t>& heads) const;
    void walk(const TokenIndex& index, const std::vector<uint32_t>& heads, size_t lo, size_t hi, size_t depth,
              std::vector<uint8_t>& allowed);
    void rollback(size_t mark) { frames_.resize(mark); }
    void compact();

    std::shared_ptr<const Grammar> g_;
    std::vector<Frame> frames_;
    // Open addressing: (pos, parent) -> frame. A slot whose frame id is past
    // frames_ (rolled back) counts as empty.
    std::vector<uint64_t> keys_;
    std::vector<uint32_t> vals_;
    size_t used_ = 0;
    std::vector<uint32_t> heads_;
    std::vector<std::vector<uint32_t>> scratch_;  // per walk depth
    size_t live_after_compact_ = 0;
};

}  // namespace strata::grammar
