// What the HTTP front (http_server.h) needs from whoever owns the model: a
// narrow interface, so the same server runs over `strata-cli serve`'s own
// engine thread (serve_loop.h) and over the desktop app's engine worker, which
// keeps chatting through the same scheduler while it serves.
//
// A request's life: the HTTP thread parses it, makes a Channel and calls
// Backend::submit; the backend's engine thread accepts or rejects it (prompt
// too long, queue full), then streams text into the channel and finishes it.
// The HTTP thread only waits on the channel. Cancelling (a client that went
// away) is a flag the engine thread acts on at its next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sched/token_stream.h"
#include "serve/openai_api.h"

namespace strata::tok {
class Vocab;
}

namespace strata::serve {

// One request's events, from the engine thread to the HTTP thread.
class Channel {
public:
    enum class State { Pending, Running, Done, Failed };

    // Engine side. The tool-call syntax of the model's template, before accept().
    void set_tool_syntax(chat::ChatTemplate::ToolSyntax s) { tool_syntax_ = s; }
    void accept(int64_t prompt_tokens);
    void reject(const ApiError& e);
    void text(std::string_view piece);
    // finish: "stop", "length" or "cancelled".
    void finish(const std::string& reason, int64_t completion_tokens);

    // HTTP side. Waits until the request is accepted or rejected.
    State wait_accepted();
    // Moves the text produced since the last call into *out. Waits up to
    // `timeout` for something new; returns the state after the wait.
    State take(std::string* out, std::chrono::milliseconds timeout);
    // Until Done or Failed; returns everything produced.
    State wait_done(std::string* all_text);

    bool ended() const;  // Done or Failed
    // Set before accept(), read after wait_accepted() (the channel's lock orders them).
    chat::ChatTemplate::ToolSyntax tool_syntax() const { return tool_syntax_; }
    ApiError error() const;
    std::string finish_reason() const;
    int64_t prompt_tokens() const;
    int64_t completion_tokens() const;

    // Set by the HTTP side when the client goes away; read by the engine side.
    void cancel() { cancelled_.store(true); }
    bool cancelled() const { return cancelled_.load(); }

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    State state_ = State::Pending;
    std::string pending_;
    ApiError error_;
    std::string finish_;
    int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
    std::atomic<bool> cancelled_{false};
    chat::ChatTemplate::ToolSyntax tool_syntax_ = chat::ChatTemplate::ToolSyntax::Hermes;
};

struct ModelCard {
    std::string id;          // what clients send as "model"
    int64_t created = 0;     // Unix seconds (the file's modification time)
    int64_t n_ctx = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    // The models served now (empty while none is loaded).
    virtual std::vector<ModelCard> models() const = 0;
    // Queues the request; the answer comes through `ch` (accept or reject first).
    virtual void submit(const CompletionRequest& request, std::shared_ptr<Channel> ch) = 0;
    // Wakes the engine thread to act on channels cancelled since.
    virtual void notify_cancelled() = 0;
    // Prometheus text exposition of the serving and engine figures.
    virtual std::string metrics_text(bool per_expert) const = 0;
    // The inputs' embeddings (sched/embedding.h), computed between the
    // scheduler's steps; *prompt_tokens their tokens. Throws ApiException.
    // Backends without them say so (501).
    virtual std::vector<std::vector<float>> embed(const EmbeddingRequest& request, int64_t* prompt_tokens) {
        (void)request, (void)prompt_tokens;
        throw ApiException{ApiError{501, "embeddings are not served here: use strata-cli serve", "invalid_request_error",
                                    "", "not_implemented"}};
    }
};

// The prompt and sampling a request turns into on a given model.
struct PreparedRequest {
    std::vector<int32_t> tokens;
    sched::SamplingParams sampling;
};

// Renders chat messages with the model's template (or takes the completion
// prompt as it is), tokenizes, merges stop strings and bounds max_tokens by the
// context. `random_seed` is used when the request gave none. Throws
// ApiException: an empty prompt, or one that leaves no room in the context
// (code "context_length_exceeded").
PreparedRequest prepare_request(const CompletionRequest& r, const tok::Vocab& vocab, const chat::ChatTemplate& tmpl,
                                int64_t n_ctx, uint64_t random_seed);

// "stop" / "length" / "cancelled" for a scheduler finish reason.
std::string openai_finish(sched::FinishReason reason);

}  // namespace strata::serve
