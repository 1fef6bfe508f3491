// EngineWorker: owns the core::Engine on its own thread (DESIGN.md §6).
//
// Commands come in as queued calls (post() runs a lambda on the worker
// thread); results go out only as queued signals. The GUI thread never waits
// on the worker. Stopping a generation and cancelling a load are atomics the
// GUI sets directly: requestStop(id) stops every request up to `id`, even one
// still in the queue; requestCancelLoad(id) likewise for loads.
//
// Telemetry: Engine::snapshot() is taken here, on the worker thread: from the
// generation's text sink at most every 200 ms, once at the end of each
// generation, after a load and after every live setting change.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QVariantMap>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "sched/sampler.h"
#include "strata/settings.h"
#include "strata/telemetry.h"

namespace strata::core {
class Engine;
}
namespace strata::model {
class Model;
}
namespace strata::chat {
class ChatTemplate;
}

namespace strata::desktop {

struct ChatTurn {
    QString role;     // "system" | "user" | "assistant"
    QString content;
};

// The plan for `path` under `settings` as the engine would make it (the model
// is opened, not loaded: a cheap mmap). Keys: fits, reason, model, rows
// [{account, tier, bytes, note}], fastBudget, slowBudget (0: none), fastTotal,
// slowTotal, residentMinimum, expertSlots, expertsTotal, cacheFraction, nCtx.
// Throws strata::Error for a bad file or bad settings.
QVariantMap plan_model(const QString& path, const EngineSettings& settings);

class EngineWorker : public QObject {
    Q_OBJECT
public:
    explicit EngineWorker(QObject* parent = nullptr);
    ~EngineWorker() override;

    // Runs `fn` on the worker's thread, after what is already queued.
    void post(std::function<void()> fn);

    // --- called on the worker thread (through post) ---
    void load(quint64 load_id, const QString& path, const EngineSettings& settings);
    void unload();
    void generate(quint64 request_id, const QList<ChatTurn>& turns, sched::SamplingParams params);
    // key: "cache" (slots/fraction), "policy", "pins", "prefetch". Emits settingApplied.
    void apply_live(const QString& key, const EngineSettings& settings);
    void emit_telemetry();

    // --- any thread ---
    void requestStop(quint64 up_to_request) { stop_up_to_.store(up_to_request); }
    void requestCancelLoad(quint64 load_id) { cancel_load_up_to_.store(load_id); }

Q_SIGNALS:
    void loadProgress(quint64 loadId, const QString& stage, double fraction);
    void loaded(quint64 loadId, const QVariantMap& info);
    void loadFailed(quint64 loadId, const QString& message, bool cancelled);
    void unloaded();
    void token(quint64 requestId, const QString& text);
    // stats: text, finish ("eos", "stop", "length", "context", "cancelled"), promptTokens,
    // reusedTokens, droppedMessages, tokens, tokS, ttftMs, seconds.
    void finished(quint64 requestId, const QVariantMap& stats);
    void failed(quint64 requestId, const QString& message, const QString& partialText);
    void telemetry(const strata::TelemetrySnapshot& snapshot);
    // error empty: applied.
    void settingApplied(const QString& key, const QString& error);

private:
    bool stopped(quint64 id) const { return id <= stop_up_to_.load(); }

    std::unique_ptr<core::Engine> engine_;
    QString model_file_;
    std::unique_ptr<chat::ChatTemplate> template_;
    std::vector<int32_t> cached_;  // the tokens the context holds (KV cache prefix reuse)
    std::atomic<quint64> stop_up_to_{0};
    std::atomic<quint64> cancel_load_up_to_{0};
    std::chrono::steady_clock::time_point last_telemetry_{};
};

}  // namespace strata::desktop

Q_DECLARE_METATYPE(strata::TelemetrySnapshot)
