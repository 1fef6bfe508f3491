// The OpenAI API's wire format, as far as Strata serves it: request bodies of
// /v1/chat/completions and /v1/completions parsed and checked into plain
// structs, and the JSON of responses, stream chunks and errors. No sockets and
// no engine here: every function is a pure translation, so the whole protocol
// is unit-tested without a server.
//
// Checked like OpenAI's own server: a wrong type or an out-of-range value is a
// 400 naming the field (`param`); a field that would change the answer but is
// not supported (n > 1, logprobs, a JSON schema keyword the grammar cannot
// express, ...) is a 400 too rather than silently ignored; fields that change nothing here
// (user, metadata, store, ...) are accepted and ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "sched/sampler.h"

namespace strata::serve {

// An error the client caused or must hear about, with its HTTP status and
// OpenAI's error object fields.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;   // the offending field, "" when none
    std::string code;    // "" when none
};

// Thrown by the parsers; the server turns it into the error response.
struct ApiException {
    ApiError error;
};

// Throws the 400 of a bad field (`param`: the field, "" for the whole body).
[[noreturn]] void bad_request(const std::string& param, const std::string& message, const std::string& code = {});

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
    Endpoint endpoint = Endpoint::Chat;
    std::string model;                       // as sent ("" when absent)
    std::vector<chat::Message> messages;     // Chat
    std::string prompt;                      // Completion
    sched::SamplingParams sampling;          // max_tokens == 0: until the context is full
    bool seed_given = false;
    std::vector<std::string> stop;           // the client's stop strings (at most 4)
    bool stream = false;
    bool include_usage = false;              // stream_options.include_usage
    // Chat: OpenAI function definitions (checked, in the client's key order)
    // for the template; tool_choice "auto" (the default), "none", "required"
    // or "function" (tool_choice_name: that one). With "required" and
    // "function" the output is constrained to calls (sampling.grammar).
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    std::string tool_choice = "auto";
    std::string tool_choice_name;
    // Several calls in one constrained reply. Off unless asked, as in
    // llama-server: a model that never ends its turn would otherwise write
    // calls until max_tokens cuts one in half.
    bool parallel_tool_calls = false;
    bool wants_tool_calls() const { return !tools.empty() && tool_choice != "none"; }
    // sampling.grammar: from response_format json_object / json_schema,
    // tool_choice "required" / a function, or llama.cpp's "grammar" (GBNF).
};

// Parses and checks a request body. Throws ApiException. Sampling defaults are
// OpenAI's (temperature 1, top_p 1, no top-k or min-p) unless the body sets
// llama.cpp's extensions top_k / min_p / repeat_penalty.
CompletionRequest parse_request(Endpoint endpoint, const std::string& body);

// Response JSON. `id` e.g. "chatcmpl-…"; `created` Unix seconds.
struct Usage {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
};
// finish: "stop" / "length" / "tool_calls" (what OpenAI clients know).
// `tool_calls`: OpenAI's array for the message (null: none; its content is
// then null where the text is empty).
nlohmann::json completion_response(const CompletionRequest& r, const std::string& id, int64_t created,
                                   const std::string& model, const std::string& text, const std::string& finish,
                                   const Usage& usage, const nlohmann::json* tool_calls = nullptr);
// One streamed chunk: `text` as a delta (chat: the first carries the role);
// `finish` "" while generating.
nlohmann::json stream_chunk(const CompletionRequest& r, const std::string& id, int64_t created,
                            const std::string& model, const std::string& text, const std::string& finish,
                            bool first, const nlohmann::json* tool_calls = nullptr);
// The usage chunk of stream_options.include_usage (empty choices).
nlohmann::json usage_chunk(const CompletionRequest& r, const std::string& id, int64_t created,
                           const std::string& model, const Usage& usage);

// /v1/embeddings: "input" a string, a list of strings, a list of token ids
// or a list of such lists (at most 256 inputs); "encoding_format" "float"
// (the default) or "base64" (little-endian float32, what OpenAI's clients
// ask for); "dimensions" is refused (no truncation).
struct EmbeddingRequest {
    std::string model;
    std::vector<std::string> texts;                 // or
    std::vector<std::vector<int32_t>> token_inputs;  // (one of the two is used)
    bool base64 = false;
    size_t size() const { return texts.empty() ? token_inputs.size() : texts.size(); }
};
EmbeddingRequest parse_embedding_request(const std::string& body);
nlohmann::json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                                  int64_t prompt_tokens);

nlohmann::json error_json(const ApiError& e);
// "data: <json>\n\n" with invalid UTF-8 replaced (generated text can end mid-character).
std::string sse_event(const nlohmann::json& j);
std::string dump(const nlohmann::json& j);

// Constant-time comparison for API keys: the time depends on the lengths only.
bool keys_equal(const std::string& given, const std::string& expected);

}  // namespace strata::serve
