// A conversation's prompt tokens, prepared the same way for every front end
// (the app's chat, the HTTP server's /v1/chat/completions, strata-cli run
// --chat): the template renders the messages, the vocabulary tokenizes them
// with its own BOS rule and control tokens parsed (chat_template.h), one BOS
// is kept where a template also spells it, and the prompt is checked against
// the context. The same conversation therefore gives the same tokens through
// the app and through HTTP.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/error.h"

namespace strata::tok {
class Vocab;
}

namespace strata::chat {

struct PromptPolicy {
    int64_t n_ctx = 0;  // the context the prompt and its answer share
    // A conversation that goes on (the app): while the prompt and
    // `answer_room` tokens do not fit, the oldest exchange after the leading
    // system messages is left out (never the last user turn). An API request
    // is refused instead (OpenAI's semantics: nothing dropped silently).
    bool drop_oldest = false;
    int64_t answer_room = 1;
};

struct Prompt {
    std::vector<int32_t> tokens;
    std::vector<std::string> stop;  // the template's stop strings
    int dropped_messages = 0;       // left out to fit (drop_oldest)
};

// Why a conversation has no prompt; `what()` says it in a sentence.
class PromptError : public Error {
public:
    enum class Kind { Template, Empty, TooLong };
    PromptError(Kind kind, const std::string& what, int64_t n_tokens = 0, int64_t n_ctx = 0)
        : Error(what), kind_(kind), n_tokens_(n_tokens), n_ctx_(n_ctx) {}
    Kind kind() const { return kind_; }
    int64_t n_tokens() const { return n_tokens_; }  // TooLong: the prompt's length
    int64_t n_ctx() const { return n_ctx_; }

private:
    Kind kind_;
    int64_t n_tokens_, n_ctx_;
};

// Throws PromptError: the template refuses the messages (Template), the prompt
// is empty or only BOS (Empty), or it does not leave one token of the context
// free (TooLong; with drop_oldest, after dropping what may be dropped).
// `tools`: OpenAI function definitions for the template (ChatTemplate::render).
Prompt prepare_prompt(const std::vector<Message>& messages, const ChatTemplate& tmpl, const tok::Vocab& vocab,
                      const PromptPolicy& policy, const nlohmann::ordered_json* tools = nullptr);

// The checks prepare_prompt makes of any prompt's tokens (a raw completion
// prompt's too): PromptError Empty or TooLong.
void check_prompt(const std::vector<int32_t>& tokens, const tok::Vocab& vocab, int64_t n_ctx);

// Adds `more` (a template's stop strings) to `stop`, skipping empty strings
// and ones already there.
void add_stop_strings(std::vector<std::string>& stop, const std::vector<std::string>& more);

}  // namespace strata::chat
