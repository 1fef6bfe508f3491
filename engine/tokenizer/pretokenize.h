// Pre-tokenizers of byte-level BPE vocabularies: the regex splits named by the
// GGUF key tokenizer.ggml.pre.
//
// Semantics follow llama.cpp (src/unicode.cpp), whose behaviour the tokenizer
// test vectors record:
//  - A pre-tokenizer is a list of regexes applied in turn. Each one splits every
//    piece left by the previous one into its matches and the unmatched runs
//    between them; a regex only ever sees one piece, so lookaheads and `\z` stop
//    at the piece's end.
//  - Invalid UTF-8 is decoded byte by byte to U+FFFD first, so the pieces are
//    always valid UTF-8.
//  - `\s` means Unicode White_Space (llama.cpp maps every non-ASCII space to
//    U+000B before matching; we do the same), \p{L}, \p{N}, ... are the Unicode
//    general categories (ICU's tables).
// The matching itself is ICU's RegexMatcher.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {

// Behaviour that comes with a pre-tokenizer name besides its regexes.
struct PreTokenizerTraits {
    std::string canonical;       // the family name ("gpt-2", "llama3", "qwen2", ...)
    bool clean_spaces = true;    // detokenizer removes " ," " ." etc. (llama.cpp clean_spaces)
    bool ignore_merges = false;  // a word that is a whole token is not merged (Llama 3)
    bool force_add_bos = false;  // add_bos defaults to true (before the GGUF key is read)
};

class PreTokenizer {
public:
    // Throws strata::Error for a name that is not supported.
    explicit PreTokenizer(std::string_view name);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    static bool is_known(std::string_view name);
    // All accepted names, for error messages.
    static std::string known_names();

    const PreTokenizerTraits& traits() const;

    // Splits UTF-8 `text` into words (valid UTF-8, not byte-encoded). Never
    // throws on any input bytes. Thread-safe.
    std::vector<std::string> split(std::string_view text) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata::tok
