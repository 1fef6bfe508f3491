// strata serve end to end, in process: the demo model behind ServeLoop and
// HttpServer on a loopback port, driven by cpp-httplib's client. Batching
// (64 concurrent streams, each equal to the same request alone), disconnects
// (cancelled, KV blocks back), a corpus of malformed requests (OpenAI errors,
// the server keeps serving), the queue limit, the key and CORS.
#include <QTemporaryDir>
#include <QtTest>

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "common/error.h"
#include "core/engine.h"
#include "gguf/gguf.h"
#include "sched/embedding.h"
#include "sched/generator.h"
#include "serve/http_server.h"
#include "serve/serve_loop.h"
#include "context_params.h"
#include "test_support.h"

using namespace strata;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct Served {
    std::unique_ptr<serve::ServeLoop> loop;
    std::unique_ptr<serve::HttpServer> http;
    int port() const { return http->port(); }
};

Served start(core::Engine& eng, serve::ServerOptions so = {}, int max_batch = 16, int max_queue = 64,
             const std::string& draft = {}) {
    serve::ServeLoopConfig lc;
    lc.speculation.draft = draft;
    lc.scheduler.max_batch = max_batch;
    lc.max_queue = max_queue;
    lc.card = {"demo", 1, eng.context().n_ctx()};
    Served s;
    s.loop = std::make_unique<serve::ServeLoop>(eng, lc);
    so.port = 0;
    so.max_concurrent = max_batch + max_queue;
    s.http = std::make_unique<serve::HttpServer>(*s.loop, so);
    s.http->start();
    return s;
}

std::unique_ptr<httplib::Client> client(int port) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_read_timeout(300, 0);
    c->set_write_timeout(60, 0);
    return c;
}

// Sends a streaming request; collects the content deltas. `stop_after`
// chunks > 0: returns false from the receiver then (the client goes away).
struct StreamResult {
    int status = 0;
    std::string text, finish;
    bool done = false;       // saw data: [DONE]
    int chunks = 0;
    double ttft_s = -1;
    json usage;
};

StreamResult stream(int port, const std::string& path, json body, int stop_after = 0) {
    body["stream"] = true;
    StreamResult out;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string buf;
    const auto t0 = Clock::now();
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        buf.append(data, n);
        size_t end;
        while ((end = buf.find("\n\n")) != std::string::npos) {
            const std::string ev = buf.substr(0, end);
            buf.erase(0, end + 2);
            if (ev.rfind("data: ", 0) != 0) continue;  // keep-alive comments
            const std::string payload = ev.substr(6);
            if (payload == "[DONE]") {
                out.done = true;
                continue;
            }
            const json j = json::parse(payload);
            if (j.contains("usage")) out.usage = j["usage"];
            if (j.contains("choices") && !j["choices"].empty()) {
                const json& c = j["choices"][0];
                const std::string piece = c.contains("delta") ? c["delta"].value("content", "") : c.value("text", "");
                if (!piece.empty() && out.ttft_s < 0)
                    out.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
                out.text += piece;
                if (!c["finish_reason"].is_null()) out.finish = c["finish_reason"].get<std::string>();
            }
            ++out.chunks;
            if (stop_after > 0 && out.chunks >= stop_after) return false;
        }
        return true;
    };
    auto c = client(port);
    auto res = c->send(req);
    out.status = res ? res->status : -static_cast<int>(res.error());
    return out;
}

json post_json(int port, const std::string& path, const std::string& body, int* status,
               const httplib::Headers& headers = {}) {
    auto c = client(port);
    auto res = c->Post(path.c_str(), headers, body, "application/json");
    *status = res ? res->status : 0;
    if (!res) return json();
    return json::parse(res->body, nullptr, false);
}

std::string metric(int port, const std::string& name) {
    auto c = client(port);
    auto res = c->Get("/metrics");
    if (!res) return "";
    std::istringstream in(res->body);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(name, 0) == 0) return line.substr(line.rfind(' ') + 1);
    return "";
}

const char* kPrompts[] = {
    "In the beginning", "And the LORD said unto Moses,", "Blessed are the poor in spirit:",
    "The LORD is my shepherd", "And it came to pass", "Then answered Jesus and said",
    "Hear, O Israel:", "For God so loved the world,",
};

json request_body(int i, bool chat) {
    json b = {{"temperature", 0}, {"max_tokens", 6 + (i * 7) % 30}};
    const std::string p = kPrompts[i % 8] + std::string(i % 3 == 0 ? "" : " and") + std::string(i % 5, '.');
    if (chat) {
        b["messages"] = json::array({{{"role", "user"}, {"content", p}}});
    } else {
        b["prompt"] = p;
    }
    return b;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

}  // namespace

class TestServeHttp : public QObject {
    Q_OBJECT
    std::unique_ptr<core::Engine> eng_;

private Q_SLOTS:
    void initTestCase() {
        EngineSettings es;
        es.threads = 2;
        es.kv_tokens = 8192;  // room for many sequences at once
        eng_ = core::Engine::load(test::demo_model_path(), es);
    }

    void models_health_and_metrics() {
        Served s = start(*eng_);
        auto c = client(s.port());
        auto h = c->Get("/health");
        QVERIFY(h && h->status == 200);
        auto m = c->Get("/v1/models");
        QVERIFY(m && m->status == 200);
        const json j = json::parse(m->body);
        QCOMPARE(j["object"].get<std::string>(), std::string("list"));
        QCOMPARE(j["data"][0]["id"].get<std::string>(), std::string("demo"));
        QVERIFY(c->Get("/v1/models/demo")->status == 200);
        QVERIFY(c->Get("/v1/models/other")->status == 404);
        auto met = c->Get("/metrics");
        QVERIFY(met && met->status == 200);
        QVERIFY(met->get_header_value("Content-Type").find("text/plain") == 0);
        for (const char* name : {"strata_kv_blocks_total", "strata_queue_depth", "strata_expert_cache_hit_rate",
                                 "strata_expert_bytes_loaded_per_token", "strata_ledger_bytes",
                                 "strata_generation_tokens_per_second", "strata_time_to_first_token_seconds"})
            QVERIFY2(met->body.find(name) != std::string::npos, name);
        QVERIFY(met->get_header_value("Access-Control-Allow-Origin").empty());  // CORS off by default
    }

    void a_greedy_completion_equals_the_engine_alone() {
        const std::string prompt = "And the LORD said unto Moses,";
        model::Context solo(eng_->model(), test::context_params(eng_->context().n_ctx(), 64, 2));
        sched::SamplingParams sp;
        sp.temperature = 0;
        sp.max_tokens = 24;
        const auto want = sched::generate(solo, eng_->vocab(), sp, eng_->vocab().encode(prompt, true));

        Served s = start(*eng_);
        int status = 0;
        const json r = post_json(s.port(), "/v1/completions",
                                 json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"model", "demo"}}.dump(),
                                 &status);
        QCOMPARE(status, 200);
        QCOMPARE(r["choices"][0]["text"].get<std::string>(), want.text);
        QCOMPARE(r["usage"]["completion_tokens"].get<int64_t>(), static_cast<int64_t>(want.tokens.size()));
        QCOMPARE(r["usage"]["prompt_tokens"].get<int64_t>(), want.prompt_tokens);
        QCOMPARE(r["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
        // Streaming gives the same text.
        const StreamResult st = stream(s.port(), "/v1/completions",
                                       json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}});
        QCOMPARE(st.status, 200);
        QVERIFY(st.done);
        QCOMPARE(st.text, want.text);
    }

    // serve --draft: requests decode speculatively, one at a time, with the
    // greedy text of plain decoding, streamed too; a request with a grammar
    // is batched as before; a draft the model cannot have fails at start.
    void a_draft_serves_the_same_greedy_text() {
        const json body = {{"messages", {{{"role", "user"}, {"content", "And God said"}}}}, {"temperature", 0}, {"max_tokens", 40}};
        int status = 0;
        std::string plain;
        {
            Served s = start(*eng_);
            plain = post_json(s.port(), "/v1/chat/completions", body.dump(), &status)["choices"][0]["message"]["content"];
            QCOMPARE(status, 200);
        }
        Served s = start(*eng_, {}, 16, 64, "self:layers=3");
        const json r = post_json(s.port(), "/v1/chat/completions", body.dump(), &status);
        QCOMPARE(status, 200);
        QCOMPARE(r["choices"][0]["message"]["content"].get<std::string>(), plain);
        QCOMPARE(r["usage"]["completion_tokens"].get<int64_t>(), int64_t{40});
        const StreamResult st = stream(s.port(), "/v1/chat/completions", body);
        QVERIFY(st.done);
        QCOMPARE(st.text, plain);
        json constrained = body;
        constrained["response_format"] = {{"type", "json_object"}};
        constrained["max_tokens"] = 20;
        QCOMPARE(post_json(s.port(), "/v1/chat/completions", constrained.dump(), &status)["object"].get<std::string>(),
                 std::string("chat.completion"));
        QCOMPARE(status, 200);
        serve::ServeLoopConfig bad;
        bad.card = {"demo", 1, eng_->context().n_ctx()};
        bad.speculation.draft = "mtp";
        QVERIFY_THROWS_EXCEPTION(strata::Error, serve::ServeLoop(*eng_, bad));
    }

    // /v1/embeddings: the mean-pooled, unit-length hidden state the engine
    // gives alone (sched::embed), as floats or base64, per input; bad inputs
    // are 400s naming the field.
    void embeddings_equal_the_engine_alone() {
        const std::vector<std::string> texts = {"In the beginning God created the heaven and the earth.", "Let there be light"};
        model::Context solo(eng_->model(), test::context_params(eng_->context().n_ctx(), 64, 2));
        std::vector<std::vector<float>> want;
        for (const std::string& t : texts) want.push_back(sched::embed(solo, eng_->vocab().encode(t, true)));
        QCOMPARE(static_cast<int64_t>(want[0].size()), eng_->model().config().n_embd);
        double norm = 0;
        for (float x : want[0]) norm += double(x) * x;
        QVERIFY(std::fabs(norm - 1.0) < 1e-5);
        QCOMPARE(solo.kv_cache().stats().sequences, int64_t{1});  // its sequences freed again (the default one stays)

        Served s = start(*eng_);
        int status = 0;
        const json r = post_json(s.port(), "/v1/embeddings", json{{"input", texts}, {"model", "demo"}}.dump(), &status);
        QCOMPARE(status, 200);
        QCOMPARE(r["object"].get<std::string>(), std::string("list"));
        QCOMPARE(r["data"].size(), size_t{2});
        for (size_t i = 0; i < texts.size(); ++i) {
            const auto got = r["data"][i]["embedding"].get<std::vector<float>>();
            QCOMPARE(r["data"][i]["index"].get<size_t>(), i);
            QCOMPARE(got.size(), want[i].size());
            for (size_t k = 0; k < got.size(); ++k) QVERIFY2(std::fabs(got[k] - want[i][k]) < 1e-6f, qPrintable(QString::number(k)));
        }
        int64_t tokens = 0;
        for (const std::string& t : texts) tokens += static_cast<int64_t>(eng_->vocab().encode(t, true).size());
        QCOMPARE(r["usage"]["prompt_tokens"].get<int64_t>(), tokens);
        // base64: the same floats, little-endian.
        const json b = post_json(s.port(), "/v1/embeddings", json{{"input", texts[0]}, {"encoding_format", "base64"}}.dump(), &status);
        QCOMPARE(status, 200);
        const QByteArray raw = QByteArray::fromBase64(QByteArray::fromStdString(b["data"][0]["embedding"].get<std::string>()));
        QCOMPARE(raw.size(), static_cast<qsizetype>(want[0].size() * sizeof(float)));
        QVERIFY(std::memcmp(raw.constData(), want[0].data(), static_cast<size_t>(raw.size())) == 0);
        // Token ids in, the same as their text.
        const std::vector<int32_t> ids = eng_->vocab().encode(texts[1], true);
        const json t = post_json(s.port(), "/v1/embeddings", json{{"input", ids}}.dump(), &status);
        QCOMPARE(status, 200);
        QCOMPARE(t["data"][0]["embedding"].get<std::vector<float>>(), r["data"][1]["embedding"].get<std::vector<float>>());
        // Bad inputs.
        const std::string too_long = json{{"input", std::vector<int32_t>(static_cast<size_t>(eng_->context().n_ctx() + 1), 5)}}.dump();
        for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
                 {R"({"input": []})", "input"},
                 {R"({"input": ""})", "input"},
                 {R"({"input": [1, "a"]})", "input"},
                 {R"({"input": [99999999]})", "input"},
                 {R"({})", "input"},
                 {R"({"input": "x", "encoding_format": "hex"})", "encoding_format"},
                 {R"({"input": "x", "dimensions": 8})", "dimensions"},
                 {too_long, "input"}}) {
            const json e = post_json(s.port(), "/v1/embeddings", body, &status);
            QVERIFY2(status == 400, body.substr(0, 80).c_str());
            QCOMPARE(e["error"]["param"].get<std::string>(), field);
        }
        post_json(s.port(), "/v1/embeddings", json{{"input", "x"}, {"model", "other"}}.dump(), &status);
        QCOMPARE(status, 404);
    }

    // The demo model has no template for tools (a plain transcript): they
    // and the tool turns are written into plain turns, so the prompt grows by
    // the definitions; tool_choice "none" with no tools is an ordinary chat.
    void tools_without_a_template_for_them_become_plain_turns() {
        Served s = start(*eng_);
        int status = 0;
        const json tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
        const json user = {{"role", "user"}, {"content", "hi"}};
        const json plain = post_json(s.port(), "/v1/chat/completions", json{{"messages", {user}}, {"max_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        const json with_tools = post_json(s.port(), "/v1/chat/completions",
                                          json{{"messages", {user}}, {"tools", tools}, {"max_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        QVERIFY(with_tools["usage"]["prompt_tokens"].get<int64_t>() > plain["usage"]["prompt_tokens"].get<int64_t>() + 20);
        const json turn = post_json(s.port(), "/v1/chat/completions",
                                    json{{"messages", {user, {{"role", "tool"}, {"content", "21"}}}}, {"max_tokens", 2}}.dump(),
                                    &status);
        QCOMPARE(status, 200);
        QVERIFY(turn["usage"]["prompt_tokens"].get<int64_t>() > plain["usage"]["prompt_tokens"].get<int64_t>());
        const json ok = post_json(s.port(), "/v1/chat/completions",
                                  json{{"messages", {user}}, {"tool_choice", "none"}, {"max_tokens", 4}}.dump(), &status);
        QCOMPARE(status, 200);
        QVERIFY(!ok["choices"][0]["message"].contains("tool_calls"));
    }

    // With a template that renders tools (a Hermes-style Jinja written into a
    // copy of the demo model), the tools and the tool turns reach the prompt:
    // it grows by what the template prints for them.
    void tools_and_tool_turns_reach_the_template() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("tools.gguf").toStdString();
        {
            auto f = gguf::File::open(test::demo_model_path());
            gguf::Writer w;
            for (const auto& [k, v] : f->metadata()) w.set(k, v);
            w.set("tokenizer.chat_template",
                  gguf::Value::make_string(
                      "{%- if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>\n{% endif %}"
                      "{%- for m in messages %}{{ m.role }}: {% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>"
                      "{{ c.function | tojson }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}"
                      "{%- if add_generation_prompt %}assistant:{% endif %}"));
            for (const gguf::TensorInfo& t : f->tensors())
                w.add_tensor_view(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
            w.write(path);
        }
        EngineSettings es;
        es.threads = 2;
        auto eng = core::Engine::load(path, es);
        QVERIFY(eng->chat_template().uses_jinja());
        QVERIFY(eng->chat_template().tool_syntax() == chat::ChatTemplate::ToolSyntax::Hermes);
        Served s = start(*eng);
        int status = 0;
        const json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
        const json plain = post_json(s.port(), "/v1/chat/completions", json{{"messages", {user}}, {"max_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"The weather",)"
                                       R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
        const json with_tools = post_json(s.port(), "/v1/chat/completions",
                                          json{{"messages", {user}}, {"tools", tools}, {"max_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        const int64_t p0 = plain["usage"]["prompt_tokens"].get<int64_t>(), p1 = with_tools["usage"]["prompt_tokens"].get<int64_t>();
        QVERIFY2(p1 > p0 + 10, qPrintable(QString("%1 vs %2").arg(p1).arg(p0)));
        const json turns = {user,
                            {{"role", "assistant"}, {"content", nullptr},
                             {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
                            {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "21 C, clear"}}};
        const json after = post_json(s.port(), "/v1/chat/completions",
                                     json{{"messages", turns}, {"tools", tools}, {"max_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        QVERIFY(after["usage"]["prompt_tokens"].get<int64_t>() > p1);

        // The same conversation through /v1/responses (flat tools, call and
        // output items) renders to the same prompt.
        const json items = {user,
                            {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"},
                             {"arguments", "{\"city\": \"Paris\"}"}},
                            {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "21 C, clear"}}};
        json flat = tools[0]["function"];
        flat["type"] = "function";
        const json resp = post_json(s.port(), "/v1/responses",
                                    json{{"input", items}, {"tools", {flat}}, {"max_output_tokens", 2}}.dump(), &status);
        QCOMPARE(status, 200);
        QCOMPARE(resp["object"].get<std::string>(), std::string("response"));
        QCOMPARE(resp["usage"]["input_tokens"].get<int64_t>(), after["usage"]["prompt_tokens"].get<int64_t>());
    }

    void sixty_four_concurrent_streams_each_equal_alone() {
        Served s = start(*eng_);
        const int n = 64;
        std::vector<std::string> alone(n);
        for (int i = 0; i < n; ++i) {
            int status = 0;
            const bool chat = i % 2 == 0;
            const json r = post_json(s.port(), chat ? "/v1/chat/completions" : "/v1/completions",
                                     request_body(i, chat).dump(), &status);
            QCOMPARE(status, 200);
            alone[i] = chat ? r["choices"][0]["message"]["content"].get<std::string>()
                            : r["choices"][0]["text"].get<std::string>();
        }
        const memory::Ledger& ledger = eng_->ledger();
        const uint64_t kv_reserved = ledger.reserved(memory::Account::KvPages, memory::Tier::Fast);
        std::vector<StreamResult> got(n);
        std::vector<std::thread> threads;
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) {
            threads.emplace_back([&, i] {
                const bool chat = i % 2 == 0;
                json b = request_body(i, chat);
                b["stream_options"] = {{"include_usage", true}};
                got[i] = stream(s.port(), chat ? "/v1/chat/completions" : "/v1/completions", b);
            });
        }
        for (auto& t : threads) t.join();
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        int64_t tokens = 0;
        std::vector<double> ttft;
        for (int i = 0; i < n; ++i) {
            QCOMPARE(got[i].status, 200);
            QVERIFY(got[i].done);
            QVERIFY2(got[i].text == alone[i], qPrintable(QStringLiteral("request %1 differs from alone").arg(i)));
            QVERIFY(!got[i].finish.empty());
            tokens += got[i].usage["completion_tokens"].get<int64_t>();
            ttft.push_back(got[i].ttft_s);
        }
        QVERIFY(ledger.used(memory::Account::KvPages, memory::Tier::Fast) <= kv_reserved);
        QCOMPARE(metric(s.port(), "strata_kv_blocks_used"), std::string("0"));
        qInfo("64 concurrent streams: %lld tokens in %.2f s = %.1f tok/s; TTFT p50 %.3f s, p99 %.3f s",
              static_cast<long long>(tokens), wall, tokens / wall, percentile(ttft, 0.5), percentile(ttft, 0.99));
    }

    void clients_that_leave_are_cancelled_and_their_blocks_freed() {
        Served s = start(*eng_);
        const int n = 32;
        std::vector<StreamResult> got(n);
        std::vector<std::thread> threads;
        for (int i = 0; i < n; ++i) {
            threads.emplace_back([&, i] {
                json b = {{"prompt", kPrompts[i % 8]}, {"temperature", 0.7}, {"seed", i}, {"max_tokens", 60}};
                got[i] = stream(s.port(), "/v1/completions", b, i % 2 == 0 ? 3 : 0);
            });
        }
        for (auto& t : threads) t.join();
        for (int i = 1; i < n; i += 2) {
            QVERIFY2(got[i].done, qPrintable(QStringLiteral("request %1: status %2, %3 chunks, text '%4'")
                                                 .arg(i)
                                                 .arg(got[i].status)
                                                 .arg(got[i].chunks)
                                                 .arg(QString::fromStdString(got[i].text))));
            QVERIFY(!got[i].finish.empty());
        }
        // The server notices each departure at its next write; give it a moment.
        for (int tries = 0; tries < 100 && metric(s.port(), R"(strata_requests_finished_total{model="demo",finish="cancelled"})") != "16"; ++tries)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        QCOMPARE(metric(s.port(), R"(strata_requests_finished_total{model="demo",finish="cancelled"})"), std::string("16"));
        QCOMPARE(metric(s.port(), "strata_kv_blocks_used"), std::string("0"));
        QCOMPARE(metric(s.port(), "strata_requests_running"), std::string("0"));
        QCOMPARE(eng_->kv_cache().stats().used_blocks, int64_t{0});
    }

    void malformed_requests_get_openai_errors_and_the_server_goes_on() {
        serve::ServerOptions so;
        so.api_key = "sekret";
        Served s = start(*eng_, so);
        const httplib::Headers key = {{"Authorization", "Bearer sekret"}};
        struct Case {
            std::string path, body;
            int status;
            httplib::Headers headers;
        };
        std::vector<Case> cases = {
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"})", 400, key},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"})", 400, key},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"temperature":1e308})", 400, key},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999})", 400, key},
            {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"seed":123456789012345678901234567890})", 400, key},
            {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", 400, key},
            {"/v1/chat/completions", R"({})", 400, key},
            {"/v1/completions", R"({"prompt":null})", 400, key},
            {"/v1/completions", R"({"prompt":"x","model":"gpt-4"})", 404, key},
            {"/v1/completions", std::string(10u << 20, ' '), 413, key},
            {"/v1/completions", R"({"prompt":"x"})", 401, {}},
            {"/v1/completions", R"({"prompt":"x"})", 401, {{"Authorization", "Bearer wrong"}}},
            {"/v1/completions", R"({"prompt":"x"})", 401, {{"Authorization", "sekret"}}},
            {"/v1/nothing", R"({})", 404, key},
            {"/v1/completions", "{\"prompt\":\"" + std::string(20000, 'a') + " " + std::string(20000, 'b') + "\"}", 400, key},
        };
        for (const Case& c : cases) {
            int status = 0;
            const json r = post_json(s.port(), c.path, c.body, &status, c.headers);
            QVERIFY2(status == c.status, qPrintable(QStringLiteral("%1 %2 -> %3 (want %4)")
                                                        .arg(QString::fromStdString(c.path))
                                                        .arg(QString::fromStdString(c.body.substr(0, 80)))
                                                        .arg(status)
                                                        .arg(c.status)));
            QVERIFY2(r.is_object() && r.contains("error") && r["error"]["message"].is_string(),
                     qPrintable(QString::fromStdString(r.dump())));
        }
        // The long prompt says which limit it broke.
        int status = 0;
        const json r = post_json(s.port(), "/v1/completions",
                                 "{\"prompt\":\"" + std::string(20000, 'a') + " " + std::string(20000, 'b') + "\"}",
                                 &status, key);
        QCOMPARE(r["error"]["code"].get<std::string>(), std::string("context_length_exceeded"));
        // Health needs no key; everything else does, and a good request still works.
        QCOMPARE(client(s.port())->Get("/health")->status, 200);
        QCOMPARE(client(s.port())->Get("/v1/models")->status, 401);
        const json ok = post_json(s.port(), "/v1/completions", R"({"prompt":"In the beginning","max_tokens":4})", &status, key);
        QCOMPARE(status, 200);
        QCOMPARE(ok["usage"]["completion_tokens"].get<int>(), 4);
    }

    void a_full_queue_answers_429() {
        Served s = start(*eng_, {}, /*max_batch=*/1, /*max_queue=*/0);
        std::atomic<bool> started{false};
        StreamResult first;
        std::thread t([&] {
            first = stream(s.port(), "/v1/completions",
                           json{{"prompt", "In the beginning"}, {"max_tokens", 200}, {"temperature", 0.8}, {"seed", 1}});
            started = true;
        });
        for (int i = 0; i < 200 && metric(s.port(), "strata_requests_running") != "1"; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        int status = 0;
        const json r = post_json(s.port(), "/v1/completions", R"({"prompt":"And","max_tokens":2})", &status);
        t.join();
        QCOMPARE(status, 429);
        QCOMPARE(r["error"]["code"].get<std::string>(), std::string("queue_full"));
        QCOMPARE(first.status, 200);
        QVERIFY(first.done);
    }

    void cors_only_when_asked() {
        serve::ServerOptions so;
        so.cors_origin = "http://localhost:3000";
        Served s = start(*eng_, so);
        auto c = client(s.port());
        auto m = c->Get("/v1/models");
        QCOMPARE(m->get_header_value("Access-Control-Allow-Origin"), std::string("http://localhost:3000"));
        auto pre = c->Options("/v1/chat/completions");
        QVERIFY(pre);
        QCOMPARE(pre->status, 204);
        QVERIFY(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
    }

    void a_port_in_use_is_a_clear_error() {
        Served s = start(*eng_);
        serve::ServeLoopConfig lc;
        lc.card = {"demo", 1, 256};
        serve::ServerOptions so;
        so.port = s.port();
        serve::HttpServer second(*s.loop, so);
        try {
            second.start();
            QFAIL("bound a port in use");
        } catch (const Error& e) {
            QVERIFY(QString::fromUtf8(e.what()).contains("in use"));
        }
        QVERIFY(!serve::is_loopback("0.0.0.0"));
        QVERIFY(serve::is_loopback("127.0.0.1") && serve::is_loopback("::1") && serve::is_loopback("localhost"));
    }
};

QTEST_GUILESS_MAIN(TestServeHttp)
#include "test_serve_http.moc"
