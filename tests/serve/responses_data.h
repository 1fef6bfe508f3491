// Request bodies for test_responses_api (kept out of the test's .cpp: Qt 6.4's
// moc misreads raw string literals with quotes and braces).
#pragma once

namespace responses_data {

// A conversation of every input item kind, with instructions and a system message.
inline const char* const kConversation = R"({
  "model": "m", "instructions": "Be brief.",
  "input": [
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in "}, {"type": "input_text", "text": "Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
    {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "21 C"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
    {"role": "user", "content": "Thanks"}
  ],
  "tools": [
    {"type": "function", "name": "get_weather", "description": "The weather", "strict": true,
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
  ],
  "tool_choice": {"type": "function", "name": "get_weather"},
  "max_output_tokens": 33, "temperature": 0.5, "top_p": 0.9, "seed": 7, "parallel_tool_calls": true,
  "metadata": {"k": "v"}, "store": true, "reasoning": {"effort": "low"}, "user": "u1"
})";

inline const char* const kJsonSchema = R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "strict": true,
  "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}})";

// {body, param of the 400}
inline const char* const kBad[][2] = {
    {"[]", ""},
    {"{", ""},
    {"{}", "input"},
    {R"({"input": []})", "input"},
    {R"({"input": 3})", "input"},
    {R"({"input": [7]})", "input[0]"},
    {R"({"input": [{"role": "critic", "content": "x"}]})", "input[0].role"},
    {R"({"input": [{"role": "user"}]})", "input[0].content"},
    {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", "input[0].content[0]"},
    {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0]"},
    {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{x"}]})", "input[0].arguments"},
    {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input[0]"},
    {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0]"},
    {R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input[0]"},
    {R"({"input": [{"type": "reasoning", "id": "rs_1"}], "instructions": "x"})", "input"},
    {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
    {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
    {R"({"input": "x", "background": true})", "background"},
    {R"({"input": "x", "prompt": {"id": "pmpt_1"}})", "prompt"},
    {R"({"input": "x", "top_logprobs": 2})", "top_logprobs"},
    {R"({"input": "x", "instructions": 5})", "instructions"},
    {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
    {R"({"input": "x", "temperature": 3})", "temperature"},
    {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools"},
    {R"({"input": "x", "tools": [{"type": "function"}]})", "tools"},
    {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
    {R"({"input": "x", "tool_choice": {"type": "file_search"}})", "tool_choice"},
    {R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format"},
    {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": "string", "pattern": "a"}}}})", "text.format"},
};

}  // namespace responses_data
