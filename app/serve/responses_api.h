// OpenAI's /v1/responses, served over the same engine path as
// /v1/chat/completions: a request is translated into a chat request (input
// items to messages, flat function tools to chat tools, text.format to
// response_format) and checked by parse_request, so every field means the
// same in both APIs; the reply comes back as Response output items
// (message, function_call), whole or as the API's typed stream events.
//
// Stateless: nothing is stored, so `previous_response_id`, `conversation`
// and `background` are refused with what to send instead (the whole
// conversation in `input`, as clients that set `store: false` do), and the
// response says `store: false`. Only function tools; only text input.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "serve/openai_api.h"
#include "serve/tool_calls.h"

namespace strata::serve {

struct ResponsesRequest {
    CompletionRequest chat;        // what the engine runs
    nlohmann::ordered_json echo;   // the request's settings the response object repeats
};

// Parses and checks a /v1/responses body. Throws ApiException (param names
// are the Responses API's: input[i], max_output_tokens, text.format, ...).
ResponsesRequest parse_responses_request(const std::string& body);

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
};

}  // namespace strata::serve
