// Chat template detection and rendering; see chat_template.h. Detection order and
// the renderings follow llama.cpp's src/llama-chat.cpp (llm_chat_detect_template,
// llm_chat_apply_template) for the families Strata renders.
#include "chat/chat_template.h"
#include "chat/tool_prompt.h"

#include "chat/jinja/template.h"
#include "common/error.h"

#include <algorithm>
#include <string>
#include <utility>

namespace strata::chat {

namespace {

bool contains(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Leading and trailing ASCII whitespace removed (llama.cpp's trim; Jinja's |trim
// and .strip() on the texts that matter).
std::string trim(std::string_view s) {
    size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
}

// Families whose Jinja raises on anything but [system] user assistant user ...
bool needs_alternation(Family f) { return f == Family::Llama2 || f == Family::Mistral || f == Family::Gemma; }

constexpr Family kAllFamilies[] = {Family::ChatMl, Family::Llama2, Family::Llama3,  Family::Mistral, Family::Gemma,
                                   Family::Phi3,   Family::Zephyr, Family::Harmony, Family::Fallback};

// Harmony's system block: the gpt-oss Jinja's defaults, less the date line.
constexpr const char* kHarmonySystem =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\n"
    "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>";

std::string quoted(std::string_view s) {
    std::string out = "'";
    out += s;
    out += "'";
    return out;
}

void check_roles(const std::vector<Message>& messages, Family family, bool add_assistant_prefix) {
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant")
            throw Error("chat message " + std::to_string(i) + ": unknown role " + chat::quoted(role) +
                        " (expected 'system', 'user' or 'assistant')");
        if (role == "system" && i != 0)
            throw Error("chat message " + std::to_string(i) + ": role 'system' is only allowed as the first message");
    }
    if (!needs_alternation(family)) return;

    const size_t first = (!messages.empty() && messages[0].role == "system") ? 1 : 0;
    for (size_t i = first; i < messages.size(); ++i) {
        const char* expected = ((i - first) % 2 == 0) ? "user" : "assistant";
        if (messages[i].role != expected)
            throw Error("chat message " + std::to_string(i) + ": role " + chat::quoted(messages[i].role) + " where " +
                        family_name(family) + " needs '" + expected +
                        "' (after the optional system message, turns must alternate user/assistant, starting with user)");
    }
    if (add_assistant_prefix) {
        // The assistant turn to open must follow a user turn.
        const bool ends_with_user = messages.size() > first && messages.back().role == "user";
        if (!ends_with_user) {
            const std::string why = messages.empty() ? " (the conversation is empty)"
                                                     : " (the conversation ends with '" + messages.back().role + "')";
            throw Error("chat message " + std::to_string(messages.size()) +
                        ": the assistant's turn to generate must follow a 'user' message in " + family_name(family) + why);
        }
    }
}

}  // namespace

const char* family_name(Family f) {
    switch (f) {
        case Family::ChatMl: return "chatml";
        case Family::Llama2: return "llama2";
        case Family::Llama3: return "llama3";
        case Family::Mistral: return "mistral";
        case Family::Gemma: return "gemma";
        case Family::Phi3: return "phi3";
        case Family::Zephyr: return "zephyr";
        case Family::Harmony: return "harmony";
        case Family::Fallback: return "fallback";
    }
    return "fallback";
}

ReplyParts split_reply(std::string_view text) {
    ReplyParts p;
    constexpr std::string_view kMessage = "<|message|>";
    auto strip_tail = [](std::string_view s) {
        for (std::string_view end : {"<|return|>", "<|end|>", "<|call|>"})
            if (const size_t at = s.find(end); at != std::string_view::npos) s = s.substr(0, at);
        return s;
    };
    if (text.find("<|channel|>") != std::string_view::npos) {
        // Harmony: each message is <|channel|>NAME<|message|>TEXT (ended by <|end|>,
        // <|return|> or the end of the text), messages joined by <|start|>assistant.
        size_t at = 0;
        while ((at = text.find("<|channel|>", at)) != std::string_view::npos) {
            at += 11;
            const size_t body = text.find(kMessage, at);
            if (body == std::string_view::npos) break;  // the channel's name is still streaming
            const std::string_view channel = text.substr(at, body - at);
            const size_t next = text.find("<|channel|>", body);
            std::string_view content = text.substr(body + kMessage.size(),
                                                   next == std::string_view::npos ? std::string_view::npos
                                                                                  : next - body - kMessage.size());
            const bool closed = content.find("<|end|>") != std::string_view::npos ||
                                content.find("<|return|>") != std::string_view::npos || next != std::string_view::npos;
            content = strip_tail(content);
            if (const size_t s = content.rfind("<|start|>"); s != std::string_view::npos) content = content.substr(0, s);
            if (channel.rfind("final", 0) == 0) {
                p.answer += content;
                p.reasoning_open = false;
            } else {
                if (!p.reasoning.empty()) p.reasoning += "\n\n";
                p.reasoning += content;
                p.reasoning_open = !closed;
            }
            at = body;
        }
        return p;
    }
    // <think>...</think> at the start (DeepSeek-R1, Qwen3).
    size_t lead = 0;
    while (lead < text.size() && (text[lead] == ' ' || text[lead] == '\n')) ++lead;
    if (text.substr(lead, 7) == "<think>") {
        const size_t end = text.find("</think>", lead + 7);
        if (end == std::string_view::npos) {
            p.reasoning = std::string(text.substr(lead + 7));
            p.reasoning_open = true;
            return p;
        }
        p.reasoning = std::string(text.substr(lead + 7, end - lead - 7));
        std::string_view rest = text.substr(end + 8);
        while (!rest.empty() && (rest.front() == '\n' || rest.front() == ' ')) rest.remove_prefix(1);
        p.answer = std::string(rest);
        return p;
    }
    p.answer = std::string(text);
    return p;
}

ChatTemplate ChatTemplate::of(Family f, std::string bos, std::string eos) {
    ChatTemplate t;
    t.family_ = f;
    t.bos_ = std::move(bos);
    t.eos_ = std::move(eos);
    return t;
}

ChatTemplate ChatTemplate::detect(std::string_view jinja, std::string bos, std::string eos) {
    ChatTemplate t = of(Family::Fallback, std::move(bos), std::move(eos));
    auto has = [&](std::string_view marker) { return contains(jinja, marker); };

    // A family name forces that family (llama.cpp accepts its template names the same way).
    for (Family f : kAllFamilies) {
        if (jinja == family_name(f)) {
            t.family_ = f;
            return t;
        }
    }

    if (has("<|channel|>") && has("<|message|>")) {
        t.family_ = Family::Harmony;
    } else if (has("<|im_start|>")) {
        // Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) use <|im_start|> but are not ChatML.
        if (!has("<|im_sep|>") && !has("<end_of_utterance>")) t.family_ = Family::ChatMl;
    } else if (jinja.substr(0, 7) == "mistral" || has("[INST]")) {
        const bool mistral_markers = has("[SYSTEM_PROMPT]")            // v7
                                     || has("' [INST] ' + system_message")  // official v1
                                     || has("[AVAILABLE_TOOLS]");        // official v3, v3-tekken
        if (!mistral_markers && has("<<SYS>>")) {
            t.family_ = Family::Llama2;
            const bool strip = has("content.strip()");
            const bool bos_inside = has("bos_token + '[INST]");
            // llama.cpp takes strip over bos_inside; both together is Meta's own
            // template, rendered as its Jinja does.
            if (strip && bos_inside)
                t.llama2_ = Llama2Variant::Meta;
            else if (strip)
                t.llama2_ = Llama2Variant::SysStrip;
            else if (bos_inside)
                t.llama2_ = Llama2Variant::SysBos;
            else
                t.llama2_ = Llama2Variant::Sys;
        } else {
            t.family_ = Family::Mistral;
        }
    } else if (has("<|assistant|>") && has("<|end|>")) {
        t.family_ = Family::Phi3;
    } else if (has("[gMASK]")) {
        // ChatGLM 3/4 (they use <|user|> too): not rendered here.
    } else if (has("<|user|>") && has("<|assistant|>") &&
               (has("</s>") || has("eos_token") || has("<|endoftext|>"))) {
        t.family_ = Family::Zephyr;
    } else if (has("<start_of_turn>")) {
        t.family_ = Family::Gemma;
    } else if (has("<|start_header_id|>") && has("<|end_header_id|>")) {
        t.family_ = Family::Llama3;
    }
    return t;
}

namespace {

std::vector<Message> probe_conversation() {
    return {{"user", "Hello"}, {"assistant", "Hi there"}, {"user", "How are you?"}};
}

}  // namespace

ChatTemplate ChatTemplate::load(std::string_view jinja_text, std::string bos, std::string eos) {
    ChatTemplate t = detect(jinja_text, bos, eos);
    if (jinja_text.empty()) return t;
    try {
        t.jinja_ = std::make_shared<const jinja::Template>(std::string(jinja_text));
        t.render_jinja(probe_conversation(), true, nullptr);  // one that renders nothing fails here, not at the first message
        t.renders_tools_ = t.prints_tools();
        // Without tools of its own, a template gets the Hermes plain turns (tool_prompt.h).
        auto has = [&](std::string_view s) { return jinja_text.find(s) != std::string_view::npos; };
        // DeepSeek V3.1's template writes calls and results but no definitions: they go into
        // the system message as its model card says (R1's has no documented format: Hermes).
        t.deepseek_turns_ = !t.renders_tools_ && has("tool▁calls▁begin") && has("tool▁output▁begin") && !has("```json");
        if (t.deepseek_turns_) t.tool_syntax_ = ToolSyntax::DeepSeek;
        else if (!t.renders_tools_) t.tool_syntax_ = ToolSyntax::Hermes;
        else if (has("<minimax:tool_call>")) t.tool_syntax_ = ToolSyntax::MiniMax;
        else if (has("<|channel|>") && has("to=") && has("functions.")) t.tool_syntax_ = ToolSyntax::Harmony;
        else if (has("<arg_key>")) t.tool_syntax_ = ToolSyntax::Glm;
        else if (has("<function=") && has("<parameter=")) t.tool_syntax_ = ToolSyntax::QwenXml;
        else if (has("[TOOL_CALLS]")) t.tool_syntax_ = has("[ARGS]") ? ToolSyntax::MistralArgs : ToolSyntax::Mistral;
        else if (has("｜DSML｜")) t.tool_syntax_ = has("tool_calls>") ? ToolSyntax::DsmlV4 : ToolSyntax::Dsml;
        else if (has("<|tool_calls_section_begin|>")) t.tool_syntax_ = ToolSyntax::Kimi;
        else if (has("tool▁calls▁begin"))  // <｜tool▁calls▁begin｜>
            t.tool_syntax_ = has("```json") ? ToolSyntax::DeepSeekR1 : ToolSyntax::DeepSeek;
        else if (has("<tool_call>")) t.tool_syntax_ = ToolSyntax::Hermes;
        else if (has("<|start_header_id|>") && has("\"parameters\"")) t.tool_syntax_ = ToolSyntax::Llama3;
        else t.tool_syntax_ = ToolSyntax::Hermes;
    } catch (const Error& e) {
        t.jinja_.reset();
        t.jinja_error_ = e.what();
    }
    return t;
}

// Whether a function given as `tools` shows up in the rendered prompt.
bool ChatTemplate::prints_tools() const {
    const auto tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "strata_probe_function", "description": "d", )"
        R"("parameters": {"type": "object", "properties": {}}}}])");
    try {
        return render_jinja({{"user", "Hello"}}, true, &tools).find("strata_probe_function") != std::string::npos;
    } catch (const Error&) {
        return false;
    }
}

std::string ChatTemplate::describe() const {
    if (jinja_) return "the model's own template (Jinja)";
    std::string d = family_ == Family::Fallback ? std::string("a plain transcript (no template Strata can render)")
                                                : std::string(family_name(family_)) + " markers";
    if (!jinja_error_.empty()) d += "; the model's template failed: " + jinja_error_;
    return d;
}

std::string ChatTemplate::render_jinja(const std::vector<Message>& messages, bool add_generation_prompt,
                                       const nlohmann::ordered_json* tools) const {
    jinja::Array msgs;
    for (const Message& m : messages) {
        auto o = std::make_shared<jinja::Object>();
        o->items = {{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}};
        for (auto it = m.extra.begin(); it != m.extra.end(); ++it)
            o->set(jinja::key_of(jinja::Value(it.key())), jinja::Value::from_json(it.value()));
        msgs.push_back(jinja::Value(std::move(o)));
    }
    auto ctx = std::make_shared<jinja::Object>();
    ctx->items = {{"messages", jinja::Value(std::move(msgs))},
                  {"add_generation_prompt", jinja::Value(add_generation_prompt)},
                  {"bos_token", jinja::Value(bos_)},
                  {"eos_token", jinja::Value(eos_)}};
    if (tools && tools->is_array() && !tools->empty()) ctx->set("tools", jinja::Value::from_json(*tools));
    std::string out = jinja_->render(jinja::Value(std::move(ctx)));
    // The vocabulary adds BOS where it wants one (see the header): not twice.
    if (!bos_.empty() && out.rfind(bos_, 0) == 0) out.erase(0, bos_.size());
    return out;
}

std::string ChatTemplate::render(const std::vector<Message>& messages, bool add_assistant_prefix,
                                 const nlohmann::ordered_json* tools) const {
    const bool has_tools = tools && tools->is_array() && !tools->empty();
    const bool tool_turns = std::any_of(messages.begin(), messages.end(),
                                        [](const Message& m) { return m.role == "tool" || m.extra.contains("tool_calls"); });
    if (deepseek_turns_ && jinja_ && has_tools) return render_jinja(deepseek_system_tools(messages, *tools), add_assistant_prefix, nullptr);
    if (!renders_tools_ && !deepseek_turns_ && (has_tools || tool_turns))
        return render(inline_tools(messages, has_tools ? *tools : nlohmann::ordered_json::array()), add_assistant_prefix);
    if (jinja_) return render_jinja(messages, add_assistant_prefix, tools);
    check_roles(messages, family_, add_assistant_prefix);

    const std::string eos = eos_.empty() ? std::string("</s>") : eos_;
    const std::string bos = bos_.empty() ? std::string("<s>") : bos_;
    std::string out;

    switch (family_) {
        case Family::ChatMl:
            for (const Message& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
            if (add_assistant_prefix) out += "<|im_start|>assistant\n";
            break;

        case Family::Llama2: {
            const bool meta = llama2_ == Llama2Variant::Meta;
            const bool strip = meta || llama2_ == Llama2Variant::SysStrip;
            const bool bos_inside = meta || llama2_ == Llama2Variant::SysBos;
            bool inside_turn = false;
            for (const Message& m : messages) {
                const std::string content = strip ? trim(m.content) : m.content;
                if (!inside_turn) {
                    // The first turn opens without BOS (the tokenizer adds it).
                    out += (bos_inside && !out.empty()) ? bos + "[INST] " : std::string("[INST] ");
                    inside_turn = true;
                }
                if (m.role == "system") {
                    out += "<<SYS>>\n" + content + "\n<</SYS>>\n\n";
                } else if (m.role == "user") {
                    out += content + " [/INST]";
                } else {
                    if (meta) out += ' ';
                    out += content;
                    if (meta) out += ' ';
                    out += eos;
                    inside_turn = false;
                }
            }
            // A user turn already ends with the assistant's opening ("[/INST]").
            break;
        }

        case Family::Llama3:
            for (const Message& m : messages)
                out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
            if (add_assistant_prefix) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;

        case Family::Mistral: {
            // llama.cpp's "mistral-v3": [INST] S\n\nU[/INST] A</s>[INST] U2[/INST]
            bool inside_turn = false;
            for (const Message& m : messages) {
                if (!inside_turn) {
                    out += "[INST] ";
                    inside_turn = true;
                }
                if (m.role == "system") {
                    out += m.content + "\n\n";
                } else if (m.role == "user") {
                    out += m.content + "[/INST]";
                } else {
                    out += ' ';  // (appended piecewise: GCC 12 warns falsely on " " + std::string&&)
                    out += trim(m.content);
                    out += eos;
                    inside_turn = false;
                }
            }
            break;
        }

        case Family::Gemma: {
            // No system role in Gemma: the system prompt opens the first user turn
            // (nothing when it is blank, as in llama.cpp).
            bool user_turn_open = false;
            for (const Message& m : messages) {
                if (m.role == "system") {
                    const std::string system = trim(m.content);
                    if (!system.empty()) {
                        out += "<start_of_turn>user\n" + system + "\n\n";
                        user_turn_open = true;
                    }
                    continue;
                }
                if (user_turn_open)
                    user_turn_open = false;  // this is the first user message (alternation is checked)
                else
                    out += std::string("<start_of_turn>") + (m.role == "assistant" ? "model" : "user") + "\n";
                out += trim(m.content) + "<end_of_turn>\n";
            }
            if (add_assistant_prefix) out += "<start_of_turn>model\n";
            break;
        }

        case Family::Phi3:
            for (const Message& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
            if (add_assistant_prefix) out += "<|assistant|>\n";
            break;

        case Family::Zephyr:
            for (const Message& m : messages) out += "<|" + m.role + "|>\n" + m.content + eos + "\n";
            if (add_assistant_prefix) out += "<|assistant|>\n";
            break;

        case Family::Harmony:
            out += kHarmonySystem;
            for (const Message& m : messages) {
                if (m.role == "system")
                    out += "<|start|>developer<|message|># Instructions\n\n" + m.content + "<|end|>";
                else if (m.role == "user")
                    out += "<|start|>user<|message|>" + m.content + "<|end|>";
                else
                    out += "<|start|>assistant<|channel|>final<|message|>" + split_reply(m.content).answer + "<|end|>";
            }
            if (add_assistant_prefix) out += "<|start|>assistant";
            break;

        case Family::Fallback:
            for (const Message& m : messages) {
                if (m.role == "system")
                    out += "System: " + m.content + "\n\n";
                else if (m.role == "user")
                    out += "User: " + m.content + "\n";
                else
                    out += "Assistant: " + m.content + "\n";
            }
            if (add_assistant_prefix) out += "Assistant:";
            break;
    }
    return out;
}

std::vector<std::string> ChatTemplate::stop_strings() const {
    const std::string eos = eos_.empty() ? std::string("</s>") : eos_;
    if (jinja_ && family_ == Family::Fallback) return {};  // the vocabulary's end-of-generation tokens end the turn
    switch (family_) {
        case Family::ChatMl: return {"<|im_end|>"};
        case Family::Llama2: return {eos};
        case Family::Llama3: return {"<|eot_id|>"};
        case Family::Mistral: return {eos};
        case Family::Gemma: return {"<end_of_turn>"};
        case Family::Phi3: return {"<|end|>"};
        case Family::Zephyr: return {eos};
        case Family::Harmony: return {"<|return|>", "<|call|>"};
        case Family::Fallback: return {"\nUser:", "\nSystem:"};
    }
    return {};
}

}  // namespace strata::chat
