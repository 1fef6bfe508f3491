// Tokenizers built from GGUF metadata: SentencePiece-style BPE ("llama", with
// byte fallback) and byte-level BPE ("gpt2") with the pre-tokenizer named by
// tokenizer.ggml.pre.
//
// Behaviour matches llama.cpp's tokenizer (src/llama-vocab.cpp), token for
// token: that is where the test vectors come from and what the models were
// converted for. In particular:
//  - Control and user-defined tokens are cut out of the text before the
//    tokenizer runs, longest token first. User-defined tokens are always
//    recognised; control (and unknown-type) tokens only with parse_special.
//  - SPM escapes spaces as U+2581 and, when tokenizer.ggml.add_space_prefix is
//    true (the default), prefixes a space to every text fragment that starts the
//    input or follows a special token.
//  - decode() is llama.cpp's detokenize(): the SPM prefix space of the first
//    token is dropped, and for pre-tokenizers with clean_spaces (gpt-2, llama3,
//    ...) " ," " ." " ?" " !" and some apostrophe spacing are tidied.
//    StreamDecoder does neither: it is the concatenation of token_to_piece(),
//    which is what a generated continuation needs.
//
// A Vocab is immutable after from_gguf(); all const methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::gguf {
class File;
}

namespace strata::tok {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Vocab {
public:
    enum class Model { SPM, BPE };

    // Reads tokenizer.ggml.* from `f`. Throws strata::Error naming the key on
    // missing or bad metadata: unknown tokenizer.ggml.model or .pre, missing
    // tokens/merges, arrays of the wrong type or length, duplicate tokens,
    // special token ids out of range (0xFFFFFFFF / -1 mean "none").
    static std::unique_ptr<Vocab> from_gguf(const gguf::File& f);

    ~Vocab();
    Vocab(const Vocab&) = delete;
    Vocab& operator=(const Vocab&) = delete;

    Model model() const;
    const std::string& pre() const;  // tokenizer.ggml.pre as given ("default" when absent)
    int32_t n_tokens() const;

    // add_special: prepend BOS / append EOS as add_bos() / add_eos() say.
    // parse_special: text spelling a control token becomes that token
    // (user-defined tokens are matched either way). Never throws on any bytes.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;

    // Raw bytes of one token: byte tokens give their byte, SPM "▁" gives ' ',
    // byte-level BPE characters give their bytes. Control and unknown-type tokens
    // give "" unless render_special. Throws strata::Error for an id out of range.
    std::string token_to_piece(int32_t id, bool render_special = false) const;
    // The whole text (llama.cpp detokenize, see the header comment). Bytes are
    // returned as they are: a sequence can end inside a UTF-8 character.
    std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;
    // token_to_piece() concatenated, nothing removed or tidied: the text of a
    // continuation (what StreamDecoder emits, before its UTF-8 repair). Use this,
    // not decode(), for generated tokens that follow a prompt.
    std::string pieces_text(const std::vector<int32_t>& ids, bool render_special = false) const;

    const std::string& token_text(int32_t id) const;  // throws for an id out of range
    TokenType token_type(int32_t id) const;           // as stored in the file
    float token_score(int32_t id) const;
    // Control-like: control or unknown type, or made control by the
    // end-of-generation detection (see is_end_of_generation).
    bool is_control(int32_t id) const;

    int32_t bos() const;
    int32_t eos() const;
    int32_t eot() const;
    int32_t eom() const;
    int32_t unk() const;
    int32_t pad() const;  // -1 when absent
    bool add_bos() const;
    bool add_eos() const;
    bool add_space_prefix() const;
    bool clean_spaces() const;

    // eos, eot (tokenizer.ggml.eot_token_id or detected by text), eom, and the
    // tokens llama.cpp treats as end of generation by their text (<|im_end|>,
    // <|eot_id|>, <|end|>, <|endoftext|>, </s>, <|eom_id|>, <end_of_turn>, ...).
    bool is_end_of_generation(int32_t id) const;
    const std::vector<int32_t>& end_of_generation_ids() const;

    std::optional<int32_t> find(std::string_view token_text) const;

    // The tokens that can be generated as text, ordered by their bytes, for
    // grammar matching (grammar/matcher.h): `pieces` by id (token_to_piece;
    // "" for control and unknown tokens), `sorted` the ids with a non-empty
    // piece in byte order (unsigned), `max_len` the longest. Built on first
    // use (thread-safe), then kept.
    struct PieceIndex {
        std::vector<std::string_view> pieces;
        std::vector<int32_t> sorted;
        size_t max_len = 0;
    };
    const PieceIndex& piece_index() const;

    struct Impl;

private:
    Vocab();
    std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: push token ids one at a time and get back only
// complete UTF-8. An incomplete trailing sequence is held until a later token
// completes it; bytes that cannot be (or cannot become) valid UTF-8 come out as
// U+FFFD as soon as that is certain. flush() releases whatever is held (an
// unfinished sequence becomes U+FFFD). The output is token_to_piece()
// concatenated (no prefix-space removal, no space cleaning).
class StreamDecoder {
public:
    explicit StreamDecoder(const Vocab& vocab, bool render_special = false);
    std::string push(int32_t id);
    // `render`: this token's text even if it is a control token (a tool-call
    // marker the request needs to see, as llama-server's preserved tokens).
    std::string push(int32_t id, bool render);
    std::string flush();
    // Bytes held back, waiting for the rest of a character.
    size_t pending() const { return pending_.size(); }

private:
    std::string drain(bool final);

    const Vocab& vocab_;
    bool render_special_;
    std::string pending_;
};

}  // namespace strata::tok
