// The OpenAI wire format without a server: request parsing and checking,
// response and chunk shapes, errors, the key comparison, the metrics text.
#include <QtTest>

#include "serve/metrics.h"
#include "serve/openai_api.h"
#include "serve/tool_calls.h"

using namespace strata;
using namespace strata::serve;
using nlohmann::json;

namespace {

// The ApiError a body gets, or status 0 when it parses.
ApiError error_of(Endpoint e, const std::string& body) {
    try {
        parse_request(e, body);
    } catch (const ApiException& ex) {
        return ex.error;
    }
    return ApiError{0, "", "", "", ""};
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";
std::string chat_body(const std::string& extra) { return "{" + kMsgs + (extra.empty() ? "" : "," + extra) + "}"; }

}  // namespace

class TestOpenAiApi : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void a_chat_request_takes_openai_defaults() {
        const CompletionRequest r = parse_request(Endpoint::Chat, chat_body(R"("model":"m")"));
        QCOMPARE(r.model, std::string("m"));
        QCOMPARE(r.messages.size(), size_t{1});
        QCOMPARE(r.messages[0].role, std::string("user"));
        QCOMPARE(r.sampling.temperature, 1.0f);
        QCOMPARE(r.sampling.top_p, 1.0f);
        QCOMPARE(r.sampling.top_k, 0);
        QCOMPARE(r.sampling.min_p, 0.0f);
        QCOMPARE(r.sampling.max_tokens, 0);
        QVERIFY(!r.stream && !r.include_usage && !r.seed_given);
    }

    void every_supported_field_is_read() {
        const CompletionRequest r = parse_request(
            Endpoint::Chat,
            R"({"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null},{"role":"user","content":"c"}],
                "max_tokens":7,"temperature":0,"top_p":0.5,"seed":18446744073709551615,"stop":["x","y"],"stream":true,
                "stream_options":{"include_usage":true},"presence_penalty":-1.5,"frequency_penalty":0.5,"top_k":3,"min_p":0.1,
                "n":1,"logprobs":false,"tools":[],"tool_choice":"none","response_format":{"type":"text"},"user":"u","metadata":{"k":"v"}})");
        QCOMPARE(r.messages[0].role, std::string("system"));  // developer = system
        QCOMPARE(r.messages[1].content, std::string("ab"));
        QCOMPARE(r.messages[2].content, std::string());
        QCOMPARE(r.sampling.max_tokens, 7);
        QCOMPARE(r.sampling.temperature, 0.0f);
        QCOMPARE(r.sampling.top_p, 0.5f);
        QCOMPARE(r.sampling.seed, uint64_t(18446744073709551615ull));
        QVERIFY(r.seed_given);
        QCOMPARE(r.stop, (std::vector<std::string>{"x", "y"}));
        QVERIFY(r.stream && r.include_usage);
        QCOMPARE(r.sampling.presence_penalty, -1.5f);
        QCOMPARE(r.sampling.top_k, 3);
        QCOMPARE(r.sampling.min_p, 0.1f);
        // max_completion_tokens wins over max_tokens; top_p 0 means the top token only.
        const CompletionRequest m = parse_request(Endpoint::Chat, chat_body(R"("max_tokens":7,"max_completion_tokens":9,"top_p":0)"));
        QCOMPARE(m.sampling.max_tokens, 9);
        QCOMPARE(m.sampling.top_k, 1);
        QVERIFY(m.sampling.validate().empty());
    }

    void a_completion_takes_one_prompt() {
        QCOMPARE(parse_request(Endpoint::Completion, R"({"prompt":"abc"})").prompt, std::string("abc"));
        QCOMPARE(parse_request(Endpoint::Completion, R"({"prompt":["abc"]})").prompt, std::string("abc"));
        QCOMPARE(error_of(Endpoint::Completion, R"({"prompt":[1,2,3]})").param, std::string("prompt"));
        QCOMPARE(error_of(Endpoint::Completion, R"({"prompt":["a","b"]})").param, std::string("prompt"));
        QCOMPARE(error_of(Endpoint::Completion, R"({})").param, std::string("prompt"));
        QCOMPARE(error_of(Endpoint::Completion, R"({"prompt":"a","echo":true})").param, std::string("echo"));
        QCOMPARE(error_of(Endpoint::Completion, R"({"prompt":"a","suffix":"z"})").param, std::string("suffix"));
        QCOMPARE(error_of(Endpoint::Completion, R"({"prompt":"a","best_of":2})").param, std::string("best_of"));
    }

    void bad_bodies_are_400s_naming_the_field() {
        struct Case {
            std::string body, param, says;
        };
        const Case cases[] = {
            {R"({"messages":[{"role":"user","content":"hi"})", "", "not valid JSON"},  // truncated
            {"", "", "not valid JSON"},
            {"[1,2]", "", "must be a JSON object"},
            {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "", "not valid JSON"},  // invalid UTF-8
            {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e400})", "", "not valid JSON"},
            {chat_body(R"("temperature":"hot")"), "temperature", "must be a number, got a string"},
            {chat_body(R"("temperature":2.5)"), "temperature", "expected a number from 0 to 2"},
            {chat_body(R"("top_p":-0.1)"), "top_p", "expected a number from 0 to 1"},
            {chat_body(R"("max_tokens":0)"), "max_tokens", "expected an integer from 1"},
            {chat_body(R"("max_tokens":12.5)"), "max_tokens", "must be an integer"},
            {chat_body(R"("max_tokens":1e30)"), "max_tokens", "must be an integer"},
            {chat_body(R"("max_tokens":99999999999999999999)"), "max_tokens", "must be an integer"},
            {chat_body(R"("max_tokens":9223372036854775807)"), "max_tokens", "expected an integer from 1"},
            {chat_body(R"("max_tokens":-5)"), "max_tokens", "expected an integer from 1"},
            {chat_body(R"("seed":"x")"), "seed", "must be an integer"},
            {chat_body(R"("stream":"yes")"), "stream", "must be a boolean"},
            {chat_body(R"("stream_options":true)"), "stream_options", "must be an object"},
            {chat_body(R"("stop":["a","b","c","d","e"])"), "stop", "at most 4"},
            {chat_body(R"("stop":[""])"), "stop", "empty string"},
            {chat_body(R"("stop":7)"), "stop", "a string or an array of strings"},
            {chat_body(R"("n":2)"), "n", "must be 1"},
            {chat_body(R"("logprobs":true)"), "logprobs", "not supported"},
            {chat_body(R"("tools":[{"type":"function"}])"), "tools", "tools[0] must be"},
            {chat_body(R"("tools":[{"type":"function","function":{"name":""}}])"), "tools", "non-empty string 'name'"},
            {chat_body(R"("tools":{})"), "tools", "must be an array"},
            {chat_body(R"("tool_choice":"required")"), "tool_choice", "needs 'tools'"},
            {chat_body(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"), "tool_choice", "'g', which is not in 'tools'"},
            {chat_body(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"string","pattern":"a"}}}}}],"tool_choice":"required")"), "tools", "keyword 'pattern' at /properties/x"},
            {chat_body(R"("response_format":{"type":"json_object"},"grammar":"root ::= [x]")"), "grammar", "both constrain"},
            {chat_body(R"("grammar":"root ::= x")"), "grammar", "rule 'x' is used but not defined"},
            {chat_body(R"("response_format":{"type":"json_schema","json_schema":{"schema":{"type":"number","maximum":3}}})"), "response_format", "keyword 'maximum'"},
            {chat_body(R"("tool_choice":"sometimes")"), "tool_choice", "must be"},
            {chat_body(R"("functions":[])"), "functions", "old form"},
            {chat_body(R"("response_format":{"type":"yaml"})"), "response_format", "must be"},
            {chat_body(R"("logit_bias":{"50":5})"), "logit_bias", "not supported"},
            {chat_body(R"("model":7)"), "model", "must be a string"},
            {R"({"model":"m"})", "messages", "is required"},
            {R"({"messages":{}})", "messages", "must be an array"},
            {R"({"messages":[]})", "messages", "is empty"},
            {R"({"messages":["hi"]})", "messages[0]", "must be an object"},
            {R"({"messages":[{"content":"hi"}]})", "messages[0].role", "needs a string 'role'"},
            {R"({"messages":[{"role":"critic","content":"hi"}]})", "messages[0].role", "has role 'critic'"},
            {R"({"messages":[{"role":"assistant","tool_calls":{}}]})", "messages[0].tool_calls", "must be an array"},
            {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"nope"}}]}]})",
             "messages[0].tool_calls[0].function.arguments", "is not JSON"},
            {R"({"messages":[{"role":"user"}]})", "messages[0].content", "needs 'content'"},
            {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", "messages[0].content",
             "only text parts"},
            {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content", "a string or an array of text parts"},
        };
        for (const Case& c : cases) {
            const ApiError e = error_of(Endpoint::Chat, c.body);
            QVERIFY2(e.status == 400, qPrintable(QString::fromStdString("accepted: " + c.body)));
            QCOMPARE(e.type, std::string("invalid_request_error"));
            QVERIFY2(e.param == c.param, qPrintable(QString::fromStdString(c.body + " -> param '" + e.param + "'")));
            QVERIFY2(e.message.find(c.says) != std::string::npos,
                     qPrintable(QString::fromStdString(c.body + " -> " + e.message)));
        }
    }

    // Tools in the client's key order for the template; tool turns carry
    // their fields (arguments as an object, Hugging Face's convention).
    void tools_and_tool_turns_are_read() {
        const std::string body =
            "{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
            "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
            "\"function\":{\"name\":\"get_weather\",\"arguments\":" + json(std::string("{\"zcity\": \"Paris\", \"aunit\": \"C\"}")).dump() + "}}]},"
            "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"21\"}],"
            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"zz\":1,\"aa\":2}}}]}";
        const CompletionRequest r = parse_request(Endpoint::Chat, body);
        QVERIFY(r.wants_tool_calls());
        QCOMPARE(r.tools.dump(), std::string(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","zz":1,"aa":2}}}])"));
        QCOMPARE(r.messages.size(), size_t{3});
        QCOMPARE(r.messages[1].extra["tool_calls"][0]["function"]["arguments"].dump(),
                 std::string(R"({"zcity":"Paris","aunit":"C"})"));
        QVERIFY(r.messages[1].extra["content"].is_null());
        QCOMPARE(r.messages[2].role, std::string("tool"));
        QCOMPARE(r.messages[2].extra["tool_call_id"].get<std::string>(), std::string("c1"));
        QVERIFY(!parse_request(Endpoint::Chat, chat_body(R"("tools":[],"tool_choice":"none")")).wants_tool_calls());
    }

    // Hermes-format calls out of a reply; anything that is not a call stays text.
    void tool_calls_are_parsed_from_the_reply() {
        ParsedReply p = parse_tool_calls(
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
            "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>",
            "call_x_");
        QCOMPARE(p.content, std::string("Let me check."));
        QCOMPARE(p.calls.size(), size_t{2});
        QCOMPARE(p.calls[0].name, std::string("get_weather"));
        QCOMPARE(p.calls[0].arguments, std::string(R"({"city":"Oslo"})"));
        QCOMPARE(p.calls[1].arguments, std::string(R"({"q": 1})"));
        QCOMPARE(p.calls[1].id, std::string("call_x_1"));
        const json tc = tool_calls_json(p.calls, false);
        QCOMPARE(tc[0]["type"].get<std::string>(), std::string("function"));
        QCOMPARE(tc[0]["function"]["name"].get<std::string>(), std::string("get_weather"));
        // Cut before its close (max_tokens, or the end of turn): still a call.
        QCOMPARE(parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {}}", "c").calls.size(), size_t{1});
        for (const char* text : {"no calls here", "<tool_call>not json</tool_call>", "<tool_call>[1]</tool_call>",
                                 "<tool_call>{\"arguments\": {}}</tool_call>"}) {
            const ParsedReply t = parse_tool_calls(text, "c");
            QVERIFY2(t.calls.empty(), text);
            QCOMPARE(t.content, std::string(text));
        }
        // Streaming: text goes out as it comes, less what may start a call.
        ToolCallStream st;
        std::string out;
        for (const char* piece : {"Sure", ", <tool", "_ca", "ll>{\"name\": \"f\",", " \"arguments\": {\"a\": 1}}</tool_call>"})
            out += st.feed(piece);
        QCOMPARE(out, std::string("Sure, "));
        const ParsedReply end = st.finish("c_");
        QCOMPARE(end.calls.size(), size_t{1});
        QVERIFY(end.content.empty());
        ToolCallStream plain;
        QCOMPARE(plain.feed("a <tool"), std::string("a "));
        QCOMPARE(plain.feed("s> b"), std::string("<tools> b"));
        QCOMPARE(plain.finish("c").content, std::string());
        // The response shapes: a message with tool_calls and null content; a delta with them.
        const CompletionRequest r = parse_request(Endpoint::Chat, chat_body(""));
        const json msg = completion_response(r, "id", 1, "m", "", "tool_calls", Usage{3, 4}, &tc);
        QVERIFY(msg["choices"][0]["message"]["content"].is_null());
        QCOMPARE(msg["choices"][0]["finish_reason"].get<std::string>(), std::string("tool_calls"));
        QCOMPARE(msg["choices"][0]["message"]["tool_calls"].size(), size_t{2});
        const json delta = tool_calls_json(p.calls, true);
        const json chunk = stream_chunk(r, "id", 1, "m", "", "", false, &delta);
        QCOMPARE(chunk["choices"][0]["delta"]["tool_calls"][1]["index"].get<int>(), 1);
    }

    void responses_and_chunks_have_openai_shapes() {
        const CompletionRequest chat_r = parse_request(Endpoint::Chat, chat_body(""));
        const json full = completion_response(chat_r, "chatcmpl-1", 100, "m", "hello", "stop", Usage{3, 2});
        QCOMPARE(full["object"].get<std::string>(), std::string("chat.completion"));
        QCOMPARE(full["choices"][0]["message"]["content"].get<std::string>(), std::string("hello"));
        QCOMPARE(full["choices"][0]["message"]["role"].get<std::string>(), std::string("assistant"));
        QCOMPARE(full["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
        QCOMPARE(full["usage"]["total_tokens"].get<int>(), 5);

        const json first = stream_chunk(chat_r, "c", 1, "m", "", "", true);
        QCOMPARE(first["object"].get<std::string>(), std::string("chat.completion.chunk"));
        QCOMPARE(first["choices"][0]["delta"]["role"].get<std::string>(), std::string("assistant"));
        QVERIFY(first["choices"][0]["finish_reason"].is_null());
        const json mid = stream_chunk(chat_r, "c", 1, "m", "x", "", false);
        QVERIFY(!mid["choices"][0]["delta"].contains("role"));
        QCOMPARE(mid["choices"][0]["delta"]["content"].get<std::string>(), std::string("x"));
        const json last = stream_chunk(chat_r, "c", 1, "m", "", "length", false);
        QVERIFY(last["choices"][0]["delta"].empty());
        QCOMPARE(last["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
        const json usage = usage_chunk(chat_r, "c", 1, "m", Usage{4, 6});
        QVERIFY(usage["choices"].empty());
        QCOMPARE(usage["usage"]["completion_tokens"].get<int>(), 6);

        const CompletionRequest comp = parse_request(Endpoint::Completion, R"({"prompt":"p"})");
        const json c = stream_chunk(comp, "cmpl-1", 1, "m", "abc", "", true);
        QCOMPARE(c["object"].get<std::string>(), std::string("text_completion"));
        QCOMPARE(c["choices"][0]["text"].get<std::string>(), std::string("abc"));
    }

    void errors_and_events_serialize_whatever_the_text() {
        const json e = error_json(ApiError{429, "busy", "server_busy", "", "queue_full"});
        QCOMPARE(e["error"]["message"].get<std::string>(), std::string("busy"));
        QVERIFY(e["error"]["param"].is_null());
        QCOMPARE(e["error"]["code"].get<std::string>(), std::string("queue_full"));
        // Text cut inside a UTF-8 character must not throw: it is replaced.
        const std::string ev = sse_event(json{{"t", std::string("ab\xe2\x82")}});
        QVERIFY(ev.rfind("data: ", 0) == 0);
        QVERIFY(ev.size() > 2 && ev.substr(ev.size() - 2) == "\n\n");
        QVERIFY(ev.find("\xef\xbf\xbd") != std::string::npos);
    }

    void keys_compare_exactly() {
        QVERIFY(keys_equal("secret", "secret"));
        QVERIFY(!keys_equal("secreT", "secret"));
        QVERIFY(!keys_equal("secret2", "secret"));
        QVERIFY(!keys_equal("secre", "secret"));
        QVERIFY(!keys_equal("", "secret"));
        QVERIFY(!keys_equal("", ""));  // no key configured never matches
    }

    void metrics_are_prometheus_text() {
        ServeMetrics m;
        m.finished("stop", 10, 5, 0.2);
        m.finished("length", 10, 7, 3.0);
        m.finished("cancelled", 4, 0, -1);
        m.rejected(429);
        m.generated(12);
        m.set_gauges(ServeGauges{2, 3, 5, 64, 16});
        TelemetrySnapshot t;
        t.hit_rate_total = 0.5;
        t.ledger.push_back(LedgerEntry{"experts.cache", "fast", 100, 60});
        const QString text = QString::fromStdString(m.render(t, "demo"));
        QVERIFY(text.contains("# TYPE strata_requests_finished_total counter"));
        QVERIFY(text.contains(R"(strata_requests_finished_total{model="demo",finish="stop"} 1)"));
        QVERIFY(text.contains(R"(strata_requests_finished_total{model="demo",finish="cancelled"} 1)"));
        QVERIFY(text.contains(R"(strata_requests_rejected_total{model="demo",status="429"} 1)"));
        QVERIFY(text.contains(R"(strata_queue_depth{model="demo"} 3)"));
        QVERIFY(text.contains(R"(strata_kv_blocks_used{model="demo"} 5)"));
        QVERIFY(text.contains(R"(strata_generated_tokens_total{model="demo"} 12)"));
        // Cumulative buckets: 0.2 s falls in le=0.25 and above, 3 s from le=5; the cancelled one has no first token.
        QVERIFY(text.contains(R"(strata_time_to_first_token_seconds_bucket{model="demo",le="0.10000000000000001"} 0)"));
        QVERIFY(text.contains(R"(strata_time_to_first_token_seconds_bucket{model="demo",le="0.25"} 1)"));
        QVERIFY(text.contains(R"(strata_time_to_first_token_seconds_bucket{model="demo",le="5"} 2)"));
        QVERIFY(text.contains(R"(strata_time_to_first_token_seconds_count{model="demo"} 2)"));
        QVERIFY(text.contains(R"(strata_expert_cache_hit_rate{model="demo"} 0.5)"));
        QVERIFY(text.contains(
            R"(strata_ledger_bytes{model="demo",account="experts.cache",tier="fast",kind="used"} 60)"));
        QVERIFY(m.recent_tokens_per_second() > 0.0);
        // Every sample line is "name{labels} value" or "name value".
        for (const QString& line : text.split('\n', Qt::SkipEmptyParts)) {
            if (line.startsWith('#')) continue;
            QVERIFY2(QRegularExpression(R"(^[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+$)").match(line).hasMatch(), qPrintable(line));
        }
    }

    // The app reads a Strata server's /metrics back into the panels' snapshot.
    void metrics_read_back_into_a_snapshot() {
        ServeMetrics m;
        m.finished("stop", 10, 5, 0.2);
        m.finished("length", 10, 7, 0.4);
        m.set_gauges(ServeGauges{1, 2, 5, 64, 16});
        TelemetrySnapshot t;
        t.tokens_processed = 1234;
        t.compute_seconds = 5.5;
        t.hit_rate_total = 0.75;
        t.hit_rate_recent = 0.5;
        t.bytes_loaded_per_token = 4096;
        t.bytes_loaded = 1u << 20;
        t.stall_fraction = 0.125;
        t.prefetch_precision = 0.25;
        t.prefetch_recall = 0.375;
        t.expert_slots = 48;
        t.expert_slot_bytes = 12345;
        t.policy = "lru";
        t.kernels = "avx512";
        t.device = "CPU \"x\"\nsecond line";
        t.fast_tier = "RAM";
        t.slow_tier = "model file";
        t.fast_budget = 1000;
        t.n_layer = 2;
        t.n_expert = 3;
        t.heat = {0.5f, 0.f, 0.25f, 0.f, 1.f, 0.125f};
        t.residency = {2, 0, 1, 3, 2, 0};
        t.ledger = {LedgerEntry{"experts.cache", "fast", 100, 60}, LedgerEntry{"weights.shared", "slow", 7, 7}};
        TelemetrySnapshot r;
        ServeFigures f;
        std::string err;
        QVERIFY2(read_metrics(m.render(t, "demo", /*per_expert=*/true), &r, &f, &err), err.c_str());
        QCOMPARE(r.tokens_processed, t.tokens_processed);
        QCOMPARE(r.compute_seconds, t.compute_seconds);
        QCOMPARE(r.hit_rate_total, t.hit_rate_total);
        QCOMPARE(r.hit_rate_recent, t.hit_rate_recent);
        QCOMPARE(r.bytes_loaded_per_token, t.bytes_loaded_per_token);
        QCOMPARE(r.bytes_loaded, t.bytes_loaded);
        QCOMPARE(r.stall_fraction, t.stall_fraction);
        QCOMPARE(r.prefetch_precision, t.prefetch_precision);
        QCOMPARE(r.prefetch_recall, t.prefetch_recall);
        QCOMPARE(r.expert_slots, t.expert_slots);
        QCOMPARE(r.expert_slot_bytes, t.expert_slot_bytes);
        QCOMPARE(r.policy, t.policy);
        QCOMPARE(r.kernels, t.kernels);
        QCOMPARE(r.device, t.device);  // escaped quote and newline survive
        QCOMPARE(r.fast_budget, t.fast_budget);
        QCOMPARE(r.n_layer, t.n_layer);
        QCOMPARE(r.n_expert, t.n_expert);
        QVERIFY(r.heat == t.heat);
        QVERIFY(r.residency == t.residency);
        QCOMPARE(r.ledger.size(), size_t(2));
        QCOMPARE(r.ledger[0].account, std::string("experts.cache"));
        QCOMPARE(r.ledger[0].reserved, uint64_t(100));
        QCOMPARE(r.ledger[0].used, uint64_t(60));
        QCOMPARE(f.finished, int64_t(2));
        QCOMPARE(f.ttft_count, int64_t(2));
        QCOMPARE(f.ttft_sum_s, 0.2 + 0.4);
        QCOMPARE(f.running, int64_t(1));
        QCOMPARE(f.waiting, int64_t(2));
        QCOMPARE(f.kv_blocks_used, int64_t(5));
        QCOMPARE(f.kv_blocks_total, int64_t(64));
        // Without ?experts=1 the heat map is left out (a Prometheus scrape stays small).
        const std::string plain = m.render(t, "demo");
        QVERIFY(plain.find("strata_expert_heat") == std::string::npos);
        QVERIFY(read_metrics(plain, &r, &f, &err));
        QVERIFY(r.heat.empty());
        QCOMPARE(r.n_expert, int64_t(3));
    }

    void other_servers_metrics_are_not_read_as_strata() {
        TelemetrySnapshot r;
        ServeFigures f;
        std::string err;
        QVERIFY(!read_metrics("# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name=\"m\"} 1\n", &r, &f, &err));
        QVERIFY2(err.find("not a Strata server") != std::string::npos, err.c_str());
        QVERIFY(!read_metrics("<html><body>Not found</body></html>", &r, &f, &err));
        QVERIFY2(err.find("line 1") != std::string::npos, err.c_str());
        QVERIFY(!read_metrics("", &r, &f, &err));
        QVERIFY(!read_metrics("strata_queue_depth{model=\"m\"\n", &r, &f, &err));  // truncated
    }
};

QTEST_GUILESS_MAIN(TestOpenAiApi)
#include "test_openai_api.moc"
