#include "chat/tool_prompt.h"

#include "chat/jinja/value.h"

namespace strata::chat {

namespace {

using ojson = nlohmann::ordered_json;

std::string tools_text(const ojson& tools) {
    std::string t =
        "You may call functions to answer. The functions, as JSON schemas:\n<tools>\n";
    for (const auto& tool : tools) t += tool.dump(-1, ' ', false) + "\n";
    t += "</tools>\nTo call a function, reply with only this, once per call:\n<tool_call>\n"
         "{\"name\": <function name>, \"arguments\": <the arguments as a JSON object>}\n</tool_call>";
    return t;
}

std::string calls_text(const ojson& calls) {
    std::string t;
    for (const auto& c : calls) {
        const ojson& fn = c.contains("function") ? c["function"] : c;
        // As the calls the server constrains and parses are written (serve/output_grammar.h).
        t += "<tool_call>\n{\"name\": " + ojson(fn.value("name", "")).dump(-1, ' ', false) +
             ", \"arguments\": " + call_arguments(fn).dump(-1, ' ', false) + "}\n</tool_call>\n";
    }
    if (!t.empty()) t.pop_back();
    return t;
}

}  // namespace

ojson call_arguments(const ojson& fn) {
    auto it = fn.find("arguments");
    if (it == fn.end()) return ojson::object();
    if (it->is_string()) {
        try {
            return ojson::parse(it->get<std::string>());
        } catch (const std::exception&) {
            return *it;
        }
    }
    return *it;
}

std::vector<Message> inline_tools(const std::vector<Message>& messages, const ojson& tools) {
    std::vector<Message> out;
    if (tools.is_array() && !tools.empty()) {
        if (!messages.empty() && messages[0].role == "system") {
            out.push_back({"system", messages[0].content + "\n\n" + tools_text(tools)});
        } else {
            out.push_back({"system", tools_text(tools)});
        }
    } else if (!messages.empty() && messages[0].role == "system") {
        out.push_back({"system", messages[0].content});
    }
    bool after_results = false;  // the last turn out is a user turn holding tool results
    for (size_t i = (!messages.empty() && messages[0].role == "system") ? 1 : 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        if (m.role == "tool") {
            const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
            if (after_results) out.back().content += "\n" + block;
            else out.push_back({"user", block});
            after_results = true;
            continue;
        }
        if (m.role == "user" && after_results) {
            out.back().content += "\n\n" + m.content;
            after_results = false;
            continue;
        }
        after_results = false;
        Message plain{m.role, m.content};
        if (auto it = m.extra.find("tool_calls"); it != m.extra.end() && it->is_array() && !it->empty()) {
            if (!plain.content.empty()) plain.content += '\n';
            plain.content += calls_text(*it);
        }
        out.push_back(std::move(plain));
    }
    return out;
}

std::vector<Message> deepseek_system_tools(const std::vector<Message>& messages, const ojson& tools) {
    if (!tools.is_array() || tools.empty()) return messages;
    std::string t = "## Tools\nYou have access to the following tools:\n";
    for (const auto& tool : tools) {
        const ojson& fn = tool.contains("function") ? tool["function"] : tool;
        // As Python's json.dumps writes it (the model card builds this text in Python).
        const ojson params = fn.contains("parameters") ? fn["parameters"] : ojson::object();
        const auto text = [&](const char* key) {  // a client's field: a string, or nothing
            auto it = fn.find(key);
            return it != fn.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        t += "\n### " + text("name") + "\nDescription: " + text("description") + "\n\nParameters: " +
             jinja::Value::from_json(params).to_json(-1, false, /*ensure_ascii=*/true) + "\n";
    }
    t += "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>"
         "{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n\n"
         "- `tool_call_name` must be an exact match to one of the available tools\n"
         "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
         "- For multiple tool calls, chain them directly without separators or spaces\n";
    std::vector<Message> out = messages;
    if (!out.empty() && out[0].role == "system") out[0].content += "\n\n" + t;
    else out.insert(out.begin(), Message{"system", t});
    return out;
}

}  // namespace strata::chat
