// Tool calls in a model's reply, as OpenAI's API returns them. The format
// parsed is Hermes' (Qwen 2.5/3/3.5, Hermes, many fine-tunes: their templates
// ask for it): <tool_call>{"name": N, "arguments": {...}}</tool_call>, any
// number of them after optional text. Other models' formats (harmony,
// DeepSeek, GLM, Llama 3, Mistral, MiniMax) are not parsed yet: their calls
// come back as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

// The calls in `text`. A <tool_call> block that is not a JSON object with a
// string "name" makes the whole reply text (nothing is half-parsed).
ParsedReply parse_tool_calls(std::string_view text, const std::string& id_prefix);

// OpenAI's tool_calls array for a message (or, with `index`, for a streamed delta).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

// Streams a reply's text while holding back what may be a tool call: text
// before "<tool_call>" goes out as content as it comes (less a tail that may
// be the start of the marker); from the marker on it is kept for the calls.
class ToolCallStream {
public:
    // The content that can be sent now.
    std::string feed(std::string_view piece);
    // At the end: the held text parsed (its content part is what was not
    // sent: `content` of the result is the rest to send).
    ParsedReply finish(const std::string& id_prefix);

private:
    std::string sent_;     // content streamed so far
    std::string pending_;  // not yet streamed (a possible marker start, or the calls)
    bool in_calls_ = false;
};

}  // namespace strata::serve
