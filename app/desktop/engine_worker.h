// EngineWorker: owns the core::Engine on its own thread (DESIGN.md §6).
//
// Commands come in as queued calls (post() runs a lambda on the worker
// thread); results go out only as queued signals. The GUI thread never waits
// on the worker.
//
// Generation goes through a sched::Scheduler over the engine's context
// (continuous batching): each request is submitted, and a 0 ms timer on this
// thread runs one scheduler step (one forward pass) per tick, so queued
// commands (another send, a stop, a setting) interleave between forward
// passes and several conversations generate at once. Prompts are prefilled
// in chunks (SchedulerConfig::prefill_chunk), so a long prompt is several
// steps too. The scheduler's prefix sharing keeps finished requests' KV
// blocks cached: the next turn of a conversation attaches them instead of
// recomputing its history (RequestResult::prefix_reused, "reusedTokens").
//
// With a draft configured (DraftSettings), a request is decoded
// speculatively by the engine core (EngineCore::Speculation): one at a
// time, once the scheduler is idle.
//
// Stopping is thread-safe: requestStop(id) stops one request (waiting,
// running, or not yet arrived), requestStopUpTo(id) every request up to id;
// requestCancelLoad(id) / requestCancelCalibration(id) likewise.
//
// Telemetry: Engine::snapshot() is taken here, between steps, at most every
// 200 ms while anything runs (prefill included), once when the work drains,
// after a load and after every live setting change.
#pragma once

#include <QList>
#include <QObject>
#include <QSet>
#include <QThread>
#include <QTimer>
#include <map>
#include <mutex>
#include <QString>
#include <QVariantMap>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "sched/sampler.h"
#include "strata/engine_core.h"
#include "strata/settings.h"
#include "strata/telemetry.h"

namespace strata::core {
class Engine;
}
namespace strata::model {
class Model;
class Context;
}
namespace strata::sched {
class Scheduler;
struct RequestResult;
}
namespace strata::chat {
class ChatTemplate;
}
namespace strata::serve {
struct CompletionRequest;
class Channel;
}

namespace strata::desktop {

class WorkerBackend;

struct ChatTurn {
    ChatTurn() = default;
    ChatTurn(QString r, QString c, QByteArray calls = {}, QString call_id = {}, QString fn = {})
        : role(std::move(r)), content(std::move(c)), tool_calls(std::move(calls)), tool_call_id(std::move(call_id)),
          name(std::move(fn)) {}
    QString role;     // "system" | "user" | "assistant" | "tool"
    QString content;
    // assistant: the calls it made, OpenAI's tool_calls array as JSON text
    // (arguments a JSON string); tool: the call it answers and its function.
    QByteArray tool_calls;
    QString tool_call_id, name;
};

// Speculative decoding as the settings ask for it: mode "off", "experts"
// (self-draft: the model's own weights with half its routed experts per
// token), "layers" (self-draft: the first half of its layers), "mtp" (the
// file's own NextN/MTP block) or "file" (a GGUF with the same vocabulary); k
// draft tokens per round (adapts in 1..2k).
struct DraftSettings {
    QString mode = QStringLiteral("off");
    QString file;
    int k = 4;
    bool on() const { return mode != QLatin1String("off"); }
};

// Why `draft_path` cannot draft for `model_path` (different vocabulary, not a
// GGUF, unreadable), or "" when it can. Reads only the two vocabularies.
QString draft_mismatch(const QString& model_path, const QString& draft_path);

// The plan for `path` under `settings` as the engine would make it (the model
// is opened, not loaded: a cheap mmap). Keys: fits, reason, model, rows
// [{account, tier, bytes, note}], fastBudget, slowBudget (0: none), fastTotal,
// slowTotal, residentMinimum, expertSlots, expertsTotal, cacheFraction, nCtx,
// fastAvailable, fastReturned. `ram_returned`: the RAM a loaded engine holds
// and gives back before this load (EngineWorker::ram_held(); a reload or a
// switch unloads it first), counted as available. `speed`: where experts
// would stream from disk, measure the file's read rate (up to ~0.6 s, once
// per file: call it off the GUI thread) and add "speed" (the expected-speed
// line, experts::StreamEstimate) with speedTokSLow/High; else "speed" is "".
// Throws strata::Error for a bad file or bad settings.
QVariantMap plan_model(const QString& path, const EngineSettings& settings, uint64_t ram_returned = 0,
                       bool speed = false);

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
    // The last call on the worker thread at exit: unloads, stops the tick timer
    // and hands the worker to `owner`'s thread, which then deletes it (a timer
    // destroyed from another thread than its own warned at every quit).
    void shutdown(QThread* owner);
    // `tools`: OpenAI function definitions (JSON) offered to the model, "" for
    // none; the text comes back raw (ChatController reads the calls).
    void generate(quint64 request_id, const QList<ChatTurn>& turns, sched::SamplingParams params,
                  const DraftSettings& draft = {}, const QByteArray& tools = {});
    // key: "cache" (slots/fraction), "policy", "pins", "prefetch". Emits settingApplied.
    void apply_live(const QString& key, const EngineSettings& settings);
    // Requests running at once; applied when the scheduler is next idle. Emits settingApplied("batch").
    void set_max_batch(int n);
    // Counts expert use over the prompts of `prompts_file` and writes the pin
    // file `out_file`; emits calibrationProgress and calibrationFinished.
    // Refused while answers are being generated.
    void calibrate(quint64 id, const QString& prompts_file, const QString& out_file);
    void emit_telemetry();

    // Serving other clients (serve_backend.h): requests from the HTTP server,
    // through the same scheduler as the app's chats. `backend` gets the model
    // card and telemetry; null stops that (requests are then refused).
    void set_serve_backend(std::shared_ptr<WorkerBackend> backend);
    void serve_submit(const serve::CompletionRequest& request, std::shared_ptr<serve::Channel> ch);
    void serve_cancelled();  // acts on channels whose clients left
    size_t served_requests() const { return remote_.size(); }

    // Introspection for tests (worker thread).
    int max_batch() const;
    size_t active_requests() const { return active_.size(); }

    // --- any thread ---
    void requestStop(quint64 request) {
        std::lock_guard<std::mutex> lk(stop_mu_);
        stop_ids_.insert(request);
    }
    void requestStopUpTo(quint64 up_to_request) { stop_up_to_.store(up_to_request); }
    void requestCancelLoad(quint64 load_id) { cancel_load_up_to_.store(load_id); }
    void requestCancelCalibration(quint64 id) { cancel_calibration_up_to_.store(id); }
    // The RAM the loaded engine gives back when it unloads
    // (Engine::ram_returned_on_unload), as of its last telemetry; 0 when none.
    uint64_t ram_held() const { return ram_held_.load(); }

Q_SIGNALS:
    void loadProgress(quint64 loadId, const QString& stage, double fraction);
    void loaded(quint64 loadId, const QVariantMap& info);
    void loadFailed(quint64 loadId, const QString& message, bool cancelled);
    void unloaded();
    void token(quint64 requestId, const QString& text);
    // A long prompt being read: `done` of its `total` tokens are in the KV cache (a reused prefix counts).
    void promptProgress(quint64 requestId, qint64 done, qint64 total);
    // stats: text, finish ("eos", "stop", "length", "context", "cancelled"), promptTokens,
    // reusedTokens (prompt tokens whose KV blocks were cached), droppedMessages, tokens, tokS, ttftMs,
    // seconds, model, speculative (bool), specAcceptance (share of draft tokens kept; -1 without a draft).
    void finished(quint64 requestId, const QVariantMap& stats);
    void failed(quint64 requestId, const QString& message, const QString& partialText);
    void telemetry(const strata::TelemetrySnapshot& snapshot);
    // error empty: applied.
    void settingApplied(const QString& key, const QString& error);
    void calibrationProgress(quint64 id, int done, int total);
    // error empty: written to `file`; cancelled: the user asked. summary: what was pinned.
    void calibrationFinished(quint64 id, const QString& file, const QString& error, bool cancelled,
                             const QString& summary);

private:
    struct Active {
        int64_t sid = -1;               // EngineCore's id
        std::chrono::steady_clock::time_point t0;
        std::string text;
        double ttft_ms = -1;
        int64_t prompt_tokens = 0;
        int dropped = 0;
        bool cancel_sent = false;
        bool speculative = false;       // decoded with a draft (EngineCore::Speculation)
        size_t sent = 0;                              // bytes of text emitted as `token`
        std::chrono::steady_clock::time_point sent_at{};
        std::chrono::steady_clock::time_point progress_at{};  // the last promptProgress
    };
    static constexpr int kPrefillChunk = 64;  // prompt tokens a step reads (of each request)
    static constexpr int kProgressMs = 100;   // promptProgress at most this often per request
    // While a long prompt is read (before the first token): promptProgress.
    void report_prompt_progress();
    // Streamed text leaves this thread at most every kTextBatchMs per request
    // (the first piece at once, a slow stream's every piece at once): each
    // `token` wakes the GUI thread, which on a machine with as many compute
    // threads as cores takes a core from the engine; a few hundred wakes a
    // second cost it far more than the text is worth.
    static constexpr int kTextBatchMs = 50;
    void send_text(quint64 id, Active& a);

    bool stopped(quint64 id) const;
    void tick();
    void ensure_ticking();
    void make_scheduler();
    void on_text(quint64 id, std::string_view text);
    void on_done(quint64 id, const sched::RequestResult& r);
    void on_failed(quint64 id, const std::string& why);
    // The settings' draft as EngineCore names it; throws strata::Error for one this model cannot have.
    EngineCore::Speculation speculation(const DraftSettings& d) const;
    void abort_all(const QString& why);
    void maybe_telemetry();
    // Ends every served request (the scheduler is going away): status + message.
    void end_served(int status, const QString& why);
    void publish_model_card();

    std::unique_ptr<core::Engine> engine_;
    std::unique_ptr<EngineCore> core_;  // the scheduler every front end shares (strata/engine_core.h)
    int max_batch_ = 4;
    QTimer* tick_ = nullptr;
    std::map<quint64, Active> active_;
    QString model_file_;
    const chat::ChatTemplate* template_ = nullptr;  // the loaded engine's
    mutable std::mutex stop_mu_;
    QSet<quint64> stop_ids_;
    std::atomic<quint64> stop_up_to_{0};
    std::atomic<quint64> cancel_load_up_to_{0};
    std::atomic<quint64> cancel_calibration_up_to_{0};
    std::atomic<uint64_t> ram_held_{0};
    std::chrono::steady_clock::time_point last_telemetry_{};
    struct Served {
        int64_t sid = -1;
        std::shared_ptr<serve::Channel> ch;
    };
    std::vector<Served> remote_;
    static constexpr int kServeQueue = 64;  // served requests waiting beyond the batch; more get 429
    std::mt19937_64 serve_seeds_{std::random_device{}()};
    std::shared_ptr<WorkerBackend> serve_backend_;
    QString model_path_;
};

}  // namespace strata::desktop

Q_DECLARE_METATYPE(strata::TelemetrySnapshot)
