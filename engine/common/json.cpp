#include "common/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace strata::json {

const Value* Value::get(std::string_view key) const {
    if (kind != Kind::Object) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &it->second;
}

namespace {

class Parser {
public:
    Parser(std::string_view t, const std::string& what) : t_(t), what_(what) {}

    Value document() {
        Value v = value(0);
        ws();
        if (i_ != t_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& msg) const {
        throw Error(what_ + ": JSON error at byte " + std::to_string(i_) + ": " + msg);
    }
    void ws() {
        while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
    }
    bool eat(char c) {
        ws();
        if (i_ < t_.size() && t_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    bool literal(std::string_view w) {
        if (t_.substr(i_, w.size()) == w) {
            i_ += w.size();
            return true;
        }
        return false;
    }

    Value value(int depth) {
        if (depth > 64) fail("nested deeper than 64 levels");
        ws();
        if (i_ >= t_.size()) fail("unexpected end of input");
        Value v;
        const char c = t_[i_];
        if (c == '{') {
            ++i_;
            v.kind = Value::Kind::Object;
            if (eat('}')) return v;
            do {
                ws();
                if (i_ >= t_.size() || t_[i_] != '"') fail("expected a string key");
                std::string k = string();
                expect(':');
                v.obj[k] = value(depth + 1);
            } while (eat(','));
            expect('}');
        } else if (c == '[') {
            ++i_;
            v.kind = Value::Kind::Array;
            if (eat(']')) return v;
            do v.arr.push_back(value(depth + 1));
            while (eat(','));
            expect(']');
        } else if (c == '"') {
            v.kind = Value::Kind::String;
            v.str = string();
        } else if (literal("true")) {
            v.kind = Value::Kind::Bool;
            v.b = true;
        } else if (literal("false")) {
            v.kind = Value::Kind::Bool;
        } else if (literal("null")) {
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            v.kind = Value::Kind::Number;
            const size_t start = i_;
            if (t_[i_] == '-') ++i_;
            while (i_ < t_.size() && ((t_[i_] >= '0' && t_[i_] <= '9') || t_[i_] == '.' || t_[i_] == 'e' ||
                                      t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-'))
                ++i_;
            const std::string num(t_.substr(start, i_ - start));
            char* end = nullptr;
            v.num = std::strtod(num.c_str(), &end);
            if (end != num.c_str() + num.size() || !std::isfinite(v.num)) fail("bad number '" + num + "'");
        } else {
            fail(std::string("unexpected character '") + c + "'");
        }
        return v;
    }

    static void utf8(uint32_t cp, std::string& out) {
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }
    uint32_t hex4() {
        if (i_ + 4 > t_.size()) fail("truncated \\u escape");
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = t_[i_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else fail("bad \\u escape");
        }
        return v;
    }
    std::string string() {
        ++i_;  // opening quote
        std::string out;
        for (;;) {
            if (i_ >= t_.size()) fail("unterminated string");
            const char c = t_[i_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= t_.size()) fail("unterminated escape");
            const char e = t_[i_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xd800 && cp < 0xdc00 && literal("\\u")) {
                        const uint32_t lo = hex4();
                        if (lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        else fail("bad surrogate pair");
                    }
                    utf8(cp, out);
                    break;
                }
                default: fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }

    std::string_view t_;
    const std::string& what_;
    size_t i_ = 0;
};

}  // namespace

Value parse(std::string_view text, const std::string& what) {
    if (text.size() > (256u << 20)) throw Error(what + ": JSON document larger than 256 MiB");
    return Parser(text, what).document();
}

std::string escape(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out;
}

}  // namespace strata::json
