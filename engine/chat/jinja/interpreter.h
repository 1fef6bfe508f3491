// The tree-walking interpreter behind Template::render, and the builtins
// (filters, tests, methods, globals: builtins.cpp) it calls.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/parser.h"
#include "chat/jinja/template.h"
#include "chat/jinja/value.h"

namespace strata::chat::jinja {

class Interpreter {
public:
    explicit Interpreter(const Limits& limits) : limits_(limits) {}

    // Renders `body` with `context`'s keys as variables.
    std::string run(const Body& body, const Value& context);

    [[noreturn]] void fail(const std::string& what) const { throw TemplateError(at_.line, at_.column, what); }
    // Counts one step toward Limits::max_steps.
    void step();
    // A string about to be built from `bytes`: fails past Limits::max_output.
    void check_size(size_t bytes) const;
    // A list about to hold `items`: fails past Limits::max_list.
    void check_items(size_t items) const;
    const Limits& limits() const { return limits_; }
    Value call(const Value& fn, const Args& args);
    // Filters and tests by name (map, select and friends call them).
    Value apply_filter(const std::string& name, const Value& input, const Args& args);
    bool apply_test(const std::string& name, const Value& input, const Args& args);

private:
    enum class Flow { Normal, Break, Continue };
    struct Frame {
        std::vector<std::pair<std::string, Value>> vars;
        Frame* parent = nullptr;
    };

    Flow exec(const Body& body, Frame& f, std::string& out);
    Flow exec_stmt(const Stmt& s, Frame& f, std::string& out);
    void exec_for(const Stmt& s, Frame& f, std::string& out);
    void exec_set(const Stmt& s, Frame& f, std::string& out);
    Value make_macro(const Stmt& s, Frame& f);
    Value eval(const Expr& e, Frame& f);
    Value eval_call(const Expr& e, Frame& f);
    Args eval_args(const Expr& e, Frame& f);
    // A filter chain over no input (a filter block's, a set block's), applied to `input`.
    Value filter_chain(const Expr& chain, Value input, Frame& f);
    // A for loop's or a set's names bound to `item` (unpacked when several).
    void bind(Frame& f, const std::vector<std::string>& targets, const Value& item);
    Value binary(const std::string& op, const Value& a, const Value& b);
    Value lookup(const std::string& name, Frame& f) const;
    void assign(Frame& f, const std::string& name, Value v);
    void emit(std::string& out, const std::string& s);

    Limits limits_;
    Where at_;
    int64_t steps_ = 0;
    int depth_ = 0;
    Frame* root_ = nullptr;
};

// builtins.cpp
Value get_attr(Interpreter& in, const Value& obj, const std::string& name);
Value get_item(Interpreter& in, const Value& obj, const Value& key);
// A method of a string, dict or list ("strip", "items", ...) bound to obj; empty when none.
std::optional<Value> method(Interpreter& in, const Value& obj, const std::string& name);
Value filter(Interpreter& in, const std::string& name, const Value& input, const Args& args);
bool test(Interpreter& in, const std::string& name, const Value& input, const Args& args);
Value global(const std::string& name);
// Python's slicing, a[lo:hi:step] (none: the default).
Value slice(Interpreter& in, const Value& obj, const Value& lo, const Value& hi, const Value& step);
// Python's iteration: a list's items, a dict's keys, a string's characters; fails otherwise.
Array iterate(Interpreter& in, const Value& v);
// Python's ordering for sort and comparisons; fails for mixed types.
int compare(Interpreter& in, const Value& a, const Value& b);
bool contains(Interpreter& in, const Value& haystack, const Value& needle);
// markupsafe's escape: & < > " ' as entities.
std::string escape_html(const std::string& s);

}  // namespace strata::chat::jinja
