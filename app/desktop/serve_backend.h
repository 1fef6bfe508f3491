// The app's side of "Serve the loaded model": serve::Backend over the
// EngineWorker, so other clients' requests go through the same engine and
// scheduler as the app's own chats (they batch together). HTTP threads call
// in here; everything that touches the model is posted to the worker thread
// (EngineWorker::serve_submit). The worker keeps this object's model card and
// telemetry up to date, so /v1/models and /metrics never wait on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "serve/backend.h"
#include "serve/metrics.h"
#include "strata/telemetry.h"

namespace strata::desktop {

class EngineWorker;

class WorkerBackend final : public serve::Backend {
public:
    explicit WorkerBackend(EngineWorker* worker) : worker_(worker) {}

    std::vector<serve::ModelCard> models() const override;
    void submit(const serve::CompletionRequest& request, std::shared_ptr<serve::Channel> ch) override;
    void notify_cancelled() override;
    std::string metrics_text(bool per_expert) const override;

    // Completion requests handed to the engine since this backend was made
    // (any thread). `on_request` runs on the HTTP thread after each is
    // counted; set it before the server starts (the app's server badge).
    int64_t requests() const { return requests_.load(); }
    void set_on_request(std::function<void()> on_request) { on_request_ = std::move(on_request); }

    // --- the worker thread ---
    void set_model(std::optional<serve::ModelCard> card);
    void set_telemetry(const TelemetrySnapshot& t);
    serve::ServeMetrics& metrics() { return metrics_; }

private:
    EngineWorker* worker_;
    mutable std::mutex mu_;
    std::optional<serve::ModelCard> card_;
    TelemetrySnapshot telemetry_;
    serve::ServeMetrics metrics_;
    std::atomic<int64_t> requests_{0};
    std::function<void()> on_request_;
};

}  // namespace strata::desktop
