// JSON Schema to grammar: the GBNF (grammar.h) of the JSON texts a schema
// accepts, for structured output (response_format json_schema) and for tool
// calls whose arguments must fit the function's parameters.
//
// Supported: type (one or a list), properties, required, additionalProperties
// (absent next to properties means no other keys are generated, which every
// schema allows), items, prefixItems, minItems, maxItems, enum, const, anyOf,
// oneOf, allOf (of object schemas, merged), $ref into the same document
// (#/$defs/..., #/definitions/..., any #/ pointer; recursion allowed),
// minLength, maxLength, format date / time / date-time / uuid, and integer
// minimum / maximum / exclusiveMinimum / exclusiveMaximum. Annotations (title,
// description, default, examples, ...) are ignored. Every other validation
// keyword (pattern, multipleOf, uniqueItems, a number's range, ...) is a
// SchemaError naming it, because output that ignored it could fail to
// validate.
//
// The text generated is JSON with at most one space or a short indented line
// break between tokens; numbers have at most 16 digits in each part, so a
// sampler that follows the grammar always ends its numbers.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace strata::grammar {

// A schema the grammar cannot express; what() names the keyword and where.
class SchemaError : public Error {
public:
    SchemaError(const std::string& keyword, const std::string& path, const std::string& why);
    const std::string& keyword() const { return keyword_; }
    const std::string& path() const { return path_; }

private:
    std::string keyword_, path_;
};

// Collects the rules of one grammar: several schemas may share it (one per
// tool), each added under its own rule.
class JsonGrammar {
public:
    // Adds the rules for values of `schema` and returns the name of the rule
    // that matches them. `hint` seeds rule names. Throws SchemaError.
    std::string add_schema(const nlohmann::ordered_json& schema, const std::string& hint);
    // The rule for any JSON value / any JSON object.
    std::string any_value();
    std::string any_object();
    // The whole grammar: every rule added, and `root ::= root_body`.
    std::string gbnf(const std::string& root_body) const;
    // Adds `name ::= body` (the name made unique from `hint`) and returns the name.
    std::string define(const std::string& hint, const std::string& body);
    // Adds a primitive rule by name ("space", "string", "char", "date", ...).
    std::string primitive(const std::string& name);

private:
    std::string visit(const nlohmann::ordered_json& s, const std::string& name, const std::string& path);
    std::string visit_type(const nlohmann::ordered_json& s, const std::string& type, const std::string& name,
                           const std::string& path);
    std::string object_rule(const nlohmann::ordered_json& s, const std::string& name, const std::string& path);
    std::string array_rule(const nlohmann::ordered_json& s, const std::string& name, const std::string& path);
    std::string string_rule(const nlohmann::ordered_json& s, const std::string& name, const std::string& path);
    std::string integer_rule(const nlohmann::ordered_json& s, const std::string& name, const std::string& path);
    std::string resolve(const std::string& ref, const std::string& path);
    std::string fresh(const std::string& hint);

    const nlohmann::ordered_json* root_ = nullptr;  // the schema being added (for $ref)
    std::map<std::string, std::string> refs_;        // $ref -> rule
    std::vector<std::pair<std::string, std::string>> rules_;
    std::map<std::string, int> used_names_;
    std::set<std::string> taken_;
    int depth_ = 0;
    static constexpr int kMaxDepth = 128;
};

// A count keyword (minLength, maxItems, ...) of schema `s`: `absent` when it
// is not there; SchemaError unless it is an integer from 0 to Grammar::kMaxRepeat.
int64_t schema_count(const nlohmann::ordered_json& s, const char* key, int64_t absent, const std::string& path);

// GBNF whose root matches the JSON texts `schema` accepts. Throws SchemaError.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema);

}  // namespace strata::grammar
