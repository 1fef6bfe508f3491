#include "serve/responses_api.h"

#include <map>

#include "serve/json_fields.h"

namespace strata::serve {
namespace {

using ojson = nlohmann::ordered_json;

std::string str_field(const ojson& o, const char* name, const std::string& where) {
    const ojson* v = json_field(o, name);
    if (!v || !v->is_string()) bad_request(where, "'" + where + "' needs a string '" + name + "'");
    return v->get<std::string>();
}

// Fields that need state this server does not keep, or hosted features.
void refuse_unsupported(const ojson& body) {
    if (json_field(body, "conversation"))
        bad_request("conversation", "'conversation' is not supported: send the whole conversation in 'input'");
    if (const ojson* v = json_field(body, "background"); v && !(v->is_boolean() && !v->get<bool>()))
        bad_request("background", "'background' responses are not supported: stream the response instead");
    if (json_field(body, "prompt")) bad_request("prompt", "stored prompt templates ('prompt') are not supported: send 'instructions' and 'input'");
    if (const ojson* v = json_field(body, "top_logprobs"); v && !(v->is_number_integer() && v->get<int64_t>() == 0))
        bad_request("top_logprobs", "'top_logprobs' is not supported");
}

// The text of a message's content: a string or text parts.
std::string content_text(const ojson& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) wrong_type(where, "a string or an array of content parts", content);
    std::string text;
    for (size_t k = 0; k < content.size(); ++k) {
        const ojson& part = content[k];
        const std::string pw = where + "[" + std::to_string(k) + "]";
        const ojson* type = part.is_object() ? json_field(part, "type") : nullptr;
        if (!type || !type->is_string()) bad_request(pw, "'" + pw + "' must be an object with a 'type'");
        const std::string t = type->get<std::string>();
        if (t != "input_text" && t != "output_text" && t != "text")
            bad_request(pw, "'" + pw + "' is an '" + t + "' part: only text (input_text, output_text) is supported");
        text += str_field(part, "text", pw);
    }
    return text;
}

// Responses input items as chat messages. Function calls join the assistant
// turn before them; a call's output names its function, for templates that
// print it.
ojson input_messages(const ojson& body, const ojson& prior) {
    const ojson* input = json_field(body, "input");
    if (!input) bad_request("input", "'input' is required: a string, or an array of messages and items");
    ojson messages = ojson::array();
    if (input->is_string()) {
        messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
        return messages;
    }
    if (!input->is_array()) wrong_type("input", "a string or an array of items", *input);
    if (input->empty()) bad_request("input", "'input' is empty: send at least one message");
    std::map<std::string, std::string> call_names;  // the calls a function_call_output may answer, earlier ones too
    for (const ojson& m : prior)
        if (m.contains("tool_calls"))
            for (const ojson& c : m["tool_calls"]) call_names[c.value("id", "")] = c["function"].value("name", "");
    for (size_t i = 0; i < input->size(); ++i) {
        const ojson& item = (*input)[i];
        const std::string where = "input[" + std::to_string(i) + "]";
        if (!item.is_object()) wrong_type(where, "an object", item);
        const ojson* tp = json_field(item, "type");
        if (tp && !tp->is_string()) wrong_type(where + ".type", "a string", *tp);
        const std::string type = tp ? tp->get<std::string>() : "message";
        if (type == "message") {
            std::string role = str_field(item, "role", where);
            if (role == "developer") role = "system";
            if (role != "system" && role != "user" && role != "assistant")
                bad_request(where + ".role", "'" + where + ".role' is '" + role +
                                                 "': expected user, assistant, system or developer");
            const ojson* content = json_field(item, "content");
            if (!content) bad_request(where + ".content", "'" + where + "' needs 'content'");
            messages.push_back({{"role", role}, {"content", content_text(*content, where + ".content")}});
        } else if (type == "function_call") {
            const std::string call_id = str_field(item, "call_id", where);
            const std::string name = str_field(item, "name", where);
            const std::string arguments = str_field(item, "arguments", where);
            if (!ojson::accept(arguments))
                bad_request(where + ".arguments", "'" + where + ".arguments' is not JSON: send the call's arguments as a JSON object in a string");
            call_names[call_id] = name;
            const ojson call = {{"id", call_id}, {"type", "function"},
                                {"function", {{"name", name}, {"arguments", arguments}}}};
            if (messages.empty() || messages.back()["role"] != "assistant")
                messages.push_back({{"role", "assistant"}, {"content", nullptr}});
            ojson& turn = messages.back();
            if (!turn.contains("tool_calls")) turn["tool_calls"] = ojson::array();
            turn["tool_calls"].push_back(call);
        } else if (type == "function_call_output") {
            const std::string call_id = str_field(item, "call_id", where);
            const ojson* output = json_field(item, "output");
            if (!output) bad_request(where, "'" + where + "' needs 'output'");
            ojson msg = {{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(*output, where + ".output")}};
            if (auto it = call_names.find(call_id); it != call_names.end()) msg["name"] = it->second;
            messages.push_back(std::move(msg));
        } else if (type == "reasoning") {
            // A reasoning item of an earlier response: its text is not sent
            // back to the template (as chat clients drop reasoning_content).
        } else if (type == "item_reference") {
            bad_request(where, "'" + where + "' is an item_reference: this server stores no items; send the item itself");
        } else {
            bad_request(where, "'" + where + "' has type '" + type +
                                   "': only message, function_call, function_call_output and reasoning items are supported");
        }
    }
    if (messages.empty() && prior.empty()) bad_request("input", "'input' has no message or call to answer (only reasoning items)");
    return messages;
}

// Flat function tools ({type, name, description, parameters, strict}) as chat tools.
ojson chat_tools(const ojson* tools) {
    ojson out = ojson::array();
    if (!tools) return out;
    if (!tools->is_array()) wrong_type("tools", "an array of function tools", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
        const ojson& t = (*tools)[i];
        const std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) wrong_type(where, "an object", t);
        const std::string type = t.value("type", "");
        if (type != "function")
            bad_request("tools", "'" + where + "' has type '" + type +
                                     "': only function tools ({type: \"function\", name, parameters}) are served here");
        const ojson* name = json_field(t, "name");
        if (!name || !name->is_string() || name->get<std::string>().empty())
            bad_request("tools", "'" + where + "' needs a non-empty string 'name'");
        ojson fn = {{"name", *name}};
        for (const char* key : {"description", "parameters", "strict"})
            if (const ojson* v = json_field(t, key)) fn[key] = *v;
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
}

ojson chat_tool_choice(const ojson& choice) {
    if (choice.is_string()) return choice;
    const char* form = "'tool_choice' must be \"auto\", \"none\", \"required\" or {type: \"function\", name: ...}";
    if (!choice.is_object() || choice.value("type", "") != "function") bad_request("tool_choice", form);
    const ojson* name = json_field(choice, "name");
    if (!name || !name->is_string()) bad_request("tool_choice", form);
    return {{"type", "function"}, {"function", {{"name", *name}}}};
}

// text.format as the chat API's response_format.
ojson chat_response_format(const ojson& text) {
    if (!text.is_object()) wrong_type("text", "an object", text);
    const ojson* format = json_field(text, "format");
    if (!format) return nullptr;
    const char* form = "'text.format' must be {type: \"text\"}, {type: \"json_object\"} or "
                       "{type: \"json_schema\", name, schema, strict}";
    if (!format->is_object() || !json_field(*format, "type") || !(*format)["type"].is_string()) bad_request("text.format", form);
    const std::string type = (*format)["type"].get<std::string>();
    if (type == "text" || type == "json_object") return {{"type", type}};
    if (type != "json_schema") bad_request("text.format", form);
    ojson js = ojson::object();
    for (const char* key : {"name", "description", "schema", "strict"})
        if (const ojson* v = json_field(*format, key)) js[key] = *v;
    return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// A chat-API error re-addressed to the Responses API's field names.
ApiError readdressed(ApiError e) {
    static const std::pair<const char*, const char*> kParams[] = {
        {"max_completion_tokens", "max_output_tokens"}, {"response_format", "text.format"}};
    static const std::pair<std::string_view, std::string_view> kWords[] = {
        {"max_completion_tokens", "max_output_tokens"},
        {"response_format.json_schema", "text.format"},
        {"response_format", "text.format"}};
    for (const auto& [chat, responses] : kParams) {
        if (e.param != chat) continue;
        e.param = responses;
        for (const auto& [from, to] : kWords)
            for (size_t at; (at = e.message.find(from)) != std::string::npos;) e.message.replace(at, from.size(), to);
    }
    if (e.param.rfind("messages", 0) == 0) e.param = "input";
    return e;
}

ojson usage_object(const Usage& u) {
    return {{"input_tokens", u.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", 0}}},
            {"output_tokens", u.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The Response object's fields around `output`, in OpenAI's order.
ojson response_shell(const ResponsesRequest& r, const std::string& id, int64_t created, const std::string& model,
                     const char* status) {
    ojson o = {{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status},
               {"background", false}, {"error", nullptr}, {"incomplete_details", nullptr}};
    o["instructions"] = r.echo["instructions"];
    o["max_output_tokens"] = r.echo["max_output_tokens"];
    o["model"] = model;
    o["output"] = ojson::array();
    for (const char* key : {"parallel_tool_calls", "previous_response_id", "reasoning", "store", "temperature", "text",
                            "tool_choice", "tools", "top_p", "truncation"})
        o[key] = r.echo[key];
    o["usage"] = nullptr;
    o["user"] = r.echo["user"];
    o["metadata"] = r.echo["metadata"];
    return o;
}

ojson call_item(const ToolCall& c, const std::string& item_id, const char* status, bool with_arguments) {
    return {{"type", "function_call"}, {"id", item_id},  {"call_id", c.id}, {"name", c.name},
            {"arguments", with_arguments ? c.arguments : ""}, {"status", status}};
}

ojson text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}};
}

// "resp_X" -> "msg_X" / "fc_X_i": item ids unique within and across responses.
std::string item_id(const std::string& response_id, const char* prefix, int index = -1) {
    const size_t cut = response_id.find('_');
    std::string id = std::string(prefix) + "_" + response_id.substr(cut == std::string::npos ? 0 : cut + 1);
    if (index >= 0) id += "_" + std::to_string(index);
    return id;
}

}  // namespace

void ResponseStore::put(const std::string& id, Entry e) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = items_.find(id); it != items_.end()) {
        order_.erase(it->second.second);
        items_.erase(it);
    }
    order_.push_back(id);
    items_.emplace(id, std::make_pair(std::move(e), std::prev(order_.end())));
    while (items_.size() > capacity_) {
        items_.erase(order_.front());
        order_.pop_front();
    }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = items_.find(id);
    if (it == items_.end()) return std::nullopt;
    return it->second.first;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = items_.find(id);
    if (it == items_.end()) return false;
    order_.erase(it->second.second);
    items_.erase(it);
    return true;
}

size_t ResponseStore::size() const {
    std::lock_guard<std::mutex> lk(mu_);
    return items_.size();
}

ojson assistant_turn(const ParsedReply& reply) {
    ojson turn = {{"role", "assistant"}, {"content", reply.content}};
    if (reply.calls.empty()) return turn;
    ojson calls = ojson::array();
    for (const ToolCall& c : reply.calls)
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    turn["tool_calls"] = std::move(calls);
    if (reply.content.empty()) turn["content"] = nullptr;
    return turn;
}

ResponsesRequest parse_responses_request(const std::string& body, const ResponseStore* store) {
    ojson j;
    try {
        j = ojson::parse(body);
    } catch (const ojson::exception& e) {
        bad_request("", std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) bad_request("", "the request body must be a JSON object, got " + json_type_name(j));
    refuse_unsupported(j);

    // A previous response's conversation (its input, less its instructions, and its output) goes first.
    ojson conversation = ojson::array();
    const ojson* prev = json_field(j, "previous_response_id");
    if (prev) {
        if (!prev->is_string()) wrong_type("previous_response_id", "a string", *prev);
        const std::string id = prev->get<std::string>();
        const std::optional<ResponseStore::Entry> e = store ? store->get(id) : std::nullopt;
        if (!store) bad_request("previous_response_id", "'previous_response_id' is not supported here: send the whole conversation in 'input'");
        if (!e)
            throw ApiException{ApiError{404,
                                        "previous response '" + id + "' not found: this server keeps the most recent "
                                        "responses in memory while it runs (not those sent with store: false); "
                                        "send the whole conversation in 'input'",
                                        "invalid_request_error", "previous_response_id", "previous_response_not_found"}};
        conversation = e->conversation;
    }
    for (ojson& m : input_messages(j, conversation)) conversation.push_back(std::move(m));
    bool keep = true;
    if (const ojson* v = json_field(j, "store")) {
        if (!v->is_boolean()) wrong_type("store", "a boolean", *v);
        keep = v->get<bool>();
    }

    ojson chat = {{"messages", conversation}};
    if (const ojson* ins = json_field(j, "instructions")) {
        if (!ins->is_string()) wrong_type("instructions", "a string", *ins);
        // The instructions are the system prompt; a system message first in the input joins them.
        ojson& msgs = chat["messages"];
        if (msgs[0]["role"] == "system")
            msgs[0]["content"] = ins->get<std::string>() + "\n\n" + msgs[0]["content"].get<std::string>();
        else
            msgs.insert(msgs.begin(), ojson{{"role", "system"}, {"content", *ins}});
    }
    // Same names and meanings in both APIs (top_k, min_p, repeat_penalty, seed,
    // stop and grammar are llama.cpp's extensions, accepted here too).
    for (const char* key : {"model", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty",
                            "frequency_penalty", "seed", "stop", "grammar", "stream", "parallel_tool_calls"})
        if (const ojson* v = json_field(j, key)) chat[key] = *v;
    if (const ojson* v = json_field(j, "max_output_tokens")) chat["max_completion_tokens"] = *v;
    chat["tools"] = chat_tools(json_field(j, "tools"));
    if (const ojson* v = json_field(j, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
    if (const ojson* v = json_field(j, "text")) {
        ojson rf = chat_response_format(*v);
        if (!rf.is_null()) chat["response_format"] = std::move(rf);
    }

    ResponsesRequest r;
    r.conversation = std::move(conversation);
    r.store = keep;
    try {
        r.chat = parse_request(Endpoint::Chat, chat.dump());
    } catch (const ApiException& e) {
        throw ApiException{readdressed(e.error)};
    }
    const auto given = [&](const char* key, ojson fallback) {
        const ojson* v = json_field(j, key);
        return v ? *v : fallback;
    };
    ojson& echo = r.echo;
    echo["instructions"] = given("instructions", nullptr);
    echo["max_output_tokens"] = given("max_output_tokens", nullptr);
    echo["parallel_tool_calls"] = r.chat.parallel_tool_calls;
    echo["previous_response_id"] = prev ? *prev : ojson(nullptr);
    echo["reasoning"] = given("reasoning", {{"effort", nullptr}, {"summary", nullptr}});
    echo["store"] = r.store;
    echo["temperature"] = given("temperature", 1.0);
    echo["text"] = given("text", {{"format", {{"type", "text"}}}});
    echo["tool_choice"] = given("tool_choice", "auto");
    echo["tools"] = given("tools", ojson::array());
    echo["top_p"] = given("top_p", 1.0);
    echo["truncation"] = given("truncation", "disabled");
    echo["user"] = given("user", nullptr);
    echo["metadata"] = given("metadata", ojson::object());
    return r;
}

ojson response_object(const ResponsesRequest& r, const std::string& id, int64_t created, const std::string& model,
                      const ParsedReply& reply, const std::string& finish, const Usage& usage) {
    const bool cut = finish == "length";
    ojson o = response_shell(r, id, created, model, cut ? "incomplete" : "completed");
    if (cut) o["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (!reply.content.empty() || reply.calls.empty()) {
        o["output"].push_back({{"type", "message"}, {"id", item_id(id, "msg")}, {"status", cut ? "incomplete" : "completed"},
                               {"role", "assistant"}, {"content", ojson::array({text_part(reply.content)})}});
    }
    for (size_t i = 0; i < reply.calls.size(); ++i)
        o["output"].push_back(call_item(reply.calls[i], item_id(id, "fc", static_cast<int>(i)), "completed", true));
    o["usage"] = usage_object(usage);
    return o;
}

ResponseEvents::ResponseEvents(const ResponsesRequest& r, std::string id, int64_t created, std::string model)
    : r_(r), id_(std::move(id)), model_(std::move(model)), msg_id_(item_id(id_, "msg")), created_(created) {}

std::string ResponseEvents::event(ojson data) {
    data["sequence_number"] = seq_++;
    return "event: " + data["type"].get<std::string>() + "\ndata: " +
           data.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n\n";
}

ojson ResponseEvents::snapshot(const char* status, const ojson& usage) const {
    ojson o = response_shell(r_, id_, created_, model_, status);
    o["output"] = output_;
    o["usage"] = usage;
    return o;
}

ojson ResponseEvents::message_item(const char* status) const {
    const bool done = std::string_view(status) != "in_progress";
    return {{"id", msg_id_}, {"type", "message"}, {"status", status}, {"role", "assistant"},
            {"content", done ? ojson::array({text_part(text_)}) : ojson::array()}};
}

std::string ResponseEvents::start() {
    std::string out = event({{"type", "response.created"}, {"response", snapshot("in_progress", nullptr)}});
    return out + event({{"type", "response.in_progress"}, {"response", snapshot("in_progress", nullptr)}});
}

std::string ResponseEvents::open_message() {
    message_open_ = true;
    std::string out = event({{"type", "response.output_item.added"}, {"output_index", output_.size()},
                             {"item", message_item("in_progress")}});
    return out + event({{"type", "response.content_part.added"}, {"item_id", msg_id_}, {"output_index", output_.size()},
                  {"content_index", 0}, {"part", text_part("")}});
}

std::string ResponseEvents::text(std::string_view delta) {
    if (delta.empty()) return {};
    std::string out = message_open_ ? std::string() : open_message();
    text_ += delta;
    out += event({{"type", "response.output_text.delta"}, {"item_id", msg_id_}, {"output_index", output_.size()},
                  {"content_index", 0}, {"delta", delta}, {"logprobs", ojson::array()}});
    return out;
}

std::string ResponseEvents::finish(const ParsedReply& rest, const std::string& finish, const Usage& usage) {
    const bool cut = finish == "length";
    std::string out = text(rest.content);
    if (!message_open_ && rest.calls.empty()) out += open_message();  // an empty reply is an empty message
    if (message_open_) {
        const size_t at = output_.size();
        out += event({{"type", "response.output_text.done"}, {"item_id", msg_id_}, {"output_index", at},
                      {"content_index", 0}, {"text", text_}, {"logprobs", ojson::array()}});
        out += event({{"type", "response.content_part.done"}, {"item_id", msg_id_}, {"output_index", at},
                      {"content_index", 0}, {"part", text_part(text_)}});
        const ojson item = message_item(cut ? "incomplete" : "completed");
        out += event({{"type", "response.output_item.done"}, {"output_index", at}, {"item", item}});
        output_.push_back(item);
        message_open_ = false;
    }
    for (size_t i = 0; i < rest.calls.size(); ++i) {
        const ToolCall& c = rest.calls[i];
        const std::string fc_id = item_id(id_, "fc", static_cast<int>(i));
        const size_t at = output_.size();
        out += event({{"type", "response.output_item.added"}, {"output_index", at},
                      {"item", call_item(c, fc_id, "in_progress", false)}});
        out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", fc_id}, {"output_index", at},
                      {"delta", c.arguments}});
        out += event({{"type", "response.function_call_arguments.done"}, {"item_id", fc_id}, {"output_index", at},
                      {"arguments", c.arguments}});
        const ojson item = call_item(c, fc_id, "completed", true);
        out += event({{"type", "response.output_item.done"}, {"output_index", at}, {"item", item}});
        output_.push_back(item);
    }
    ojson final = snapshot(cut ? "incomplete" : "completed", usage_object(usage));
    if (cut) final["incomplete_details"] = {{"reason", "max_output_tokens"}};
    final_ = final;
    calls_ = rest.calls;
    return out + event({{"type", cut ? "response.incomplete" : "response.completed"}, {"response", std::move(final)}});
}

ParsedReply ResponseEvents::whole_reply() const { return ParsedReply{text_, calls_}; }

std::string ResponseEvents::failed(const ApiError& e) {
    ojson o = snapshot("failed", nullptr);
    o["error"] = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.message}};
    return event({{"type", "response.failed"}, {"response", std::move(o)}});
}

}  // namespace strata::serve
