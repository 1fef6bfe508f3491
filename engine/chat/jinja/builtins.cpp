// jinja2's filters and tests, Python's string, dict and list methods, and
// the globals Hugging Face's environment has, as chat templates use them.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>

#include "chat/jinja/interpreter.h"

namespace strata::chat::jinja {

namespace {

const std::string kSpace = " \t\n\r\f\v";

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && chars.find(s[b]) != std::string::npos) ++b;
    if (right)
        while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
    return s.substr(b, e - b);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string title(const std::string& s) {
    std::string r = s;
    bool start = true;
    for (char& c : r) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (std::isalpha(u)) {
            c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
            start = false;
        } else {
            start = !(std::isdigit(u) || u >= 0x80);
        }
    }
    return r;
}

std::string capitalize(const std::string& s) {
    std::string r = lower(s);
    if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
    return r;
}

std::string replace_all(Interpreter& in, const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) {
        std::string r;
        int64_t n = 0;
        for (size_t i = 0; i <= s.size(); ++i) {
            if (count < 0 || n < count) {
                r += to;
                ++n;
            }
            if (i < s.size()) r += s[i];
            in.check_size(r.size());
        }
        return r;
    }
    std::string r;
    size_t p = 0;
    int64_t n = 0;
    for (size_t q; (count < 0 || n < count) && (q = s.find(from, p)) != std::string::npos; p = q + from.size(), ++n) {
        r.append(s, p, q - p);
        r += to;
        in.check_size(r.size());
    }
    return r + s.substr(p);
}

Array split(const std::string& s, const Value* sep, int64_t maxsplit) {
    Array out;
    if (!sep || sep->is_none()) {  // runs of whitespace, none empty
        size_t i = 0;
        int64_t n = 0;
        while (i < s.size()) {
            while (i < s.size() && kSpace.find(s[i]) != std::string::npos) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && n == maxsplit) {
                out.push_back(Value(strip_chars(s.substr(i), kSpace, false, true)));
                return out;
            }
            size_t j = i;
            while (j < s.size() && kSpace.find(s[j]) == std::string::npos) ++j;
            out.push_back(Value(s.substr(i, j - i)));
            ++n;
            i = j;
        }
        return out;
    }
    const std::string& d = sep->as_string();
    size_t p = 0;
    int64_t n = 0;
    for (size_t q; (maxsplit < 0 || n < maxsplit) && (q = s.find(d, p)) != std::string::npos; p = q + d.size(), ++n)
        out.push_back(Value(s.substr(p, q - p)));
    out.push_back(Value(s.substr(p)));
    return out;
}

int64_t to_int(Interpreter& in, const Value& v, const char* what) {
    if (v.is_int()) return v.as_int();
    if (v.is_bool()) return v.as_bool();
    if (v.is_float()) return static_cast<int64_t>(v.as_number());
    in.fail(std::string(what) + " must be a number, not a " + v.type_name());
}

const std::string& str_arg(Interpreter& in, const Value* v, const char* what) {
    if (!v || !v->is_string()) in.fail(std::string(what) + " needs a string argument");
    return v->as_string();
}

bool prefix_match(const Value& arg, const std::string& s, bool end) {
    const auto one = [&](const std::string& p) {
        return end ? s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0 : s.rfind(p, 0) == 0;
    };
    if (arg.is_array()) {
        for (const Value& v : arg.as_array())
            if (v.is_string() && one(v.as_string())) return true;
        return false;
    }
    return arg.is_string() && one(arg.as_string());
}

// Python's str.format with {}, {0} and {name} fields (a format spec after
// ':' is not applied), {{ and }} for braces.
std::string format(Interpreter& in, const std::string& s, const Args& a) {
    std::string r;
    size_t auto_index = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
            r += c;
            ++i;
            continue;
        }
        if (c != '{') {
            r += c;
            continue;
        }
        const size_t close = s.find('}', i);
        if (close == std::string::npos) in.fail("format(): a '{' is never closed");
        std::string field = s.substr(i + 1, close - i - 1);
        if (const size_t colon = field.find(':'); colon != std::string::npos) field.erase(colon);
        const Value* v = nullptr;
        if (field.empty()) v = auto_index < a.pos.size() ? &a.pos[auto_index++] : nullptr;
        else if (std::all_of(field.begin(), field.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); }))
            v = std::stoul(field) < a.pos.size() ? &a.pos[std::stoul(field)] : nullptr;
        else v = a.keyword(field);
        if (!v) in.fail("format(): no value for the field {" + field + "}");
        r += v->str();
        in.check_size(r.size());
        i = close;
    }
    return r;
}

// A string's characters (Python's str is indexed by code point, not byte):
// each UTF-8 sequence, a stray byte alone.
std::vector<std::string_view> chars_of(std::string_view s) {
    std::vector<std::string_view> out;
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        len = std::min(len, s.size() - i);
        out.push_back(s.substr(i, len));
        i += len;
    }
    return out;
}

// Characters before byte `p` (Python's find() counts characters).
int64_t char_index(std::string_view s, size_t p) {
    int64_t n = 0;
    for (size_t i = 0; i < p; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    return n;
}


Value string_method(Interpreter& in, const std::string& s, const std::string& name, const Args& a) {
    const Value* a0 = a.get(0, "");
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const std::string chars = a0 && a0->is_string() ? a0->as_string() : kSpace;
        return Value(strip_chars(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "upper") return Value(upper(s));
    if (name == "lower") return Value(lower(s));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "startswith" || name == "endswith") {
        if (!a0) in.fail(name + "() needs an argument");
        return Value(prefix_match(*a0, s, name == "endswith"));
    }
    if (name == "split" || name == "rsplit") {
        const Value* n = a.get(1, "maxsplit");
        const Value* sep = a.get(0, "sep");
        if (sep && !sep->is_none() && !sep->is_string()) in.fail(name + "() needs a string separator");
        if (sep && sep->is_string() && sep->as_string().empty()) in.fail(name + "(): empty separator");
        const int64_t max = n ? to_int(in, *n, "maxsplit") : -1;
        if (name == "split" || max < 0) return Value(split(s, sep, max));
        // rsplit with a limit: split the reversed text by the reversed separator, then reverse back.
        const std::string rs(s.rbegin(), s.rend());
        const Value rsep = sep && sep->is_string() ? Value(std::string(sep->as_string().rbegin(), sep->as_string().rend())) : Value::none();
        Array parts = split(rs, &rsep, max);
        std::reverse(parts.begin(), parts.end());
        for (Value& p : parts) p = Value(std::string(p.as_string().rbegin(), p.as_string().rend()));
        return Value(std::move(parts));
    }
    if (name == "splitlines") {
        Array out;
        size_t p = 0;
        while (p < s.size()) {
            size_t q = s.find('\n', p);
            if (q == std::string::npos) q = s.size();
            std::string line = s.substr(p, q - p);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            out.push_back(Value(std::move(line)));
            p = q + 1;
        }
        return Value(std::move(out));
    }
    if (name == "replace") {
        const Value* c = a.get(2, "count");
        return Value(replace_all(in, s, str_arg(in, a0, "replace()"), str_arg(in, a.get(1, ""), "replace()"),
                                 c ? to_int(in, *c, "count") : -1));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "count") {
        const std::string& sub = str_arg(in, a0, (name + "()").c_str());
        if (name == "count") {
            if (sub.empty()) return Value(char_index(s, s.size()) + 1);  // between every two characters
            int64_t n = 0;
            for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
            return Value(n);
        }
        const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (p == std::string::npos && name == "index") in.fail("substring not found");
        return Value(p == std::string::npos ? int64_t{-1} : char_index(s, p));
    }
    if (name == "join") {
        if (!a0) in.fail("join() needs a list");
        std::string r;
        const Array items = iterate(in, *a0);
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) r += s;
            r += items[i].str();
            in.check_size(r.size());
        }
        return Value(std::move(r));
    }
    if (name == "format") return Value(format(in, s, a));
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "isupper" ||
        name == "islower") {
        if (s.empty()) return Value(false);
        bool ok = true;
        for (unsigned char c : s) {
            if (name == "isdigit") ok &= std::isdigit(c) != 0;
            else if (name == "isalpha") ok &= std::isalpha(c) != 0;
            else if (name == "isspace") ok &= std::isspace(c) != 0;
            else if (name == "isalnum") ok &= std::isalnum(c) != 0;
            else if (name == "isupper") ok &= !std::islower(c);
            else ok &= !std::isupper(c);
        }
        return Value(ok);
    }
    in.fail("strings have no method '" + name + "'");
}

bool is_string_method(const std::string& n) {
    static const char* const names[] = {"strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize", "startswith",
                                        "endswith", "split", "rsplit", "splitlines", "replace", "find", "rfind", "index",
                                        "count", "join", "format", "isdigit", "isalpha", "isspace", "isalnum", "isupper", "islower"};
    return std::find(std::begin(names), std::end(names), n) != std::end(names);
}

Array dict_items(const Object& o) {
    Array out;
    for (const auto& [k, v] : o.items) out.push_back(Value(Array{key_value(k), v}));
    return out;
}

}  // namespace

Value slice(Interpreter& in, const Value& obj, const Value& lo, const Value& hi, const Value& st) {
    int64_t n;
    const std::vector<std::string_view> chars = obj.is_string() ? chars_of(obj.as_string()) : std::vector<std::string_view>();
    if (obj.is_string()) n = static_cast<int64_t>(chars.size());
    else if (obj.is_array()) n = static_cast<int64_t>(obj.as_array().size());
    else in.fail("cannot slice a " + std::string(obj.type_name()));
    const int64_t step = st.is_none() ? 1 : to_int(in, st, "a slice step");
    if (step == 0) in.fail("a slice step cannot be zero");
    const auto norm = [&](const Value& v, int64_t dflt) {
        if (v.is_none()) return dflt;
        int64_t i = to_int(in, v, "a slice index");
        if (i < 0) i += n;
        return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = norm(lo, step > 0 ? 0 : n - 1), e = norm(hi, step > 0 ? n : -1);
    // The count first (b and e lie within [-1, n]): no index arithmetic can overflow.
    const uint64_t span = step > 0 ? (e > b ? static_cast<uint64_t>(e - b) : 0) : (b > e ? static_cast<uint64_t>(b - e) : 0);
    const uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    const uint64_t count = span == 0 ? 0 : (span - 1) / mag + 1;
    const auto at = [&](uint64_t k) {
        return static_cast<size_t>(step > 0 ? static_cast<uint64_t>(b) + k * mag : static_cast<uint64_t>(b) - k * mag);
    };
    if (obj.is_string()) {
        std::string r;
        for (uint64_t k = 0; k < count; ++k) r += chars[at(k)];
        return Value(std::move(r));
    }
    Array r;
    for (uint64_t k = 0; k < count; ++k) r.push_back(obj.as_array()[at(k)]);
    return Value(std::move(r));
}

namespace {

// The attribute a filter like map or selectattr names ("a.b" goes deeper).
Value attribute_of(Interpreter& in, const Value& v, const std::string& path) {
    Value cur = v;
    size_t p = 0;
    while (p <= path.size()) {
        size_t q = path.find('.', p);
        if (q == std::string::npos) q = path.size();
        const std::string part = path.substr(p, q - p);
        if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
            cur = get_item(in, cur, Value(static_cast<int64_t>(std::stoll(part))));
        else cur = get_attr(in, cur, part);
        p = q + 1;
    }
    return cur;
}

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank) {
    std::string r;
    size_t p = 0;
    bool line0 = true;
    while (p <= s.size()) {
        size_t q = s.find('\n', p);
        const bool last = q == std::string::npos;
        if (last) q = s.size();
        const std::string line = s.substr(p, q - p);
        if ((!line0 || first) && (blank || !strip_chars(line, kSpace, true, true).empty())) r += pad;
        r += line;
        if (!last) r += '\n';
        line0 = false;
        p = q + 1;
        if (last) break;
    }
    return r;
}

Value select_like(Interpreter& in, const std::string& name, const Value& input, const Args& a) {
    const bool reject = name == "reject" || name == "rejectattr";
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    Array out;
    size_t first_arg = 0;
    std::string attr;
    if (by_attr) {
        attr = str_arg(in, a.get(0, "attribute"), name.c_str());
        first_arg = 1;
    }
    const Value* test_name = a.pos.size() > first_arg ? &a.pos[first_arg] : nullptr;
    Args targs;
    for (size_t i = first_arg + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
    if (!input.truthy()) return Value::generator({});  // jinja2 iterates only what is true (None: nothing)
    for (const Value& v : iterate(in, input)) {
        const Value x = by_attr ? attribute_of(in, v, attr) : v;
        const bool ok = test_name ? in.apply_test(str_arg(in, test_name, name.c_str()), x, targs) : x.truthy();
        if (ok != reject) out.push_back(v);
    }
    return Value::generator(std::move(out));
}

}  // namespace

std::string escape_html(const std::string& s) {
    std::string r;
    for (char c : s) {
        switch (c) {
            case '&': r += "&amp;"; break;
            case '<': r += "&lt;"; break;
            case '>': r += "&gt;"; break;
            case '"': r += "&#34;"; break;
            case '\'': r += "&#39;"; break;
            default: r += c;
        }
    }
    return r;
}

namespace {
}  // namespace

Array iterate(Interpreter& in, const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined: return {};
        case Value::Kind::Array: return v.as_array();
        case Value::Kind::Object: {
            Array keys;
            for (const auto& kv : v.as_object().items) keys.push_back(key_value(kv.first));
            return keys;
        }
        case Value::Kind::String: {
            Array chars;
            for (std::string_view c : chars_of(v.as_string())) chars.push_back(Value(std::string(c)));
            return chars;
        }
        default: in.fail("a " + std::string(v.type_name()) + " is not iterable");
    }
}

int compare(Interpreter& in, const Value& a, const Value& b) {
    if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
        const double x = a.is_bool() ? a.as_bool() : a.as_number(), y = b.is_bool() ? b.as_bool() : b.as_number();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
    if (a.is_array() && b.is_array()) {
        const Array &x = a.as_array(), &y = b.as_array();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (const int c = compare(in, x[i], y[i]); c != 0) return c;
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    in.fail(std::string("cannot order a ") + a.type_name() + " and a " + b.type_name());
}

bool contains(Interpreter& in, const Value& h, const Value& n) {
    switch (h.kind()) {
        case Value::Kind::String:
            if (!n.is_string()) in.fail("'in <string>' needs a string on the left, not a " + std::string(n.type_name()));
            return h.as_string().find(n.as_string()) != std::string::npos;
        case Value::Kind::Array:
            for (const Value& x : h.as_array()) {
                in.step();
                if (x == n) return true;
            }
            return false;
        case Value::Kind::Object: return h.as_object().find(key_of(n)) != nullptr;
        case Value::Kind::Undefined: return false;
        default: in.fail("'in' needs a string, list or dict on the right, not a " + std::string(h.type_name()));
    }
}

Value get_attr(Interpreter& in, const Value& obj, const std::string& name) {
    switch (obj.kind()) {
        case Value::Kind::Undefined: in.fail("cannot read '" + name + "' of an undefined value");
        case Value::Kind::Object:
            if (const Value* v = obj.as_object().find(name)) return *v;
            break;
        case Value::Kind::Array:
            if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
                return get_item(in, obj, Value(static_cast<int64_t>(std::stoll(name))));
            break;
        default: break;
    }
    if (std::optional<Value> m = method(in, obj, name)) return *m;
    return Value();
}

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
    switch (obj.kind()) {
        case Value::Kind::Undefined: in.fail("cannot index an undefined value with " + key.repr());
        case Value::Kind::Object:
            if (const Value* v = obj.as_object().find(key_of(key))) return *v;
            return Value();
        case Value::Kind::Array:
        case Value::Kind::String: {
            if (obj.is_generator()) in.fail("'generator' object is not subscriptable");
            if (key.is_string()) return get_attr(in, obj, key.as_string());
            if (!key.is_int() && !key.is_bool()) in.fail("list indices must be integers, not " + std::string(key.type_name()));
            const std::vector<std::string_view> chars = obj.is_string() ? chars_of(obj.as_string()) : std::vector<std::string_view>();
            const int64_t n = obj.is_array() ? static_cast<int64_t>(obj.as_array().size()) : static_cast<int64_t>(chars.size());
            int64_t i = key.is_bool() ? key.as_bool() : key.as_int();
            if (i < 0) i += n;
            if (i < 0 || i >= n) return Value();
            return obj.is_array() ? obj.as_array()[static_cast<size_t>(i)] : Value(std::string(chars[static_cast<size_t>(i)]));
        }
        default: return Value();
    }
}

std::optional<Value> method(Interpreter& in, const Value& obj, const std::string& name) {
    (void)in;
    if (obj.is_string() && is_string_method(name)) {
        const std::string s = obj.as_string();
        return Value::function(name, [s, name](Interpreter& i, const Args& a) { return string_method(i, s, name, a); });
    }
    if (obj.is_object() && !obj.as_object().is_namespace) {
        const std::shared_ptr<Object> o = obj.object_ptr();
        if (name == "items") return Value::function(name, [o](Interpreter&, const Args&) { return Value(dict_items(*o)); });
        if (name == "keys" || name == "values")
            return Value::function(name, [o, name](Interpreter&, const Args&) {
                Array r;
                for (const auto& [k, v] : o->items) r.push_back(name == "keys" ? key_value(k) : v);
                return Value(std::move(r));
            });
        if (name == "get")
            return Value::function(name, [o](Interpreter& i, const Args& a) {
                const Value* k = a.get(0, "key");
                if (!k) i.fail("get() needs a key");
                const Value* v = o->find(key_of(*k));
                if (v) return *v;
                const Value* d = a.get(1, "default");
                return d ? *d : Value::none();
            });
    }
    if (obj.is_array() && (name == "index" || name == "count")) {
        const Value list = obj;
        return Value::function(name, [list, name](Interpreter& i, const Args& a) {
            const Value* x = a.get(0, "value");
            if (!x) i.fail(name + "() needs a value");
            int64_t n = 0, at = -1;
            for (size_t k = 0; k < list.as_array().size(); ++k)
                if (list.as_array()[k] == *x) {
                    if (at < 0) at = static_cast<int64_t>(k);
                    ++n;
                }
            if (name == "count") return Value(n);
            if (at < 0) i.fail("the value is not in the list");
            return Value(at);
        });
    }
    return std::nullopt;
}

bool test(Interpreter& in, const std::string& name, const Value& v, const Args& a) {
    const Value* a0 = a.get(0, "");
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "mapping") return v.is_object();
    if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
    if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
    if (name == "callable") return v.is_callable();
    if (name == "lower") return v.is_string() && lower(v.as_string()) == v.as_string();
    if (name == "upper") return v.is_string() && upper(v.as_string()) == v.as_string();
    if (name == "odd" || name == "even") {
        const int64_t x = to_int(in, v, name.c_str());
        return (x % 2 != 0) == (name == "odd");
    }
    if (name == "divisibleby") {
        if (!a0) in.fail("divisibleby needs a number");
        const int64_t d = to_int(in, *a0, "divisibleby");
        return d == -1 || (d != 0 && to_int(in, v, "divisibleby") % d == 0);  // (INT64_MIN % -1 traps)
    }
    if (!a0 && (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=" || name == "lt" ||
                name == "gt" || name == "le" || name == "ge" || name == "in" || name == "sameas"))
        in.fail("the test '" + name + "' needs a value to compare with");
    if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v == *a0;
    if (name == "ne" || name == "!=") return !(v == *a0);
    if (name == "lt" || name == "<") return compare(in, v, *a0) < 0;
    if (name == "gt" || name == ">") return compare(in, v, *a0) > 0;
    if (name == "le" || name == "<=") return compare(in, v, *a0) <= 0;
    if (name == "ge" || name == ">=") return compare(in, v, *a0) >= 0;
    if (name == "in") return contains(in, *a0, v);
    in.fail("unknown test '" + name + "'");
}

Value filter(Interpreter& in, const std::string& name, const Value& v, const Args& a) {
    in.step();
    const Value* a0 = a.get(0, "");
    if (name == "safe") return v.is_markup() ? v : Value::markup(v.str());
    if (name == "string") return v.is_string() ? v : Value(v.str());
    if (name == "tojson") {
        const Value* ind = a.get(0, "indent");
        const Value* sk = a.keyword("sort_keys");
        const Value* ascii = a.keyword("ensure_ascii");
        std::string s;
        try {
            const int64_t width = ind && !ind->is_none() ? std::clamp<int64_t>(to_int(in, *ind, "indent"), 0, 64) : -1;
            s = v.to_json(static_cast<int>(width), sk && sk->truthy(), ascii && ascii->truthy(), in.limits().max_output);
        } catch (const TemplateError&) {
            throw;
        } catch (const Error& e) {
            in.fail(e.what());
        }
        in.check_size(s.size());
        return Value(s);
    }
    if (name == "trim") {
        const Value* chars = a.get(0, "chars");
        return Value(strip_chars(v.str(), chars && chars->is_string() ? chars->as_string() : kSpace, true, true));
    }
    if (name == "upper") return Value(upper(v.str()));
    if (name == "lower") return Value(lower(v.str()));
    if (name == "title") return Value(title(v.str()));
    if (name == "capitalize") return Value(capitalize(v.str()));
    if (name == "replace") {
        const Value* c = a.get(2, "count");
        return Value(replace_all(in, v.str(), str_arg(in, a0, "replace"), str_arg(in, a.get(1, "new"), "replace"),
                                 c && !c->is_none() ? to_int(in, *c, "count") : -1));
    }
    if (name == "length" || name == "count") {
        if (v.is_string()) {
            int64_t n = 0;
            for (unsigned char c : v.as_string()) n += (c & 0xC0) != 0x80;
            return Value(n);
        }
        if (v.is_generator()) in.fail("object of type 'generator' has no len()");
        if (v.is_array()) return Value(static_cast<int64_t>(v.as_array().size()));
        if (v.is_object()) return Value(static_cast<int64_t>(v.as_object().items.size()));
        if (v.is_undefined()) return Value(int64_t{0});
        in.fail("a " + std::string(v.type_name()) + " has no length");
    }
    if (name == "first" || name == "last") {
        if (name == "last" && v.is_generator()) in.fail("'generator' object is not reversible");
        const Array items = iterate(in, v);
        if (items.empty()) return Value();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "join") {
        const std::string sep = a0 && a0->is_string() ? a0->as_string() : "";
        const Value* attr = a.get(1, "attribute");
        std::string r;
        const Array items = iterate(in, v);
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) r += sep;
            r += (attr ? attribute_of(in, items[i], attr->str()) : items[i]).str();
            in.check_size(r.size());
        }
        return Value(std::move(r));
    }
    if (name == "default" || name == "d") {
        const Value* b = a.get(1, "boolean");
        const bool use = b && b->truthy() ? !v.truthy() : v.is_undefined();
        return use ? (a0 ? *a0 : Value(std::string())) : v;
    }
    if (name == "list") return Value(iterate(in, v));
    if (name == "items") {
        if (v.is_undefined()) return Value(Array{});
        if (!v.is_object()) in.fail("items needs a dict, not a " + std::string(v.type_name()));
        return Value::generator(dict_items(v.as_object()));
    }
    if (name == "dictsort") {
        if (!v.is_object()) in.fail("dictsort needs a dict");
        Array items = dict_items(v.as_object());
        const Value* by = a.keyword("by");
        const size_t k = by && by->is_string() && by->as_string() == "value" ? 1 : 0;
        std::stable_sort(items.begin(), items.end(),
                         [&](const Value& x, const Value& y) { return compare(in, x.as_array()[k], y.as_array()[k]) < 0; });
        return Value(std::move(items));
    }
    if (name == "map") {
        const Value* attr = a.keyword("attribute");
        Array out;
        for (const Value& x : v.truthy() ? iterate(in, v) : Array{}) {
            if (attr) {
                Value r = attribute_of(in, x, attr->str());
                const Value* d = a.keyword("default");
                out.push_back(r.is_undefined() && d ? *d : r);
            } else {
                Args rest;
                for (size_t i = 1; i < a.pos.size(); ++i) rest.pos.push_back(a.pos[i]);
                out.push_back(in.apply_filter(str_arg(in, a0, "map"), x, rest));
            }
        }
        return Value::generator(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
        return select_like(in, name, v, a);
    if (name == "unique") {
        Array out;
        for (const Value& x : iterate(in, v)) {
            for (size_t i = 0; i < out.size(); ++i) in.step();  // quadratic: each comparison counts
            if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return y == x; })) out.push_back(x);
        }
        return Value::generator(std::move(out));
    }
    if (name == "reverse") {
        if (v.is_string()) {
            std::string r;
            const std::vector<std::string_view> chars = chars_of(v.as_string());
            for (auto c = chars.rbegin(); c != chars.rend(); ++c) r += *c;
            return Value(std::move(r));
        }
        Array items = iterate(in, v);
        std::reverse(items.begin(), items.end());
        // reversed(list) is an iterator; a generator has no reversed(): jinja2 then makes a list.
        return v.is_array() && !v.is_generator() ? Value::generator(std::move(items)) : Value(std::move(items));
    }
    if (name == "sort") {
        Array items = iterate(in, v);
        const Value* rev = a.get(0, "reverse");
        const Value* attr = a.keyword("attribute");
        std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
            const Value& l = attr ? attribute_of(in, x, attr->str()) : x;
            const Value& r = attr ? attribute_of(in, y, attr->str()) : y;
            return compare(in, l, r) < 0;
        });
        if (rev && rev->truthy()) std::reverse(items.begin(), items.end());
        return Value(std::move(items));
    }
    if (name == "int") {
        if (v.is_string()) {
            try {
                return Value(static_cast<int64_t>(std::stoll(strip_chars(v.as_string(), kSpace, true, true))));
            } catch (...) {
                return a0 ? *a0 : Value(int64_t{0});
            }
        }
        if (v.is_number() || v.is_bool()) return Value(to_int(in, v, "int"));
        return a0 ? *a0 : Value(int64_t{0});
    }
    if (name == "float") {
        if (v.is_string()) {
            try {
                return Value(std::stod(v.as_string()));
            } catch (...) {
                return a0 ? *a0 : Value(0.0);
            }
        }
        if (v.is_number()) return Value(v.as_number());
        if (v.is_bool()) return Value(v.as_bool() ? 1.0 : 0.0);
        return a0 ? *a0 : Value(0.0);
    }
    if (name == "abs") {
        if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
        if (v.is_float()) return Value(std::fabs(v.as_number()));
        in.fail("abs needs a number");
    }
    if (name == "round") {
        const int64_t prec = a0 ? to_int(in, *a0, "round") : 0;
        const Value* method = a.get(1, "method");
        const double m = std::pow(10.0, static_cast<double>(prec));
        const double x = (v.is_number() ? v.as_number() : 0.0) * m;
        const std::string how = method && method->is_string() ? method->as_string() : "common";
        const double r = how == "floor" ? std::floor(x) : how == "ceil" ? std::ceil(x) : std::round(x);
        return Value(r / m);
    }
    if (name == "sum" || name == "min" || name == "max") {
        const Array items = iterate(in, v);
        const Value* attr = a.keyword("attribute");
        if (name == "sum") {
            Value total = a.keyword("start") ? *a.keyword("start") : Value(int64_t{0});
            for (const Value& x : items) {
                const Value y = attr ? attribute_of(in, x, attr->str()) : x;
                if (total.is_int() && y.is_int()) total = Value(total.as_int() + y.as_int());
                else total = Value(total.as_number() + (y.is_number() ? y.as_number() : 0.0));
            }
            return total;
        }
        if (items.empty()) return Value();
        Value best = items[0];
        for (const Value& x : items)
            if ((compare(in, x, best) < 0) == (name == "min") && !(x == best)) best = x;
        return best;
    }
    if (name == "indent") {
        const Value* w = a.get(0, "width");
        const std::string pad = w && w->is_string() ? w->as_string().substr(0, 256)
                                                    : std::string(static_cast<size_t>(std::clamp<int64_t>(w ? to_int(in, *w, "indent") : 4, 0, 256)), ' ');
        const Value* first = a.get(1, "first");
        const Value* blank = a.get(2, "blank");
        std::string r = indent_text(v.str(in.limits().max_output), pad, first && first->truthy(), blank && blank->truthy());
        in.check_size(r.size());
        return Value(std::move(r));
    }
    if (name == "escape" || name == "e" || name == "forceescape") return Value(escape_html(v.str()));
    if (name == "wordcount") return Value(static_cast<int64_t>(split(v.str(), nullptr, -1).size()));
    if (name == "batch") {
        const int64_t n = a0 ? to_int(in, *a0, "batch") : 1;
        if (n <= 0) in.fail("batch needs a positive size");
        Array out, cur;
        for (const Value& x : iterate(in, v)) {
            cur.push_back(x);
            if (static_cast<int64_t>(cur.size()) == n) {
                out.push_back(Value(std::move(cur)));
                cur = {};
            }
        }
        if (!cur.empty()) out.push_back(Value(std::move(cur)));
        return Value::generator(std::move(out));
    }
    in.fail("unknown filter '" + name + "'");
}

Value global(const std::string& name) {
    if (name == "range")
        return Value::function("range", [](Interpreter& in, const Args& a) {
            int64_t b = 0, e = 0, s = 1;
            if (a.pos.size() == 1) e = to_int(in, a.pos[0], "range");
            else if (a.pos.size() >= 2) {
                b = to_int(in, a.pos[0], "range");
                e = to_int(in, a.pos[1], "range");
                if (a.pos.size() > 2) s = to_int(in, a.pos[2], "range");
            } else {
                in.fail("range() needs 1 to 3 numbers");
            }
            if (s == 0) in.fail("range() step cannot be zero");
            const double n = std::ceil((static_cast<double>(e) - static_cast<double>(b)) / static_cast<double>(s));
            if (n > 0) in.check_items(static_cast<size_t>(n));
            Array r;
            for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
                in.step();
                r.push_back(Value(i));
            }
            return Value(std::move(r));
        });
    if (name == "namespace" || name == "dict")
        return Value::function(name, [name](Interpreter& in, const Args& a) {
            auto o = std::make_shared<Object>();
            o->is_namespace = name == "namespace";
            for (const Value& p : a.pos) {
                if (!p.is_object()) in.fail(name + "() takes keyword arguments or a dict");
                for (const auto& [k, v] : p.as_object().items) o->set(k, v);
            }
            for (const auto& [k, v] : a.kw) o->set(k, v);
            return Value(std::move(o));
        });
    if (name == "raise_exception")
        return Value::function(name, [](Interpreter& in, const Args& a) -> Value {
            in.fail("the template raised an error: " + (a.pos.empty() ? std::string() : a.pos[0].str()));
        });
    if (name == "strftime_now")
        return Value::function(name, [](Interpreter& in, const Args& a) {
            const std::string& fmt = str_arg(in, a.get(0, "format"), "strftime_now");
            const std::time_t t = std::time(nullptr);
            std::tm tm{};
            localtime_r(&t, &tm);
            char buf[256];
            const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
            return Value(std::string(buf, n));
        });
    return Value();
}

}  // namespace strata::chat::jinja
