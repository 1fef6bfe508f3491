// OpenAI's /v1/responses, served over the same engine path as
// /v1/chat/completions: a request is translated into a chat request (input
// items to messages, flat function tools to chat tools, text.format to
// response_format) and checked by parse_request, so every field means the
// same in both APIs; the reply comes back as Response output items
// (message, function_call), whole or as the API's typed stream events.
//
// Responses are kept in memory (ResponseStore: the most recent 256, as long
// as the server runs) unless a request says `store: false`, so a later
// request may go on from one with `previous_response_id` (its conversation
// and output before the new input; not its instructions), and
// GET/DELETE /v1/responses/{id} read and forget one. `conversation` and
// `background` are refused with what to send instead. Only function tools;
// only text input.
#pragma once

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "serve/openai_api.h"
#include "serve/tool_calls.h"

namespace strata::serve {

// Responses kept for previous_response_id and GET/DELETE, the most recent
// `capacity` of them (the oldest goes first). Thread-safe.
class ResponseStore {
public:
    struct Entry {
        nlohmann::ordered_json conversation;  // chat messages: the input (without instructions) and the output
        nlohmann::ordered_json response;      // the Response object as returned
    };
    explicit ResponseStore(size_t capacity = 256) : capacity_(capacity) {}
    void put(const std::string& id, Entry e);
    std::optional<Entry> get(const std::string& id) const;
    bool erase(const std::string& id);
    size_t size() const;

private:
    size_t capacity_;
    mutable std::mutex mu_;
    std::list<std::string> order_;  // oldest first
    std::unordered_map<std::string, std::pair<Entry, std::list<std::string>::iterator>> items_;
};

struct ResponsesRequest {
    CompletionRequest chat;        // what the engine runs
    nlohmann::ordered_json echo;   // the request's settings the response object repeats
    // The conversation so far as chat messages (the previous response's and
    // this input; not the instructions), what a stored response keeps.
    nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
    bool store = true;
};

// Parses and checks a /v1/responses body; `store` resolves
// previous_response_id (nullptr: it is refused). Throws ApiException (param
// names are the Responses API's: input[i], max_output_tokens, text.format,
// ...; an unknown previous response is a 404).
ResponsesRequest parse_responses_request(const std::string& body, const ResponseStore* store = nullptr);

// What a finished response adds to the stored conversation: the assistant's
// turn (its text and calls, arguments as the API's JSON strings).
nlohmann::ordered_json assistant_turn(const ParsedReply& reply);

// The Response object: `reply` the model's text split into content and calls,
// `finish` "stop" / "length" / "tool_calls".
nlohmann::ordered_json response_object(const ResponsesRequest& r, const std::string& id, int64_t created,
                                       const std::string& model, const ParsedReply& reply, const std::string& finish,
                                       const Usage& usage);

// The typed server-sent events of a streamed response, in order, each with its
// sequence_number: created and in_progress; the message item opened at the
// first text, then its deltas; at the end the message closed, each call as a
// function_call item, and completed / incomplete (or failed).
class ResponseEvents {
public:
    ResponseEvents(const ResponsesRequest& r, std::string id, int64_t created, std::string model);
    std::string start();
    std::string text(std::string_view delta);
    // `rest`: what the tool-call stream held back (content still to send, calls).
    std::string finish(const ParsedReply& rest, const std::string& finish, const Usage& usage);
    std::string failed(const ApiError& e);
    // After finish(): the Response object and the whole reply it streamed.
    const nlohmann::ordered_json& final_response() const { return final_; }
    ParsedReply whole_reply() const;

private:
    std::string event(nlohmann::ordered_json data);
    std::string open_message();
    nlohmann::ordered_json snapshot(const char* status, const nlohmann::ordered_json& usage) const;
    nlohmann::ordered_json message_item(const char* status) const;

    const ResponsesRequest& r_;
    std::string id_, model_, msg_id_;
    int64_t created_;
    int64_t seq_ = 0;
    bool message_open_ = false;
    std::string text_;
    nlohmann::ordered_json output_ = nlohmann::ordered_json::array();  // the items closed so far
    nlohmann::ordered_json final_;
    std::vector<ToolCall> calls_;
};

}  // namespace strata::serve
