// The lexer (text, {{ }}, {% %}, {# #} with jinja2's whitespace control and
// Hugging Face's trim_blocks and lstrip_blocks) and the recursive-descent
// parser of jinja2's grammar, the part chat templates use.
#include "chat/jinja/parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace strata::chat::jinja {

namespace {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, Int, Float, String, Op, End };

struct Token {
    Tok kind;
    std::string text;
    Where at;
    int64_t i = 0;
    double f = 0.0;
};

[[noreturn]] void fail(const Where& at, const std::string& what) { throw TemplateError(at.line, at.column, what); }

class Lexer {
public:
    explicit Lexer(const std::string& src) : s_(src) {}

    std::vector<Token> run() {
        bool strip_next = false;   // the tag before ended with '-'
        bool trim_newline = false; // the block before ends a line (trim_blocks)
        bool line_start = true;    // what came before ended a line (lstrip_blocks)
        while (pos_ < s_.size()) {
            const size_t open = find_open(pos_);
            std::string text = s_.substr(pos_, open - pos_);
            const Where text_at = at(pos_);
            after_tag(text, trim_newline, strip_next);
            strip_next = trim_newline = false;
            if (open == s_.size()) {
                push_text(text, text_at);
                break;
            }
            const char kind = s_[open + 1];  // '{', '%' or '#'
            const char sign = open + 2 < s_.size() ? s_[open + 2] : 0;
            if (sign == '-') {
                const size_t e = text.find_last_not_of(" \t\r\n");
                text.erase(e == std::string::npos ? 0 : e + 1);
            } else if (kind != '{' && sign != '+') {
                lstrip_block(text, line_start);
            }
            push_text(text, text_at);
            pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                const size_t close = s_.find("#}", pos_);
                if (close == std::string::npos) fail(at(open), "a comment {# is never closed with #}");
                strip_next = close > pos_ && s_[close - 1] == '-';
                pos_ = close + 2;
                trim_newline = true;
                line_start = ends_line();
                continue;
            }
            const bool block = kind == '%';
            out_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", at(open)});
            const size_t first = out_.size();
            if (!lex_tag(block, &strip_next)) fail(at(open), block ? "a tag {% is never closed with %}" : "{{ is never closed with }}");
            trim_newline = block;
            line_start = block && ends_line();
            if (block && out_.size() == first + 2 && out_[first].kind == Tok::Name && out_[first].text == "raw") {
                trim_newline = false;  // jinja2: trim_blocks does not apply after {% raw %} (it does after endraw)
                lex_raw(&strip_next, &trim_newline, &line_start);
            }
        }
        out_.push_back({Tok::End, "", at(s_.size())});
        return std::move(out_);
    }

private:
    size_t find_open(size_t from) const {
        for (size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1))
            if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
        return s_.size();
    }

    // lstrip_blocks: the spaces and tabs between a line's start and a block tag go.
    static void lstrip_block(std::string& text, bool line_start) {
        const size_t nl = text.rfind('\n');
        const size_t from = nl == std::string::npos ? 0 : nl + 1;
        if ((nl != std::string::npos || line_start) && text.find_first_not_of(" \t", from) == std::string::npos)
            text.erase(from);
    }

    // The text after a tag: trim_blocks' one newline gone where the tag was a
    // block, all leading whitespace where it ended with '-'.
    static void after_tag(std::string& text, bool trim_newline, bool strip_next) {
        if (trim_newline) {
            if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
            else if (!text.empty() && text[0] == '\n') text.erase(0, 1);
        }
        if (strip_next) text.erase(0, std::min(text.size(), text.find_first_not_of(" \t\r\n")));
    }

    // Whether the tag just closed is followed by a newline trim_blocks removes.
    bool ends_line() const { return pos_ < s_.size() && (s_[pos_] == '\n' || s_.compare(pos_, 2, "\r\n") == 0); }

    Where at(size_t p) {
        while (line_pos_ < p) {
            if (s_[line_pos_] == '\n') {
                ++line_;
                col_ = 1;
            } else {
                ++col_;
            }
            ++line_pos_;
        }
        return {line_, col_};
    }

    void push_text(const std::string& t, Where w) {
        if (!t.empty()) out_.push_back({Tok::Text, t, w});
    }

    // The tokens of a tag up to its closing }} or %}; false where it never closes.
    bool lex_tag(bool block, bool* strip_next) {
        const char closer = block ? '%' : '}';
        int braces = 0;  // a dict literal's own }} does not close {{ (jinja2 balances them)
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (std::isspace(static_cast<unsigned char>(c))) {
                ++pos_;
                continue;
            }
            const Where w = at(pos_);
            if (braces == 0 && ((c == '-' && s_.compare(pos_ + 1, 2, std::string(1, closer) + "}") == 0) ||
                                (c == closer && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}'))) {
                *strip_next = c == '-';
                pos_ += c == '-' ? 3 : 2;
                out_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", w});
                return true;
            }
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
                size_t e = pos_;
                while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
                out_.push_back({Tok::Name, s_.substr(pos_, e - pos_), w});
                pos_ = e;
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                lex_number(w);
            } else if (c == '\'' || c == '"') {
                lex_string(w);
            } else {
                static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                                  "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
                bool found = false;
                for (const char* op : ops) {
                    const size_t len = std::strlen(op);
                    if (s_.compare(pos_, len, op) == 0) {
                        if (op[0] == '{' && op[1] == 0) ++braces;
                        if (op[0] == '}' && op[1] == 0 && braces > 0) --braces;
                        out_.push_back({Tok::Op, op, w});
                        pos_ += len;
                        found = true;
                        break;
                    }
                }
                if (!found) fail(w, std::string("unexpected character '") + c + "'");
            }
        }
        return false;
    }

    void lex_number(Where w) {
        size_t e = pos_;
        bool is_float = false;
        while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
        if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
            is_float = true;
            ++e;
            while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
        }
        if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
            size_t x = e + 1;
            if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
            if (x < s_.size() && std::isdigit(static_cast<unsigned char>(s_[x]))) {
                is_float = true;
                e = x;
                while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
            }
        }
        std::string digits;
        for (size_t i = pos_; i < e; ++i)
            if (s_[i] != '_') digits += s_[i];
        Token t{is_float ? Tok::Float : Tok::Int, digits, w};
        try {
            if (is_float) t.f = std::stod(digits);
            else t.i = std::stoll(digits);
        } catch (...) {
            fail(w, "the number " + digits + " is out of range");
        }
        out_.push_back(t);
        pos_ = e;
    }

    void lex_string(Where w) {
        const char q = s_[pos_++];
        std::string v;
        while (pos_ < s_.size() && s_[pos_] != q) {
            char c = s_[pos_++];
            if (c == '\\' && pos_ < s_.size()) {
                const char x = s_[pos_++];
                switch (x) {
                    case 'n': c = '\n'; break;
                    case 't': c = '\t'; break;
                    case 'r': c = '\r'; break;
                    case '\\': c = '\\'; break;
                    case '\'': c = '\''; break;
                    case '"': c = '"'; break;
                    case '0': c = '\0'; break;
                    default: v += '\\'; c = x;
                }
            }
            v += c;
        }
        if (pos_ >= s_.size()) fail(w, "a string literal is never closed");
        ++pos_;
        out_.push_back({Tok::String, v, w});
    }

    // After {% raw %}: the text up to {% endraw %}, as it is.
    void lex_raw(bool* strip_next, bool* trim_newline, bool* line_start) {
        out_.resize(out_.size() - 2);  // drop "raw" and its end
        out_.pop_back();               // and its begin
        size_t p = pos_;
        for (;;) {
            const size_t open = s_.find("{%", p);
            if (open == std::string::npos) fail(at(pos_), "{% raw %} is never closed with {% endraw %}");
            size_t q = open + 2;
            const bool minus = q < s_.size() && s_[q] == '-';
            if (minus || (q < s_.size() && s_[q] == '+')) ++q;
            while (q < s_.size() && std::isspace(static_cast<unsigned char>(s_[q]))) ++q;
            if (s_.compare(q, 6, "endraw") != 0) {
                p = open + 2;
                continue;
            }
            q += 6;
            while (q < s_.size() && std::isspace(static_cast<unsigned char>(s_[q]))) ++q;
            const bool minus_end = q < s_.size() && s_[q] == '-';
            if (minus_end) ++q;
            if (s_.compare(q, 2, "%}") != 0) {
                p = open + 2;
                continue;
            }
            std::string text = s_.substr(pos_, open - pos_);
            after_tag(text, *trim_newline, *strip_next);
            if (minus) {
                const size_t e = text.find_last_not_of(" \t\r\n");
                text.erase(e == std::string::npos ? 0 : e + 1);
            } else if (s_[open + 2] != '+') {
                // jinja2 lstrips before endraw too, where a newline in the raw text starts its line.
                lstrip_block(text, false);
            }
            push_text(text, at(pos_));
            pos_ = q + 2;
            *strip_next = minus_end;
            *trim_newline = true;
            *line_start = ends_line();
            return;
        }
    }

    const std::string& s_;
    size_t pos_ = 0;
    size_t line_pos_ = 0;
    int line_ = 1, col_ = 1;
    std::vector<Token> out_;
};

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    Body parse_all() {
        Body b = parse_body({});
        if (peek().kind != Tok::End) fail(peek().at, "unexpected '" + peek().text + "'");
        return b;
    }

private:
    const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
    const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
    bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Tok::Op && peek(k).text == op; }
    bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Tok::Name && peek(k).text == n; }
    void expect_op(const char* op) {
        if (!is_op(op)) fail(peek().at, std::string("expected '") + op + "'" + found());
        ++i_;
    }
    std::string found() const {
        const Token& t = peek();
        switch (t.kind) {
            case Tok::BlockEnd: return ", found the end of the tag";
            case Tok::VarEnd: return ", found the end of the expression";
            case Tok::End: return ", found the end of the template";
            default: return ", found '" + t.text + "'";
        }
    }
    std::string expect_name() {
        if (peek().kind != Tok::Name) fail(peek().at, "expected a name" + found());
        return next().text;
    }
    void expect_block_end() {
        if (peek().kind != Tok::BlockEnd) fail(peek().at, "expected the end of the tag" + found());
        ++i_;
    }

    // Statements up to a {% name %} with name in `stops` (left unconsumed:
    // i_ at its name); at the end of the template when stops is empty.
    Body parse_body(const std::vector<std::string>& stops) {
        Body body;
        for (;;) {
            const Token& t = peek();
            if (t.kind == Tok::End) {
                if (!stops.empty()) fail(t.at, "the template ends where {% " + stops.front() + " %} was expected");
                return body;
            }
            if (t.kind == Tok::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->at = t.at;
                s->text = t.text;
                body.push_back(std::move(s));
                ++i_;
            } else if (t.kind == Tok::VarBegin) {
                ++i_;
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->at = t.at;
                s->expr = parse_expr();
                if (peek().kind != Tok::VarEnd) fail(peek().at, "expected '}}'" + found());
                ++i_;
                body.push_back(std::move(s));
            } else if (t.kind == Tok::BlockBegin) {
                const Token& nm = peek(1);
                if (nm.kind != Tok::Name) fail(nm.at, "expected a statement name after {%");
                for (const std::string& stop : stops)
                    if (nm.text == stop) {
                        ++i_;  // at the name
                        return body;
                    }
                ++i_;
                body.push_back(parse_statement());
            } else {
                fail(t.at, "unexpected '" + t.text + "'");
            }
        }
    }

    StmtPtr parse_statement() {
        Nest nest(*this);
        const Token& nm = next();
        auto s = std::make_unique<Stmt>();
        s->at = nm.at;
        const std::string& k = nm.text;
        if (k == "if") {
            s->kind = Stmt::Kind::If;
            s->conds.push_back(parse_expr());
            expect_block_end();
            for (;;) {
                s->bodies.push_back(parse_body({"elif", "else", "endif"}));
                const std::string w = next().text;
                if (w == "elif") {
                    s->conds.push_back(parse_expr());
                    expect_block_end();
                } else if (w == "else") {
                    expect_block_end();
                    s->else_body = parse_body({"endif"});
                    ++i_;
                    expect_block_end();
                    break;
                } else {
                    expect_block_end();
                    break;
                }
            }
        } else if (k == "for") {
            s->kind = Stmt::Kind::For;
            s->targets.push_back(expect_name());
            while (is_op(",")) {
                ++i_;
                s->targets.push_back(expect_name());
            }
            if (!is_name("in")) fail(peek().at, "expected 'in'" + found());
            ++i_;
            s->expr = parse_expr(/*allow_cond=*/false);
            if (is_name("if")) {
                ++i_;
                s->cond = parse_expr();
            }
            if (is_name("recursive")) fail(peek().at, "recursive for loops are not supported");
            expect_block_end();
            s->body = parse_body({"else", "endfor"});
            if (next().text == "else") {
                expect_block_end();
                s->else_body = parse_body({"endfor"});
                ++i_;
            }
            expect_block_end();
        } else if (k == "set") {
            s->kind = Stmt::Kind::Set;
            std::string first = expect_name();
            if (is_op(".")) {
                ++i_;
                s->target_ns = first;
                first = expect_name();
            }
            s->targets.push_back(first);
            while (is_op(",")) {
                ++i_;
                s->targets.push_back(expect_name());
            }
            if (is_op("=")) {
                ++i_;
                s->expr = parse_expr();
                if (is_op(",")) s->expr = parse_tuple_rest(std::move(s->expr));
                expect_block_end();
            } else {
                s->block_set = true;
                if (is_op("|")) s->filter = parse_filters(nullptr);
                expect_block_end();
                s->body = parse_body({"endset"});
                ++i_;
                expect_block_end();
            }
        } else if (k == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->name = expect_name();
            s->params = parse_params();
            expect_block_end();
            s->body = parse_body({"endmacro"});
            ++i_;
            expect_block_end();
        } else if (k == "call") {
            s->kind = Stmt::Kind::CallBlock;
            if (is_op("(")) s->params = parse_params();
            s->expr = parse_expr();
            if (s->expr->kind != Expr::Kind::Call) fail(s->expr->at, "{% call %} needs a macro call");
            expect_block_end();
            s->body = parse_body({"endcall"});
            ++i_;
            expect_block_end();
        } else if (k == "filter") {
            s->kind = Stmt::Kind::FilterBlock;
            s->filter = parse_filter_chain_head();
            expect_block_end();
            s->body = parse_body({"endfilter"});
            ++i_;
            expect_block_end();
        } else if (k == "break" || k == "continue") {
            s->kind = k == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
            expect_block_end();
        } else if (k == "generation") {
            // Hugging Face's AssistantTracker: marks the assistant's tokens, renders its body as it is.
            expect_block_end();
            s->kind = Stmt::Kind::If;
            auto yes = std::make_unique<Expr>();
            yes->kind = Expr::Kind::Literal;
            yes->value = Value(true);
            s->conds.push_back(std::move(yes));
            s->bodies.push_back(parse_body({"endgeneration"}));
            ++i_;
            expect_block_end();
        } else {
            fail(nm.at, "unknown statement '" + k + "'");
        }
        return s;
    }

    std::vector<MacroParam> parse_params() {
        std::vector<MacroParam> ps;
        expect_op("(");
        while (!is_op(")")) {
            MacroParam p;
            p.name = expect_name();
            if (is_op("=")) {
                ++i_;
                p.fallback = parse_expr();
            }
            ps.push_back(std::move(p));
            if (!is_op(",")) break;
            ++i_;
        }
        expect_op(")");
        return ps;
    }

    // {% filter name(args) | other %}: a filter chain applied to nothing yet.
    ExprPtr parse_filter_chain_head() {
        ExprPtr e = parse_filter_call(nullptr);
        while (is_op("|")) {
            ++i_;
            e = parse_filter_call(std::move(e));
        }
        return e;
    }

    ExprPtr make(Expr::Kind k, Where at) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->at = at;
        return e;
    }

    ExprPtr parse_tuple_rest(ExprPtr first) {
        auto l = make(Expr::Kind::List, first->at);
        l->items.push_back(std::move(first));
        while (is_op(",")) {
            ++i_;
            if (peek().kind == Tok::BlockEnd || peek().kind == Tok::VarEnd || is_op(")")) break;
            l->items.push_back(parse_expr());
        }
        return l;
    }

    // Nesting (brackets, statements) deeper than this is refused: the parser
    // recurses, and an untrusted template must not exhaust the stack.
    static constexpr int kMaxNesting = 500;
    struct Nest {
        Parser& p;
        explicit Nest(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) fail(p.peek().at, "nested deeper than " + std::to_string(kMaxNesting) + " levels");
        }
        ~Nest() { --p.depth_; }
    };

    // Each operator in a chain (a + b + c, a.b.c, x | f | g) deepens the tree
    // it builds by one: counted like nesting while the chain is parsed.
    struct Chain {
        Parser& p;
        int links = 0;
        explicit Chain(Parser& parser) : p(parser) {}
        void link() {
            ++links;
            if (++p.depth_ > kMaxNesting) fail(p.peek().at, "nested deeper than " + std::to_string(kMaxNesting) + " levels");
        }
        ~Chain() { p.depth_ -= links; }
    };

    ExprPtr parse_expr(bool allow_cond = true) {
        Nest nest(*this);
        ExprPtr e = parse_or();
        if (allow_cond && is_name("if")) {
            const Where at = next().at;
            auto c = make(Expr::Kind::Cond, at);
            c->b = std::move(e);
            c->a = parse_or();
            if (is_name("else")) {
                ++i_;
                c->c = parse_expr();
            }
            return c;
        }
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        Chain chain(*this);
        while (is_name("or")) {
            chain.link();
            auto o = make(Expr::Kind::Or, next().at);
            o->a = std::move(e);
            o->b = parse_and();
            e = std::move(o);
        }
        return e;
    }

    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        Chain chain(*this);
        while (is_name("and")) {
            chain.link();
            auto o = make(Expr::Kind::And, next().at);
            o->a = std::move(e);
            o->b = parse_not();
            e = std::move(o);
        }
        return e;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            Nest nest(*this);
            auto o = make(Expr::Kind::Unary, next().at);
            o->name = "not";
            o->a = parse_not();
            return o;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        ExprPtr e = parse_concat();
        Chain chain(*this);
        for (;;) {
            chain.link();
            std::string op;
            if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                          peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
                op = peek().text;
                ++i_;
            } else if (is_name("in")) {
                op = "in";
                ++i_;
            } else if (is_name("not") && is_name("in", 1)) {
                op = "not in";
                i_ += 2;
            } else {
                return e;
            }
            auto b = make(Expr::Kind::Binary, peek().at);
            b->name = op;
            b->a = std::move(e);
            b->b = parse_concat();
            e = std::move(b);
        }
    }

    ExprPtr parse_concat() {
        ExprPtr e = parse_additive();
        Chain chain(*this);
        while (is_op("~")) {
            chain.link();
            auto b = make(Expr::Kind::Binary, next().at);
            b->name = "~";
            b->a = std::move(e);
            b->b = parse_additive();
            e = std::move(b);
        }
        return e;
    }

    ExprPtr parse_additive() {
        ExprPtr e = parse_multiplicative();
        Chain chain(*this);
        while (is_op("+") || is_op("-")) {
            chain.link();
            auto b = make(Expr::Kind::Binary, peek().at);
            b->name = next().text;
            b->a = std::move(e);
            b->b = parse_multiplicative();
            e = std::move(b);
        }
        return e;
    }

    ExprPtr parse_multiplicative() {
        ExprPtr e = parse_unary();
        Chain chain(*this);
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            chain.link();
            auto b = make(Expr::Kind::Binary, peek().at);
            b->name = next().text;
            b->a = std::move(e);
            b->b = parse_unary();
            e = std::move(b);
        }
        return e;
    }

    ExprPtr parse_unary() {
        if (is_op("-") || is_op("+")) {
            Nest nest(*this);
            auto u = make(Expr::Kind::Unary, peek().at);
            u->name = next().text;
            u->a = parse_unary();
            return u;
        }
        return parse_power();
    }

    ExprPtr parse_power() {
        ExprPtr e = parse_filtered();
        if (is_op("**")) {
            Nest nest(*this);  // right-nested: a ** b ** c
            auto b = make(Expr::Kind::Binary, next().at);
            b->name = "**";
            b->a = std::move(e);
            b->b = parse_unary();
            return b;
        }
        return e;
    }

    // A primary with its postfixes, then | filters and is tests.
    ExprPtr parse_filtered() {
        ExprPtr e = parse_postfix(parse_primary());
        Chain chain(*this);
        for (;;) {
            chain.link();
            if (is_op("|")) {
                ++i_;
                e = parse_filter_call(std::move(e));
            } else if (is_name("is")) {
                auto t = make(Expr::Kind::Test, next().at);
                if (is_name("not")) {
                    ++i_;
                    t->negated = true;
                }
                // Tests named like keywords: none, true, false, in (jinja2's "is none").
                if (peek().kind != Tok::Name) fail(peek().at, "expected a test name" + found());
                t->name = next().text;
                t->a = std::move(e);
                if (is_op("(")) {
                    parse_call_args(*t);
                } else if (peek().kind == Tok::String || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                           (peek().kind == Tok::Name && !is_name("and") && !is_name("or") && !is_name("else") &&
                            !is_name("if") && !is_name("is") && !is_name("in") && !is_name("not"))) {
                    t->items.push_back(parse_postfix(parse_primary()));  // "is divisibleby 3", "is sameas x"
                }
                e = std::move(t);
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_filter_call(ExprPtr input) {
        auto f = make(Expr::Kind::Filter, peek().at);
        f->name = expect_name();
        f->a = std::move(input);
        if (is_op("(")) parse_call_args(*f);
        return f;
    }

    ExprPtr parse_filters(ExprPtr input) {
        ExprPtr e = std::move(input);
        while (is_op("|")) {
            ++i_;
            e = parse_filter_call(std::move(e));
        }
        return e;
    }

    void parse_call_args(Expr& call) {
        expect_op("(");
        while (!is_op(")")) {
            if (peek().kind == Tok::Name && is_op("=", 1)) {
                std::string k = next().text;
                ++i_;
                call.kwargs.emplace_back(std::move(k), parse_expr());
            } else {
                if (!call.kwargs.empty()) fail(peek().at, "a positional argument after keyword arguments");
                call.items.push_back(parse_expr());
            }
            if (!is_op(",")) break;
            ++i_;
        }
        expect_op(")");
    }

    ExprPtr parse_postfix(ExprPtr e) {
        Chain chain(*this);
        for (;;) {
            chain.link();
            if (is_op(".")) {
                ++i_;
                auto g = make(Expr::Kind::GetAttr, peek().at);
                if (peek().kind == Tok::Int) g->name = next().text;  // x.0: Python's getitem by index
                else g->name = expect_name();
                g->a = std::move(e);
                e = std::move(g);
            } else if (is_op("[")) {
                const Where at = next().at;
                ExprPtr lo, hi, step;
                bool slice = false;
                if (!is_op(":")) lo = parse_expr();
                if (is_op(":")) {
                    slice = true;
                    ++i_;
                    if (!is_op(":") && !is_op("]")) hi = parse_expr();
                    if (is_op(":")) {
                        ++i_;
                        if (!is_op("]")) step = parse_expr();
                    }
                }
                expect_op("]");
                auto g = make(slice ? Expr::Kind::Slice : Expr::Kind::GetItem, at);
                g->a = std::move(e);
                g->b = std::move(lo);
                g->c = std::move(hi);
                g->d = std::move(step);
                e = std::move(g);
            } else if (is_op("(")) {
                auto c = make(Expr::Kind::Call, e->at);  // errors point at what is called
                c->a = std::move(e);
                parse_call_args(*c);
                e = std::move(c);
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_primary() {
        const Token& t = peek();
        switch (t.kind) {
            case Tok::String: {
                auto e = make(Expr::Kind::Literal, t.at);
                std::string s = next().text;
                while (peek().kind == Tok::String) s += next().text;  // "a" "b": one string, as in Python
                e->value = Value(std::move(s));
                return e;
            }
            case Tok::Int: {
                auto e = make(Expr::Kind::Literal, t.at);
                e->value = Value(next().i);
                return e;
            }
            case Tok::Float: {
                auto e = make(Expr::Kind::Literal, t.at);
                e->value = Value(next().f);
                return e;
            }
            case Tok::Name: {
                auto e = make(Expr::Kind::Literal, t.at);
                const std::string& n = t.text;
                if (n == "true" || n == "True") e->value = Value(true);
                else if (n == "false" || n == "False") e->value = Value(false);
                else if (n == "none" || n == "None") e->value = Value::none();
                else {
                    e->kind = Expr::Kind::Name;
                    e->name = n;
                }
                ++i_;
                return e;
            }
            case Tok::Op:
                if (t.text == "(") {
                    ++i_;
                    if (is_op(")")) {
                        ++i_;
                        return make(Expr::Kind::List, t.at);
                    }
                    ExprPtr e = parse_expr();
                    if (is_op(",")) e = parse_tuple_rest(std::move(e));
                    expect_op(")");
                    return e;
                }
                if (t.text == "[") {
                    auto l = make(Expr::Kind::List, next().at);
                    while (!is_op("]")) {
                        l->items.push_back(parse_expr());
                        if (!is_op(",")) break;
                        ++i_;
                    }
                    expect_op("]");
                    return l;
                }
                if (t.text == "{") {
                    auto d = make(Expr::Kind::Dict, next().at);
                    while (!is_op("}")) {
                        d->keys.push_back(parse_expr());
                        expect_op(":");
                        d->items.push_back(parse_expr());
                        if (!is_op(",")) break;
                        ++i_;
                    }
                    expect_op("}");
                    return d;
                }
                break;
            default: break;
        }
        fail(t.at, "expected an expression" + found());
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;
};

}  // namespace

TemplateError::TemplateError(int line, int column, const std::string& what)
    : Error("template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what),
      line_(line),
      column_(column) {}

Body parse(const std::string& source) { return Parser(Lexer(source).run()).parse_all(); }

}  // namespace strata::chat::jinja
