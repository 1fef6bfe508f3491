// Tools for a template that has no place for them (the marker families, and
// Jinja templates that ignore `tools`): the conversation is rewritten into
// plain turns in the Hermes format the server parses (serve/tool_calls.h),
// as llama.cpp's generic tool format does:
//  - the function definitions and how to call one go into the system message;
//  - an assistant's tool_calls become <tool_call>{"name", "arguments"}</tool_call>
//    blocks after its text;
//  - tool results become a user turn of <tool_response> blocks (consecutive
//    results, and a user message right after them, share one turn, so
//    templates that need user and assistant to alternate accept it).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace strata::chat {

// A call's arguments as templates read them (Hugging Face's convention: an
// object), from OpenAI's `function` {name, arguments}, whose arguments are a
// string of JSON: that JSON, else the string as it is; {} when absent.
nlohmann::ordered_json call_arguments(const nlohmann::ordered_json& fn);

// `tools`: OpenAI function definitions (may be empty when only tool turns need rewriting).
std::vector<Message> inline_tools(const std::vector<Message>& messages, const nlohmann::ordered_json& tools);

// For a template that writes call and result turns in the model's own format
// but not the definitions (DeepSeek V3.1's): the definitions and the call
// format go into the system message as DeepSeek's model card describes; the
// turns are left to the template.
std::vector<Message> deepseek_system_tools(const std::vector<Message>& messages, const nlohmann::ordered_json& tools);

}  // namespace strata::chat
