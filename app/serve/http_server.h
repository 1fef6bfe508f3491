// The OpenAI-compatible HTTP front, on cpp-httplib: /v1/models,
// /v1/chat/completions and /v1/completions (JSON or server-sent events),
// /health and /metrics, over any Backend. Loopback unless asked otherwise; an
// API key when set (compared in constant time); CORS only when an origin is
// given; bodies over a limit refused. Every failure is OpenAI's error JSON with
// its HTTP status, and no request can take the server down.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "serve/backend.h"
#include "serve/responses_api.h"

namespace httplib {
class Server;
}

namespace strata::serve {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                        // 0: any free port (see HttpServer::port)
    std::string api_key;                    // "" = no key
    std::string cors_origin;                // "" = CORS off; "*" or an origin
    size_t max_body_bytes = 4u << 20;
    int threads = 0;                        // connection threads; 0: enough for the queue limit
    int max_concurrent = 80;                // the backend's running + queued limit (sizes the pool)
};

bool is_loopback(const std::string& host);

class HttpServer {
public:
    HttpServer(Backend& backend, const ServerOptions& options);
    ~HttpServer();  // stops
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts serving on a thread of its own. Throws strata::Error
    // when the address cannot be bound (in use, not an address of this host).
    void start();
    void stop();
    int port() const { return port_; }
    std::string url() const;

private:
    void routes();
    Backend& backend_;
    ResponseStore responses_;  // /v1/responses kept for previous_response_id and GET
    ServerOptions opt_;
    std::unique_ptr<httplib::Server> svr_;
    std::thread thread_;
    int port_ = 0;
};

}  // namespace strata::serve
