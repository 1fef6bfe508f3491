// strata-cli serve: the model over the OpenAI API (serve/http_server.h), with
// every request through one continuous-batching scheduler.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <sys/stat.h>

#include "commands.h"
#include "common.h"
#include "core/default_model.h"
#include "core/engine.h"
#include "draft.h"
#include "serve/http_server.h"
#include "serve/serve_loop.h"

namespace strata::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

// The id clients send as "model": the file's name without ".gguf".
std::string model_id(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
    return name;
}

int64_t file_time(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return static_cast<int64_t>(st.st_mtime);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
    Args a("serve", "[MODEL] [--host H] [--port P] [--api-key KEY] [options]",
           "Serves the model over the OpenAI API until Ctrl-C: /v1/models, /v1/chat/completions,\n"
           "/v1/completions and /v1/responses (each streaming or not), /v1/embeddings, /health, and\n"
           "/metrics (Prometheus). Concurrent requests are\n"
           "batched by one scheduler (with --draft: decoded speculatively one at a time, requests with a grammar\n"
           "batched). Without MODEL it serves the embedded demo model (or $STRATA_MODEL).\n"
           "Loopback only unless --host says otherwise; with another address set an API key.");
    a.positional("MODEL", "a GGUF model file (default: the demo model)", false);
    a.option("--model", "-m", "MODEL", "the model, as an option");
    a.option("--host", "", "ADDR", "address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)",
             "127.0.0.1");
    a.option("--port", "", "P", "TCP port (0: any free port, printed at start)", "8080");
    a.option("--api-key", "", "KEY", "require 'Authorization: Bearer KEY' (default: $STRATA_API_KEY, else none)");
    a.option("--alias", "", "NAME", "the model's id in the API (default: the file name without .gguf)");
    a.option("--cors", "", "ORIGIN", "allow browser pages from ORIGIN ('*' for any) to call the API (default: off)");
    a.option("--parallel", "", "N", "requests generating at once (the batch)", "16");
    a.option("--queue", "", "N", "requests waiting beyond the batch; one more gets HTTP 429", "64");
    a.option("--max-body", "", "SIZE", "largest request body accepted (HTTP 413 above)", "4M");
    add_draft_options(a);
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;

    std::string model = a.has("--model") ? a.str("--model") : a.pos("MODEL");
    if (model.empty()) model = core::default_model_path();
    if (model.empty()) {
        throw UsageError("no MODEL given and the demo model was not found (set STRATA_MODEL or pass a GGUF file)");
    }
    serve::ServerOptions so;
    so.host = a.str("--host");
    so.port = static_cast<int>(a.integer("--port", 0, 65535));
    if (a.has("--api-key")) {
        so.api_key = a.str("--api-key");
        if (so.api_key.empty()) throw UsageError("--api-key is empty");
    } else if (const char* env = std::getenv("STRATA_API_KEY"); env && *env) {
        so.api_key = env;
    }
    if (a.has("--cors")) so.cors_origin = a.str("--cors");
    so.max_body_bytes = parse_size(a.str("--max-body"), "--max-body");
    serve::ServeLoopConfig lc;
    lc.scheduler.max_batch = static_cast<int>(a.integer("--parallel", 1, 1024));
    lc.max_queue = static_cast<int>(a.integer("--queue", 0, 100000));
    so.max_concurrent = lc.scheduler.max_batch + lc.max_queue;
    lc.card.id = a.has("--alias") ? a.str("--alias") : model_id(model);
    if (lc.card.id.empty()) throw UsageError("--alias is empty");
    lc.card.created = file_time(model);
    if (a.has("--draft")) {
        // Requests then run one at a time with the draft (those with a grammar in the batch).
        if (!parse_draft_option(a.str("--draft")).on()) throw UsageError("--draft '" + a.str("--draft") + "' names no draft");
        lc.speculation.draft = a.str("--draft");
        lc.speculation.k = static_cast<int>(a.integer("--spec-k", 1, 32));
        lc.speculation.p_min = static_cast<float>(a.number("--spec-p-min", 0, 1));
    }

    auto engine = core::Engine::load(model, engine_settings(a));
    lc.card.n_ctx = engine->context().n_ctx();
    serve::ServeLoop loop(*engine, lc);
    serve::HttpServer server(loop, so);
    server.start();
    std::printf("serving '%s' at %s/v1 (context %lld tokens, %d at once, queue %d%s%s)\n", lc.card.id.c_str(),
                server.url().c_str(), static_cast<long long>(lc.card.n_ctx), lc.scheduler.max_batch, lc.max_queue,
                so.api_key.empty() ? "" : ", API key required",
                lc.speculation.draft.empty() ? "" : ", speculative decoding: one request at a time");
    std::printf("%s\n", engine->device().c_str());
    std::fflush(stdout);

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::fprintf(stderr, "stopping\n");
    loop.shutdown();  // open streams end now instead of running to their end
    server.stop();
    return 0;
}

}  // namespace strata::cli
