// UTF-8 and byte-level helpers shared by the tokenizers.
//
// The decoding rules here follow llama.cpp on purpose (the tokenizer test
// vectors come from it): a lead byte announces its length by its high nibble,
// a malformed sequence becomes U+FFFD and decoding resumes at the next byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok::uni {

inline constexpr uint32_t kReplacement = 0xFFFD;

// Bytes a sequence starting with `lead` claims, by its high nibble only:
// 0x00-0xBF -> 1 (continuation bytes count as one), 0xC0-0xDF -> 2,
// 0xE0-0xEF -> 3, 0xF0-0xFF -> 4. The SPM tokenizer splits text this way.
inline size_t seq_len_by_lead(uint8_t lead) {
    static constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

// Decodes one code point at `pos` leniently (overlong forms and surrogates are
// accepted, as llama.cpp does). Returns false, without moving `pos`, when the
// bytes there do not form a sequence (bad lead byte, missing or bad continuation,
// value above U+10FFFF).
bool decode_one(std::string_view s, size_t& pos, uint32_t& cp);

// Whole-string lenient decode: every byte that cannot start a sequence becomes
// one U+FFFD.
std::vector<uint32_t> decode_lenient(std::string_view s);

void append_utf8(std::string& out, uint32_t cp);

// Unicode White_Space (the set llama.cpp's \s uses).
bool is_whitespace(uint32_t cp);

// GPT-2 byte-level mapping: each byte value has a printable stand-in character.
// Returns that character's UTF-8.
const std::string& byte_to_unicode(uint8_t b);
// The byte a stand-in code point represents, or -1 when `cp` is none of them.
int unicode_to_byte(uint32_t cp);

// Strict UTF-8 validation helper for streaming: classifies the sequence at
// `pos`. Returns the sequence length when complete and valid; 0 when the bytes
// present are a valid but incomplete prefix (needs more input); and -n when the
// first n bytes (n >= 1) are a maximal invalid subpart to replace with U+FFFD.
int classify_strict(std::string_view s, size_t pos);

}  // namespace strata::tok::uni
