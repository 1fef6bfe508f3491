// Internal state of strata::tok::Vocab, shared by vocab.cpp, spm.cpp and bpe.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab.h"

namespace strata::tok {

struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TextMap = std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>>;

// Token attributes as llama.cpp keeps them (a token type plus flags that the
// loader adds, e.g. CONTROL for end-of-generation tokens, RSTRIP for Phi-3).
enum Attr : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1u << 0,
    kAttrUnused = 1u << 1,
    kAttrNormal = 1u << 2,
    kAttrControl = 1u << 3,
    kAttrUserDefined = 1u << 4,
    kAttrByte = 1u << 5,
    kAttrLstrip = 1u << 7,
    kAttrRstrip = 1u << 8,
};

struct TokenData {
    std::string text;
    float score = 0.0f;
    TokenType type = TokenType::Normal;
    uint32_t attr = kAttrNormal;
};

struct BpeMerge {
    int32_t rank;
    int32_t result;  // symbol id of left+right
};

// Trie over the special tokens' texts, to find which of them occur in a text.
struct SpecialTrie {
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
        int32_t token = -1;
    };
    std::vector<Node> nodes{Node{}};

    void insert(std::string_view s, int32_t token);
    int32_t child(int32_t node, uint8_t b) const;
};

struct Vocab::Impl {
    Model model = Model::SPM;
    std::string pre = "default";
    std::vector<TokenData> tokens;
    TextMap text_to_id;

    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1, sep = -1;
    bool add_bos = false, add_eos = false;
    bool add_space_prefix = false;
    bool clean_spaces = false;
    bool ignore_merges = false;

    std::vector<uint8_t> eog_flag;  // per token
    std::vector<int32_t> eog_ids;   // sorted

    std::vector<int32_t> special_tokens;  // control / user-defined / unknown, longest text first
    SpecialTrie special_trie;
    std::vector<std::string> pieces;  // token_to_piece(id, render_special = true)
    std::once_flag piece_index_once;
    Vocab::PieceIndex piece_index;    // built by Vocab::piece_index()

    // SPM
    std::array<int32_t, 256> byte_token{};  // <0xXX> token per byte, -1 when absent

    // BPE
    std::unique_ptr<PreTokenizer> pretok;
    std::unordered_map<uint64_t, BpeMerge> merges;  // (left symbol << 32 | right symbol)
    TextMap extra_symbols;                          // merge strings that are not tokens: ids >= n_tokens
    std::array<int32_t, 256> byte_symbol{};         // symbol of each byte's GPT-2 character, -1 when unknown

    int32_t n() const { return static_cast<int32_t>(tokens.size()); }
    int32_t lookup(std::string_view text) const {
        const auto it = text_to_id.find(text);
        return it == text_to_id.end() ? -1 : it->second;
    }
    int32_t symbol_id(std::string_view text) const;  // token id, else extra symbol id, else -1
    int32_t intern_symbol(const std::string& text);

    // One raw-text fragment (no special tokens inside) of each model.
    void encode_spm(std::string_view fragment, bool prefix_space, std::vector<int32_t>& out) const;
    void encode_bpe(std::string_view fragment, std::vector<int32_t>& out) const;
    void encode_bpe_word(std::string_view word, std::vector<int32_t>& out) const;
};

}  // namespace strata::tok
