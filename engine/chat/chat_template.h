// Chat templates: a conversation (system prompt, user and assistant turns) ->
// the exact prompt text the model was trained on, chosen from the model's own
// `tokenizer.chat_template` metadata (a Jinja string in the GGUF).
//
// load() runs the model's own Jinja (chat/jinja: Hugging Face's rendering).
// Where a file has none, or one that does not parse or render, it falls back
// to the families below: like llama.cpp's llm_chat_detect_template, detect()
// recognises the template family by distinctive markers in the Jinja text and
// renders that family in C++. A model without a template, or with one no
// family matches, gets the documented fallback (a plain "User:/Assistant:"
// transcript) and `ChatTemplate::is_fallback()` says so, so the app can show it.
//
// Detection follows llama.cpp's llm_chat_detect_template (src/llama-chat.cpp),
// in its order, for the families below; the text may also be a family name
// ("chatml", "llama3", ...) to force one. Templates of families Strata does not
// render (Phi-4's <|im_sep|>, SmolVLM, ChatGLM, Command-R, DeepSeek, ...) give
// the fallback rather than a near miss. Rendering follows llama.cpp's
// llm_chat_apply_template for the same family, with two conventions:
//
//  * BOS. The prompt never starts with the BOS text, even for families whose
//    Jinja starts with {{ bos_token }} (Llama 2/3, Mistral, Gemma, Phi-3).
//    Tokenize the prompt with the vocabulary's own BOS rule and with control
//    tokens parsed: Vocab::encode(prompt, /*add_special=*/true,
//    /*parse_special=*/true). Then BOS appears exactly once (where the
//    vocabulary wants one) and spelled markers (<|im_start|>, </s>, ...) become
//    their tokens.
//  * EOS/BOS inside the text. Families that spell them between turns use the
//    `eos` / `bos` given to detect()/of(), or "</s>" / "<s>" when those are
//    empty: Llama 2 and Mistral end assistant turns with eos (some Llama 2
//    variants open later turns with bos), Zephyr ends every turn with eos.
//
// Prefix property (for KV-cache reuse): for every conversation `m` and k <= n,
// render(first k messages, false) is a prefix of render(m, any), and
// render(m ending with a user turn, true) is a prefix of
// render(m + assistant reply, false). A new turn only appends text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::chat {

namespace jinja {
class Template;
}

// What each family renders for [system S, user U1, assistant A1, user U2] with
// add_assistant_prefix (eos "</s>"; trimmed = leading/trailing whitespace removed):
enum class Family {
    // <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n
    // <|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n           (Qwen, Hermes, many fine-tunes)
    // No default system prompt is added (Qwen2's Jinja adds one when there is none; llama.cpp does not).
    ChatMl,
    // [INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]
    // Detected by [INST] with <<SYS>>. Variants by the Jinja text, contents
    // trimmed where it says "content.strip()":
    //  - "content.strip()" and "bos_token + '[INST]" (Meta's Llama-2-chat, and
    //    what of(Llama2) gives): Meta's format, as shown -- exactly what the
    //    Jinja renders, less the leading BOS;
    //  - otherwise llama.cpp's renderings: with "content.strip()" only
    //    "...U1 [/INST]A1</s>[INST] U2 [/INST]" (trimmed); with
    //    "bos_token + '[INST]" only "...U1 [/INST]A1</s><s>[INST] U2 [/INST]";
    //    else "...U1 [/INST]A1</s>[INST] U2 [/INST]".
    Llama2,
    // <|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>
    // <|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|>...<|start_header_id|>assistant<|end_header_id|>\n\n
    // (contents trimmed)
    Llama3,
    // [INST] S\n\nU1[/INST] A1</s>[INST] U2[/INST]
    // Detected by [INST] without <<SYS>> (or with [SYSTEM_PROMPT] / Mistral's v1
    // and v3 tool markers). One rendering for all Mistral templates: the v3 one
    // (Mistral-7B-Instruct-v0.3, Mistral-Large-2407), assistant contents trimmed,
    // system folded into the first user turn. Older v0.1/v0.2 templates
    // ("[INST] U [/INST]A</s>") and v7 ([SYSTEM_PROMPT]) differ in spaces and in
    // how the system prompt is marked; they get this rendering too.
    Mistral,
    // <start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n
    // <start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n
    // (contents trimmed; system folded into the first user turn)
    Gemma,
    // <|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n
    // Detected by <|assistant|> with <|end|>.
    Phi3,
    // <|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n
    // Detected by <|user|> and <|assistant|> with an end-of-turn marker (</s>,
    // eos_token or <|endoftext|>) and without <|end|> (that is Phi-3) or [gMASK]
    // (ChatGLM). llama.cpp differs here: it recognises Zephyr only by <|endoftext|>
    // and takes other <|user|>/<|assistant|> templates for Falcon 3 (with a literal
    // </s>) or GLM-Edge, so zephyr-7b-beta's own template (eos_token) is Zephyr
    // here; <|user|>/<|assistant|> without any end marker (GLM-Edge) is the fallback.
    Zephyr,
    // gpt-oss's harmony format (OpenAI's published description):
    // <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\n
    // Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>
    // <|start|>developer<|message|># Instructions\n\nS<|end|><|start|>user<|message|>U1<|end|>
    // <|start|>assistant<|channel|>final<|message|>A1<|end|><|start|>user<|message|>U2<|end|><|start|>assistant
    // Detected by <|channel|> with <|message|>. The system block is always there
    // (the Jinja's defaults, without its date line, which would change the
    // prompt every day); the system prompt is the developer message. An earlier
    // answer is rendered as its final channel alone (split_reply), as the Jinja
    // drops the reasoning of finished turns. The model writes
    // <|channel|>analysis<|message|>reasoning<|end|><|start|>assistant<|channel|>final<|message|>answer<|return|>.
    Harmony,
    // System: S\n\nUser: U1\nAssistant: A1\nUser: U2\nAssistant:
    // for models without a template or with one no family matches.
    Fallback,
};

const char* family_name(Family f);   // "chatml", "llama2", ... "fallback"

struct Message {
    std::string role;     // "system", "user" or "assistant" ("tool" with a Jinja template)
    std::string content;
    // More fields of the message for a Jinja template (OpenAI's tool_calls,
    // tool_call_id, name, reasoning_content; "content": null to say none),
    // in their order. Empty for plain turns; the marker families refuse it.
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// A reply split into the model's reasoning and its answer: harmony's
// analysis and final channels, or a <think>...</think> block at the start
// (DeepSeek-R1, Qwen3). Text without either is all answer. While a reply
// streams, `reasoning_open` says the reasoning has not ended yet. Structure
// tokens (<|start|>assistant, <|end|>, <|return|>) are not in either part.
struct ReplyParts {
    std::string reasoning;
    std::string answer;
    bool reasoning_open = false;
};
ReplyParts split_reply(std::string_view text);

class ChatTemplate {
public:
    // The model's own template: its Jinja (tokenizer.chat_template) run by
    // chat/jinja as Hugging Face renders it, where it parses and renders a
    // plain conversation; else detect()'s marker family, with jinja_error()
    // saying why. The family is detected either way (stop strings).
    static ChatTemplate load(std::string_view jinja, std::string bos = {}, std::string eos = {});
    // Detects the family from the GGUF's tokenizer.chat_template text (may be empty).
    // `bos` / `eos` are the vocabulary's BOS/EOS token texts (e.g. "<s>", "</s>"),
    // used by families whose prompt spells them out.
    static ChatTemplate detect(std::string_view jinja, std::string bos = {}, std::string eos = {});
    static ChatTemplate of(Family f, std::string bos = {}, std::string eos = {});

    Family family() const { return family_; }
    // Neither the model's Jinja nor a recognised family: the plain transcript.
    bool is_fallback() const { return family_ == Family::Fallback && !jinja_; }
    // The model's Jinja renders the prompts (load()).
    bool uses_jinja() const { return static_cast<bool>(jinja_); }
    // Why load() fell back to the markers (the template's own error, naming
    // its line), or empty.
    const std::string& jinja_error() const { return jinja_error_; }
    // One line for logs and the UI: "the model's template (Jinja)", "chatml
    // markers (...)".
    std::string describe() const;

    // The prompt for `messages`. With the model's Jinja: what it renders
    // (messages, add_generation_prompt, bos_token, eos_token; a leading BOS
    // text dropped, as below), its raise_exception and errors thrown as
    // strata::Error naming the template line. Otherwise the family's:
    // The prompt for `messages` (roles checked: throws strata::Error naming the
    // bad role or a conversation that does not alternate where the family needs it).
    // With add_assistant_prefix, ends with the opening of the assistant's turn,
    // ready for generation.
    //
    // Checked, with the message index and role in the message: every role is
    // "system", "user" or "assistant"; "system" only at index 0. Llama 2, Mistral
    // and Gemma also need the turns after the system prompt to alternate user,
    // assistant, user, ... starting with user, and (with add_assistant_prefix) the
    // conversation to end with a user turn. Without add_assistant_prefix an empty
    // conversation renders as "".
    //
    // Without add_assistant_prefix the text ends where the last message ends:
    // after an assistant message that is its closed turn (the text to keep in the
    // KV cache after a reply). In the [INST] families the user turn itself ends
    // with the assistant's opening ("[/INST]"), so there the flag changes nothing.
    //
    // `tools` (OpenAI's function definitions) go to a Jinja template as
    // `tools`; for a template that has no place for them (renders_tools()),
    // they and the tool turns are rewritten into plain turns first, except
    // where the template writes DeepSeek V3.1's call and result turns: then
    // only the definitions are added, to the system message, in its format.
    std::string render(const std::vector<Message>& messages, bool add_assistant_prefix = true,
                       const nlohmann::ordered_json* tools = nullptr) const;

    // How the model's template asks for tool calls (what the server parses
    // and, for tool_choice "required", constrains the reply to):
    //   Hermes   <tool_call>{"name": N, "arguments": {...}}</tool_call>  (Qwen 2.5/3, Hermes;
    //            also the plain-turn format for templates without tools, and what is
    //            used for templates whose own format is none of these)
    //   QwenXml  <tool_call><function=N><parameter=K>V</parameter></function></tool_call>
    //            (Qwen3-Coder, Qwen3.5/3.6, Nemotron 3, Seed-OSS)
    //   Glm      <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>  (GLM-4.5..4.7)
    //   MiniMax  <minimax:tool_call><invoke name="N"><parameter name="K">V</parameter></invoke>...
    //   Harmony  (gpt-oss) to=functions.N<|channel|>commentary json<|message|>{...}<|call|>
    //   Llama3   the reply is {"name": N, "parameters": {...}}
    //   Mistral  [TOOL_CALLS][{"name": N, "arguments": {...}, "id": "..."}]  (Nemo)
    //   MistralArgs  [TOOL_CALLS]N[ARGS]{...}  (Small 3.2, Devstral, Ministral 3)
    //   DeepSeek     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>... (V3.1+)
    //   DeepSeekR1   ...<｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>...
    //   Dsml     <｜DSML｜function_calls><｜DSML｜invoke name="N"><｜DSML｜parameter name="K" string="true|false">V
    //            </｜DSML｜parameter></｜DSML｜invoke>...</｜DSML｜function_calls>  (DeepSeek V3.2)
    //   DsmlV4   the same in <｜DSML｜tool_calls> (DeepSeek V4)
    //   Kimi     <|tool_calls_section_begin|><|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>{...}
    //            <|tool_call_end|>...<|tool_calls_section_end|>  (Kimi-K2)
    // Mistral's, DeepSeek's and Kimi's markers are control tokens: a request
    // with tools renders them (serve/tool_calls.h special_markers).
    enum class ToolSyntax {
        Hermes, QwenXml, Glm, MiniMax, Harmony, Llama3, Mistral, MistralArgs, DeepSeek, DeepSeekR1, Dsml, DsmlV4, Kimi
    };
    ToolSyntax tool_syntax() const { return tool_syntax_; }
    // Whether the template itself renders `tools` (a Jinja template that
    // prints the definitions it is given). Where it does not, render() writes
    // tools and tool turns into plain turns (chat/tool_prompt.h) instead.
    bool renders_tools() const { return renders_tools_; }

    // Strings that end an assistant turn in this family (e.g. "<|im_end|>"),
    // to use as stop strings in addition to the vocabulary's end-of-generation tokens.
    // ChatML {"<|im_end|>"}, Llama 3 {"<|eot_id|>"}, Gemma {"<end_of_turn>"},
    // Phi-3 {"<|end|>"}, Llama 2 / Mistral / Zephyr {eos}, harmony {"<|return|>", "<|call|>"}
    // (<|end|> closes the reasoning, not the turn), fallback {"\nUser:", "\nSystem:"}.
    std::vector<std::string> stop_strings() const;

private:
    // The Llama 2 variants (see Family::Llama2): Meta's, and llama.cpp's three.
    enum class Llama2Variant { Meta, Sys, SysBos, SysStrip };

    bool prints_tools() const;
    std::string render_jinja(const std::vector<Message>& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json* tools) const;
    ToolSyntax tool_syntax_ = ToolSyntax::Hermes;
    bool renders_tools_ = false;
    // It writes call and result turns in DeepSeek V3.1's format but not the
    // definitions: those go into the system message (tool_prompt.h).
    bool deepseek_turns_ = false;

    Family family_ = Family::Fallback;
    Llama2Variant llama2_ = Llama2Variant::Meta;
    std::string bos_, eos_;
    std::shared_ptr<const jinja::Template> jinja_;
    std::string jinja_error_;
};

}  // namespace strata::chat
