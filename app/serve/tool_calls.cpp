#include "serve/tool_calls.h"

#include <optional>

namespace strata::serve {

namespace {

using ojson = nlohmann::ordered_json;

struct Markers {
    std::string_view open, close;
};
Markers markers(ToolSyntax s) {
    if (s == ToolSyntax::MiniMax) return {"<minimax:tool_call>", "</minimax:tool_call>"};
    if (s == ToolSyntax::Harmony) return {"to=functions.", "<|call|>"};  // <|call|> ends the turn: rarely in the text
    // Each call opens with the marker and runs to the next one (no close).
    if (s == ToolSyntax::Mistral || s == ToolSyntax::MistralArgs) return {"[TOOL_CALLS]", ""};
    if (s == ToolSyntax::DeepSeek || s == ToolSyntax::DeepSeekR1) return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"};
    if (s == ToolSyntax::Llama3) return {"{", ""};  // the whole reply, when it begins with it
    if (s == ToolSyntax::Dsml) return {"<｜DSML｜function_calls>", "</｜DSML｜function_calls>"};
    if (s == ToolSyntax::DsmlV4) return {"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"};
    if (s == ToolSyntax::Kimi) return {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"};
    return {"<tool_call>", "</tool_call>"};
}

std::string trim(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r\n");
    return std::string(s.substr(b, e - b + 1));
}

// The schema of function `fn`'s parameter `key` in the request's tools, or nullptr.
const ojson* parameter_schema(const ojson* tools, const std::string& fn, const std::string& key) {
    if (!tools) return nullptr;
    for (const auto& t : *tools) {
        const auto& f = t["function"];
        if (f.value("name", "") != fn || !f.contains("parameters")) continue;
        const auto& p = f["parameters"];
        if (p.is_object() && p.contains("properties") && p["properties"].contains(key)) return &p["properties"][key];
    }
    return nullptr;
}

// The length of the longest end of `text` that begins `marker` (not all of it).
size_t partial_tail(std::string_view text, std::string_view marker) {
    for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k)
        if (marker.substr(0, k) == text.substr(text.size() - k)) return k;
    return 0;
}

}  // namespace

bool is_string_schema(const ojson* s) {
    if (!s || !s->is_object()) return false;
    if (s->contains("type")) return (*s)["type"] == "string";
    if (s->contains("enum")) {
        for (const auto& v : (*s)["enum"])
            if (!v.is_string()) return false;
        return true;
    }
    return false;
}

namespace {

// The JSON value `text` spells, or nothing.
std::optional<ojson> parse_json(std::string_view text) {
    try {
        return ojson::parse(text);
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

// An XML argument's text as the JSON value it stands for.
ojson typed_value(const std::string& text, const ojson* schema) {
    if (is_string_schema(schema)) return text;
    if (auto v = parse_json(text)) return *v;
    if (text == "True" || text == "False") return text == "True";  // Python's str() of a bool
    if (text == "None") return nullptr;
    return text;
}

// The text between `open` and the next `close` at or after `from`; npos when absent.
size_t between(std::string_view s, size_t from, std::string_view open, std::string_view close, std::string_view* out,
               size_t* after) {
    const size_t a = s.find(open, from);
    if (a == std::string_view::npos) return std::string_view::npos;
    const size_t b = s.find(close, a + open.size());
    if (b == std::string_view::npos) return std::string_view::npos;
    *out = s.substr(a + open.size(), b - a - open.size());
    *after = b + close.size();
    return a;
}

// The first JSON object or array in `s` (after leading whitespace), by its
// brackets (strings' contents skipped); the whole of `s` when it is not one.
std::string_view json_prefix(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos || (s[b] != '{' && s[b] != '[')) return s;
    int depth = 0;
    bool in_string = false;
    for (size_t i = b; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return s.substr(b, i + 1 - b);
        }
    }
    return s;
}

// Where json_prefix(s) ends in s (0 when s does not begin with an object or array).
size_t json_end(std::string_view s) {
    const std::string_view j = json_prefix(s);
    return j.size() == s.size() && j.data() == s.data() ? 0 : size_t(j.data() - s.data()) + j.size();
}

bool add_call(std::vector<ToolCall>& calls, const std::string& id_prefix, std::string name, const ojson& args) {
    if (name.empty()) return false;
    ToolCall c;
    c.id = id_prefix + std::to_string(calls.size());
    c.name = std::move(name);
    c.arguments = args.is_string() ? args.get<std::string>() : args.dump();
    calls.push_back(std::move(c));
    return true;
}

bool parse_hermes(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    const std::optional<ojson> j_json = parse_json(trim(body));
    if (!j_json) return false;
    const ojson& j = *j_json;
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    return add_call(calls, id_prefix, j["name"].get<std::string>(), j.contains("arguments") ? j["arguments"] : ojson::object());
}

// <function=N> <parameter=K>\nV\n</parameter> ... </function>
bool parse_qwen_xml(std::string_view body, const std::string& id_prefix, const ojson* tools, std::vector<ToolCall>& calls) {
    const size_t f = body.find("<function=");
    if (f == std::string_view::npos) return false;
    const size_t gt = body.find('>', f);
    if (gt == std::string_view::npos) return false;
    const std::string name = trim(body.substr(f + 10, gt - f - 10));
    ojson args = ojson::object();
    std::string_view v;
    size_t pos = gt + 1, after = 0;
    while (between(body, pos, "<parameter=", "</parameter>", &v, &after) != std::string_view::npos) {
        const size_t k = v.find('>');
        if (k == std::string_view::npos) return false;
        const std::string key = trim(v.substr(0, k));
        std::string_view value = v.substr(k + 1);
        if (!value.empty() && value.front() == '\n') value.remove_prefix(1);  // the template's own line breaks
        if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
        args[key] = typed_value(std::string(value), parameter_schema(tools, name, key));
        pos = after;
    }
    return add_call(calls, id_prefix, name, args);
}

// N <arg_key>K</arg_key> <arg_value>V</arg_value> ...
bool parse_glm(std::string_view body, const std::string& id_prefix, const ojson* tools, std::vector<ToolCall>& calls) {
    const size_t first = body.find("<arg_key>");
    const std::string name = trim(body.substr(0, first));
    ojson args = ojson::object();
    std::string_view k, v;
    size_t pos = 0, after = 0;
    while (between(body, pos, "<arg_key>", "</arg_key>", &k, &after) != std::string_view::npos) {
        if (between(body, after, "<arg_value>", "</arg_value>", &v, &after) == std::string_view::npos) return false;
        const std::string key = trim(k);
        args[key] = typed_value(std::string(v), parameter_schema(tools, name, key));
        pos = after;
    }
    return add_call(calls, id_prefix, name, args);
}

// <Pinvoke name="N"> <Pparameter name="K"[ string="true|false"]>V</Pparameter> ... </Pinvoke>, several per
// block; P is "" for MiniMax-M2, "｜DSML｜" for DeepSeek V3.2/V4. string="true" is the text itself, "false"
// its JSON; without the attribute the value is typed by the function's schema.
bool parse_invokes(std::string_view body, const std::string& p, const std::string& id_prefix, const ojson* tools,
                   std::vector<ToolCall>& calls) {
    const std::string inv_open = "<" + p + "invoke name=\"", inv_close = "</" + p + "invoke>";
    const std::string par_open = "<" + p + "parameter name=\"", par_close = "</" + p + "parameter>";
    std::string_view inv;
    size_t pos = 0, after = 0;
    bool any = false;
    while (between(body, pos, inv_open, inv_close, &inv, &after) != std::string_view::npos) {
        pos = after;
        const size_t q = inv.find("\">");
        if (q == std::string_view::npos) return false;
        const std::string name(inv.substr(0, q));
        ojson args = ojson::object();
        std::string_view v;
        size_t ppos = q + 2, pafter = 0;
        while (between(inv, ppos, par_open, par_close, &v, &pafter) != std::string_view::npos) {
            ppos = pafter;
            // The key ends at the quote before '>' or an attribute.
            size_t e = v.find('"');
            while (e != std::string_view::npos && e + 1 < v.size() && v[e + 1] != '>' && v[e + 1] != ' ') e = v.find('"', e + 1);
            const size_t gt = e == std::string_view::npos ? e : v.find('>', e);
            if (gt == std::string_view::npos) return false;
            const std::string key(v.substr(0, e));
            const std::string_view attrs = v.substr(e + 1, gt - e - 1);
            const std::string value(v.substr(gt + 1));
            const std::optional<ojson> j = attrs.find("string=\"false\"") != std::string_view::npos ? parse_json(value) : std::nullopt;
            if (attrs.find("string=\"true\"") != std::string_view::npos) args[key] = value;
            else args[key] = j ? *j : typed_value(value, parameter_schema(tools, name, key));
        }
        if (!add_call(calls, id_prefix, name, args)) return false;
        any = true;
    }
    return any;
}

// <|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>{...}<|tool_call_end|>, several per section.
bool parse_kimi(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";
    std::string_view c;
    size_t pos = 0, after = 0;
    bool any = false;
    while (between(body, pos, "<|tool_call_begin|>", "<|tool_call_end|>", &c, &after) != std::string_view::npos) {
        pos = after;
        const size_t sep = c.find(kArgs);
        if (sep == std::string_view::npos) return false;
        std::string name = trim(c.substr(0, sep));  // functions.NAME:INDEX
        if (name.rfind("functions.", 0) == 0) name.erase(0, 10);
        if (const size_t colon = name.rfind(':'); colon != std::string::npos &&
                                                  name.find_first_not_of("0123456789", colon + 1) == std::string::npos)
            name.erase(colon);
        const std::optional<ojson> a = parse_json(trim(c.substr(sep + kArgs.size())));
        if (!a || !add_call(calls, id_prefix, name, *a)) return false;
        any = true;
    }
    return any;
}

// After "to=functions.": N, then (<|channel|>commentary [<|constrain|>]json) <|message|>ARGS.
bool parse_harmony(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    size_t n = 0;
    while (n < body.size() && body[n] != ' ' && body[n] != '<' && body[n] != '\n') ++n;
    const size_t msg = body.find("<|message|>", n);
    if (n == 0 || msg == std::string_view::npos) return false;
    const std::optional<ojson> a_json = parse_json(json_prefix(body.substr(msg + 11)));  // up to its closing brace: <|call|> or <|end|> follows
    if (!a_json) return false;
    const ojson& a = *a_json;
    return add_call(calls, id_prefix, std::string(body.substr(0, n)), a);
}

// [{"name": N, "arguments": {...}, "id": ...}, ...]
bool parse_mistral(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    const std::optional<ojson> a_json = parse_json(json_prefix(body));
    if (!a_json) return false;
    const ojson& a = *a_json;
    if (!a.is_array() || a.empty()) return false;
    for (const auto& c : a) {
        if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) return false;
        add_call(calls, id_prefix, c["name"].get<std::string>(), c.contains("arguments") ? c["arguments"] : ojson::object());
    }
    return true;
}

// N[CALL_ID]id[ARGS]{...} or N[ARGS]{...}
bool parse_mistral_args(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    const size_t args = body.find("[ARGS]");
    if (args == std::string_view::npos) return false;
    const std::string name = trim(body.substr(0, std::min(args, body.find("[CALL_ID]"))));
    const std::optional<ojson> a_json = parse_json(json_prefix(body.substr(args + 6)));
    if (!a_json) return false;
    const ojson& a = *a_json;
    return add_call(calls, id_prefix, name, a);
}

// {"name": N, "parameters": {...}} (or "arguments")
bool parse_llama3(std::string_view body, const std::string& id_prefix, std::vector<ToolCall>& calls) {
    std::string object(1, '{');  // (not "{" + ...: g++ 12 warns wrongly about that)
    object.append(body);
    const std::optional<ojson> j_json = parse_json(json_prefix(object));
    if (!j_json) return false;
    const ojson& j = *j_json;
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    const ojson args = j.contains("parameters") ? j["parameters"] : j.contains("arguments") ? j["arguments"] : ojson::object();
    return add_call(calls, id_prefix, j["name"].get<std::string>(), args);
}

// <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1), or
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜> (R1), several per block
bool parse_deepseek(std::string_view body, const std::string& id_prefix, bool r1, std::vector<ToolCall>& calls) {
    constexpr std::string_view kSep = "<｜tool▁sep｜>";
    std::string_view c;
    size_t pos = 0, after = 0;
    bool any = false;
    while (between(body, pos, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", &c, &after) != std::string_view::npos) {
        pos = after;
        const size_t sep = c.find(kSep);
        if (sep == std::string_view::npos) return false;
        std::string_view rest = c.substr(sep + kSep.size());
        std::string name;
        std::string_view args = rest;
        const size_t fence = r1 ? rest.find("```json") : std::string_view::npos;
        if (fence != std::string_view::npos) {  // R1: the name after the separator, the arguments fenced
            name = trim(rest.substr(0, fence));
            args = rest.substr(fence + 7);
            if (const size_t close = args.rfind("```"); close != std::string_view::npos) args = args.substr(0, close);
        } else {
            name = trim(c.substr(0, sep));
        }
        const std::optional<ojson> a_json = parse_json(trim(args));
        if (!a_json) return false;
        const ojson& a = *a_json;
        if (!add_call(calls, id_prefix, name, a)) return false;
        any = true;
    }
    return any;
}

// Harmony's text before a call's message header ("<|start|>assistant", "<|channel|>commentary ") is markup.
size_t harmony_message_start(std::string_view text, size_t marker) {
    // The earliest <|start|> or <|channel|> with no message begun between it and the marker.
    size_t at = marker;
    for (std::string_view tag : {std::string_view("<|start|>"), std::string_view("<|channel|>")}) {
        const size_t p = text.rfind(tag, marker);
        if (p != std::string_view::npos && p < at && text.substr(p, marker - p).find("<|message|>") == std::string_view::npos)
            at = p;
    }
    return at;
}

}  // namespace

ParsedReply parse_tool_calls(std::string_view text, const std::string& id_prefix, ToolSyntax syntax, const ojson* tools) {
    const Markers m = markers(syntax);
    ParsedReply r;
    size_t first = text.find(m.open);
    // Llama 3: a call is the whole reply, not a marker within it.
    if (syntax == ToolSyntax::Llama3 && first != std::string_view::npos && !trim(text.substr(0, first)).empty())
        first = std::string_view::npos;
    if (first == std::string_view::npos) {
        r.content = std::string(text);
        return r;
    }
    size_t p = first;
    while (p != std::string_view::npos) {
        const size_t body = p + m.open.size();
        size_t end, next;
        bool closed;
        if (syntax == ToolSyntax::Llama3) {
            end = text.size();
            closed = false;
            next = std::string_view::npos;
        } else if (m.close.empty()) {  // runs to the next marker
            end = text.find(m.open, body);
            closed = end != std::string_view::npos;
            if (!closed) end = text.size();
            next = end;
        } else {
            // Hermes: after the JSON object, so a string in it may hold the close tag.
            const size_t from = syntax == ToolSyntax::Hermes ? body + json_end(text.substr(body)) : body;
            end = text.find(m.close, from);
            closed = end != std::string_view::npos;
            if (!closed) end = text.size();  // a reply cut at max_tokens or the end-of-turn token before the close
            next = closed ? text.find(m.open, end + m.close.size()) : std::string_view::npos;
        }
        const std::string_view block = text.substr(body, end - body);
        bool ok = false;
        switch (syntax) {
            case ToolSyntax::Hermes: ok = parse_hermes(block, id_prefix, r.calls); break;
            case ToolSyntax::QwenXml: ok = parse_qwen_xml(block, id_prefix, tools, r.calls); break;
            case ToolSyntax::Glm: ok = parse_glm(block, id_prefix, tools, r.calls); break;
            case ToolSyntax::MiniMax: ok = parse_invokes(block, "", id_prefix, tools, r.calls); break;
            case ToolSyntax::Harmony: ok = parse_harmony(block, id_prefix, r.calls); break;
            case ToolSyntax::Llama3: ok = parse_llama3(block, id_prefix, r.calls); break;
            case ToolSyntax::Mistral: ok = parse_mistral(block, id_prefix, r.calls); break;
            case ToolSyntax::MistralArgs: ok = parse_mistral_args(block, id_prefix, r.calls); break;
            case ToolSyntax::DeepSeek:
            case ToolSyntax::DeepSeekR1: ok = parse_deepseek(block, id_prefix, syntax == ToolSyntax::DeepSeekR1, r.calls); break;
            case ToolSyntax::Dsml:
            case ToolSyntax::DsmlV4: ok = parse_invokes(block, "｜DSML｜", id_prefix, tools, r.calls); break;
            case ToolSyntax::Kimi: ok = parse_kimi(block, id_prefix, r.calls); break;
        }
        if (!ok) return ParsedReply{std::string(text), {}};
        if (!closed) break;
        p = next;
        // Only whitespace may separate calls; anything else after them is dropped with the markup.
    }
    r.content = trim(text.substr(0, syntax == ToolSyntax::Harmony ? harmony_message_start(text, first) : first));
    return r;
}

std::vector<std::string_view> special_markers(ToolSyntax syntax) {
    switch (syntax) {
        case ToolSyntax::Mistral:
        case ToolSyntax::MistralArgs: return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
        case ToolSyntax::DeepSeek:
        case ToolSyntax::DeepSeekR1:
            return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                    "<｜tool▁sep｜>"};
        case ToolSyntax::Kimi:
            return {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                    "<|tool_call_argument_begin|>", "<|tool_call_end|>"};
        default: return {};
    }
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
    nlohmann::json a = nlohmann::json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        nlohmann::json c = {{"id", calls[i].id},
                            {"type", "function"},
                            {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
        if (with_index) c["index"] = i;
        a.push_back(std::move(c));
    }
    return a;
}

ToolCallStream::ToolCallStream(ToolSyntax syntax, const ojson* tools)
    : syntax_(syntax), tools_(tools), open_(markers(syntax).open) {}

std::string ToolCallStream::feed(std::string_view piece) {
    pending_ += piece;
    if (in_calls_) return {};
    if (syntax_ == ToolSyntax::Llama3) {  // a call is the whole reply: its first character decides
        if (!text_only_) {
            const size_t c = pending_.find_first_not_of(" \t\r\n");
            if (c == std::string::npos) return {};
            if (pending_[c] == '{') {
                in_calls_ = true;
                return {};
            }
            text_only_ = true;
        }
        sent_ += pending_;
        std::string out;
        out.swap(pending_);
        return out;
    }
    const size_t at = pending_.find(open_);
    if (at != std::string::npos) {
        in_calls_ = true;
        // Harmony: the call's message header before the marker is markup (held back below).
        const size_t cut = syntax_ == ToolSyntax::Harmony ? harmony_message_start(pending_, at) : at;
        std::string out = pending_.substr(0, cut);
        pending_.erase(0, cut);
        sent_ += out;
        return out;
    }
    // Keep back a tail that could begin the marker (harmony: also an open
    // message header, which may turn out to be a call's).
    size_t keep = partial_tail(pending_, open_);
    if (syntax_ == ToolSyntax::Harmony) {
        keep = std::max(keep, pending_.size() - harmony_message_start(pending_, pending_.size()));
        for (std::string_view tag : {std::string_view("<|start|>"), std::string_view("<|channel|>")})
            keep = std::max(keep, partial_tail(pending_, tag));
    }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    sent_ += out;
    return out;
}

ParsedReply ToolCallStream::finish(const std::string& id_prefix) {
    if (!in_calls_) {
        ParsedReply r;
        r.content = pending_;
        pending_.clear();
        return r;
    }
    ParsedReply r = parse_tool_calls(pending_, id_prefix, syntax_, tools_);
    if (r.calls.empty()) r.content = pending_;  // not a call after all: the rest is text
    else r.content.clear();                     // the text before the marker went out already
    pending_.clear();
    return r;
}

}  // namespace strata::serve
