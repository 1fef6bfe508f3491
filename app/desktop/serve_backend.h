// The app's side of "Serve the loaded model": serve::Backend over the
// EngineWorker, so other clients' requests go through the same engine and
// scheduler as the app's own chats (they batch together). HTTP threads call
// in here; everything that touches the model is posted to the worker thread
// (EngineWorker::serve_submit). The worker keeps this object's model card and
// telemetry up to date, so /v1/models and /metrics never wait on it.
#pragma once

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
};

}  // namespace strata::desktop
