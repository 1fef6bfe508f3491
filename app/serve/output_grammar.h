// The grammar a request's output must follow (grammar-constrained sampling):
//  - response_format {type: "json_object"}: any JSON object;
//  - response_format {type: "json_schema", json_schema: {name, schema, strict}}:
//    JSON the schema accepts (grammar/json_schema.h);
//  - tool_choice "required" or a named function: one call (or, with
//    parallel_tool_calls, several) in the syntax of the model's template that
//    the server parses (serve/tool_calls.h), the arguments following the
//    function's parameters schema: Hermes JSON by default (decided when the
//    request is parsed), the XML syntaxes once the template is known
//    (prepare_request);
//  - "grammar": llama.cpp's extension, GBNF text.
// At most one of them per request.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "serve/openai_api.h"

namespace strata::serve {

// nullptr when the output is free. Throws ApiException: a malformed field, a
// schema keyword the grammar cannot express (400 naming it), two constraints.
std::shared_ptr<const grammar::Grammar> output_grammar(const nlohmann::ordered_json& body, const CompletionRequest& r);

// The calls tool_choice asks for, in `syntax`. Throws ApiException (param
// "tools") for a parameters schema the grammar cannot express.
std::shared_ptr<const grammar::Grammar> tool_call_grammar(const CompletionRequest& r, chat::ChatTemplate::ToolSyntax syntax);

}  // namespace strata::serve
