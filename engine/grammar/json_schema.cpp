#include "grammar/json_schema.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "grammar/grammar.h"

namespace strata::grammar {

using ojson = nlohmann::ordered_json;

namespace {

// The generic JSON rules, llama.cpp's json.gbnf with bounded whitespace and
// numbers. A \u escape never names a lone surrogate (parsers reject those).
const std::map<std::string, std::string>& primitives() {
    static const std::map<std::string, std::string> p = {
        {"space", R"(| " " | "\n" [ \t]{0,20})"},
        {"boolean", R"(("true" | "false") space)"},
        {"null", R"("null" space)"},
        {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
        {"decimal-part", R"([0-9]{1,16})"},
        {"integer", R"(("-"? integral-part) space)"},
        {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)"},
        {"hex", R"([0-9a-fA-F])"},
        {"char", R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex)))"},
        {"string", R"("\"" char* "\"" space)"},
        {"value", R"(object | array | string | number | boolean | null)"},
        {"object", R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)"},
        {"array", R"("[" space (value ("," space value)*)? "]" space)"},
        {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))"},
        {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
        {"uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})"},
    };
    return p;
}

// What each primitive needs.
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
    static const std::map<std::string, std::vector<std::string>> d = {
        {"boolean", {"space"}},
        {"null", {"space"}},
        {"integer", {"integral-part", "space"}},
        {"number", {"integral-part", "decimal-part", "space"}},
        {"char", {"hex"}},
        {"string", {"char", "space"}},
        {"value", {"object", "array", "string", "number", "boolean", "null"}},
        {"object", {"space", "string", "value"}},
        {"array", {"space", "value"}},
        {"uuid", {"hex"}},
    };
    return d;
}

// Validation keywords the grammar does not express.
const std::set<std::string>& unsupported() {
    static const std::set<std::string> k = {
        "pattern", "multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "minProperties",
        "maxProperties", "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
        "dependencies", "if", "then", "else", "not", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
        "$recursiveRef", "contentEncoding", "contentMediaType", "contentSchema"};
    return k;
}

std::string literal(const ojson& v) { return gbnf_literal(v.dump(-1, ' ', false)) + " space"; }

// The code points of UTF-8 text (a stray byte as itself).
std::vector<uint32_t> code_points(std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (n == 1 || i + n > s.size()) {
            out.push_back(c);
            ++i;
            continue;
        }
        uint32_t cp = c & (0x7F >> n);
        for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        out.push_back(cp);
        i += n;
    }
    return out;
}

// A JSON string that is none of `keys` (as the declared keys are written):
// a trie over their code points, each node allowing a code point that leaves
// it (then anything), a child's path, or the end where no key ends. So an
// additional property never repeats a declared key. Keys with escapes are not
// excluded (""  when any has one: the caller keeps any string).
std::string other_key(JsonGrammar& g, const std::vector<std::string>& keys, const std::string& name) {
    struct Node {
        std::map<uint32_t, size_t> next;
        bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& k : keys) {
        const std::string written = ojson(k).dump(-1, ' ', false);
        if (written.find('\\') != std::string::npos) return "";
        size_t at = 0;
        for (uint32_t cp : code_points(std::string_view(written).substr(1, written.size() - 2))) {
            auto it = trie[at].next.find(cp);
            if (it == trie[at].next.end()) {
                trie.push_back({});
                it = trie[at].next.emplace(cp, trie.size() - 1).first;
            }
            at = it->second;
        }
        trie[at].end = true;
    }
    const std::string c = g.primitive("char");
    const std::string escape = g.define("escape", R"("\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex)))");
    std::function<std::string(size_t)> node = [&](size_t n) -> std::string {
        std::string alts, other = R"([^"\\\x7F\x00-\x1F)";
        for (const auto& [cp, child] : trie[n].next) {
            char esc[16];
            std::snprintf(esc, sizeof esc, "\\U%08X", cp);
            other += esc;
            std::string bytes;  // the code point as UTF-8
            if (cp < 0x80) bytes = std::string(1, char(cp));
            else if (cp < 0x800) bytes = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
            else if (cp < 0x10000) bytes = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
            else bytes = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
            alts += gbnf_literal(bytes) + " " + node(child) + " | ";
        }
        alts += "(" + other + "] | " + escape + ") " + c + "*";
        return g.define(name + "-other", trie[n].end ? "(" + alts + ")" : "(" + alts + ")?");
    };
    g.primitive("space");
    return g.define(name + "-other-key", "\"\\\"\" " + node(0) + " \"\\\"\" space");
}

std::string join_alternatives(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
}

// Decimal numbers of one length between lo and hi (same length, lo <= hi), no sign.
std::string digits_between(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "";
    const size_t rest = lo.size() - 1;
    auto tail = [&](const std::string& s) { return s.substr(1); };
    auto any = [&](size_t n) { return n == 0 ? std::string() : " [0-9]{" + std::to_string(n) + "}"; };
    if (lo[0] == hi[0]) {
        const std::string r = digits_between(tail(lo), tail(hi));
        return "\"" + std::string(1, lo[0]) + "\"" + (r.empty() ? "" : " " + r);
    }
    if (tail(lo) == std::string(rest, '0') && tail(hi) == std::string(rest, '9'))
        return std::string("[") + lo[0] + "-" + hi[0] + "]" + any(rest);
    std::vector<std::string> alts;
    const std::string a = digits_between(tail(lo), std::string(rest, '9'));
    alts.push_back("\"" + std::string(1, lo[0]) + "\"" + (a.empty() ? "" : " " + a));
    if (hi[0] - lo[0] >= 2)
        alts.push_back(std::string("[") + char(lo[0] + 1) + "-" + char(hi[0] - 1) + "]" + any(rest));
    const std::string b = digits_between(std::string(rest, '0'), tail(hi));
    alts.push_back("\"" + std::string(1, hi[0]) + "\"" + (b.empty() ? "" : " " + b));
    return "(" + join_alternatives(alts) + ")";
}

// Non-negative integers in [a, b] (b < 0: no upper bound), without leading zeros,
// at most 16 digits when unbounded.
std::string unsigned_between(int64_t a, int64_t b) {
    std::vector<std::string> alts;
    const std::string sa = std::to_string(a);
    const size_t la = sa.size();
    const size_t lb = b < 0 ? std::max<size_t>(la, 16) : std::to_string(b).size();
    for (size_t len = la; len <= lb; ++len) {
        std::string lo = sa;
        if (len != la) {  // 10...0 (built in place: g++ 12 warns wrongly about "1" + string)
            lo.assign(len, '0');
            lo[0] = '1';
        }
        std::string hi = std::string(len, '9');
        if (b >= 0 && len == lb) hi = std::to_string(b);
        alts.push_back(digits_between(lo, hi));
    }
    return alts.size() == 1 ? alts[0] : "(" + join_alternatives(alts) + ")";
}

}  // namespace

int64_t schema_count(const ojson& s, const char* key, int64_t absent, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end()) return absent;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) throw SchemaError(key, path, "must be a non-negative integer");
    if (it->get<int64_t>() > int64_t(Grammar::kMaxRepeat))
        throw SchemaError(key, path, "counts above " + std::to_string(Grammar::kMaxRepeat) + " are not supported");
    return it->get<int64_t>();
}

SchemaError::SchemaError(const std::string& keyword, const std::string& path, const std::string& why)
    : Error("JSON schema keyword '" + keyword + "' at " + (path.empty() ? std::string("/") : path) + ": " + why),
      keyword_(keyword),
      path_(path) {}

std::string JsonGrammar::fresh(const std::string& hint) {
    std::string name;
    for (const char c : hint)
        name.push_back((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '-');
    if (name.empty()) name = "schema";
    if (primitives().count(name) || name == "root") name += "-x";
    // Unique among every name given out (a hint may itself look like "a-1").
    std::string out = name;
    for (int n = used_names_[name]; taken_.count(out); n = ++used_names_[name]) out = name + "-" + std::to_string(n);
    taken_.insert(out);
    return out;
}

std::string JsonGrammar::define(const std::string& hint, const std::string& body) {
    const std::string name = fresh(hint);
    rules_.push_back({name, body});
    return name;
}

std::string JsonGrammar::primitive(const std::string& name) {
    for (const auto& [n, body] : rules_)
        if (n == name) return name;
    rules_.push_back({name, primitives().at(name)});
    taken_.insert(name);
    if (auto it = primitive_deps().find(name); it != primitive_deps().end())
        for (const std::string& d : it->second) primitive(d);
    return name;
}

std::string JsonGrammar::any_value() { return primitive("value"); }
std::string JsonGrammar::any_object() { return primitive("object"); }

std::string JsonGrammar::gbnf(const std::string& root_body) const {
    std::string out = "root ::= " + root_body + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
}

std::string JsonGrammar::add_schema(const ojson& schema, const std::string& hint) {
    root_ = &schema;
    refs_.clear();  // refs point into this schema
    const std::string r = visit(schema, hint, "");
    root_ = nullptr;
    return r;
}

std::string JsonGrammar::resolve(const std::string& ref, const std::string& path) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.empty() || ref[0] != '#')
        throw SchemaError("$ref", path, "'" + ref + "' is not in this schema: only references into the same document (#/...) are supported");
    const ojson* target = root_;
    if (ref != "#") {
        try {
            target = &root_->at(ojson::json_pointer(ref.substr(1)));
        } catch (const std::exception&) {
            throw SchemaError("$ref", path, "'" + ref + "' does not point at anything in the schema");
        }
    }
    // Named before it is visited, so a recursive schema refers to itself.
    const std::string name = fresh(ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/') + 1));
    refs_[ref] = name;
    const size_t at = rules_.size();
    rules_.push_back({name, ""});
    const std::string body = visit(*target, name + "-def", ref.substr(1));
    rules_[at].second = body;
    return name;
}

std::string JsonGrammar::visit(const ojson& s, const std::string& name, const std::string& path) {
    if (depth_ >= kMaxDepth) throw SchemaError("$ref", path, "schemas nest more than " + std::to_string(kMaxDepth) + " deep");
    ++depth_;
    struct Leave {
        int& d;
        ~Leave() { --d; }
    } leave{depth_};
    if (s.is_boolean()) {
        if (s.get<bool>()) return any_value();
        throw SchemaError("false", path, "the schema false accepts nothing");
    }
    if (!s.is_object()) throw SchemaError("type", path, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
        (void)v;
        if (unsupported().count(key)) throw SchemaError(key, path, "this keyword is not supported by grammar-constrained output");
    }
    if (auto it = s.find("$ref"); it != s.end()) {
        if (!it->is_string()) throw SchemaError("$ref", path, "must be a string");
        return resolve(it->get<std::string>(), path);
    }
    if (auto it = s.find("const"); it != s.end()) return define(name, literal(*it));
    if (auto it = s.find("enum"); it != s.end()) {
        if (!it->is_array() || it->empty()) throw SchemaError("enum", path, "must be a non-empty array");
        std::vector<std::string> alts;
        for (const auto& v : *it) alts.push_back(literal(v));
        return define(name, join_alternatives(alts));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
        if (auto it = s.find(key); it != s.end()) {
            if (!it->is_array() || it->empty()) throw SchemaError(key, path, "must be a non-empty array of schemas");
            // Keywords beside anyOf apply to every branch: each branch is visited with them.
            ojson siblings = s;
            siblings.erase(key);
            for (const char* other : {"anyOf", "oneOf"}) siblings.erase(other);
            std::vector<std::string> alts;
            for (size_t i = 0; i < it->size(); ++i) {
                const ojson& branch = (*it)[i];
                ojson merged = branch;
                if (branch.is_object() && !branch.contains("$ref"))
                    for (const auto& [k, v] : siblings.items())
                        if (!merged.contains(k)) merged[k] = v;
                alts.push_back(visit(merged, name + "-" + std::to_string(i), path + "/" + key + "/" + std::to_string(i)));
            }
            return define(name, join_alternatives(alts));
        }
    }
    if (auto it = s.find("allOf"); it != s.end()) {
        if (!it->is_array() || it->empty()) throw SchemaError("allOf", path, "must be a non-empty array of schemas");
        if (it->size() == 1) return visit((*it)[0], name, path + "/allOf/0");
        // Object schemas merge: their properties and required lists together.
        ojson merged = {{"type", "object"}, {"properties", ojson::object()}, {"required", ojson::array()}};
        for (size_t i = 0; i < it->size(); ++i) {
            const ojson& part = (*it)[i];
            const std::string where = path + "/allOf/" + std::to_string(i);
            if (!part.is_object() || !part.contains("properties") || part.contains("$ref"))
                throw SchemaError("allOf", where, "only object schemas with 'properties' can be combined");
            for (const auto& [k, v] : part["properties"].items()) merged["properties"][k] = v;
            if (part.contains("required"))
                for (const auto& r : part["required"]) merged["required"].push_back(r);
            if (part.contains("additionalProperties")) merged["additionalProperties"] = part["additionalProperties"];
        }
        return visit(merged, name, path);
    }
    auto type = s.find("type");
    if (type == s.end()) {
        if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
            return object_rule(s, name, path);
        if (s.contains("items") || s.contains("prefixItems")) return array_rule(s, name, path);
        if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) return string_rule(s, name, path);
        return any_value();
    }
    if (type->is_string()) return visit_type(s, type->get<std::string>(), name, path);
    if (type->is_array() && !type->empty()) {
        std::vector<std::string> alts;
        for (const auto& t : *type) {
            if (!t.is_string()) throw SchemaError("type", path, "must be a string or a list of strings");
            alts.push_back(visit_type(s, t.get<std::string>(), name + "-" + t.get<std::string>(), path));
        }
        return define(name, join_alternatives(alts));
    }
    throw SchemaError("type", path, "must be a string or a non-empty list of strings");
}

std::string JsonGrammar::visit_type(const ojson& s, const std::string& type, const std::string& name,
                                    const std::string& path) {
    if (type == "object") return object_rule(s, name, path);
    if (type == "array") return array_rule(s, name, path);
    if (type == "string") return string_rule(s, name, path);
    if (type == "integer") return integer_rule(s, name, path);
    if (type == "number") {
        for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
            if (s.contains(k))
                throw SchemaError(k, path, "a range is supported for integers only: use \"type\": \"integer\" or drop it");
        return primitive("number");
    }
    if (type == "boolean") return primitive("boolean");
    if (type == "null") return primitive("null");
    throw SchemaError("type", path, "unknown type '" + type + "'");
}

std::string JsonGrammar::object_rule(const ojson& s, const std::string& name, const std::string& path) {
    const ojson empty = ojson::object();
    const ojson& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) throw SchemaError("properties", path, "must be an object");
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
        if (!it->is_array()) throw SchemaError("required", path, "must be an array of property names");
        for (const auto& r : *it) {
            if (!r.is_string()) throw SchemaError("required", path, "must be an array of property names");
            required.insert(r.get<std::string>());
        }
    }
    // Keys in the schema's order; required keys the properties do not describe take any value.
    std::vector<std::pair<std::string, const ojson*>> keys;
    for (const auto& [k, v] : props.items()) {
        if (v.is_boolean() && !v.get<bool>()) {  // a key that may not appear: never written
            if (required.count(k)) throw SchemaError("required", path, "'" + k + "' is required but its schema is false");
            continue;
        }
        keys.push_back({k, &v});
    }
    static const ojson any = true;
    for (const auto& r : required)
        if (!props.contains(r)) keys.push_back({r, &any});
    // An additional key is any string but a declared one.
    std::vector<std::string> declared;
    for (const auto& [key, schema] : keys) declared.push_back(key);
    const auto extra_key = [&] {
        const std::string k = other_key(*this, declared, name);
        return k.empty() ? primitive("string") : k;
    };

    std::string extra;  // the rule for one additional key-value pair, "" when none
    auto add = s.find("additionalProperties");
    const bool no_props = keys.empty();
    if (add == s.end()) {
        if (no_props) return any_object();
    } else if (add->is_boolean()) {
        if (add->get<bool>()) {
            if (no_props) return any_object();
            extra = define(name + "-extra", extra_key() + " \":\" space " + any_value());
        }
    } else {
        const std::string v = visit(*add, name + "-additional", path + "/additionalProperties");
        extra = define(name + "-extra", extra_key() + " \":\" space " + v);
    }
    primitive("space");

    std::vector<std::string> kv;
    for (size_t i = 0; i < keys.size(); ++i) {
        const std::string v = visit(*keys[i].second, name + "-" + keys[i].first, path + "/properties/" + keys[i].first);
        kv.push_back(define(name + "-" + keys[i].first + "-kv", literal(ojson(keys[i].first)) + " \":\" space " + v));
    }
    // tail(i, first): the pairs from key i on; `first` says no pair came before (no comma).
    std::map<std::pair<size_t, bool>, std::string> tails;
    std::function<std::string(size_t, bool)> tail = [&](size_t i, bool first) -> std::string {
        if (auto it = tails.find({i, first}); it != tails.end()) return it->second;
        const std::string sep = first ? "" : "\",\" space ";
        std::string body;
        if (i == keys.size()) {
            if (extra.empty()) return "";
            body = "(" + sep + extra + " (\",\" space " + extra + ")*)?";
        } else {
            const std::string next = tail(i + 1, false);
            const std::string with = sep + kv[i] + (next.empty() ? "" : " " + next);
            if (required.count(keys[i].first)) {
                body = with;
            } else {
                const std::string without = tail(i + 1, first);
                body = "(" + with + " | " + without + ")";
            }
        }
        const std::string r = define(name + "-rest", body);
        tails[{i, first}] = r;
        return r;
    };
    const std::string t = tail(0, true);
    return define(name, "\"{\" space " + (t.empty() ? "" : t + " ") + "\"}\" space");
}

std::string JsonGrammar::array_rule(const ojson& s, const std::string& name, const std::string& path) {
    primitive("space");
    if (auto it = s.find("prefixItems"); it != s.end()) {
        if (!it->is_array()) throw SchemaError("prefixItems", path, "must be an array of schemas");
        if (s.contains("items") && !(s["items"].is_boolean() && !s["items"].get<bool>()))
            throw SchemaError("items", path, "items after prefixItems are not supported: set \"items\": false");
        std::string body = "\"[\" space";
        for (size_t i = 0; i < it->size(); ++i)
            body += (i ? " \",\" space " : " ") + visit((*it)[i], name + "-" + std::to_string(i),
                                                      path + "/prefixItems/" + std::to_string(i));
        return define(name, body + " \"]\" space");
    }
    std::string item = any_value();
    if (auto it = s.find("items"); it != s.end()) item = visit(*it, name + "-item", path + "/items");
    const int64_t lo = schema_count(s, "minItems", 0, path), hi = schema_count(s, "maxItems", -1, path);
    if (hi >= 0 && hi < lo) throw SchemaError("maxItems", path, "is smaller than minItems");
    if (hi == 0) return define(name, "\"[\" space \"]\" space");
    const std::string more = "(\",\" space " + item + ")";
    const std::string reps = "{" + std::to_string(std::max<int64_t>(lo - 1, 0)) + "," + (hi < 0 ? "" : std::to_string(hi - 1)) + "}";
    const std::string list = item + " " + more + reps;
    return define(name, "\"[\" space " + (lo == 0 ? "(" + list + ")?" : list) + " \"]\" space");
}

std::string JsonGrammar::string_rule(const ojson& s, const std::string& name, const std::string& path) {
    primitive("space");
    if (auto it = s.find("format"); it != s.end()) {
        const std::string f = it->is_string() ? it->get<std::string>() : "";
        std::string inner;
        if (f == "date") inner = primitive("date");
        else if (f == "time") inner = primitive("time");
        else if (f == "date-time") inner = primitive("date") + " \"T\" " + primitive("time");
        else if (f == "uuid") inner = primitive("uuid");
        else throw SchemaError("format", path, "format '" + f + "' is not supported (date, time, date-time and uuid are)");
        return define(name, "\"\\\"\" " + inner + " \"\\\"\" space");
    }
    const int64_t lo = schema_count(s, "minLength", 0, path), hi = schema_count(s, "maxLength", -1, path);
    if (hi >= 0 && hi < lo) throw SchemaError("maxLength", path, "is smaller than minLength");
    if (lo == 0 && hi < 0) return primitive("string");
    const std::string c = primitive("char");
    return define(name, "\"\\\"\" " + c + "{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) +
                            "} \"\\\"\" space");
}

std::string JsonGrammar::integer_rule(const ojson& s, const std::string& name, const std::string& path) {
    constexpr int64_t kLimit = 999999999999999;  // 15 digits: bounds stay exact in a double
    bool has_lo = false, has_hi = false;
    int64_t lo = 0, hi = 0;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
        auto it = s.find(key);
        if (it == s.end()) return;
        if (!it->is_number()) throw SchemaError(key, path, "must be a number");
        const double v = it->get<double>();
        if (!(std::fabs(v) <= double(kLimit)))
            throw SchemaError(key, path, "bounds beyond 15 digits are not supported");
        int64_t b = lower ? int64_t(std::ceil(v)) : int64_t(std::floor(v));
        if (exclusive && double(b) == v) b += lower ? 1 : -1;
        if (lower) {
            lo = has_lo ? std::max(lo, b) : b;
            has_lo = true;
        } else {
            hi = has_hi ? std::min(hi, b) : b;
            has_hi = true;
        }
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (!has_lo && !has_hi) return primitive("integer");
    if (has_lo && has_hi && hi < lo) throw SchemaError("maximum", path, "no integer lies within the bounds");
    primitive("space");
    std::vector<std::string> alts;
    // Negative numbers: "-" then the magnitudes |x| for x in [lo, min(hi, -1)].
    if (!has_lo || lo < 0) {
        const int64_t top = has_hi ? std::min<int64_t>(hi, -1) : -1;  // the largest negative allowed
        if (!has_hi || hi < 0 || top == -1) {
            const int64_t mag_lo = -top;                    // smallest magnitude
            const int64_t mag_hi = has_lo ? -lo : -1;       // -1: unbounded
            alts.push_back("\"-\" " + unsigned_between(mag_lo, mag_hi));
        }
    }
    // Non-negative numbers in [max(lo, 0), hi].
    if (!has_hi || hi >= 0) alts.push_back(unsigned_between(has_lo ? std::max<int64_t>(lo, 0) : 0, has_hi ? hi : -1));
    return define(name, "(" + join_alternatives(alts) + ") space");
}

std::string json_schema_gbnf(const ojson& schema) {
    JsonGrammar g;
    const std::string r = g.add_schema(schema, "schema");
    return g.gbnf(r);
}

}  // namespace strata::grammar
