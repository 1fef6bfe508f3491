// Byte-level BPE ("gpt2" tokenizer model): pre-tokenize into words, map each
// byte to its GPT-2 stand-in character, then apply the merges by rank (lowest
// first, ties leftmost). Same algorithm as llama.cpp's llm_tokenizer_bpe.
//
// Symbols are interned: every string that appears in a merge has an id (its
// token id when it is a token), so a merge is a hash lookup on two integers.
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab_impl.h"

namespace strata::tok {
namespace {

struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t start;  // in the word's raw bytes
    uint32_t n;      // bytes; 0 once merged into its left neighbour
    int32_t id;      // interned symbol, -1 when it is no known string
};

struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
};

struct BigramOrder {
    // Lowest rank on top, then leftmost.
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

inline uint64_t merge_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }

std::string byte_encode(std::string_view raw) {
    std::string s;
    s.reserve(raw.size() * 2);
    for (const char c : raw) s += uni::byte_to_unicode(static_cast<uint8_t>(c));
    return s;
}

}  // namespace

int32_t Vocab::Impl::symbol_id(std::string_view text) const {
    if (const int32_t id = lookup(text); id >= 0) return id;
    const auto it = extra_symbols.find(text);
    return it == extra_symbols.end() ? -1 : it->second;
}

int32_t Vocab::Impl::intern_symbol(const std::string& text) {
    if (const int32_t id = symbol_id(text); id >= 0) return id;
    const int32_t id = n() + static_cast<int32_t>(extra_symbols.size());
    extra_symbols.emplace(text, id);
    return id;
}

void Vocab::Impl::encode_bpe(std::string_view fragment, std::vector<int32_t>& out) const {
    for (const std::string& word : pretok->split(fragment)) encode_bpe_word(word, out);
}

void Vocab::Impl::encode_bpe_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges) {
        if (const int32_t id = lookup(byte_encode(word)); id >= 0) {
            out.push_back(id);
            return;
        }
    }

    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
        const auto idx = static_cast<int32_t>(symbols.size());
        symbols.push_back(Symbol{idx - 1, i + 1 == word.size() ? -1 : idx + 1, uint32_t(i), 1,
                                 byte_symbol[static_cast<uint8_t>(word[i])]});
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const int32_t l = symbols[left].id, r = symbols[right].id;
        if (l < 0 || r < 0) return;
        const auto it = merges.find(merge_key(l, r));
        if (it == merges.end()) return;
        queue.push(Bigram{it->second.rank, left, right, l, r, it->second.result});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& l = symbols[bg.left];
        Symbol& r = symbols[bg.right];
        // Stale when either side has changed since the pair was queued.
        if (l.n == 0 || r.n == 0 || l.id != bg.left_id || r.id != bg.right_id || l.next != bg.right) continue;
        l.id = bg.result;
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    for (int32_t i = 0; i != -1; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        if (s.id >= 0 && s.id < n()) {
            out.push_back(s.id);
            continue;
        }
        // Not a token (llama.cpp: look each byte of the encoded text up as a
        // one-character token and keep those found).
        const std::string enc = byte_encode(word.substr(s.start, s.n));
        for (const char c : enc) {
            const int32_t id = lookup(std::string_view(&c, 1));
            if (id >= 0) out.push_back(id);
        }
    }
}

}  // namespace strata::tok
