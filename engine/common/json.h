// A small JSON reader and writer for the engine's own files (calibration pin
// lists, traces' headers): full JSON syntax, depth- and size-limited, errors
// with the byte offset. Not a general-purpose library: values are a plain tree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace strata::json {

struct Value {
    enum class Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Kind::Null;
    bool b = false;
    double num = 0.0;
    std::string str;
    std::vector<Value> arr;
    std::map<std::string, Value, std::less<>> obj;

    bool is_object() const { return kind == Kind::Object; }
    bool is_array() const { return kind == Kind::Array; }
    bool is_number() const { return kind == Kind::Number; }
    bool is_string() const { return kind == Kind::String; }
    const Value* get(std::string_view key) const;  // null when absent or not an object
};

// Throws strata::Error("<what>: JSON error at byte N: ...").
Value parse(std::string_view text, const std::string& what);

// Escapes a string for a JSON string literal (without the quotes).
std::string escape(std::string_view s);

}  // namespace strata::json
