// Jinja chat templates, as Hugging Face renders them (transformers'
// apply_chat_template: jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks, the loopcontrols extension, tojson as
// json.dumps(ensure_ascii=False), and the globals raise_exception and
// strftime_now). The subset real chat templates use: if/elif/else, for with
// loop.* and else, set (namespaces, blocks), macro and call, filter blocks,
// raw, break/continue; Python's operators, slicing, string and dict
// methods; jinja2's filters and tests (template.cpp lists them).
//
// Untrusted templates (every GGUF carries one) cannot run away: rendering
// stops with a TemplateError past Limits (steps, output, call depth), and
// nothing a template does touches anything but its output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "chat/jinja/parser.h"
#include "chat/jinja/value.h"

namespace strata::chat::jinja {

struct Limits {
    int64_t max_steps = 20'000'000;       // expressions and statements evaluated
    size_t max_output = 32u << 20;       // bytes of rendered text (and of any one string built)
    int max_depth = 64;                   // nested macro calls
    size_t max_list = 1u << 20;           // items of a list a template builds (range, repetition, +)
};

class Template {
public:
    // Throws TemplateError naming the line and column of what does not parse.
    explicit Template(const std::string& source);
    // `context`: a dict (messages, tools, add_generation_prompt, bos_token,
    // ...). Throws TemplateError (raise_exception's message included).
    std::string render(const Value& context, const Limits& limits = {}) const;

private:
    std::shared_ptr<const Body> body_;
};

}  // namespace strata::chat::jinja
