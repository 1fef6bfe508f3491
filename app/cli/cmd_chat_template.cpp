// strata-cli chat-template: a conversation through a model's own Jinja chat
// template, printed exactly as Hugging Face's apply_chat_template renders it
// (for users checking a file's prompt format, and for the tests against
// jinja2's renderings).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "chat/jinja/template.h"
#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace strata::cli {

namespace {

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
    const std::string text = read_text_file(path, what);
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": the " + what + " file is not JSON: " + e.what());
    }
}

bool ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

int cmd_chat_template(int argc, char** argv) {
    Args a("chat-template", "MODEL.gguf|TEMPLATE.jinja --messages FILE.json [--tools FILE.json] [--no-generation-prompt]",
           "Renders a conversation with a model's own chat template (tokenizer.chat_template, or a .jinja file) and\n"
           "prints the prompt exactly as Hugging Face's apply_chat_template would (its leading BOS text included).\n"
           "FILE.json holds the messages: a list of {role, content, ...} objects, or an object with \"messages\".\n"
           "A template that does not parse or raises is an error naming its line and column.");
    a.positional("MODEL", "a GGUF model (its tokenizer.chat_template) or a Jinja template file");
    a.option("--messages", "", "FILE", "the conversation (JSON)");
    a.option("--tools", "", "FILE", "tool definitions (a JSON list of OpenAI {type, function} objects)");
    a.option("--context", "", "FILE", "more template variables (a JSON object: enable_thinking, date_string, ...)");
    a.flag("--no-generation-prompt", "end after the last message (add_generation_prompt false)");
    a.option("--bos", "", "TEXT", "bos_token for a .jinja file (a GGUF gives its vocabulary's)", "");
    a.option("--eos", "", "TEXT", "eos_token for a .jinja file (a GGUF gives its vocabulary's)", "");
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--messages")) throw UsageError("chat-template needs --messages FILE.json");

    const std::string path = a.pos("MODEL");
    std::string source, bos = a.str("--bos"), eos = a.str("--eos");
    if (ends_with(path, ".gguf")) {
        auto file = gguf::File::open(path);
        source = file->get_string_or("tokenizer.chat_template", "");
        if (source.empty()) throw Error(path + " has no tokenizer.chat_template");
        auto vocab = tok::Vocab::from_gguf(*file);
        if (!a.has("--bos") && vocab->bos() >= 0) bos = vocab->token_text(vocab->bos());
        if (!a.has("--eos") && vocab->eos() >= 0) eos = vocab->token_text(vocab->eos());
    } else {
        source = read_text_file(path, "template");
    }
    nlohmann::ordered_json messages = read_json(a.str("--messages"), "messages");
    if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
    if (!messages.is_array()) throw Error(a.str("--messages") + ": expected a list of messages");

    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    if (a.has("--context")) {
        ctx = read_json(a.str("--context"), "context");
        if (!ctx.is_object()) throw Error(a.str("--context") + ": expected a JSON object of variables");
    }
    ctx["messages"] = messages;
    if (a.has("--tools")) ctx["tools"] = read_json(a.str("--tools"), "tools");
    ctx["add_generation_prompt"] = !a.flag_set("--no-generation-prompt");
    ctx["bos_token"] = bos;
    ctx["eos_token"] = eos;

    const chat::jinja::Template t(source);
    const std::string out = t.render(chat::jinja::Value::from_json(ctx));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace strata::cli
