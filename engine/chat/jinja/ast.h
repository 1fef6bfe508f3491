// A parsed template: statements and expressions, each with the line and
// column it came from (errors name them).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace strata::chat::jinja {

struct Where {
    int line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        Literal,   // value
        Name,      // name
        List,      // items
        Dict,      // keys, items
        GetAttr,   // a.name
        GetItem,   // a[b]
        Slice,     // a[b:c:d] (any may be null)
        Call,      // a(items, kwargs)
        Filter,    // a | name(items, kwargs); a null: a filter block's
        Test,      // a is [not] name(items)
        Unary,     // op a: "not", "-", "+"
        Binary,    // a op b
        And,
        Or,
        Cond,      // b if a else c (c may be null)
    };
    Kind kind;
    Where at;
    Value value;
    std::string name;  // Name, GetAttr, Call's method, Filter, Test, Unary/Binary op
    ExprPtr a, b, c, d;
    std::vector<ExprPtr> items, keys;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
    std::string name;
    ExprPtr fallback;  // default (null: none)
};

struct Stmt {
    enum class Kind {
        Text,      // text
        Output,    // {{ expr }}
        If,        // conds[i] -> bodies[i]; else_body
        For,       // targets in expr [if cond]: body; else_body
        Set,       // targets (or ns.attr: target_ns, targets[0]) = expr; a block: body (then filter)
        Macro,     // name(params): body
        CallBlock, // {% call(params) expr %}body{% endcall %}
        FilterBlock,  // body through filter (an Expr::Filter chain over null)
        Break,
        Continue,
    };
    Kind kind;
    Where at;
    std::string text;
    ExprPtr expr, cond, filter;
    std::vector<ExprPtr> conds;
    std::vector<Body> bodies;
    Body body, else_body;
    std::vector<std::string> targets;
    std::string target_ns;
    std::string name;
    std::vector<MacroParam> params;
    bool block_set = false;
};

}  // namespace strata::chat::jinja
