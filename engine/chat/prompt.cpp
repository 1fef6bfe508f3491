#include "chat/prompt.h"

#include <algorithm>

#include "tokenizer/vocab.h"

namespace strata::chat {

namespace {

std::vector<int32_t> tokenize(const std::vector<Message>& messages, const ChatTemplate& tmpl, const tok::Vocab& vocab) {
    std::string text;
    try {
        text = tmpl.render(messages, /*add_assistant_prefix=*/true);
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
                      const PromptPolicy& policy) {
    Prompt p;
    std::vector<Message> kept = messages;
    // The leading system messages stay; exchanges after them may give way.
    size_t first_turn = 0;
    while (first_turn < kept.size() && kept[first_turn].role == "system") ++first_turn;
    for (;;) {
        p.tokens = tokenize(kept, tmpl, vocab);
        const auto n = static_cast<int64_t>(p.tokens.size());
        if (!policy.drop_oldest || n + policy.answer_room <= policy.n_ctx) break;
        // The oldest exchange: up to the next user turn; the last user turn stays.
        size_t cut = first_turn + 1;
        while (cut < kept.size() && kept[cut].role != "user") ++cut;
        if (cut >= kept.size()) break;
        p.dropped_messages += static_cast<int>(cut - first_turn);
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first_turn), kept.begin() + static_cast<std::ptrdiff_t>(cut));
    }
    const auto n = static_cast<int64_t>(p.tokens.size());
    if (std::all_of(p.tokens.begin(), p.tokens.end(), [&](int32_t t) { return t == vocab.bos(); }))
        throw PromptError(PromptError::Kind::Empty, "the prompt is empty: nothing to generate from");
    if (n >= policy.n_ctx)
        throw PromptError(PromptError::Kind::TooLong,
                          "the prompt has " + std::to_string(n) + " tokens but the model's context holds " +
                              std::to_string(policy.n_ctx) + " (with room for at least one more)",
                          n, policy.n_ctx);
    p.stop = tmpl.stop_strings();
    return p;
}

}  // namespace strata::chat
