// Tool calls in a model's reply, as OpenAI's API returns them, in the syntax
// its template asks for (chat::ChatTemplate::ToolSyntax): Hermes' JSON in
// <tool_call> (Qwen 2.5/3, Hermes, and the plain-turn format), the XML of
// Qwen3-Coder / Qwen3.5 and GLM-4.5+ in <tool_call>, MiniMax-M2's
// <minimax:tool_call>, gpt-oss's harmony (to=functions.N ... <|message|>{...}),
// Llama 3's {"name", "parameters"} reply, Mistral's [TOOL_CALLS] (array or
// N[ARGS]{...}) and DeepSeek's <｜tool▁calls▁begin｜> blocks; any number of
// calls after optional text (harmony and Llama 3: one, the whole turn). The XML
// syntaxes write argument values as text: a value becomes a JSON string where
// the function's schema says string, else the JSON it spells (Python's
// True/False/None too), else a string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace strata::serve {

struct ToolCall {
    std::string id;         // "call_..." (unique within the reply)
    std::string name;
    std::string arguments;  // a JSON object, as a string (OpenAI's wire form)
};

struct ParsedReply {
    std::string content;            // the text before the first call (trimmed), or all of it
    std::vector<ToolCall> calls;    // empty: the reply is text
};

using ToolSyntax = chat::ChatTemplate::ToolSyntax;

// The calls in `text`. A block that does not parse (Hermes: not a JSON object
// with a string "name"; XML: no function name) makes the whole reply text
// (nothing is half-parsed). `tools`: the request's definitions, for the XML
// syntaxes' value types (nullptr: values that spell JSON become that JSON).
ParsedReply parse_tool_calls(std::string_view text, const std::string& id_prefix, ToolSyntax syntax = ToolSyntax::Hermes,
                             const nlohmann::ordered_json* tools = nullptr);

// Whether a value of this schema is a string (type "string", or an enum of
// strings): the XML syntaxes write such a value as raw text.
bool is_string_schema(const nlohmann::ordered_json* schema);

// The syntax's markers that are special tokens in the models that use it
// (Mistral's [TOOL_CALLS] / [ARGS] / [CALL_ID], DeepSeek's tool tokens): a
// request with tools renders them (SamplingParams::render_tokens) so its
// calls can be read; empty for the other syntaxes.
std::vector<std::string_view> special_markers(ToolSyntax syntax);

// OpenAI's tool_calls array for a message (or, with `index`, for a streamed delta).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

// Streams a reply's text while holding back what may be a tool call: text
// before the syntax's marker ("<tool_call>", "<minimax:tool_call>") goes out as content as it comes (less a tail that may
// be the start of the marker); from the marker on it is kept for the calls.
class ToolCallStream {
public:
    explicit ToolCallStream(ToolSyntax syntax = ToolSyntax::Hermes, const nlohmann::ordered_json* tools = nullptr);
    // The content that can be sent now.
    std::string feed(std::string_view piece);
    // At the end: the held text parsed (its content part is what was not
    // sent: `content` of the result is the rest to send).
    ParsedReply finish(const std::string& id_prefix);

private:
    ToolSyntax syntax_;
    const nlohmann::ordered_json* tools_;
    std::string_view open_;  // the marker a call starts with
    std::string sent_;     // content streamed so far
    std::string pending_;  // not yet streamed (a possible marker start, or the calls)
    bool in_calls_ = false;
    bool text_only_ = false;  // Llama 3: the reply began as text, so it is not a call
};

}  // namespace strata::serve
