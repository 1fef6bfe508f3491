// Reading a request body's fields, for the OpenAI API parsers (chat and
// completions in openai_api.cpp, /v1/responses in responses_api.cpp): the
// same wording for a field that is absent or of the wrong type, with
// nlohmann's json or ordered_json alike.
#pragma once

#include <string>

#include "serve/openai_api.h"

namespace strata::serve {

// JSON's own type names, for messages ("expected a number, got a string").
template <class J>
std::string json_type_name(const J& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

// The field `name` of `body` when present and not null.
template <class J>
const J* json_field(const J& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

// The 400 of a field of the wrong type.
template <class J>
[[noreturn]] void wrong_type(const std::string& field, const char* expected, const J& v) {
    bad_request(field, "'" + field + "' must be " + expected + ", got " + json_type_name(v));
}

}  // namespace strata::serve
