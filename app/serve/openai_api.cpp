#include "serve/openai_api.h"

#include <algorithm>

#include <array>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "serve/json_fields.h"
#include "serve/output_grammar.h"

namespace strata::serve {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& param, const std::string& message, const std::string& code = {}) {
    bad_request(param, message, code);
}

std::string short_num(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

double number_in(const json& body, const char* name, double lo, double hi, double fallback) {
    const json* v = json_field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) wrong_type(name, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
        fail(name, "'" + std::string(name) + "' is " + v->dump() + ": expected a number from " + short_num(lo) +
                       " to " + short_num(hi));
    }
    return x;
}

int64_t integer_in(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
    const json* v = json_field(body, name);
    if (!v) return fallback;
    if (!v->is_number_integer()) wrong_type(name, "an integer", *v);
    // Unsigned values beyond int64 and negative ones are compared without overflow.
    bool out_of_range;
    if (v->is_number_unsigned()) {
        const uint64_t x = v->get<uint64_t>();
        out_of_range = x > static_cast<uint64_t>(hi) || static_cast<int64_t>(x) < lo;
    } else {
        const int64_t x = v->get<int64_t>();
        out_of_range = x < lo || x > hi;
    }
    if (out_of_range) {
        fail(name, "'" + std::string(name) + "' is " + v->dump() + ": expected an integer from " + std::to_string(lo) +
                       " to " + std::to_string(hi));
    }
    return v->get<int64_t>();
}

bool boolean(const json& body, const char* name, bool fallback) {
    const json* v = json_field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
    return v->get<bool>();
}

// Fields that would change the answer and that Strata does not implement: refused
// with a message, not silently ignored.
void refuse_unsupported(const json& body) {
    if (const json* v = json_field(body, "n"); v && !(v->is_number_integer() && v->get<int64_t>() == 1))
        fail("n", "'n' must be 1: one choice per request is supported (send several requests instead)");
    if (const json* v = json_field(body, "best_of"); v && !(v->is_number_integer() && v->get<int64_t>() == 1))
        fail("best_of", "'best_of' must be 1: it is not supported");
    if (const json* v = json_field(body, "logprobs"); v && !(v->is_boolean() && !v->get<bool>()))
        fail("logprobs", "'logprobs' is not supported");
    if (json_field(body, "top_logprobs")) fail("top_logprobs", "'top_logprobs' is not supported");
    if (json_field(body, "functions") || json_field(body, "function_call"))
        fail("functions", "'functions' and 'function_call' are the API's old form: send 'tools' and 'tool_choice'");
    if (const json* v = json_field(body, "logit_bias"); v && !(v->is_object() && v->empty()))
        fail("logit_bias", "'logit_bias' is not supported");
    if (const json* v = json_field(body, "echo"); v && !(v->is_boolean() && !v->get<bool>()))
        fail("echo", "'echo' is not supported");
    if (const json* v = json_field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
        fail("suffix", "'suffix' (insertion) is not supported");
}

std::string text_content(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) wrong_type(where, "a string or an array of text parts", content);
    std::string text;
    for (const json& part : content) {
        const json* type = part.is_object() ? json_field(part, "type") : nullptr;
        if (!type || !type->is_string()) fail(where, "each part of '" + where + "' must be an object with a 'type'");
        if (type->get<std::string>() != "text")
            fail(where, "'" + where + "' has a part of type '" + type->get<std::string>() +
                            "': only text parts are supported");
        const json* t = json_field(part, "text");
        if (!t || !t->is_string()) fail(where, "a text part of '" + where + "' must have a string 'text'");
        text += t->get<std::string>();
    }
    return text;
}

// OpenAI's tool definitions: [{type: "function", function: {name, description?, parameters?}}].
nlohmann::ordered_json parse_tools(const nlohmann::ordered_json& body) {
    auto it = body.find("tools");
    if (it == body.end() || it->is_null()) return nlohmann::ordered_json::array();
    if (!it->is_array()) fail("tools", "'tools' must be an array of {type: \"function\", function: {...}}");
    for (size_t i = 0; i < it->size(); ++i) {
        const auto& t = (*it)[i];
        const std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
            fail("tools", where + " must be {type: \"function\", function: {name, description, parameters}}");
        const auto& f = t["function"];
        if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
            fail("tools", where + ".function needs a non-empty string 'name'");
        if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
            fail("tools", where + ".function.parameters must be a JSON schema object");
    }
    return *it;
}

// tool_choice: "auto", "none", "required" or {type: "function", function: {name}}.
void parse_tool_choice(const json& body, CompletionRequest& r) {
    const json* v = json_field(body, "tool_choice");
    if (!v) return;
    const char* form = "'tool_choice' must be \"auto\", \"none\", \"required\" or {type: \"function\", function: {name: ...}}";
    if (v->is_string()) {
        const std::string c = v->get<std::string>();
        if (c != "auto" && c != "none" && c != "required") fail("tool_choice", form);
        r.tool_choice = c;
    } else if (v->is_object()) {
        const json* fn = json_field(*v, "function");
        const json* name = fn && fn->is_object() ? json_field(*fn, "name") : nullptr;
        if (v->value("type", "") != "function" || !name || !name->is_string()) fail("tool_choice", form);
        r.tool_choice = "function";
        r.tool_choice_name = name->get<std::string>();
    } else {
        fail("tool_choice", form);
    }
    if (r.tool_choice == "none" || r.tool_choice == "auto") return;
    if (r.tools.empty())
        fail("tool_choice", "'tool_choice' \"" + r.tool_choice + "\" needs 'tools': the functions the call may name");
    if (r.tool_choice == "function") {
        const bool known = std::any_of(r.tools.begin(), r.tools.end(), [&](const auto& t) {
            return t["function"]["name"].template get<std::string>() == r.tool_choice_name;
        });
        if (!known) fail("tool_choice", "'tool_choice' names the function '" + r.tool_choice_name + "', which is not in 'tools'");
    }
}

std::vector<chat::Message> parse_messages(const json& body, const nlohmann::ordered_json& ordered) {
    const json* v = json_field(body, "messages");
    if (!v) fail("messages", "'messages' is required: an array of {role, content}");
    if (!v->is_array()) wrong_type("messages", "an array", *v);
    if (v->empty()) fail("messages", "'messages' is empty: send at least one message");
    std::vector<chat::Message> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const json& m = (*v)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) wrong_type(where, "an object", m);
        const json* role = json_field(m, "role");
        if (!role || !role->is_string()) fail(where + ".role", where + " needs a string 'role'");
        std::string r = role->get<std::string>();
        if (r == "developer") r = "system";  // OpenAI's newer name for the system prompt
        if (r != "system" && r != "user" && r != "assistant" && r != "tool")
            fail(where + ".role", where + " has role '" + role->get<std::string>() +
                                      "': expected system, developer, user, assistant or tool");
        const json* content = json_field(m, "content");
        std::string text = content ? text_content(*content, where + ".content") : std::string();
        const json* calls = r == "assistant" ? json_field(m, "tool_calls") : nullptr;
        if (!content && !(r == "assistant")) fail(where + ".content", where + " needs 'content'");
        chat::Message msg{r, std::move(text)};
        const auto& om = ordered["messages"][i];
        if (calls) {
            if (!calls->is_array()) wrong_type(where + ".tool_calls", "an array", *calls);
            nlohmann::ordered_json tc = nlohmann::ordered_json::array();
            for (size_t k = 0; k < calls->size(); ++k) {
                const json& c = (*calls)[k];
                const std::string cw = where + ".tool_calls[" + std::to_string(k) + "]";
                const json* fn = c.is_object() ? json_field(c, "function") : nullptr;
                if (!fn || !fn->is_object() || !json_field(*fn, "name") || !(*fn)["name"].is_string())
                    fail(cw, cw + " must be {id, type: \"function\", function: {name, arguments}}");
                nlohmann::ordered_json call = om["tool_calls"][k];
                // Templates read the arguments as an object (Hugging Face's convention); the API sends a JSON string.
                if (call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
                    try {
                        call["function"]["arguments"] =
                            nlohmann::ordered_json::parse(call["function"]["arguments"].get<std::string>());
                    } catch (const nlohmann::json::exception&) {
                        fail(cw + ".function.arguments", cw + ".function.arguments is not JSON");
                    }
                }
                tc.push_back(std::move(call));
            }
            msg.extra["tool_calls"] = std::move(tc);
            if (!content) msg.extra["content"] = nullptr;
        }
        if (r == "tool") {
            for (const char* key : {"tool_call_id", "name"})
                if (om.contains(key) && om[key].is_string()) msg.extra[key] = om[key];
        }
        out.push_back(std::move(msg));
    }
    return out;
}

std::string parse_prompt(const json& body) {
    const json* v = json_field(body, "prompt");
    if (!v) fail("prompt", "'prompt' is required");
    if (v->is_string()) return v->get<std::string>();
    if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) return (*v)[0].get<std::string>();
    if (v->is_array()) fail("prompt", "'prompt' must be one string (arrays of several prompts or of token ids are not supported)");
    wrong_type("prompt", "a string", *v);
}

std::vector<std::string> parse_stop(const json& body) {
    const json* v = json_field(body, "stop");
    if (!v) return {};
    std::vector<std::string> out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        if (v->size() > 4) fail("stop", "'stop' has " + std::to_string(v->size()) + " strings: at most 4");
        for (const json& s : *v) {
            if (!s.is_string()) fail("stop", "'stop' must be a string or an array of strings");
            out.push_back(s.get<std::string>());
        }
    } else {
        wrong_type("stop", "a string or an array of strings", *v);
    }
    for (const std::string& s : out)
        if (s.empty()) fail("stop", "'stop' contains an empty string");
    return out;
}

const char* object_name(const CompletionRequest& r, bool chunk) {
    if (r.endpoint == Endpoint::Chat) return chunk ? "chat.completion.chunk" : "chat.completion";
    return "text_completion";
}

json usage_json(const Usage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json finish_value(const std::string& finish) { return finish.empty() ? json(nullptr) : json(finish); }

}  // namespace

void bad_request(const std::string& param, const std::string& message, const std::string& code) {
    throw ApiException{ApiError{400, message, "invalid_request_error", param, code}};
}

EmbeddingRequest parse_embedding_request(const std::string& body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        fail("", std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) fail("", "the request body must be a JSON object, got " + json_type_name(j));
    EmbeddingRequest r;
    if (const json* m = json_field(j, "model")) {
        if (!m->is_string()) wrong_type("model", "a string", *m);
        r.model = m->get<std::string>();
    }
    if (json_field(j, "dimensions")) fail("dimensions", "'dimensions' is not supported: embeddings have the model's width");
    if (const json* f = json_field(j, "encoding_format")) {
        if (!f->is_string() || (f->get<std::string>() != "float" && f->get<std::string>() != "base64"))
            fail("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        r.base64 = f->get<std::string>() == "base64";
    }
    const json* in = json_field(j, "input");
    if (!in) fail("input", "'input' is required: a string, or an array of strings or of token ids");
    const auto tokens_of = [](const json& a, const std::string& where) {
        std::vector<int32_t> ids;
        for (const json& t : a) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
                fail("input", "'" + where + "' must hold token ids (non-negative integers)");
            ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
        }
        if (ids.empty()) fail("input", "'" + where + "' is empty");
        return ids;
    };
    if (in->is_string()) {
        r.texts.push_back(in->get<std::string>());
    } else if (in->is_array() && !in->empty() && (*in)[0].is_number()) {
        r.token_inputs.push_back(tokens_of(*in, "input"));
    } else if (in->is_array() && !in->empty()) {
        for (size_t i = 0; i < in->size(); ++i) {
            const json& x = (*in)[i];
            const std::string where = "input[" + std::to_string(i) + "]";
            if (x.is_string() && (*in)[0].is_string()) r.texts.push_back(x.get<std::string>());
            else if (x.is_array() && (*in)[0].is_array()) r.token_inputs.push_back(tokens_of(x, where));
            else fail("input", "'input' must be all strings or all arrays of token ids; " + where + " is " + json_type_name(x));
        }
    } else {
        fail("input", "'input' must be a non-empty string or array, got " + (in->is_array() ? std::string("an empty array") : json_type_name(*in)));
    }
    for (const std::string& t : r.texts)
        if (t.empty()) fail("input", "'input' has an empty string: nothing to embed");
    if (r.size() > 256) fail("input", "'input' has " + std::to_string(r.size()) + " items: at most 256 per request");
    return r;
}

namespace {
std::string base64_floats(const std::vector<float>& v) {
    static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto* b = reinterpret_cast<const unsigned char*>(v.data());  // little-endian on every host Strata builds for
    const size_t n = v.size() * sizeof(float);
    std::string out;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t x = (static_cast<uint32_t>(b[i]) << 16) | (i + 1 < n ? static_cast<uint32_t>(b[i + 1]) << 8 : 0) |
                           (i + 2 < n ? b[i + 2] : 0);
        out += kAlphabet[(x >> 18) & 63];
        out += kAlphabet[(x >> 12) & 63];
        out += i + 1 < n ? kAlphabet[(x >> 6) & 63] : '=';
        out += i + 2 < n ? kAlphabet[x & 63] : '=';
    }
    return out;
}
}  // namespace

json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                        int64_t prompt_tokens) {
    json data = json::array();
    for (size_t i = 0; i < vectors.size(); ++i) {
        json e = {{"object", "embedding"}, {"index", i}};
        if (base64) e["embedding"] = base64_floats(vectors[i]);
        else e["embedding"] = vectors[i];
        data.push_back(std::move(e));
    }
    return {{"object", "list"},
            {"data", std::move(data)},
            {"model", model},
            {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

CompletionRequest parse_request(Endpoint endpoint, const std::string& body) {
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        // nlohmann's message names the byte and what it expected (or the
        // number that overflowed).
        fail("", std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) fail("", "the request body must be a JSON object, got " + json_type_name(j));
    refuse_unsupported(j);

    CompletionRequest r;
    r.endpoint = endpoint;
    if (const json* m = json_field(j, "model")) {
        if (!m->is_string()) wrong_type("model", "a string", *m);
        r.model = m->get<std::string>();
    }
    // Again in the client's key order, for what templates print as JSON (tools,
    // tool calls) and for the order of the keys a schema makes the model write.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
    if (endpoint == Endpoint::Chat) {
        r.messages = parse_messages(j, ordered);
        r.tools = parse_tools(ordered);
        r.parallel_tool_calls = boolean(j, "parallel_tool_calls", false);
        parse_tool_choice(j, r);
    } else {
        if (const json* t = json_field(j, "tools"); t && !(t->is_array() && t->empty()))
            fail("tools", "'tools' are for /v1/chat/completions");
        r.prompt = parse_prompt(j);
    }

    sched::SamplingParams& s = r.sampling;
    s.temperature = static_cast<float>(number_in(j, "temperature", 0.0, 2.0, 1.0));
    const double top_p = number_in(j, "top_p", 0.0, 1.0, 1.0);
    s.top_k = static_cast<int32_t>(integer_in(j, "top_k", 0, 1 << 20, 0));
    if (top_p == 0.0) {
        s.top_p = 1.0f;  // OpenAI accepts 0: only the most likely token
        s.top_k = 1;
    } else {
        s.top_p = static_cast<float>(top_p);
    }
    s.min_p = static_cast<float>(number_in(j, "min_p", 0.0, 1.0, 0.0));
    s.repeat_penalty = static_cast<float>(number_in(j, "repeat_penalty", 0.01, 10.0, 1.0));
    s.presence_penalty = static_cast<float>(number_in(j, "presence_penalty", -2.0, 2.0, 0.0));
    s.frequency_penalty = static_cast<float>(number_in(j, "frequency_penalty", -2.0, 2.0, 0.0));
    const int64_t max_tokens = integer_in(j, "max_tokens", 1, 1 << 24, 0);
    const int64_t max_completion = integer_in(j, "max_completion_tokens", 1, 1 << 24, 0);
    s.max_tokens = static_cast<int32_t>(max_completion > 0 ? max_completion : max_tokens);
    if (const json* seed = json_field(j, "seed")) {
        if (!seed->is_number_integer()) wrong_type("seed", "an integer", *seed);
        s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
        r.seed_given = true;
    }
    r.stop = parse_stop(j);
    r.stream = boolean(j, "stream", false);
    if (const json* so = json_field(j, "stream_options")) {
        if (!so->is_object()) wrong_type("stream_options", "an object", *so);
        r.include_usage = boolean(*so, "include_usage", false);
    }
    r.sampling.grammar = output_grammar(ordered, r);
    return r;
}

json completion_response(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                         const std::string& text, const std::string& finish, const Usage& usage, const json* tool_calls) {
    json choice = {{"index", 0}, {"finish_reason", finish_value(finish)}, {"logprobs", nullptr}};
    if (r.endpoint == Endpoint::Chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text}};
        if (tool_calls) {
            choice["message"]["tool_calls"] = *tool_calls;
            if (text.empty()) choice["message"]["content"] = nullptr;
        }
    } else {
        choice["text"] = text;
    }
    return json{{"id", id},           {"object", object_name(r, false)},       {"created", created},
                {"model", model},     {"choices", json::array({choice})},       {"usage", usage_json(usage)}};
}

json stream_chunk(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                  const std::string& text, const std::string& finish, bool first, const json* tool_calls) {
    json choice = {{"index", 0}, {"finish_reason", finish_value(finish)}, {"logprobs", nullptr}};
    if (r.endpoint == Endpoint::Chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || (first && finish.empty() && !tool_calls)) delta["content"] = text;
        if (tool_calls) delta["tool_calls"] = *tool_calls;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
    }
    return json{{"id", id}, {"object", object_name(r, true)}, {"created", created}, {"model", model},
                {"choices", json::array({choice})}};
}

json usage_chunk(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                 const Usage& usage) {
    return json{{"id", id},       {"object", object_name(r, true)}, {"created", created},
                {"model", model}, {"choices", json::array()},        {"usage", usage_json(usage)}};
}

json error_json(const ApiError& e) {
    return json{{"error",
                 {{"message", e.message},
                  {"type", e.type},
                  {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                  {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

bool keys_equal(const std::string& given, const std::string& expected) {
    // Every byte of the longer string is looked at whatever matches, and the
    // lengths fold into the result: no early exit for an attacker to time.
    const size_t n = std::max(given.size(), expected.size());
    unsigned diff = given.size() == expected.size() ? 0u : 1u;
    for (size_t i = 0; i < n; ++i) {
        const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
        const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
        diff |= static_cast<unsigned>(a ^ b);
    }
    return diff == 0 && !expected.empty();
}

}  // namespace strata::serve
