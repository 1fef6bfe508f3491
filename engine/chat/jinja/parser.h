// Template text -> statements (chat/jinja/ast.h), with Hugging Face's
// settings: trim_blocks and lstrip_blocks on, jinja2's - and + whitespace
// control, {% raw %}, comments, and its loopcontrols extension (break,
// continue) and {% generation %} blocks.
#pragma once

#include <string>

#include "chat/jinja/ast.h"
#include "common/error.h"

namespace strata::chat::jinja {

// A template that does not parse, or fails while it renders (it raised, a
// value has the wrong type, it ran past a limit): the message starts with
// "template line L, column C: ".
class TemplateError : public Error {
public:
    TemplateError(int line, int column, const std::string& what);
    int line() const { return line_; }
    int column() const { return column_; }

private:
    int line_, column_;
};

Body parse(const std::string& source);

}  // namespace strata::chat::jinja
