// SentencePiece-style BPE over the vocabulary scores ("llama" tokenizer model).
//
// The text (spaces escaped as U+2581) is cut into characters by their lead
// bytes; then, repeatedly, the adjacent pair whose concatenation is the
// highest-scoring token is merged (ties: leftmost first). Pieces that are not
// tokens fall back to their bytes' <0xXX> tokens. Same algorithm as
// llama.cpp's llm_tokenizer_spm.
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab_impl.h"

namespace strata::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t start;
    uint32_t n;  // 0 once merged into its left neighbour
};

struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;
};

struct BigramOrder {
    // priority_queue keeps the "largest" on top: highest score, then leftmost.
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

void Vocab::Impl::encode_spm(std::string_view fragment, bool prefix_space, std::vector<int32_t>& out) const {
    std::string text;
    text.reserve(fragment.size() * 2 + 3);
    if (prefix_space) text += kSpace;
    for (const char c : fragment) {
        if (c == ' ')
            text += kSpace;
        else
            text += c;
    }
    if (text.empty()) return;

    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
        const size_t len = std::min(uni::seq_len_by_lead(static_cast<uint8_t>(text[off])), text.size() - off);
        const auto idx = static_cast<int32_t>(symbols.size());
        symbols.push_back(Symbol{idx - 1, off + len == text.size() ? -1 : idx + 1, uint32_t(off), uint32_t(len)});
        off += len;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[left];
        const Symbol& r = symbols[right];
        const std::string_view piece(text.data() + l.start, l.n + r.n);
        const int32_t id = lookup(piece);
        if (id < 0) return;
        queue.push(Bigram{tokens[id].score, left, right, uint32_t(piece.size())});
    };

    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& l = symbols[bg.left];
        Symbol& r = symbols[bg.right];
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    for (int32_t i = 0; i != -1; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        const std::string_view piece(text.data() + s.start, s.n);
        const int32_t id = lookup(piece);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (const char c : piece) {
            const int32_t b = byte_token[static_cast<uint8_t>(c)];
            if (b >= 0)
                out.push_back(b);
            else if (unk >= 0)
                out.push_back(unk);
        }
    }
}

}  // namespace strata::tok
