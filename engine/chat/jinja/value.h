// The values a chat template computes with: Python's, as Hugging Face's
// jinja2 environment sees them (none, bools, ints, floats, strings, lists,
// dicts keeping their insertion order, callables), plus jinja2's undefined.
// Printing and JSON follow Python: str() of a list is its repr ("['a', 1]"),
// tojson is json.dumps(ensure_ascii=False) with its separators.
#pragma once

#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::chat::jinja {

class Value;
class Interpreter;

using Array = std::vector<Value>;

// A dict, in insertion order (Python's), and jinja2's namespace() objects
// (whose attributes `set ns.x = ...` may assign).
struct Object {
    std::vector<std::pair<std::string, Value>> items;
    bool is_namespace = false;
    const Value* find(const std::string& key) const;
    Value* find(const std::string& key);
    void set(const std::string& key, Value v);
};

// Positional and keyword arguments of a call.
struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    const Value* keyword(const std::string& name) const;
    // Positional i, else keyword `name`, else null.
    const Value* get(size_t i, const std::string& name) const;
};

using NativeFn = std::function<Value(Interpreter&, const Args&)>;

struct Callable {
    std::string name;
    NativeFn fn;
};

class Value {
public:
    enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Callable };

    Value() = default;  // undefined
    static Value none();
    Value(bool b);
    Value(int64_t i);
    Value(int i) : Value(static_cast<int64_t>(i)) {}
    Value(double f);
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    Value(Array a);
    Value(std::shared_ptr<Object> o);
    static Value object();
    // What jinja2's map, select, reject, selectattr and rejectattr return: a
    // Python generator. It iterates like a list, but has no len(), no index,
    // is always true, prints as "<generator object>" and is not JSON.
    static Value generator(Array a);
    // jinja2's Markup (what |safe returns): adding a plain string to it with
    // + HTML-escapes that string, as Python's markupsafe does.
    static Value markup(std::string s);
    static Value function(std::string name, NativeFn fn);
    // Throws strata::Error for JSON nested deeper than 256 levels.
    static Value from_json(const nlohmann::ordered_json& j);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_array() const { return kind_ == Kind::Array; }
    bool is_object() const { return kind_ == Kind::Object; }
    bool is_callable() const { return kind_ == Kind::Callable; }
    bool is_generator() const { return kind_ == Kind::Array && generator_; }
    bool is_markup() const { return kind_ == Kind::String && generator_; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }
    double as_number() const { return kind_ == Kind::Int ? static_cast<double>(i_) : f_; }
    const std::string& as_string() const { return *s_; }
    const Array& as_array() const { return *a_; }
    Array& as_array() { return *a_; }
    const Object& as_object() const { return *o_; }
    Object& as_object() { return *o_; }
    const Callable& as_callable() const { return *c_; }
    const std::shared_ptr<Object>& object_ptr() const { return o_; }

    bool truthy() const;
    // Python's str() (jinja2's {{ }} output; None prints "None"). The text
    // forms throw strata::Error past `max_bytes` (a template's output limit)
    // rather than build it.
    std::string str(size_t max_bytes = SIZE_MAX) const;
    // Python's repr() (inside lists and dicts).
    std::string repr(size_t max_bytes = SIZE_MAX) const;
    // json.dumps(ensure_ascii, indent=indent (< 0: none), sort_keys);
    // throws strata::Error for what is not JSON (a generator, a function).
    std::string to_json(int indent = -1, bool sort_keys = false, bool ensure_ascii = false,
                        size_t max_bytes = SIZE_MAX) const;
    // Lists and dicts inside one another, this one included (0 for a scalar).
    int depth() const { return depth_; }
    const char* type_name() const;

    bool operator==(const Value& o) const;

private:
    static Value from_json(const nlohmann::ordered_json& j, int depth);
    void str_into(std::string& out, bool as_repr, size_t max_bytes) const;
    Kind kind_ = Kind::Undefined;
    bool generator_ = false;  // an array: a generator; a string: Markup
    int depth_ = 0;
    bool b_ = false;
    int64_t i_ = 0;
    double f_ = 0.0;
    std::shared_ptr<const std::string> s_;
    std::shared_ptr<Array> a_;
    std::shared_ptr<Object> o_;
    std::shared_ptr<const Callable> c_;
};

// Python's repr of a float ("1.0", "0.1", "1e+16").
std::string float_repr(double f);

// Values nest at most this deep (deeper ones are refused when built): the
// text forms, comparisons and destructors recurse.
inline constexpr int kMaxValueDepth = 128;

// Dict keys are strings; a key of another type ({0: 'a'}) is kept in its
// own spelling, and these convert between the two.
std::string key_of(const Value& key);
Value key_value(const std::string& key);

}  // namespace strata::chat::jinja
