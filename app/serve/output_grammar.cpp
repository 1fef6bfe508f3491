#include "serve/output_grammar.h"

#include "grammar/json_schema.h"

namespace strata::serve {

namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& param, const std::string& message, const std::string& code = {}) {
    throw ApiException{ApiError{400, message, "invalid_request_error", param, code}};
}

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf, const std::string& param) {
    try {
        return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
    } catch (const grammar::GrammarError& e) {
        fail(param, std::string("'") + param + "': " + e.what());
    }
}

// The JSON the response_format asks for, as GBNF; "" for text.
std::string response_format_gbnf(const ojson& body) {
    auto it = body.find("response_format");
    if (it == body.end() || it->is_null()) return "";
    const char* form =
        "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) fail("response_format", form);
    const std::string type = (*it)["type"].get<std::string>();
    if (type == "text") return "";
    grammar::JsonGrammar g;
    if (type == "json_object") return g.gbnf(g.any_object());
    if (type != "json_schema") fail("response_format", form);
    const auto js = it->find("json_schema");
    if (js == it->end() || !js->is_object()) fail("response_format", form);
    const auto schema = js->find("schema");
    if (schema == js->end()) return g.gbnf(g.any_value());  // OpenAI: no schema is any JSON
    if (!schema->is_object() && !schema->is_boolean())
        fail("response_format", "'response_format.json_schema.schema' must be a JSON schema object");
    try {
        return g.gbnf(g.add_schema(*schema, "schema"));
    } catch (const grammar::SchemaError& e) {
        fail("response_format", std::string("'response_format.json_schema.schema': ") + e.what() +
                                    "; change the schema, or leave response_format out and validate the reply yourself",
             "unsupported_schema");
    }
}

// One Hermes call of one of the tools (or of tool_choice's function).
std::string tool_call_gbnf(const CompletionRequest& r) {
    grammar::JsonGrammar g;
    std::string calls;
    for (size_t i = 0; i < r.tools.size(); ++i) {
        const ojson& fn = r.tools[i]["function"];
        const std::string name = fn["name"].get<std::string>();
        if (r.tool_choice == "function" && name != r.tool_choice_name) continue;
        const ojson params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                                       : ojson{{"type", "object"}};
        std::string args;
        try {
            args = g.add_schema(params, "args-" + name);
        } catch (const grammar::SchemaError& e) {
            fail("tools", "'tools[" + std::to_string(i) + "].function.parameters': " + e.what() +
                              "; a call constrained by tool_choice needs a schema the grammar can express "
                              "(or send tool_choice \"auto\")",
                 "unsupported_schema");
        }
        const std::string head = "<tool_call>\n{\"name\": " + ojson(name).dump(-1, ' ', false) + ", \"arguments\": ";
        calls += std::string(calls.empty() ? "" : " | ") + grammar::gbnf_literal(head) + " " + args + " " +
                 grammar::gbnf_literal("}\n</tool_call>");
    }
    const std::string call = "(" + calls + ")";
    return g.gbnf(r.parallel_tool_calls ? call + " (\"\\n\" " + call + ")*" : call);
}

}  // namespace

std::shared_ptr<const grammar::Grammar> output_grammar(const ojson& body, const CompletionRequest& r) {
    std::string gbnf = response_format_gbnf(body), param = "response_format";
    if (r.tool_choice == "required" || r.tool_choice == "function") {
        if (!gbnf.empty())
            fail("response_format", "'response_format' JSON and 'tool_choice' \"" + r.tool_choice +
                                        "\" both constrain the reply: send one of them");
        gbnf = tool_call_gbnf(r);
        param = "tool_choice";
    }
    if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string() || it->get<std::string>().empty()) fail("grammar", "'grammar' must be GBNF text (llama.cpp's)");
        if (!gbnf.empty())
            fail("grammar", "'grammar' and '" + param + "' both constrain the reply: send one of them");
        gbnf = it->get<std::string>();
        param = "grammar";
    }
    if (gbnf.empty()) return nullptr;
    return compile(gbnf, param);
}

}  // namespace strata::serve
