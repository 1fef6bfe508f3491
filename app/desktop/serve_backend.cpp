#include "serve_backend.h"

#include "engine_worker.h"

namespace strata::desktop {

std::vector<serve::ModelCard> WorkerBackend::models() const {
    std::lock_guard<std::mutex> lk(mu_);
    if (!card_) return {};
    return {*card_};
}

void WorkerBackend::submit(const serve::CompletionRequest& request, std::shared_ptr<serve::Channel> ch) {
    EngineWorker* w = worker_;
    w->post([w, request, ch] { w->serve_submit(request, ch); });
    requests_.fetch_add(1);
    if (on_request_) on_request_();
}

void WorkerBackend::notify_cancelled() {
    EngineWorker* w = worker_;
    w->post([w] { w->serve_cancelled(); });
}

std::string WorkerBackend::metrics_text(bool per_expert) const {
    std::lock_guard<std::mutex> lk(mu_);
    return metrics_.render(telemetry_, card_ ? card_->id : std::string(), per_expert);
}

void WorkerBackend::set_model(std::optional<serve::ModelCard> card) {
    std::lock_guard<std::mutex> lk(mu_);
    card_ = std::move(card);
}

void WorkerBackend::set_telemetry(const TelemetrySnapshot& t) {
    std::lock_guard<std::mutex> lk(mu_);
    telemetry_ = t;
}

}  // namespace strata::desktop
