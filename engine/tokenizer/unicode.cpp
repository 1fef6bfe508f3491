#include "tokenizer/unicode.h"

#include <array>

namespace strata::tok::uni {

bool decode_one(std::string_view s, size_t& pos, uint32_t& cp) {
    const size_t n = s.size();
    const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const auto cont = [&](size_t i) { return i < n && (b(i) & 0xC0) == 0x80; };
    const uint8_t b0 = b(pos);
    if (b0 < 0x80) {
        cp = b0;
        pos += 1;
        return true;
    }
    if ((b0 & 0x40) == 0) return false;  // stray continuation byte
    if ((b0 & 0x20) == 0) {
        if (!cont(pos + 1)) return false;
        cp = (uint32_t(b0 & 0x1F) << 6) | (b(pos + 1) & 0x3F);
        pos += 2;
        return true;
    }
    if ((b0 & 0x10) == 0) {
        if (!cont(pos + 1) || !cont(pos + 2)) return false;
        cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(b(pos + 1) & 0x3F) << 6) | (b(pos + 2) & 0x3F);
        pos += 3;
        return true;
    }
    if ((b0 & 0x08) == 0) {
        if (!cont(pos + 1) || !cont(pos + 2) || !cont(pos + 3)) return false;
        const uint32_t v = (uint32_t(b0 & 0x07) << 18) | (uint32_t(b(pos + 1) & 0x3F) << 12) |
                           (uint32_t(b(pos + 2) & 0x3F) << 6) | (b(pos + 3) & 0x3F);
        if (v > 0x10FFFF) return false;  // not encodable back; llama.cpp would abort here
        cp = v;
        pos += 4;
        return true;
    }
    return false;
}

std::vector<uint32_t> decode_lenient(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t pos = 0;
    while (pos < s.size()) {
        uint32_t cp = 0;
        if (decode_one(s, pos, cp)) {
            out.push_back(cp);
        } else {
            out.push_back(kReplacement);
            ++pos;
        }
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp <= 0x7F) {
        out.push_back(static_cast<char>(cp));
    } else if (cp <= 0x7FF) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0xFFFF) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0x10FFFF) {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        append_utf8(out, kReplacement);
    }
}

bool is_whitespace(uint32_t cp) {
    if (cp <= 0x7F) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

namespace {

struct ByteMap {
    std::array<std::string, 256> to_unicode;
    std::array<int16_t, 256 + 68> to_byte{};  // stand-ins are U+0021..U+00FF and U+0100..U+0143
    ByteMap() {
        to_byte.fill(-1);
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
            append_utf8(to_unicode[b], cp);
            to_byte[cp] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

int unicode_to_byte(uint32_t cp) {
    const auto& m = byte_map();
    return cp < m.to_byte.size() ? m.to_byte[cp] : -1;
}

int classify_strict(std::string_view s, size_t pos) {
    const size_t n = s.size();
    const uint8_t b0 = static_cast<uint8_t>(s[pos]);
    if (b0 < 0x80) return 1;
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return -1;  // C0, C1, F5-FF, or a stray continuation byte
    }
    for (int k = 1; k <= need; ++k) {
        if (pos + k >= n) return 0;  // valid so far, more bytes needed
        const uint8_t c = static_cast<uint8_t>(s[pos + k]);
        const uint8_t l = (k == 1) ? lo : 0x80;
        const uint8_t h = (k == 1) ? hi : 0xBF;
        if (c < l || c > h) return -k;
    }
    return need + 1;
}

}  // namespace strata::tok::uni
