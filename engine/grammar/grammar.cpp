#include "grammar/grammar.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace strata::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr size_t kMaxNameLength = 256;
constexpr int kMaxNesting = 256;  // groups within groups

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

// The code points lo..hi (one UTF-8 length, no surrogates) as sequences of byte
// ranges, each matching exactly a part of the range (regex-syntax's Utf8Sequences).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
    for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu})
        if (lo <= bound && hi > bound) {
            utf8_sequences(lo, bound, out);
            utf8_sequences(bound + 1, hi, out);
            return;
        }
    if (hi <= 0x7F) {
        out.push_back({{uint8_t(lo), uint8_t(hi)}});
        return;
    }
    for (int i = 1; i < 4; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_sequences(lo, lo | m, out);
                utf8_sequences((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                utf8_sequences(lo, (hi & ~m) - 1, out);
                utf8_sequences(hi & ~m, hi, out);
                return;
            }
        }
    }
    std::string a, b;
    append_utf8(a, lo);
    append_utf8(b, hi);
    ByteRanges seq;
    for (size_t k = 0; k < a.size(); ++k) seq.push_back({uint8_t(a[k]), uint8_t(b[k])});
    out.push_back(std::move(seq));
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

class Builder {
public:
    Builder(std::string_view text) : text_(text) {}

    Grammar build(std::string_view root_name);

private:
    struct Rule {
        std::string name;
        std::vector<std::vector<Element>> alts;
        bool defined = false;
        size_t first_use = std::string_view::npos;  // where an undefined rule was named
        std::string parent;                          // anonymous rules: the rule they are part of
    };
    using Sequence = std::vector<Element>;

    [[noreturn]] void fail(size_t at, const std::string& what) const;
    bool eof() const { return pos_ >= text_.size(); }
    char peek() const { return eof() ? '\0' : text_[pos_]; }
    void skip_space(bool newline_ok);
    std::string parse_name();
    uint32_t parse_hex(int digits);
    uint32_t parse_char();  // one code point, escapes decoded
    std::vector<std::vector<Element>> parse_alternatives(const std::string& rule, bool nested);
    Sequence parse_sequence(const std::string& rule, bool nested);
    void parse_literal(Sequence& seq);
    Element parse_class(const std::string& rule);
    void apply_repeat(Sequence& seq, size_t item_start, uint32_t min, uint32_t max, const std::string& rule);
    uint32_t rule_id(const std::string& name);
    uint32_t anonymous(const std::string& parent, std::vector<std::vector<Element>> alts);
    Element bytes(const ByteSet& s);
    Element code_points(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, const std::string& rule);
    void count(size_t n);
    void check_left_recursion(const Grammar& g) const;

    std::string_view text_;
    size_t pos_ = 0;
    std::vector<Rule> rules_;
    std::unordered_map<std::string, uint32_t> ids_;
    std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
    std::vector<ByteSet> sets_;
    size_t elements_ = 0;
    uint32_t any_char_ = UINT32_MAX;
    int nesting_ = 0;
};

void Builder::fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
        if (text_[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    throw GrammarError("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
}

void Builder::count(size_t n) {
    elements_ += n;
    if (elements_ > Grammar::kMaxElements)
        fail(pos_, "the grammar is too large (more than " + std::to_string(Grammar::kMaxElements) +
                       " elements once repetitions are expanded): use smaller repetition counts");
}

void Builder::skip_space(bool newline_ok) {
    while (!eof()) {
        const char c = text_[pos_];
        if (c == ' ' || c == '\t') {
            ++pos_;
        } else if (c == '#') {
            while (!eof() && text_[pos_] != '\n') ++pos_;
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            ++pos_;
        } else {
            break;
        }
    }
}

std::string Builder::parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ - start > kMaxNameLength)
        fail(start, "a rule name longer than " + std::to_string(kMaxNameLength) + " characters");
    return std::string(text_.substr(start, pos_ - start));
}

uint32_t Builder::rule_id(const std::string& name) {
    auto [it, added] = ids_.try_emplace(name, uint32_t(rules_.size()));
    if (added) rules_.push_back(Rule{name, {}, false, std::string_view::npos, {}});
    return it->second;
}

uint32_t Builder::anonymous(const std::string& parent, std::vector<std::vector<Element>> alts) {
    size_t n = 0;
    for (const auto& a : alts) n += a.size() + 1;
    count(n);
    // '#' cannot appear in a rule name the grammar text gives: no clash.
    const uint32_t id = rule_id(parent + "#" + std::to_string(rules_.size()));
    rules_[id].alts = std::move(alts);
    rules_[id].defined = true;
    rules_[id].parent = parent;
    return id;
}

Element Builder::bytes(const ByteSet& s) {
    std::array<uint64_t, 4> key{};
    for (size_t b = 0; b < 256; ++b)
        if (s.test(b)) key[b / 64] |= uint64_t(1) << (b % 64);
    auto [it, added] = set_ids_.try_emplace(key, uint32_t(sets_.size()));
    if (added) sets_.push_back(s);
    return Element{Element::Kind::Bytes, it->second};
}

uint32_t Builder::parse_hex(int digits) {
    uint32_t v = 0;
    const size_t start = pos_;
    for (int i = 0; i < digits; ++i) {
        const char c = peek();
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else fail(pos_, "expected " + std::to_string(digits) + " hexadecimal digits in an escape");
        v = v * 16 + uint32_t(d);
        ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail(start, "the escape is not a Unicode code point");
    return v;
}

uint32_t Builder::parse_char() {
    if (eof()) fail(pos_, "unexpected end of the grammar");
    const auto c = uint8_t(text_[pos_]);
    if (c == '\\') {
        ++pos_;
        if (eof()) fail(pos_, "unexpected end of the grammar after '\\'");
        const char e = text_[pos_++];
        switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case '0': return 0;
            case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return uint32_t(uint8_t(e));
            case 'x': return parse_hex(2);
            case 'u': return parse_hex(4);
            case 'U': return parse_hex(8);
            default: fail(pos_ - 2, std::string("unknown escape '\\") + e + "'");
        }
    }
    // Raw UTF-8 in the grammar text.
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > text_.size()) fail(pos_, "the grammar text is not valid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
        const auto b = uint8_t(text_[pos_ + size_t(i)]);
        if ((b & 0xC0) != 0x80) fail(pos_, "the grammar text is not valid UTF-8");
        cp = (cp << 6) | (b & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        fail(pos_, "the grammar text is not valid UTF-8 (an overlong form, a surrogate or beyond U+10FFFF)");
    pos_ += size_t(len);
    return cp;
}

void Builder::parse_literal(Sequence& seq) {
    const size_t start = pos_++;  // the opening quote
    std::string bytes_of;
    while (true) {
        if (eof() || peek() == '\n') fail(start, "this literal has no closing '\"'");
        if (peek() == '"') {
            ++pos_;
            break;
        }
        append_utf8(bytes_of, parse_char());
    }
    count(bytes_of.size());
    for (const char b : bytes_of) {
        ByteSet s;
        s.set(uint8_t(b));
        seq.push_back(bytes(s));
    }
}

Element Builder::code_points(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, const std::string& rule) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    if (negated) {
        std::vector<std::pair<uint32_t, uint32_t>> inv;
        uint32_t next = 0;
        for (const auto& r : merged) {
            if (r.first > next) inv.push_back({next, r.first - 1});
            next = r.second + 1;
        }
        if (next <= kMaxCodePoint) inv.push_back({next, kMaxCodePoint});
        merged = std::move(inv);
    }
    // Surrogates are not characters: no UTF-8 encodes them.
    std::vector<ByteRanges> seqs;
    for (const auto& [lo, hi] : merged) {
        if (hi < 0xD800 || lo > 0xDFFF) {
            utf8_sequences(lo, hi, seqs);
        } else {
            if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, seqs);
            if (hi > 0xDFFF) utf8_sequences(0xE000, hi, seqs);
        }
    }
    ByteSet single;
    std::vector<std::vector<Element>> alts;
    for (const ByteRanges& s : seqs) {
        if (s.size() == 1) {
            for (unsigned b = s[0].first; b <= s[0].second; ++b) single.set(b);
            continue;
        }
        std::vector<Element> alt;
        for (const auto& [a, b] : s) {
            ByteSet set;
            for (unsigned x = a; x <= b; ++x) set.set(x);
            alt.push_back(bytes(set));
        }
        alts.push_back(std::move(alt));
    }
    if (alts.empty()) return bytes(single);  // ASCII only (or nothing at all)
    if (single.any()) alts.insert(alts.begin(), std::vector<Element>{bytes(single)});
    return Element{Element::Kind::Rule, anonymous(rule, std::move(alts))};
}

Element Builder::parse_class(const std::string& rule) {
    const size_t start = pos_++;  // '['
    bool negated = false;
    if (peek() == '^') {
        negated = true;
        ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
        if (eof() || peek() == '\n') fail(start, "this character class has no closing ']'");
        if (peek() == ']') {
            ++pos_;
            break;
        }
        const uint32_t lo = parse_char();
        uint32_t hi = lo;
        if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
            ++pos_;
            const size_t at = pos_;
            hi = parse_char();
            if (hi < lo) fail(at, "the range in this character class ends before it starts");
        }
        ranges.push_back({lo, hi});
    }
    return code_points(std::move(ranges), negated, rule);
}

void Builder::apply_repeat(Sequence& seq, size_t item_start, uint32_t min, uint32_t max, const std::string& rule) {
    Element x;
    if (seq.size() - item_start == 1) {
        x = seq.back();
    } else {
        Sequence item(seq.begin() + std::ptrdiff_t(item_start), seq.end());
        x = Element{Element::Kind::Rule, anonymous(rule, {std::move(item)})};
    }
    seq.resize(item_start);
    count(min);
    for (uint32_t i = 0; i < min; ++i) seq.push_back(x);
    if (max == kUnbounded) {
        const uint32_t r = anonymous(rule, {});
        rules_[r].alts = {{x, Element{Element::Kind::Rule, r}}, {}};
        count(3);
        seq.push_back(Element{Element::Kind::Rule, r});
    } else if (max > min) {
        uint32_t prev = anonymous(rule, {{x}, {}});
        for (uint32_t k = min + 1; k < max; ++k) prev = anonymous(rule, {{x, Element{Element::Kind::Rule, prev}}, {}});
        seq.push_back(Element{Element::Kind::Rule, prev});
    }
}

Builder::Sequence Builder::parse_sequence(const std::string& rule, bool nested) {
    Sequence seq;
    while (!eof()) {
        const char c = peek();
        if (c == '|' || c == '\n' || c == '\r') break;
        if (c == ')') {
            if (nested) break;
            fail(pos_, "this ')' closes no group");
        }
        const size_t item_start = seq.size();
        if (c == '"') {
            parse_literal(seq);
        } else if (c == '[') {
            seq.push_back(parse_class(rule));
        } else if (c == '.') {
            ++pos_;
            if (any_char_ == UINT32_MAX) any_char_ = code_points({}, true, "any-char").value;
            seq.push_back(Element{Element::Kind::Rule, any_char_});
        } else if (c == '(') {
            const size_t open = pos_++;
            if (++nesting_ > kMaxNesting) fail(open, "groups nest more than " + std::to_string(kMaxNesting) + " deep");
            skip_space(true);
            auto alts = parse_alternatives(rule, true);
            --nesting_;
            if (peek() != ')') fail(open, "this '(' is not closed");
            ++pos_;
            seq.push_back(Element{Element::Kind::Rule, anonymous(rule, std::move(alts))});
        } else if (is_name_char(c)) {
            const size_t at = pos_;
            const uint32_t id = rule_id(parse_name());
            if (rules_[id].first_use == std::string_view::npos) rules_[id].first_use = at;
            seq.push_back(Element{Element::Kind::Rule, id});
        } else {
            fail(pos_, std::string("unexpected character '") + c + "'");
        }
        count(1);
        skip_space(nested);
        while (!eof() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
            const char op = text_[pos_++];
            uint32_t min = 0, max = kUnbounded;
            if (op == '+') min = 1;
            else if (op == '?') max = 1;
            else if (op == '{') {
                auto number = [&] {
                    const size_t at = pos_;
                    uint64_t v = 0;
                    if (!(peek() >= '0' && peek() <= '9')) fail(at, "expected a number in {m,n}");
                    while (peek() >= '0' && peek() <= '9') {
                        v = v * 10 + uint64_t(text_[pos_++] - '0');
                        if (v > Grammar::kMaxRepeat)
                            fail(at, "repetition counts above " + std::to_string(Grammar::kMaxRepeat) +
                                         " are not supported");
                    }
                    return uint32_t(v);
                };
                skip_space(false);
                min = number();
                skip_space(false);
                if (peek() == ',') {
                    ++pos_;
                    skip_space(false);
                    if (peek() != '}') max = number();
                } else {
                    max = min;
                }
                skip_space(false);
                if (peek() != '}') fail(pos_, "expected '}' to close {m,n}");
                ++pos_;
                if (max < min) fail(pos_ - 1, "{m,n} with n smaller than m");
            }
            if (seq.size() == item_start) fail(pos_ - 1, "a repetition needs something before it");
            apply_repeat(seq, item_start, min, max, rule);
            skip_space(nested);
        }
    }
    return seq;
}

std::vector<std::vector<Element>> Builder::parse_alternatives(const std::string& rule, bool nested) {
    std::vector<std::vector<Element>> alts;
    alts.push_back(parse_sequence(rule, nested));
    while (peek() == '|') {
        ++pos_;
        skip_space(true);
        alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
}

void Builder::check_left_recursion(const Grammar& g) const {
    const size_t n = g.rule_count();
    const auto& el = g.elements();
    // Nullable rules by a worklist: an alternative is nullable once every
    // element in it is a nullable rule (linear in the grammar's size).
    std::vector<uint8_t> nullable(n, 0);
    struct Alt {
        uint32_t rule;
        uint32_t pending;  // elements not known nullable
    };
    std::vector<Alt> alts;
    std::vector<std::vector<uint32_t>> used_in(n);  // rule -> alternatives it occurs in (once per occurrence)
    std::vector<uint32_t> work;
    for (uint32_t r = 0; r < n; ++r)
        for (uint32_t a : g.alternatives(r)) {
            uint32_t pending = 0;
            bool has_bytes = false;
            for (uint32_t p = a; el[p].kind != Element::Kind::End; ++p) {
                if (el[p].kind == Element::Kind::Bytes) has_bytes = true;
                else used_in[el[p].value].push_back(uint32_t(alts.size()));
                ++pending;
            }
            if (has_bytes) pending = UINT32_MAX;  // never nullable
            alts.push_back({r, pending});
            if (pending == 0 && !nullable[r]) {
                nullable[r] = 1;
                work.push_back(r);
            }
        }
    while (!work.empty()) {
        const uint32_t s = work.back();
        work.pop_back();
        for (uint32_t ai : used_in[s]) {
            Alt& a = alts[ai];
            if (a.pending == UINT32_MAX || a.pending == 0) continue;
            if (--a.pending == 0 && !nullable[a.rule]) {
                nullable[a.rule] = 1;
                work.push_back(a.rule);
            }
        }
    }
    // Edges r -> s where s can start r; a cycle is left recursion.
    std::vector<std::vector<uint32_t>> first(n);
    for (uint32_t r = 0; r < n; ++r)
        for (uint32_t a : g.alternatives(r))
            for (uint32_t p = a; el[p].kind == Element::Kind::Rule; ++p) {
                first[r].push_back(el[p].value);
                if (!nullable[el[p].value]) break;
            }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t s = 0; s < n; ++s) {
        if (color[s]) continue;
        stack.push_back({s, 0});
        color[s] = 1;
        while (!stack.empty()) {
            auto& [r, i] = stack.back();
            if (i == first[r].size()) {
                color[r] = 2;
                stack.pop_back();
                continue;
            }
            const uint32_t t = first[r][i++];
            if (color[t] == 1) {
                const Rule& rule = rules_[t];
                std::string where = rule.parent.empty() ? "rule '" + rule.name + "'"
                                                        : "a group or repetition in rule '" + rule.parent + "'";
                throw GrammarError("grammar: " + where +
                                   " can reach itself without matching a character (left recursion, or a "
                                   "repetition of something that can be empty): rewrite it so that every "
                                   "repetition and recursion matches at least one character first");
            }
            if (color[t] == 0) {
                color[t] = 1;
                stack.push_back({t, 0});
            }
        }
    }
}

Grammar Builder::build(std::string_view root_name) {
    while (true) {
        skip_space(true);
        if (eof()) break;
        const size_t at = pos_;
        const std::string name = parse_name();
        if (name.empty()) fail(at, std::string("expected a rule name, found '") + peek() + "'");
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after the rule name '" + name + "'");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name);
        if (rules_[id].defined) fail(at, "rule '" + name + "' is defined twice");
        rules_[id].defined = true;  // before its body, so a body naming it is not 'undefined'
        auto alts = parse_alternatives(name, false);
        rules_[id].alts = std::move(alts);
        skip_space(false);
        if (!eof() && peek() != '\n' && peek() != '\r') fail(pos_, std::string("unexpected character '") + peek() + "'");
    }
    for (const Rule& r : rules_)
        if (!r.defined) fail(r.first_use, "rule '" + r.name + "' is used but not defined");
    auto it = ids_.find(std::string(root_name));
    if (it == ids_.end()) throw GrammarError("grammar: there is no rule '" + std::string(root_name) + "' to start from");

    Grammar g;
    g.root_ = it->second;
    g.sets_ = std::move(sets_);
    for (Rule& r : rules_) {
        std::vector<uint32_t> starts;
        for (auto& alt : r.alts) {
            starts.push_back(uint32_t(g.elements_.size()));
            g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
            g.elements_.push_back(Element{Element::Kind::End, 0});
        }
        g.alternatives_.push_back(std::move(starts));
        g.names_.push_back(r.name);
    }
    check_left_recursion(g);
    return g;
}

Grammar Grammar::parse(std::string_view gbnf, std::string_view root) { return Builder(gbnf).build(root); }

std::string gbnf_literal(std::string_view bytes) {
    static const char* hex = "0123456789ABCDEF";
    std::string out = "\"";
    for (const char ch : bytes) {
        const auto c = uint8_t(ch);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(char(c));
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            out += "\\x";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else {
            out.push_back(char(c));
        }
    }
    out.push_back('"');
    return out;
}

}  // namespace strata::grammar
