#include "serve/output_grammar.h"

#include <set>

#include "grammar/json_schema.h"
#include "serve/tool_calls.h"

namespace strata::serve {

namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf, const std::string& param) {
    try {
        return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
    } catch (const grammar::GrammarError& e) {
        bad_request(param, std::string("'") + param + "': " + e.what());
    }
}

// The JSON the response_format asks for, as GBNF; "" for text.
std::string response_format_gbnf(const ojson& body) {
    auto it = body.find("response_format");
    if (it == body.end() || it->is_null()) return "";
    const char* form =
        "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) bad_request("response_format", form);
    const std::string type = (*it)["type"].get<std::string>();
    if (type == "text") return "";
    grammar::JsonGrammar g;
    if (type == "json_object") return g.gbnf(g.any_object());
    if (type != "json_schema") bad_request("response_format", form);
    const auto js = it->find("json_schema");
    if (js == it->end() || !js->is_object()) bad_request("response_format", form);
    const auto schema = js->find("schema");
    if (schema == js->end()) return g.gbnf(g.any_value());  // OpenAI: no schema is any JSON
    if (!schema->is_object() && !schema->is_boolean())
        bad_request("response_format", "'response_format.json_schema.schema' must be a JSON schema object");
    try {
        return g.gbnf(g.add_schema(*schema, "schema"));
    } catch (const nlohmann::json::exception& e) {
        bad_request("response_format", std::string("'response_format.json_schema.schema' is not a valid schema: ") + e.what());
    } catch (const grammar::SchemaError& e) {
        bad_request("response_format", std::string("'response_format.json_schema.schema': ") + e.what() +
                                    "; change the schema, or leave response_format out and validate the reply yourself",
             "unsupported_schema");
    }
}

using Syntax = chat::ChatTemplate::ToolSyntax;

// An argument's value as the XML syntaxes write it: strings as raw text (no
// closing tag can begin inside: no "</"), anything else as its JSON.
std::string xml_value(grammar::JsonGrammar& g, const ojson& s, const std::string& hint) {
    if (!is_string_schema(&s)) return g.add_schema(s, hint);
    if (s.contains("enum")) {
        std::string alts;
        for (const auto& v : s["enum"]) alts += (alts.empty() ? "" : " | ") + grammar::gbnf_literal(v.get<std::string>());
        return g.define(hint, alts);
    }
    if (s.contains("format")) {  // the format's text itself, unquoted
        const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
        if (f == "date" || f == "time" || f == "uuid") return g.primitive(f);
        if (f == "date-time") return g.define(hint, g.primitive("date") + " \"T\" " + g.primitive("time"));
        return g.add_schema(s, hint);  // refused, naming the format
    }
    if (s.contains("pattern")) return g.add_schema(s, hint);  // refused, naming the keyword
    const int64_t lo = grammar::schema_count(s, "minLength", 0, "/properties/" + hint),
                  hi = grammar::schema_count(s, "maxLength", -1, "/properties/" + hint);
    if (lo == 0 && hi < 0) return g.define(hint, "([^<] | \"<\" [^/<])*");
    if (hi >= 0 && hi < lo) throw grammar::SchemaError("maxLength", "/properties", "is smaller than minLength");
    return g.define(hint, "[^<]{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}");
}

// The arguments of one call in an XML syntax: each property in the schema's
// order, the required ones always, the others optionally.
std::string xml_arguments(grammar::JsonGrammar& g, const ojson& params, const std::string& fn, Syntax syntax) {
    std::string out;
    if (!params.is_object() || !params.contains("properties")) return out;
    std::set<std::string> required;
    if (params.contains("required"))
        for (const auto& r : params["required"])
            if (r.is_string()) required.insert(r.get<std::string>());
    for (const auto& [key, schema] : params["properties"].items()) {
        const std::string v = xml_value(g, schema, "arg-" + fn + "-" + key);
        std::string one;
        switch (syntax) {
            case Syntax::QwenXml:
                one = grammar::gbnf_literal("<parameter=" + key + ">\n") + " " + v + " " + grammar::gbnf_literal("\n</parameter>\n");
                break;
            case Syntax::Glm:
                one = grammar::gbnf_literal("<arg_key>" + key + "</arg_key>\n<arg_value>") + " " + v + " " +
                      grammar::gbnf_literal("</arg_value>\n");
                break;
            case Syntax::Dsml:
            case Syntax::DsmlV4:
                one = grammar::gbnf_literal("<｜DSML｜parameter name=\"" + key + "\" string=\"" +
                                            (is_string_schema(&schema) ? "true" : "false") + "\">") +
                      " " + v + " " + grammar::gbnf_literal("</｜DSML｜parameter>\n");
                break;
            default:
                one = grammar::gbnf_literal("<parameter name=\"" + key + "\">") + " " + v + " " +
                      grammar::gbnf_literal("</parameter>\n");
                break;
        }
        out += " " + (required.count(key) ? one : "(" + one + ")?");
    }
    return out;
}

std::string one_call(grammar::JsonGrammar& g, const std::string& name, const ojson& params, Syntax syntax) {
    switch (syntax) {
        case Syntax::Hermes:
            return grammar::gbnf_literal("<tool_call>\n{\"name\": " + ojson(name).dump(-1, ' ', false) + ", \"arguments\": ") +
                   " " + g.add_schema(params, "args-" + name) + " " + grammar::gbnf_literal("}\n</tool_call>");
        case Syntax::QwenXml:
            return grammar::gbnf_literal("<tool_call>\n<function=" + name + ">\n") + xml_arguments(g, params, name, syntax) +
                   " " + grammar::gbnf_literal("</function>\n</tool_call>");
        case Syntax::Glm:
            return grammar::gbnf_literal("<tool_call>" + name + "\n") + xml_arguments(g, params, name, syntax) + " " +
                   grammar::gbnf_literal("</tool_call>");
        case Syntax::MiniMax:
            return grammar::gbnf_literal("<minimax:tool_call>\n<invoke name=\"" + name + "\">\n") +
                   xml_arguments(g, params, name, syntax) + " " + grammar::gbnf_literal("</invoke>\n</minimax:tool_call>");
        case Syntax::Llama3:
            return grammar::gbnf_literal("{\"name\": " + ojson(name).dump(-1, ' ', false) + ", \"parameters\": ") + " " +
                   g.add_schema(params, "args-" + name) + " \"}\"";
        case Syntax::Mistral:
            return grammar::gbnf_literal("[TOOL_CALLS][{\"name\": " + ojson(name).dump(-1, ' ', false) + ", \"arguments\": ") +
                   " " + g.add_schema(params, "args-" + name) + " " + grammar::gbnf_literal(", \"id\": \"") +
                   " [a-zA-Z0-9]{9} " + grammar::gbnf_literal("\"}]");
        case Syntax::MistralArgs:
            return grammar::gbnf_literal("[TOOL_CALLS]" + name + "[ARGS]") + " " + g.add_schema(params, "args-" + name);
        case Syntax::DeepSeek:
            return grammar::gbnf_literal("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>") + " " +
                   g.add_schema(params, "args-" + name) + " " + grammar::gbnf_literal("<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
        case Syntax::DeepSeekR1:
            return grammar::gbnf_literal("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name +
                                         "\n```json\n") +
                   " " + g.add_schema(params, "args-" + name) + " " +
                   grammar::gbnf_literal("\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
        case Syntax::Dsml:
        case Syntax::DsmlV4: {
            const std::string block = syntax == Syntax::Dsml ? "function_calls>" : "tool_calls>";
            return grammar::gbnf_literal("<｜DSML｜" + block + "\n<｜DSML｜invoke name=\"" + name + "\">\n") +
                   xml_arguments(g, params, name, syntax) + " " +
                   grammar::gbnf_literal("</｜DSML｜invoke>\n</｜DSML｜" + block);
        }
        case Syntax::Kimi:
            return grammar::gbnf_literal("<|tool_calls_section_begin|><|tool_call_begin|>functions." + name +
                                         ":0<|tool_call_argument_begin|>") +
                   " " + g.add_schema(params, "args-" + name) + " " +
                   grammar::gbnf_literal("<|tool_call_end|><|tool_calls_section_end|>");
        case Syntax::Harmony:
            // The prompt ends with "<|start|>assistant"; the template writes calls this way. The
            // end token that follows (<|call|>) is allowed once the arguments are complete.
            return grammar::gbnf_literal(" to=functions." + name + "<|channel|>commentary json<|message|>") + " " +
                   g.add_schema(params, "args-" + name);
    }
    return "";
}

}  // namespace

std::shared_ptr<const grammar::Grammar> output_grammar(const ojson& body, const CompletionRequest& r) {
    std::string gbnf = response_format_gbnf(body), param = "response_format";
    if (r.tool_choice == "required" || r.tool_choice == "function") {
        if (!gbnf.empty())
            bad_request("response_format", "'response_format' JSON and 'tool_choice' \"" + r.tool_choice +
                                        "\" both constrain the reply: send one of them");
        if (auto it = body.find("grammar"); it != body.end() && !it->is_null())
            bad_request("grammar", "'grammar' and 'tool_choice' \"" + r.tool_choice + "\" both constrain the reply: send one of them");
        return tool_call_grammar(r, Syntax::Hermes);  // the template's own syntax replaces it in prepare_request
    }
    if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string() || it->get<std::string>().empty()) bad_request("grammar", "'grammar' must be GBNF text (llama.cpp's)");
        if (!gbnf.empty())
            bad_request("grammar", "'grammar' and '" + param + "' both constrain the reply: send one of them");
        gbnf = it->get<std::string>();
        param = "grammar";
    }
    if (gbnf.empty()) return nullptr;
    return compile(gbnf, param);
}

std::shared_ptr<const grammar::Grammar> tool_call_grammar(const CompletionRequest& r, Syntax syntax) {
    grammar::JsonGrammar g;
    std::string calls;
    for (size_t i = 0; i < r.tools.size(); ++i) {
        const ojson& fn = r.tools[i]["function"];
        const std::string name = fn["name"].get<std::string>();
        if (r.tool_choice == "function" && name != r.tool_choice_name) continue;
        const ojson params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                                       : ojson{{"type", "object"}};
        try {
            calls += std::string(calls.empty() ? "" : " | ") + one_call(g, name, params, syntax);
        } catch (const grammar::SchemaError& e) {
            bad_request("tools", "'tools[" + std::to_string(i) + "].function.parameters': " + e.what() +
                              "; a call constrained by tool_choice needs a schema the grammar can express "
                              "(or send tool_choice \"auto\")",
                 "unsupported_schema");
        } catch (const nlohmann::json::exception& e) {  // a keyword with a value of the wrong type
            bad_request("tools", "'tools[" + std::to_string(i) + "].function.parameters' is not a valid schema: " + e.what());
        }
    }
    const std::string call = "(" + calls + ")";
    // Several calls where the syntax strings them together; harmony ends its turn
    // after one (<|call|>); Llama 3's reply is one call; Mistral's array and
    // DeepSeek's block hold one here.
    const bool several = r.parallel_tool_calls && (syntax == Syntax::Hermes || syntax == Syntax::QwenXml ||
                                                   syntax == Syntax::Glm || syntax == Syntax::MiniMax ||
                                                   syntax == Syntax::MistralArgs);
    const std::string sep = syntax == Syntax::MistralArgs ? "" : "\"\\n\" ";
    return compile(g.gbnf(several ? call + " (" + sep + call + ")*" : call), "tools");
}

}  // namespace strata::serve
