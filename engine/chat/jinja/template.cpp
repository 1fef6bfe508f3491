// Template::render: statements and expressions evaluated as jinja2 does.
#include "chat/jinja/template.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja/interpreter.h"

namespace strata::chat::jinja {

Template::Template(const std::string& source) : body_(std::make_shared<const Body>(parse(source))) {}

std::string Template::render(const Value& context, const Limits& limits) const {
    Interpreter in(limits);
    return in.run(*body_, context);
}

namespace {

// Whether v holds a namespace() (assigning one into a namespace could make a
// cycle, which printing and comparing would follow forever).
bool holds_namespace(const Value& v) {
    if (v.is_object()) {
        if (v.as_object().is_namespace) return true;
        for (const auto& kv : v.as_object().items)
            if (holds_namespace(kv.second)) return true;
    } else if (v.is_array()) {
        for (const Value& x : v.as_array())
            if (holds_namespace(x)) return true;
    }
    return false;
}

}  // namespace

std::string Interpreter::run(const Body& body, const Value& context) {
    Frame root;
    if (context.is_object())
        for (const auto& [k, v] : context.as_object().items) root.vars.emplace_back(k, v);
    root_ = &root;
    std::string out;
    try {
        exec(body, root, out);
    } catch (const Error&) {
        root_ = nullptr;
        throw;
    } catch (const std::exception& e) {  // bad_alloc and the like: the template's error too, not the caller's crash
        root_ = nullptr;
        fail(std::string("the template failed: ") + e.what());
    }
    root_ = nullptr;
    return out;
}

void Interpreter::step() {
    if (++steps_ > limits_.max_steps)
        fail("the template ran past " + std::to_string(limits_.max_steps) + " steps (an endless loop?)");
}

void Interpreter::check_size(size_t bytes) const {
    if (bytes > limits_.max_output)
        fail("the template's output passed " + std::to_string(limits_.max_output) + " bytes");
}

void Interpreter::check_items(size_t items) const {
    if (items > limits_.max_list) fail("a list of more than " + std::to_string(limits_.max_list) + " items");
}

void Interpreter::emit(std::string& out, const std::string& s) {
    check_size(out.size() + s.size());
    out += s;
}

Value Interpreter::lookup(const std::string& name, Frame& f) const {
    for (const Frame* x = &f; x; x = x->parent)
        for (auto it = x->vars.rbegin(); it != x->vars.rend(); ++it)
            if (it->first == name) return it->second;
    return global(name);
}

void Interpreter::assign(Frame& f, const std::string& name, Value v) {
    for (auto& [k, x] : f.vars)
        if (k == name) {
            x = std::move(v);
            return;
        }
    f.vars.emplace_back(name, std::move(v));
}

Interpreter::Flow Interpreter::exec(const Body& body, Frame& f, std::string& out) {
    for (const StmtPtr& s : body) {
        const Flow fl = exec_stmt(*s, f, out);
        if (fl != Flow::Normal) return fl;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, Frame& f, std::string& out) {
    at_ = s.at;
    step();
    switch (s.kind) {
        case Stmt::Kind::Text: emit(out, s.text); break;
        case Stmt::Kind::Output: {
            const Value v = eval(*s.expr, f);
            try {
                emit(out, v.str(limits_.max_output));
            } catch (const TemplateError&) {
                throw;
            } catch (const Error& e) {
                fail(e.what());
            }
            break;
        }
        case Stmt::Kind::If:
            for (size_t i = 0; i < s.conds.size(); ++i)
                if (eval(*s.conds[i], f).truthy()) return exec(s.bodies[i], f, out);
            return exec(s.else_body, f, out);
        case Stmt::Kind::For: exec_for(s, f, out); break;
        case Stmt::Kind::Set: exec_set(s, f, out); break;
        case Stmt::Kind::Macro: assign(f, s.name, make_macro(s, f)); break;
        case Stmt::Kind::CallBlock: {
            // The macro gets `caller`: a callable rendering the block's body.
            const Stmt* block = &s;
            Frame* outer = &f;
            // Valid while the call runs: a caller kept past it (set into a
            // namespace) would read a frame that is gone.
            auto live = std::make_shared<bool>(true);
            Value caller = Value::function("caller", [this, block, outer, live](Interpreter&, const Args& a) {
                if (!*live) fail("caller() used after its {% call %} block ended");
                Frame cf;
                cf.parent = outer;
                for (size_t i = 0; i < block->params.size(); ++i) {
                    const Value* v = a.get(i, block->params[i].name);
                    cf.vars.emplace_back(block->params[i].name,
                                         v ? *v : block->params[i].fallback ? eval(*block->params[i].fallback, *outer) : Value());
                }
                std::string o;
                exec(block->body, cf, o);
                return Value(std::move(o));
            });
            // jinja2 passes it to the macro as a keyword argument.
            Args args = eval_args(*s.expr, f);
            args.kw.emplace_back("caller", std::move(caller));
            const Value fn = eval(*s.expr->a, f);
            at_ = s.at;
            struct End {
                std::shared_ptr<bool> live;
                ~End() { *live = false; }
            } end{live};
            emit(out, call(fn, args).str(limits_.max_output));
            break;
        }
        case Stmt::Kind::FilterBlock: {
            Frame inner;
            inner.parent = &f;
            std::string body;
            exec(s.body, inner, body);
            emit(out, filter_chain(*s.filter, Value(std::move(body)), f).str());
            break;
        }
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
}

void Interpreter::exec_for(const Stmt& s, Frame& f, std::string& out) {
    Array items = iterate(*this, eval(*s.expr, f));
    if (s.cond) {
        // jinja2 filters first, so loop.length counts what runs.
        Array kept;
        for (Value& v : items) {
            Frame cf;
            cf.parent = &f;
            bind(cf, s.targets, v);
            if (eval(*s.cond, cf).truthy()) kept.push_back(std::move(v));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        Frame ef;
        ef.parent = &f;
        exec(s.else_body, ef, out);
        return;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
        step();
        Frame lf;
        lf.parent = &f;
        bind(lf, s.targets, items[static_cast<size_t>(i)]);
        auto loop = std::make_shared<Object>();
        loop->items = {{"index", Value(i + 1)},
                       {"index0", Value(i)},
                       {"revindex", Value(n - i)},
                       {"revindex0", Value(n - i - 1)},
                       {"first", Value(i == 0)},
                       {"last", Value(i == n - 1)},
                       {"length", Value(n)},
                       {"depth", Value(int64_t{1})},
                       {"depth0", Value(int64_t{0})},
                       {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value()},
                       {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value()}};
        loop->items.emplace_back("cycle", Value::function("cycle", [i](Interpreter& in, const Args& a) {
            if (a.pos.empty()) in.fail("loop.cycle() needs at least one value");
            return a.pos[static_cast<size_t>(i) % a.pos.size()];
        }));
        lf.vars.emplace_back("loop", Value(std::move(loop)));
        const Flow fl = exec(s.body, lf, out);
        if (fl == Flow::Break) break;
    }
}

void Interpreter::exec_set(const Stmt& s, Frame& f, std::string& out) {
    (void)out;
    Value v;
    if (s.block_set) {
        Frame inner;
        inner.parent = &f;
        std::string body;
        exec(s.body, inner, body);
        v = Value(std::move(body));
        if (s.filter) v = filter_chain(*s.filter, std::move(v), f);
    } else {
        v = eval(*s.expr, f);
    }
    if (!s.target_ns.empty()) {
        Value ns = lookup(s.target_ns, f);
        if (!ns.is_object() || !ns.as_object().is_namespace)
            fail("cannot assign attribute '" + s.targets[0] + "' on '" + s.target_ns + "', which is not a namespace()");
        if (holds_namespace(v)) fail("a namespace cannot hold a namespace (" + s.target_ns + "." + s.targets[0] + ")");
        ns.as_object().set(s.targets[0], std::move(v));
        return;
    }
    bind(f, s.targets, v);
}

Value Interpreter::make_macro(const Stmt& s, Frame& f) {
    const Stmt* m = &s;
    Frame* defined_in = &f;
    return Value::function(s.name, [this, m, defined_in](Interpreter&, const Args& a) {
        Frame mf;
        mf.parent = root_ ? root_ : defined_in;
        for (size_t i = 0; i < m->params.size(); ++i) {
            const MacroParam& p = m->params[i];
            const Value* v = a.get(i, p.name);
            mf.vars.emplace_back(p.name, v ? *v : p.fallback ? eval(*p.fallback, mf) : Value());
        }
        for (const auto& [k, v] : a.kw)  // caller, and keywords the macro does not name (jinja2's kwargs)
            if (std::none_of(m->params.begin(), m->params.end(), [&](const MacroParam& p) { return p.name == k; }))
                mf.vars.emplace_back(k, v);
        std::string o;
        exec(m->body, mf, o);
        return Value(std::move(o));
    });
}

Value Interpreter::filter_chain(const Expr& chain, Value input, Frame& f) {
    // A chain over no input ({% filter a | b %}, {% set x | a %}): its innermost filter reads `input`.
    std::vector<const Expr*> links;
    for (const Expr* e = &chain; e; e = e->a.get()) links.push_back(e);
    for (auto it = links.rbegin(); it != links.rend(); ++it) input = apply_filter((*it)->name, input, eval_args(**it, f));
    return input;
}

void Interpreter::bind(Frame& f, const std::vector<std::string>& targets, const Value& item) {
    if (targets.size() == 1) {
        assign(f, targets[0], item);
        return;
    }
    const Array parts = iterate(*this, item);
    if (parts.size() != targets.size())
        fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < parts.size(); ++i) assign(f, targets[i], parts[i]);
}

Args Interpreter::eval_args(const Expr& e, Frame& f) {
    Args a;
    for (const ExprPtr& x : e.items) a.pos.push_back(eval(*x, f));
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x, f));
    return a;
}

Value Interpreter::call(const Value& fn, const Args& args) {
    if (!fn.is_callable()) fail("a " + std::string(fn.type_name()) + " is not callable");
    // Every call counts (macros, caller, natives calling back): none recurses without end.
    if (++depth_ > limits_.max_depth) fail("calls nested deeper than " + std::to_string(limits_.max_depth));
    struct Down {
        int& d;
        ~Down() { --d; }
    } down{depth_};
    return fn.as_callable().fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, const Args& args) {
    return filter(*this, name, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, const Args& args) {
    return test(*this, name, input, args);
}

Value Interpreter::eval_call(const Expr& e, Frame& f) {
    const Expr& callee = *e.a;
    Args args = eval_args(e, f);
    if (callee.kind == Expr::Kind::GetAttr) {
        const Value obj = eval(*callee.a, f);
        at_ = e.at;
        const Value* own = obj.is_object() ? obj.as_object().find(callee.name) : nullptr;
        if (!(own && own->is_callable()))
            if (std::optional<Value> m = method(*this, obj, callee.name)) return call(*m, args);
        const Value fn = get_attr(*this, obj, callee.name);
        if (!fn.is_callable())
            fail("'" + callee.name + "' of a " + obj.type_name() + (fn.is_undefined() ? " is undefined" : " is not callable"));
        return call(fn, args);
    }
    const Value fn = eval(callee, f);
    at_ = e.at;
    if (fn.is_undefined() && callee.kind == Expr::Kind::Name) fail("'" + callee.name + "' is undefined");
    return call(fn, args);
}

Value Interpreter::eval(const Expr& e, Frame& f) {
    step();
    at_ = e.at;
    switch (e.kind) {
        case Expr::Kind::Literal: return e.value;
        case Expr::Kind::Name: return lookup(e.name, f);
        case Expr::Kind::List: {
            Array a;
            for (const ExprPtr& x : e.items) a.push_back(eval(*x, f));
            return Value(std::move(a));
        }
        case Expr::Kind::Dict: {
            auto o = std::make_shared<Object>();
            for (size_t i = 0; i < e.keys.size(); ++i) {
                const Value k = eval(*e.keys[i], f);
                if (!(k.is_string() || k.is_number() || k.is_bool() || k.is_none()))
                    fail("a " + std::string(k.type_name()) + " cannot be a dict key");
                o->set(key_of(k), eval(*e.items[i], f));
            }
            return Value(std::move(o));
        }
        case Expr::Kind::GetAttr: {
            const Value obj = eval(*e.a, f);
            at_ = e.at;
            return get_attr(*this, obj, e.name);
        }
        case Expr::Kind::GetItem: {
            const Value obj = eval(*e.a, f);
            const Value key = eval(*e.b, f);
            at_ = e.at;
            return get_item(*this, obj, key);
        }
        case Expr::Kind::Slice: {
            const Value obj = eval(*e.a, f);
            const Value lo = e.b ? eval(*e.b, f) : Value::none();
            const Value hi = e.c ? eval(*e.c, f) : Value::none();
            const Value st = e.d ? eval(*e.d, f) : Value::none();
            at_ = e.at;
            return slice(*this, obj, lo, hi, st);
        }
        case Expr::Kind::Call: return eval_call(e, f);
        case Expr::Kind::Filter: {
            const Value in = eval(*e.a, f);
            Args a = eval_args(e, f);
            at_ = e.at;
            return apply_filter(e.name, in, a);
        }
        case Expr::Kind::Test: {
            const Value in = eval(*e.a, f);
            Args a = eval_args(e, f);
            at_ = e.at;
            return Value(apply_test(e.name, in, a) != e.negated);
        }
        case Expr::Kind::Unary: {
            const Value v = eval(*e.a, f);
            at_ = e.at;
            if (e.name == "not") return Value(!v.truthy());
            if (!v.is_number()) fail("unary " + e.name + " of a " + v.type_name());
            if (e.name == "+") return v;
            return v.is_int() ? Value(-v.as_int()) : Value(-v.as_number());
        }
        case Expr::Kind::Binary: {
            const Value a = eval(*e.a, f);
            const Value b = eval(*e.b, f);
            at_ = e.at;
            return binary(e.name, a, b);
        }
        case Expr::Kind::And: {
            Value a = eval(*e.a, f);
            return a.truthy() ? eval(*e.b, f) : a;
        }
        case Expr::Kind::Or: {
            Value a = eval(*e.a, f);
            return a.truthy() ? a : eval(*e.b, f);
        }
        case Expr::Kind::Cond:
            if (eval(*e.a, f).truthy()) return eval(*e.b, f);
            return e.c ? eval(*e.c, f) : Value();
    }
    return Value();
}

namespace {

int64_t floor_div(int64_t a, int64_t b) {
    if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 traps: wrap instead
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

}  // namespace

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Value(a == b);
    if (op == "!=") return Value(!(a == b));
    if (op == "<") return Value(compare(*this, a, b) < 0);
    if (op == "<=") return Value(compare(*this, a, b) <= 0);
    if (op == ">") return Value(compare(*this, a, b) > 0);
    if (op == ">=") return Value(compare(*this, a, b) >= 0);
    if (op == "in") return Value(contains(*this, b, a));
    if (op == "not in") return Value(!contains(*this, b, a));
    if (op == "~") {
        std::string s, t;
        try {
            s = a.str(limits_.max_output);
            t = b.str(limits_.max_output);
        } catch (const TemplateError&) {
            throw;
        } catch (const Error& e) {
            fail(e.what());
        }
        check_size(s.size() + t.size());
        return Value(s + t);
    }
    const auto bad = [&]() -> Value {
        fail("unsupported operand types for " + op + ": " + a.type_name() + " and " + b.type_name());
    };
    const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
    const auto iv = [](const Value& v) { return v.is_bool() ? static_cast<int64_t>(v.as_bool()) : v.as_int(); };
    const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
    const auto nv = [](const Value& v) { return v.is_bool() ? static_cast<double>(v.as_bool()) : v.as_number(); };
    if (op == "+") {
        if (ints) return Value(iv(a) + iv(b));
        if (nums) return Value(nv(a) + nv(b));
        if (a.is_string() && b.is_string()) {
            check_size(a.as_string().size() + b.as_string().size());
            if (a.is_markup() || b.is_markup())  // Markup + str escapes the str
                return Value::markup((a.is_markup() ? a.as_string() : escape_html(a.as_string())) +
                                     (b.is_markup() ? b.as_string() : escape_html(b.as_string())));
            return Value(a.as_string() + b.as_string());
        }
        if (a.is_array() && b.is_array() && !a.is_generator() && !b.is_generator()) {
            check_items(a.as_array().size() + b.as_array().size());
            Array r = a.as_array();
            r.insert(r.end(), b.as_array().begin(), b.as_array().end());
            return Value(std::move(r));
        }
        return bad();
    }
    if (op == "-") {
        if (ints) return Value(iv(a) - iv(b));
        if (nums) return Value(nv(a) - nv(b));
        return bad();
    }
    if (op == "*") {
        if (ints) return Value(iv(a) * iv(b));
        if (nums) return Value(nv(a) * nv(b));
        const Value* s = a.is_string() || a.is_array() ? &a : b.is_string() || b.is_array() ? &b : nullptr;
        const Value* n = s == &a ? &b : &a;
        if (s && (n->is_int() || n->is_bool())) {
            const int64_t k = std::max<int64_t>(0, iv(*n));
            const size_t len = s->is_string() ? s->as_string().size() : s->as_array().size();
            if (len > 0 && static_cast<uint64_t>(k) > (s->is_string() ? limits_.max_output : limits_.max_list) / len)
                fail(s->is_string() ? "the template's output passed " + std::to_string(limits_.max_output) + " bytes"
                                    : "a list of more than " + std::to_string(limits_.max_list) + " items");
            if (s->is_string()) {
                check_size(s->as_string().size() * static_cast<size_t>(k));
                std::string r;
                for (int64_t i = 0; i < k; ++i) r += s->as_string();
                return Value(std::move(r));
            }
            check_items(s->as_array().size() * static_cast<size_t>(k));
            Array r;
            for (int64_t i = 0; i < k; ++i) r.insert(r.end(), s->as_array().begin(), s->as_array().end());
            return Value(std::move(r));
        }
        return bad();
    }
    if (op == "/") {
        if (!nums) return bad();
        if (nv(b) == 0.0) fail("division by zero");
        return Value(nv(a) / nv(b));
    }
    if (op == "//") {
        if (!nums) return bad();
        if (nv(b) == 0.0) fail("division by zero");
        if (ints) return Value(floor_div(iv(a), iv(b)));
        return Value(std::floor(nv(a) / nv(b)));
    }
    if (op == "%") {
        if (a.is_string()) fail("string formatting with % is not supported; use ~ or the format filter");
        if (!nums) return bad();
        if (nv(b) == 0.0) fail("modulo by zero");
        if (ints) return Value(iv(b) == -1 ? int64_t{0} : iv(a) - floor_div(iv(a), iv(b)) * iv(b));
        const double r = std::fmod(nv(a), nv(b));
        return Value(r != 0.0 && ((r < 0) != (nv(b) < 0)) ? r + nv(b) : r);
    }
    if (op == "**") {
        if (ints && iv(b) >= 0) {
            int64_t r = 1;
            for (int64_t i = 0; i < iv(b) && i < 64; ++i) r *= iv(a);
            return Value(r);
        }
        if (nums) return Value(std::pow(nv(a), nv(b)));
        return bad();
    }
    return bad();
}

}  // namespace strata::chat::jinja
