// Grammars for constrained sampling: a context-free grammar over bytes, read
// from llama.cpp's GBNF notation, which is what users and llama-server's
// `grammar` parameter already speak:
//
//   root  ::= "{" space pair ("," space pair)* "}"   # a comment
//   pair  ::= [a-z]+ ":" space ("true" | "false")
//   space ::= " "?
//
// Literals "..." (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), character
// classes [a-z0-9_] and [^"\\] (code points; matched as their UTF-8 bytes, so
// a negated class matches any well-formed character outside it), `.` (any
// character), groups ( ), alternatives |, and the repetitions * + ? {m} {m,}
// {m,n}. A rule ends at the end of its line unless a group is open or the line
// ends in |.
//
// The compiled form is what the matcher walks: each rule is a list of
// alternatives, each a sequence of elements ending in End, where an element
// is a set of bytes or a reference to a rule. Repetitions become right-
// recursive helper rules (llama.cpp's expansion), so a grammar is refused
// when a rule can reach itself without consuming a byte (left recursion,
// which would make matching loop forever) or when it is too large.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace strata::grammar {

// A grammar that does not parse, names an undefined rule, or cannot be
// matched; what() says where (line:column) and what to change.
class GrammarError : public Error {
public:
    explicit GrammarError(const std::string& what) : Error(what) {}
};

using ByteSet = std::bitset<256>;

struct Element {
    enum class Kind : uint8_t { Bytes, Rule, End };
    Kind kind;
    uint32_t value;  // Bytes: index into Grammar::sets(); Rule: rule index
};

class Grammar {
public:
    // Throws GrammarError.
    static Grammar parse(std::string_view gbnf, std::string_view root = "root");

    const std::vector<Element>& elements() const { return elements_; }
    // Where each alternative of the rule starts in elements().
    const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alternatives_[rule]; }
    const ByteSet& set(uint32_t i) const { return sets_[i]; }
    uint32_t root() const { return root_; }
    size_t rule_count() const { return alternatives_.size(); }
    const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

    // Limits that keep an untrusted grammar small.
    static constexpr size_t kMaxElements = 1u << 20;
    static constexpr uint32_t kMaxRepeat = 10000;

private:
    friend class Builder;
    std::vector<Element> elements_;
    std::vector<std::vector<uint32_t>> alternatives_;
    std::vector<ByteSet> sets_;
    std::vector<std::string> names_;
    uint32_t root_ = 0;
};

// A string as a GBNF literal: "..." with ", \ and control bytes escaped
// (other bytes, UTF-8 included, as they are).
std::string gbnf_literal(std::string_view bytes);

}  // namespace strata::grammar
