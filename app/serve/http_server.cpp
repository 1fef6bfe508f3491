#include "serve/http_server.h"

#include "serve/responses_api.h"
#include "serve/tool_calls.h"

#include <httplib.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <ctime>
#include <random>

#include "common/error.h"
#include "common/log.h"

namespace strata::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(200);
// An idle stream writes an SSE comment this often: a client that has gone away
// is noticed (the write fails) even while its request waits in the queue.
constexpr auto kKeepAlive = std::chrono::seconds(2);

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_json(e)), "application/json");
}

ApiError status_error(int status) {
    switch (status) {
        case 404:
            return {404, "no such endpoint: see /v1/models, /v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings, /health, "
                    "/metrics",
                    "invalid_request_error", "", "not_found"};
        case 405:
            return {405, "method not allowed for this endpoint", "invalid_request_error", "", ""};
        case 413:
            return {413, "the request body is larger than this server accepts", "invalid_request_error", "",
                    "request_too_large"};
        case 400:
            return {400, "the request could not be read as HTTP", "invalid_request_error", "", ""};
        default:
            return {status, "HTTP error " + std::to_string(status), status >= 500 ? "server_error" : "invalid_request_error",
                    "", ""};
    }
}

std::string request_id(const char* prefix, char separator = '-') {
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng(std::random_device{}());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%c%016llx%04llx", prefix, separator, static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(counter.fetch_add(1) & 0xffff));
    return buf;
}

// Tool call ids: "call_" + a random part + the call's index (unique per reply and across replies).
std::string call_id_prefix() { return request_id("call") + "_"; }

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Streams one request's channel as server-sent events. Called by cpp-httplib
// on the connection's thread until it returns false or the sink is done. The
// API's event format is the subclass's.
struct EventStream {
    std::shared_ptr<Channel> ch;
    Backend* backend = nullptr;
    std::string id, model;
    int64_t created = 0;
    // With tools: text that may be a call is held back (ToolCallStream).
    std::unique_ptr<ToolCallStream> calls;
    Clock::time_point last_write = Clock::now();

    virtual ~EventStream() = default;
    // The events for new text ("" when nothing is to be sent yet); `running`:
    // the request has started (the chat stream greets with the role then).
    virtual std::string on_text(const std::string& text, bool running) = 0;
    virtual std::string on_done(const ParsedReply& rest, const std::string& finish, const Usage& usage) = 0;
    virtual std::string on_failed(const ApiError& e) = 0;

    void gone() {
        ch->cancel();
        backend->notify_cancelled();
    }

    bool write(httplib::DataSink& sink, const std::string& data) {
        if (!sink.write(data.data(), data.size())) {
            gone();
            return false;
        }
        last_write = Clock::now();
        return true;
    }

    bool pump(httplib::DataSink& sink) {
        std::string text;
        const Channel::State st = ch->take(&text, kPoll);
        if (!sink.is_writable()) {
            gone();
            return false;
        }
        if (calls) text = calls->feed(text);
        if (const std::string events = on_text(text, st == Channel::State::Running); !events.empty()) {
            if (!write(sink, events)) return false;
        } else if (Clock::now() - last_write >= kKeepAlive) {
            if (!write(sink, ": keep-alive\n\n")) return false;
        }
        if (st == Channel::State::Done) {
            const ParsedReply rest = calls ? calls->finish(call_id_prefix()) : ParsedReply{};
            if (!write(sink, on_done(rest, ch->finish_reason(), Usage{ch->prompt_tokens(), ch->completion_tokens()})))
                return false;
            sink.done();
        } else if (st == Channel::State::Failed) {
            // Headers are gone already: the error travels as an event, as
            // OpenAI's own streams report a failure mid-answer.
            if (!write(sink, on_failed(ch->error()))) return false;
            sink.done();
        }
        return true;
    }
};

// /v1/chat/completions and /v1/completions: chunks, then "data: [DONE]".
struct ChunkStream : EventStream {
    CompletionRequest request;
    bool first = true;

    std::string on_text(const std::string& text, bool running) override {
        if (text.empty() && !(first && running)) return {};
        std::string out = sse_event(stream_chunk(request, id, created, model, text, "", first));
        first = false;
        return out;
    }

    std::string on_done(const ParsedReply& rest, const std::string& finish_reason, const Usage& usage) override {
        std::string finish = finish_reason;
        std::string out;
        if (!rest.content.empty()) {
            out += sse_event(stream_chunk(request, id, created, model, rest.content, "", first));
            first = false;
        }
        if (!rest.calls.empty()) {
            const nlohmann::json tc = tool_calls_json(rest.calls, /*with_index=*/true);
            out += sse_event(stream_chunk(request, id, created, model, "", "", first, &tc));
            first = false;
            finish = "tool_calls";
        }
        out += sse_event(stream_chunk(request, id, created, model, "", finish, first));
        if (request.include_usage) out += sse_event(usage_chunk(request, id, created, model, usage));
        return out + "data: [DONE]\n\n";
    }

    std::string on_failed(const ApiError& e) override { return sse_event(error_json(e)) + "data: [DONE]\n\n"; }
};

// /v1/responses: typed events (response.created ... response.completed).
struct ResponseStream : EventStream {
    ResponsesRequest request;
    std::unique_ptr<ResponseEvents> events;
    ResponseStore* store = nullptr;
    bool started = false;

    std::string on_text(const std::string& text, bool running) override {
        std::string out;
        if (!started && (running || !text.empty())) {
            started = true;
            out = events->start();
        }
        return out + events->text(text);
    }
    std::string on_done(const ParsedReply& rest, const std::string& finish, const Usage& usage) override {
        std::string out = on_text("", true);  // (sequenced: the events are numbered)
        out += events->finish(rest, rest.calls.empty() ? finish : "tool_calls", usage);
        if (request.store) {
            ResponseStore::Entry e{request.conversation, events->final_response()};
            e.conversation.push_back(assistant_turn(events->whole_reply()));
            store->put(id, std::move(e));
        }
        return out;
    }
    std::string on_failed(const ApiError& e) override {
        std::string out = on_text("", true);
        return out + events->failed(e);
    }
};

// Debian's cpp-httplib 0.11 listens with a backlog of 5 (compiled in): a
// burst of clients overflows it, and the kernel then drops their handshakes,
// which clients see as read errors. Linux lets listen() be called again on a
// listening socket to change the backlog: find ours among the process's
// descriptors (a listening socket bound to our port) and widen it.
void widen_backlog(int port) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
        const int fd = std::atoi(e->d_name);
        if (fd <= 2 || fd == dirfd(dir)) continue;
        int listening = 0;
        socklen_t len = sizeof listening;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
        sockaddr_storage addr{};
        socklen_t alen = sizeof addr;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
        int bound = -1;
        if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
        if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
        if (bound == port) ::listen(fd, SOMAXCONN);
    }
    closedir(dir);
}

bool model_known(const Backend& b, const std::string& model, std::string* served) {
    const std::vector<ModelCard> cards = b.models();
    if (cards.empty()) return false;
    if (model.empty()) {
        *served = cards.front().id;
        return true;
    }
    for (const ModelCard& c : cards)
        if (c.id == model) {
            *served = c.id;
            return true;
        }
    return false;
}

}  // namespace

bool is_loopback(const std::string& host) {
    return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

HttpServer::HttpServer(Backend& backend, const ServerOptions& options) : backend_(backend), opt_(options) {
    if (opt_.port < 0 || opt_.port > 65535) throw Error("port " + std::to_string(opt_.port) + " is out of range (0..65535)");
    if (opt_.max_body_bytes == 0) throw Error("the body limit must be positive");
}

HttpServer::~HttpServer() { stop(); }

std::string HttpServer::url() const {
    const bool v6 = opt_.host.find(':') != std::string::npos && opt_.host.front() != '[';
    return "http://" + (v6 ? "[" + opt_.host + "]" : opt_.host) + ":" + std::to_string(port_);
}

void HttpServer::start() {
    // A client that closes its socket mid-write must not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    svr_ = std::make_unique<httplib::Server>();
    const int threads = opt_.threads > 0 ? opt_.threads : std::max(8, opt_.max_concurrent + 8);
    svr_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    svr_->set_payload_max_length(opt_.max_body_bytes);
    // cpp-httplib's default sets SO_REUSEPORT, which lets a second server bind
    // the same port and silently share its connections. SO_REUSEADDR only: a
    // port in use is an error, a restart after a crash still binds at once.
    svr_->set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    svr_->set_read_timeout(30, 0);
    svr_->set_write_timeout(30, 0);
    routes();
    port_ = opt_.port == 0 ? svr_->bind_to_any_port(opt_.host) : (svr_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
    if (port_ < 0) {
        svr_.reset();
        throw Error("cannot listen on " + opt_.host + ":" + std::to_string(opt_.port) +
                    ": the port is in use or the address is not one of this machine's (choose another --port or --host)");
    }
    widen_backlog(port_);
    if (!is_loopback(opt_.host) && opt_.api_key.empty()) {
        logger("serve")->warn("serving on {} without an API key: anyone who can reach this address can use the model "
                              "(set --api-key)",
                              opt_.host);
    }
    thread_ = std::thread([this] { svr_->listen_after_bind(); });
    // Bound already, so connections queue in the backlog meanwhile; waiting
    // here only makes start() return with the accept loop running.
    for (int i = 0; i < 2000 && !svr_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
    if (!svr_) return;
    svr_->stop();
    if (thread_.joinable()) thread_.join();
    svr_.reset();
}

void HttpServer::routes() {
    httplib::Server& s = *svr_;
    if (!opt_.cors_origin.empty()) {
        s.set_default_headers({{"Access-Control-Allow-Origin", opt_.cors_origin}, {"Vary", "Origin"}});
        s.Options(R"(.*)", [](const httplib::Request&, httplib::Response& res) {
            res.status = 204;
            res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Max-Age", "600");
        });
    }
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (opt_.api_key.empty() || req.path == "/health" || req.method == "OPTIONS")
            return httplib::Server::HandlerResponse::Unhandled;
        std::string given = req.get_header_value("Authorization");
        const std::string bearer = "Bearer ";
        given = given.rfind(bearer, 0) == 0 ? given.substr(bearer.size()) : std::string();
        if (keys_equal(given, opt_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, ApiError{401,
                                 given.empty() ? "no API key: send the header 'Authorization: Bearer KEY'"
                                               : "the API key is not valid",
                                 "invalid_request_error", "", "invalid_api_key"});
        return httplib::Server::HandlerResponse::Handled;
    });
    s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
        if (res.body.empty()) send_error(res, status_error(res.status));
    });
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        logger("serve")->error("request failed: {}", what);
        send_error(res, ApiError{500, "internal error: " + what, "server_error", "", ""});
    });

    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        const bool ready = !backend_.models().empty();
        res.status = ready ? 200 : 503;
        res.set_content(dump(json{{"status", ready ? "ok" : "no model loaded"}}), "application/json");
    });
    s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
        // ?experts=1 adds the heat map (the app's panels); Prometheus' scrapes stay small.
        const bool per_expert = req.has_param("experts") && req.get_param_value("experts") != "0";
        res.set_content(backend_.metrics_text(per_expert), "text/plain; version=0.0.4; charset=utf-8");
    });
    auto card_json = [](const ModelCard& c) {
        return json{{"id", c.id},
                    {"object", "model"},
                    {"created", c.created},
                    {"owned_by", "strata"},
                    {"meta", {{"n_ctx", c.n_ctx}}}};
    };
    s.Get("/v1/models", [this, card_json](const httplib::Request&, httplib::Response& res) {
        json data = json::array();
        for (const ModelCard& c : backend_.models()) data.push_back(card_json(c));
        res.set_content(dump(json{{"object", "list"}, {"data", data}}), "application/json");
    });
    s.Get(R"(/v1/models/(.+))", [this, card_json](const httplib::Request& req, httplib::Response& res) {
        for (const ModelCard& c : backend_.models())
            if (c.id == req.matches[1].str()) return res.set_content(dump(card_json(c)), "application/json");
        send_error(res, ApiError{404, "the model '" + req.matches[1].str() + "' does not exist", "invalid_request_error",
                                 "model", "model_not_found"});
    });

    // Checks the model and queues the request; nullptr once an error was sent.
    auto admit = [this](const CompletionRequest& r, httplib::Response& res, std::string* model) -> std::shared_ptr<Channel> {
        if (!model_known(backend_, r.model, model)) {
            const bool none = backend_.models().empty();
            send_error(res, none ? ApiError{503, "no model is loaded", "server_error", "", "model_not_loaded"}
                                 : ApiError{404,
                                            "the model '" + r.model + "' does not exist; GET /v1/models lists "
                                                                      "what this server has",
                                            "invalid_request_error", "model", "model_not_found"});
            return nullptr;
        }
        auto ch = std::make_shared<Channel>();
        backend_.submit(r, ch);
        if (ch->wait_accepted() == Channel::State::Failed) {
            send_error(res, ch->error());
            return nullptr;
        }
        return ch;
    };
    // The whole reply, split into content and calls where the request has tools.
    auto whole_reply = [](const CompletionRequest& r, Channel& ch, const std::string& text) {
        if (!r.wants_tool_calls()) return ParsedReply{text, {}};
        return parse_tool_calls(text, call_id_prefix(), ch.tool_syntax(), &r.tools);
    };
    auto stream = [this](EventStream* st, const CompletionRequest& r, httplib::Response& res) {
        std::shared_ptr<EventStream> owned(st);
        owned->backend = &backend_;
        if (r.wants_tool_calls()) owned->calls = std::make_unique<ToolCallStream>(owned->ch->tool_syntax(), &r.tools);
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        res.set_chunked_content_provider(
            "text/event-stream", [owned](size_t, httplib::DataSink& sink) { return owned->pump(sink); },
            [owned](bool success) {
                if (!success && !owned->ch->ended()) owned->gone();
            });
    };

    auto completion = [admit, whole_reply, stream](Endpoint endpoint, const httplib::Request& req,
                                                   httplib::Response& res) {
        CompletionRequest r;
        try {
            r = parse_request(endpoint, req.body);
        } catch (const ApiException& e) {
            return send_error(res, e.error);
        }
        std::string model;
        const std::shared_ptr<Channel> ch = admit(r, res, &model);
        if (!ch) return;
        const std::string id = request_id(endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl");
        const int64_t created = unix_now();
        if (!r.stream) {
            std::string text;
            if (ch->wait_done(&text) == Channel::State::Failed) return send_error(res, ch->error());
            const Usage usage{ch->prompt_tokens(), ch->completion_tokens()};
            const ParsedReply p = whole_reply(r, *ch, text);
            if (!p.calls.empty()) {
                const nlohmann::json tc = tool_calls_json(p.calls, false);
                return res.set_content(dump(completion_response(r, id, created, model, p.content, "tool_calls", usage, &tc)),
                                       "application/json");
            }
            return res.set_content(dump(completion_response(r, id, created, model, text, ch->finish_reason(), usage)),
                                   "application/json");
        }
        auto* st = new ChunkStream;
        st->request = std::move(r);
        st->ch = ch;
        st->id = id;
        st->model = model;
        st->created = created;
        stream(st, st->request, res);
    };
    s.Post("/v1/responses", [this, admit, whole_reply, stream](const httplib::Request& req, httplib::Response& res) {
        ResponsesRequest r;
        try {
            r = parse_responses_request(req.body, &responses_);
        } catch (const ApiException& e) {
            return send_error(res, e.error);
        }
        std::string model;
        const std::shared_ptr<Channel> ch = admit(r.chat, res, &model);
        if (!ch) return;
        const std::string id = request_id("resp", '_');  // OpenAI's form
        const int64_t created = unix_now();
        if (!r.chat.stream) {
            std::string text;
            if (ch->wait_done(&text) == Channel::State::Failed) return send_error(res, ch->error());
            const ParsedReply p = whole_reply(r.chat, *ch, text);
            const std::string finish = p.calls.empty() ? ch->finish_reason() : "tool_calls";
            const Usage usage{ch->prompt_tokens(), ch->completion_tokens()};
            nlohmann::ordered_json obj = response_object(r, id, created, model, p, finish, usage);
            res.set_content(obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
            if (r.store) {
                ResponseStore::Entry e{std::move(r.conversation), std::move(obj)};
                e.conversation.push_back(assistant_turn(p));
                responses_.put(id, std::move(e));
            }
            return;
        }
        auto* st = new ResponseStream;
        st->store = &responses_;
        st->request = std::move(r);
        st->events = std::make_unique<ResponseEvents>(st->request, id, created, model);
        st->ch = ch;
        st->id = id;
        st->model = model;
        st->created = created;
        stream(st, st->request.chat, res);
    });
    s.Post("/v1/chat/completions", [completion](const httplib::Request& req, httplib::Response& res) {
        completion(Endpoint::Chat, req, res);
    });
    s.Post("/v1/completions", [completion](const httplib::Request& req, httplib::Response& res) {
        completion(Endpoint::Completion, req, res);
    });
    auto no_response = [](const std::string& id) {
        return ApiError{404, "no response '" + id + "': this server keeps the most recent responses in memory while it "
                             "runs (not those sent with store: false)",
                        "invalid_request_error", "response_id", "response_not_found"};
    };
    s.Get(R"(/v1/responses/([^/]+))", [this, no_response](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1].str();
        const std::optional<ResponseStore::Entry> e = responses_.get(id);
        if (!e) return send_error(res, no_response(id));
        res.set_content(e->response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
    });
    s.Delete(R"(/v1/responses/([^/]+))", [this, no_response](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1].str();
        if (!responses_.erase(id)) return send_error(res, no_response(id));
        res.set_content(dump(json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}), "application/json");
    });
    s.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const EmbeddingRequest r = parse_embedding_request(req.body);
            const std::vector<ModelCard> cards = backend_.models();
            if (cards.empty())
                return send_error(res, ApiError{503, "no model is loaded", "server_error", "", "model_not_loaded"});
            if (!r.model.empty() && r.model != cards.front().id)
                return send_error(res, ApiError{404, "the model '" + r.model + "' does not exist; GET /v1/models lists what "
                                                     "this server has", "invalid_request_error", "model", "model_not_found"});
            int64_t tokens = 0;
            const auto vectors = backend_.embed(r, &tokens);
            res.set_content(dump(embedding_response(vectors, r.base64, cards.front().id, tokens)), "application/json");
        } catch (const ApiException& e) {
            send_error(res, e.error);
        }
    });
}

}  // namespace strata::serve
