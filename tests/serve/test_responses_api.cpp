// OpenAI's /v1/responses without a server: the translation of a Responses
// request into the chat request the engine runs, its 400s (named with the
// Responses API's fields), the Response object and the stream's typed events.
#include <QtTest>

#include "serve/responses_api.h"
#include "responses_data.h"

using namespace strata;
using namespace strata::serve;
using ojson = nlohmann::ordered_json;

namespace {

ApiError error_of(const std::string& body) {
    try {
        parse_responses_request(body);
    } catch (const ApiException& ex) {
        return ex.error;
    }
    return ApiError{0, "", "", "", ""};
}

// Splits "event: T\ndata: J\n\n" events; checks each event line names its data's type.
std::vector<ojson> events_of(const std::string& sse) {
    std::vector<ojson> out;
    size_t at = 0;
    while (at < sse.size()) {
        const size_t end = sse.find("\n\n", at);
        if (end == std::string::npos) break;
        const std::string ev = sse.substr(at, end - at);
        at = end + 2;
        const size_t nl = ev.find('\n');
        const std::string type = ev.substr(7, nl - 7);
        ojson j = ojson::parse(ev.substr(nl + 7));
        if (j["type"] != type) throw std::runtime_error("event line " + type + " names another type");
        out.push_back(std::move(j));
    }
    return out;
}

std::vector<std::string> types_of(const std::vector<ojson>& events) {
    std::vector<std::string> t;
    for (const ojson& e : events) t.push_back(e["type"].get<std::string>());
    return t;
}

}  // namespace

class TestResponsesApi : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void a_string_input_is_one_user_turn() {
        const ResponsesRequest r = parse_responses_request("{\"input\": \"hello\"}");
        QCOMPARE(r.chat.endpoint, Endpoint::Chat);
        QCOMPARE(r.chat.messages.size(), size_t{1});
        QCOMPARE(r.chat.messages[0].role, std::string("user"));
        QCOMPARE(r.chat.messages[0].content, std::string("hello"));
        QCOMPARE(r.chat.sampling.temperature, 1.0f);
        QCOMPARE(r.chat.sampling.max_tokens, 0);
        QVERIFY(!r.chat.stream && !r.chat.sampling.grammar && r.chat.tools.empty());
        QCOMPARE(r.echo["store"], ojson(true));  // OpenAI's default: kept for previous_response_id
        QVERIFY(r.store);
        QCOMPARE(r.conversation.size(), size_t{1});
        QCOMPARE(r.echo["tool_choice"], ojson("auto"));
        QCOMPARE(r.echo["text"]["format"]["type"], ojson("text"));
    }

    // Every item kind: instructions join the system message; function calls join
    // the assistant turn before them; outputs name their function.
    void items_become_the_chat_conversation() {
        const ResponsesRequest r = parse_responses_request(responses_data::kConversation);
        const auto& m = r.chat.messages;
        QCOMPARE(m.size(), size_t{6});
        QCOMPARE(m[0].role, std::string("system"));
        QCOMPARE(m[0].content, std::string("Be brief.\n\nUse tools."));
        QCOMPARE(m[1].content, std::string("Weather in Paris?"));
        QCOMPARE(m[2].role, std::string("assistant"));
        QCOMPARE(m[2].content, std::string("Checking."));
        const auto& calls = m[2].extra.at("tool_calls");
        QCOMPARE(calls.size(), size_t{2});
        QCOMPARE(calls[0]["id"], ojson("c1"));
        QCOMPARE(calls[0]["function"]["name"], ojson("get_weather"));
        QCOMPARE(calls[0]["function"]["arguments"]["city"], ojson("Paris"));  // an object for the template
        QCOMPARE(m[3].role, std::string("tool"));
        QCOMPARE(m[3].content, std::string("21 C"));
        QCOMPARE(m[3].extra.at("tool_call_id"), ojson("c1"));
        QCOMPARE(m[3].extra.at("name"), ojson("get_weather"));
        QCOMPARE(m[4].content, std::string("noon"));
        QCOMPARE(m[4].extra.at("name"), ojson("get_time"));
        QCOMPARE(m[5].role, std::string("user"));

        QCOMPARE(r.chat.tools.size(), size_t{2});
        QCOMPARE(r.chat.tools[0]["function"]["name"], ojson("get_weather"));
        QCOMPARE(r.chat.tools[0]["function"]["description"], ojson("The weather"));
        QCOMPARE(r.chat.tools[0]["function"]["parameters"]["required"][0], ojson("city"));
        QCOMPARE(r.chat.tool_choice, std::string("function"));
        QCOMPARE(r.chat.tool_choice_name, std::string("get_weather"));
        QVERIFY(r.chat.sampling.grammar);  // a named function: the reply is constrained to its call
        QVERIFY(r.chat.parallel_tool_calls);
        QCOMPARE(r.chat.sampling.max_tokens, 33);
        QCOMPARE(r.chat.sampling.temperature, 0.5f);
        QCOMPARE(r.chat.sampling.top_p, 0.9f);
        QCOMPARE(r.chat.sampling.seed, uint64_t{7});
        QVERIFY(r.chat.seed_given);
        // What the response object repeats: the request's own forms.
        QCOMPARE(r.echo["instructions"], ojson("Be brief."));
        QCOMPARE(r.echo["max_output_tokens"], ojson(33));
        QCOMPARE(r.echo["tools"][1]["name"], ojson("get_time"));
        QCOMPARE(r.echo["tool_choice"]["name"], ojson("get_weather"));
        QCOMPARE(r.echo["metadata"]["k"], ojson("v"));
        QCOMPARE(r.echo["reasoning"]["effort"], ojson("low"));
        QCOMPARE(r.echo["store"], ojson(true));
        QCOMPARE(r.echo["user"], ojson("u1"));
    }

    void a_json_schema_format_constrains_the_reply() {
        const ResponsesRequest r = parse_responses_request(responses_data::kJsonSchema);
        QVERIFY(r.chat.sampling.grammar);
        QCOMPARE(r.echo["text"]["format"]["name"], ojson("p"));
        QVERIFY(!parse_responses_request("{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"text\"}}}").chat.sampling.grammar);
        QVERIFY(parse_responses_request("{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_object\"}}}").chat.sampling.grammar);
    }

    void bad_requests_are_400s_naming_the_responses_field() {
        for (const auto& [body, param] : responses_data::kBad) {
            const ApiError e = error_of(body);
            QVERIFY2(e.status == 400, body);
            QVERIFY2(e.param == param, qPrintable(QString("%1: param '%2', want '%3' (%4)")
                                                      .arg(body, e.param.c_str(), param, e.message.c_str())));
            QVERIFY2(!e.message.empty(), body);
            // The chat API's names never leak into a Responses error.
            QVERIFY2(e.message.find("response_format") == std::string::npos &&
                         e.message.find("max_completion_tokens") == std::string::npos &&
                         e.message.find("messages[") == std::string::npos,
                     e.message.c_str());
        }
        QVERIFY(error_of(std::end(responses_data::kBad)[-1][0]).message.find("'pattern'") != std::string::npos);
    }

    // previous_response_id: the kept conversation (its input, not its
    // instructions, and its output) goes before the new input; a call it made
    // is named for the output that answers it; an unknown id is a 404; a
    // response sent with store: false says so.
    void a_previous_response_goes_first() {
        ResponseStore store(2);
        const ParsedReply reply{"", {{"call_7", "get_weather", "{\"city\":\"Oslo\"}"}}};
        ojson conversation = ojson::array({{{"role", "user"}, {"content", "Weather in Oslo?"}}});
        conversation.push_back(assistant_turn(reply));
        QVERIFY(conversation[1]["content"].is_null());
        QCOMPARE(conversation[1]["tool_calls"][0]["function"]["arguments"], ojson("{\"city\":\"Oslo\"}"));
        store.put("resp_1", {conversation, ojson{{"id", "resp_1"}}});
        const ResponsesRequest r = parse_responses_request(
            "{\"previous_response_id\": \"resp_1\", \"instructions\": \"Be brief.\", \"store\": false, "
            "\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"call_7\", \"output\": \"-3 C\"}]}",
            &store);
        const auto& m = r.chat.messages;
        QCOMPARE(m.size(), size_t{4});
        QCOMPARE(m[0].role, std::string("system"));
        QCOMPARE(m[1].content, std::string("Weather in Oslo?"));
        QCOMPARE(m[2].extra.at("tool_calls")[0]["function"]["arguments"]["city"], ojson("Oslo"));
        QCOMPARE(m[3].role, std::string("tool"));
        QCOMPARE(m[3].extra.at("name"), ojson("get_weather"));
        QCOMPARE(r.conversation.size(), size_t{3});  // without the instructions
        QVERIFY(!r.store);
        QCOMPARE(r.echo["store"], ojson(false));
        QCOMPARE(r.echo["previous_response_id"], ojson("resp_1"));
        try {
            parse_responses_request("{\"previous_response_id\": \"resp_9\", \"input\": \"x\"}", &store);
            QFAIL("accepted");
        } catch (const ApiException& e) {
            QCOMPARE(e.error.status, 404);
            QCOMPARE(e.error.code, std::string("previous_response_not_found"));
        }
        // The oldest goes when the store is full; a deleted one is gone.
        store.put("resp_2", {});
        store.put("resp_3", {});
        QVERIFY(!store.get("resp_1"));
        QVERIFY(store.erase("resp_2"));
        QVERIFY(!store.erase("resp_2"));
        QCOMPARE(store.size(), size_t{1});
    }

    void the_response_object_has_openai_shape() {
        const ResponsesRequest r = parse_responses_request("{\"input\": \"x\", \"max_output_tokens\": 5}");
        const ojson text = response_object(r, "resp_abc", 100, "demo", ParsedReply{"Hello", {}}, "length", Usage{3, 5});
        QCOMPARE(text["id"], ojson("resp_abc"));
        QCOMPARE(text["object"], ojson("response"));
        QCOMPARE(text["status"], ojson("incomplete"));
        QCOMPARE(text["incomplete_details"]["reason"], ojson("max_output_tokens"));
        QCOMPARE(text["output"].size(), size_t{1});
        QCOMPARE(text["output"][0]["type"], ojson("message"));
        QCOMPARE(text["output"][0]["id"], ojson("msg_abc"));
        QCOMPARE(text["output"][0]["content"][0]["type"], ojson("output_text"));
        QCOMPARE(text["output"][0]["content"][0]["text"], ojson("Hello"));
        QCOMPARE(text["usage"]["input_tokens"], ojson(3));
        QCOMPARE(text["usage"]["output_tokens"], ojson(5));
        QCOMPARE(text["usage"]["total_tokens"], ojson(8));
        QVERIFY(text["error"].is_null());

        const ParsedReply calls{"", {{"call_1", "f", "{\"a\":1}"}, {"call_2", "g", "{}"}}};
        const ojson fc = response_object(r, "resp_abc", 100, "demo", calls, "tool_calls", Usage{3, 5});
        QCOMPARE(fc["status"], ojson("completed"));
        QVERIFY(fc["incomplete_details"].is_null());
        QCOMPARE(fc["output"].size(), size_t{2});  // no empty message beside calls
        QCOMPARE(fc["output"][0]["type"], ojson("function_call"));
        QCOMPARE(fc["output"][0]["call_id"], ojson("call_1"));
        QCOMPARE(fc["output"][0]["arguments"], ojson("{\"a\":1}"));
        QCOMPARE(fc["output"][1]["id"], ojson("fc_abc_1"));
    }

    // The events a client's stream accumulator (openai-node's ResponseStream)
    // needs, numbered from 0 in order, each item added before its deltas.
    void stream_events_come_in_order() {
        const ResponsesRequest r = parse_responses_request("{\"input\": \"x\"}");
        ResponseEvents ev(r, "resp_q", 100, "demo");
        std::string sse = ev.start();
        sse += ev.text("Hel");
        sse += ev.text("");
        sse += ev.text("lo");
        sse += ev.finish(ParsedReply{" there", {{"call_1", "f", "{}"}}}, "tool_calls", Usage{2, 4});
        const std::vector<ojson> events = events_of(sse);
        const std::vector<std::string> want = {
            "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
            "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
            "response.output_text.done", "response.content_part.done", "response.output_item.done",
            "response.output_item.added", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
        QCOMPARE(types_of(events), want);
        for (size_t i = 0; i < events.size(); ++i) QCOMPARE(events[i]["sequence_number"], ojson(i));
        QCOMPARE(events[0]["response"]["status"], ojson("in_progress"));
        QCOMPARE(events[7]["text"], ojson("Hello there"));
        QCOMPARE(events[10]["output_index"], ojson(1));
        QCOMPARE(events[10]["item"]["arguments"], ojson(""));
        const ojson& done = events.back()["response"];
        QCOMPARE(done["output"].size(), size_t{2});
        QCOMPARE(done["output"][0]["content"][0]["text"], ojson("Hello there"));
        QCOMPARE(done["output"][1]["name"], ojson("f"));
        QCOMPARE(done["usage"]["total_tokens"], ojson(6));
    }

    void an_empty_or_cut_or_failed_stream_still_closes() {
        const ResponsesRequest r = parse_responses_request("{\"input\": \"x\"}");
        ResponseEvents empty(r, "resp_e", 1, "demo");
        std::string sse = empty.start();
        sse += empty.finish(ParsedReply{}, "stop", Usage{1, 0});
        std::vector<ojson> ev = events_of(sse);
        QCOMPARE(ev.back()["type"], ojson("response.completed"));
        QCOMPARE(ev.back()["response"]["output"][0]["content"][0]["text"], ojson(""));  // one empty message

        ResponseEvents cut(r, "resp_c", 1, "demo");
        sse = cut.start() + cut.text("a");
        sse += cut.finish(ParsedReply{}, "length", Usage{1, 1});
        ev = events_of(sse);
        QCOMPARE(ev.back()["type"], ojson("response.incomplete"));
        QCOMPARE(ev.back()["response"]["incomplete_details"]["reason"], ojson("max_output_tokens"));
        QCOMPARE(ev.back()["response"]["output"][0]["status"], ojson("incomplete"));

        ResponseEvents failed(r, "resp_f", 1, "demo");
        sse = failed.start();
        sse += failed.failed(ApiError{500, "the grammar cannot go on", "server_error", "", ""});
        ev = events_of(sse);
        QCOMPARE(ev.back()["type"], ojson("response.failed"));
        QCOMPARE(ev.back()["response"]["status"], ojson("failed"));
        QCOMPARE(ev.back()["response"]["error"]["message"], ojson("the grammar cannot go on"));
        QVERIFY(!ev.back().contains("error"));  // a top-level error would make clients throw before reading it
    }
};

QTEST_GUILESS_MAIN(TestResponsesApi)
#include "test_responses_api.moc"
