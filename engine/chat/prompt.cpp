#include "chat/prompt.h"

#include <algorithm>

#include "tokenizer/vocab.h"

namespace strata::chat {

namespace {

std::vector<int32_t> tokenize(const std::vector<Message>& messages, const ChatTemplate& tmpl, const tok::Vocab& vocab,
                              const nlohmann::ordered_json* tools) {
    std::string text;
    try {
        text = tmpl.render(messages, /*add_assistant_prefix=*/true, tools);
    } catch (const Error& e) {
        throw PromptError(PromptError::Kind::Template, e.what());
    }
    std::vector<int32_t> tokens = vocab.encode(text, /*add_special=*/true, /*parse_special=*/true);
    // A template whose first marker is the vocabulary's BOS text, encoded with
    // BOS added: keep one.
    if (tokens.size() >= 2 && tokens[0] == vocab.bos() && tokens[1] == vocab.bos()) tokens.erase(tokens.begin());
    return tokens;
}

}  // namespace

Prompt prepare_prompt(const std::vector<Message>& messages, const ChatTemplate& tmpl, const tok::Vocab& vocab,
                      const PromptPolicy& policy, const nlohmann::ordered_json* tools) {
    Prompt p;
    std::vector<Message> kept = messages;
    // The leading system messages stay; exchanges after them may give way.
    size_t first_turn = 0;
    while (first_turn < kept.size() && kept[first_turn].role == "system") ++first_turn;
    for (;;) {
        p.tokens = tokenize(kept, tmpl, vocab, tools);
        const auto n = static_cast<int64_t>(p.tokens.size());
        if (!policy.drop_oldest || n + policy.answer_room <= policy.n_ctx) break;
        // The oldest exchange: up to the next user turn; the last user turn stays.
        size_t cut = first_turn + 1;
        while (cut < kept.size() && kept[cut].role != "user") ++cut;
        if (cut >= kept.size()) break;
        p.dropped_messages += static_cast<int>(cut - first_turn);
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first_turn), kept.begin() + static_cast<std::ptrdiff_t>(cut));
    }
    check_prompt(p.tokens, vocab, policy.n_ctx);
    p.stop = tmpl.stop_strings();
    return p;
}

void check_prompt(const std::vector<int32_t>& tokens, const tok::Vocab& vocab, int64_t n_ctx) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (std::all_of(tokens.begin(), tokens.end(), [&](int32_t t) { return t == vocab.bos(); }))
        throw PromptError(PromptError::Kind::Empty, "the prompt is empty: nothing to generate from");
    if (n >= n_ctx)
        throw PromptError(PromptError::Kind::TooLong,
                          "the prompt has " + std::to_string(n) + " tokens but the model's context holds " +
                              std::to_string(n_ctx) + " (with room for at least one more)",
                          n, n_ctx);
}

void add_stop_strings(std::vector<std::string>& stop, const std::vector<std::string>& more) {
    for (const std::string& s : more)
        if (!s.empty() && std::find(stop.begin(), stop.end(), s) == stop.end()) stop.push_back(s);
}

}  // namespace strata::chat
