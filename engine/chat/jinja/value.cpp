#include "chat/jinja/value.h"

#include "common/error.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <cstdio>

namespace strata::chat::jinja {

const Value* Object::find(const std::string& key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

Value* Object::find(const std::string& key) {
    for (auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

void Object::set(const std::string& key, Value v) {
    if (v.depth() >= kMaxValueDepth) throw Error("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
    if (Value* x = find(key)) *x = std::move(v);
    else items.emplace_back(key, std::move(v));
}

const Value* Args::keyword(const std::string& name) const {
    for (const auto& [k, v] : kw)
        if (k == name) return &v;
    return nullptr;
}

const Value* Args::get(size_t i, const std::string& name) const {
    if (i < pos.size()) return &pos[i];
    return keyword(name);
}

Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}

Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double f) : kind_(Kind::Float), f_(f) {}
Value::Value(std::string s) : kind_(Kind::String), s_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(Array a) : kind_(Kind::Array), a_(std::make_shared<Array>(std::move(a))) {
    for (const Value& v : *a_) depth_ = std::max(depth_, v.depth_);
    if (++depth_ > kMaxValueDepth) throw Error("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
}
Value::Value(std::shared_ptr<Object> o) : kind_(Kind::Object), o_(std::move(o)) {
    for (const auto& kv : o_->items) depth_ = std::max(depth_, kv.second.depth_);
    if (++depth_ > kMaxValueDepth) throw Error("values nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
}

Value Value::object() { return Value(std::make_shared<Object>()); }

Value Value::generator(Array a) {
    Value v(std::move(a));
    v.generator_ = true;
    return v;
}

Value Value::markup(std::string s) {
    Value v(std::move(s));
    v.generator_ = true;
    return v;
}

// A non-string key: a 0x01 byte, then its type letter and its repr; a string
// key that itself starts with 0x01 gets the letter 's', so no string is
// ever read as another type.
std::string key_of(const Value& key) {
    if (key.is_string()) return key.as_string().empty() || key.as_string()[0] != '\x01' ? key.as_string() : "\x01s" + key.as_string();
    return std::string("\x01") + (key.is_int() ? "i" : key.is_float() ? "f" : key.is_bool() ? "b" : "n") + key.repr();
}

Value key_value(const std::string& key) {
    if (key.size() < 2 || key[0] != '\x01') return Value(key);
    const std::string r = key.substr(2);
    switch (key[1]) {
        case 'i': {
            int64_t i = 0;
            std::from_chars(r.data(), r.data() + r.size(), i);
            return Value(i);
        }
        case 'f': {
            double f = 0.0;
            std::from_chars(r.data(), r.data() + r.size(), f);
            return Value(f);
        }
        case 'b': return Value(r == "True");
        case 's': return Value(r);
        default: return Value::none();
    }
}

Value Value::function(std::string name, NativeFn fn) {
    Value v;
    v.kind_ = Kind::Callable;
    v.c_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
}

namespace {
// Deeper JSON than this is refused: converting recurses (a 4 MiB request of
// nested brackets must not exhaust the stack).
constexpr int kMaxJsonDepth = 256;
}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json(j, 0); }

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
    if (depth > kMaxJsonDepth) throw Error("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return none();
        case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
        case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            Array a;
            for (const auto& x : j) a.push_back(from_json(x, depth + 1));
            return Value(std::move(a));
        }
        case nlohmann::ordered_json::value_t::object: {
            auto o = std::make_shared<Object>();
            for (auto it = j.begin(); it != j.end(); ++it)
                o->items.emplace_back(key_of(Value(it.key())), from_json(it.value(), depth + 1));
            return Value(std::move(o));
        }
        default: return Value();
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool: return b_;
        case Kind::Int: return i_ != 0;
        case Kind::Float: return f_ != 0.0;
        case Kind::String: return !s_->empty();
        case Kind::Array: return generator_ || !a_->empty();
        case Kind::Object: return o_->is_namespace || !o_->items.empty();
        case Kind::Callable: return true;
    }
    return false;
}

const char* Value::type_name() const {
    switch (kind_) {
        case Kind::Undefined: return "undefined";
        case Kind::None: return "none";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "string";
        case Kind::Array: return "list";
        case Kind::Object: return o_->is_namespace ? "namespace" : "dict";
        case Kind::Callable: return "function";
    }
    return "?";
}

std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
    // The shortest digits that round-trip, placed as Python's repr places them:
    // positional for exponents -4..15, else d.ddde+XX.
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    const std::string sci(buf, r.ptr);
    const size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    const int exp = std::stoi(sci.substr(e + 1));
    const bool neg = mant[0] == '-';
    if (neg) mant.erase(0, 1);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        } else if (static_cast<int>(digits.size()) <= exp + 1) {
            out = digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
        } else {
            out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
        }
    } else {
        out.assign(1, digits[0]);
        if (digits.size() > 1) {
            out += '.';
            out.append(digits, 1, std::string::npos);
        }
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += eb;
    }
    return neg ? "-" + out : out;
}

namespace {

std::string py_str_repr(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + q;
}

// Decodes one UTF-8 character at s[i] (advancing i); U+FFFD for a bad byte.
uint32_t next_code_point(const std::string& s, size_t& i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
        ++i;
        return 0xFFFD;
    }
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    i += static_cast<size_t>(len);
    return cp;
}

void json_string(const std::string& s, std::string& out, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (ensure_ascii && c >= 0x80) {
            const uint32_t cp = next_code_point(s, i);
            char b[16];
            if (cp >= 0x10000) {
                const uint32_t v = cp - 0x10000;
                std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                std::snprintf(b, sizeof b, "\\u%04x", cp);
            }
            out += b;
            continue;
        }
        ++i;
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    out += b;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
}

void json_dump(const Value& v, int indent, bool sort_keys, bool ascii, int depth, std::string& out, size_t max_bytes) {
    if (out.size() > max_bytes) throw Error("the JSON passed " + std::to_string(max_bytes) + " bytes");
    if (v.is_object() && v.as_object().is_namespace) throw Error("Object of type Namespace is not JSON serializable");
    const auto newline = [&](int d) {
        out += '\n';
        out.append(static_cast<size_t>(indent * d), ' ');
    };
    switch (v.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None: out += "null"; return;
        case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
        case Value::Kind::Int: out += std::to_string(v.as_int()); return;
        case Value::Kind::Float: {
            const double f = v.as_number();
            out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : float_repr(f);
            return;
        }
        case Value::Kind::String: json_string(v.as_string(), out, ascii); return;
        case Value::Kind::Callable: throw Error("Object of type function is not JSON serializable");
        case Value::Kind::Array: {
            if (v.is_generator()) throw Error("Object of type generator is not JSON serializable");
            const Array& a = v.as_array();
            if (a.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < a.size(); ++i) {
                if (i) out += indent >= 0 ? "," : ", ";
                if (indent >= 0) newline(depth + 1);
                json_dump(a[i], indent, sort_keys, ascii, depth + 1, out, max_bytes);
            }
            if (indent >= 0) newline(depth);
            out += ']';
            return;
        }
        case Value::Kind::Object: {
            std::vector<const std::pair<std::string, Value>*> items;
            for (const auto& kv : v.as_object().items) items.push_back(&kv);
            if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
            if (items.empty()) {
                out += "{}";
                return;
            }
            out += '{';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += indent >= 0 ? "," : ", ";
                if (indent >= 0) newline(depth + 1);
                const Value key = key_value(items[i]->first);
                if (key.is_string()) json_string(key.as_string(), out, ascii);
                else json_string(key.is_none() ? "null" : key.is_bool() ? (key.as_bool() ? "true" : "false") : key.str(), out, ascii);
                out += ": ";
                json_dump(items[i]->second, indent, sort_keys, ascii, depth + 1, out, max_bytes);
            }
            if (indent >= 0) newline(depth);
            out += '}';
            return;
        }
    }
}

}  // namespace

std::string Value::repr(size_t max_bytes) const {
    std::string out;
    str_into(out, true, max_bytes);
    return out;
}

std::string Value::str(size_t max_bytes) const {
    std::string out;
    str_into(out, false, max_bytes);
    return out;
}

void Value::str_into(std::string& out, bool as_repr, size_t max_bytes) const {
    const auto budget = [&] {
        if (out.size() > max_bytes) throw Error("the text passed " + std::to_string(max_bytes) + " bytes");
    };
    switch (kind_) {
        case Kind::Undefined: break;
        case Kind::None: out += "None"; break;
        case Kind::Bool: out += b_ ? "True" : "False"; break;
        case Kind::Int: out += std::to_string(i_); break;
        case Kind::Float: out += float_repr(f_); break;
        case Kind::String: out += as_repr ? py_str_repr(*s_) : *s_; break;
        case Kind::Array:
            if (generator_) {
                out += "<generator object>";
                break;
            }
            out += '[';
            for (size_t i = 0; i < a_->size(); ++i) {
                if (i) out += ", ";
                (*a_)[i].str_into(out, true, max_bytes);
                budget();
            }
            out += ']';
            break;
        case Kind::Object:
            if (o_->is_namespace) {
                out += "<Namespace>";
                break;
            }
            out += '{';
            for (size_t i = 0; i < o_->items.size(); ++i) {
                if (i) out += ", ";
                key_value(o_->items[i].first).str_into(out, true, max_bytes);
                out += ": ";
                o_->items[i].second.str_into(out, true, max_bytes);
                budget();
            }
            out += '}';
            break;
        case Kind::Callable: out += "<function " + c_->name + ">"; break;
    }
    budget();
}

std::string Value::to_json(int indent, bool sort_keys, bool ensure_ascii, size_t max_bytes) const {
    std::string out;
    json_dump(*this, std::min(indent, 64), sort_keys, ensure_ascii, 0, out, max_bytes);
    return out;
}

bool Value::operator==(const Value& o) const {
    if (is_number() && o.is_number()) {
        if (is_int() && o.is_int()) return i_ == o.i_;
        return as_number() == o.as_number();
    }
    if (is_bool() && o.is_number()) return static_cast<double>(b_) == o.as_number();
    if (is_number() && o.is_bool()) return as_number() == static_cast<double>(o.b_);
    if (kind_ != o.kind_) return (is_none() || is_undefined()) && (o.is_none() || o.is_undefined()) && kind_ == o.kind_;
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None: return true;
        case Kind::Bool: return b_ == o.b_;
        case Kind::String: return *s_ == *o.s_;
        case Kind::Array: return *a_ == *o.a_;
        case Kind::Object: {
            if (o_ == o.o_) return true;
            if (o_->items.size() != o.o_->items.size()) return false;
            for (const auto& [k, v] : o_->items) {
                const Value* x = o.o_->find(k);
                if (!x || !(*x == v)) return false;
            }
            return true;
        }
        case Kind::Callable: return c_ == o.c_;
        default: return false;
    }
}

}  // namespace strata::chat::jinja
