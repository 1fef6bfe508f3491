// The panels' data: the latest engine TelemetrySnapshot and short histories
// (the last 120 samples) of what the charts draw. Fed by the engine's
// snapshots: the local engine's (EngineWorker::telemetry), or a Strata
// server's read from its /metrics (RemoteMetrics). The only figure derived
// here is tokens/s, from the difference of two snapshots' tokens_processed
// and compute_seconds (forward-pass tokens per second of forward-pass time).
// A server that reports no engine figures feeds only what its answers
// measure: tokens/s and time to first token (record_answer).
#pragma once

#include <QList>
#include <QObject>
#include <QVariantList>
#include <QVariantMap>

#include "strata/telemetry.h"

namespace strata::desktop {

class TelemetryModel : public QObject {
    Q_OBJECT
    Q_PROPERTY(bool hasData READ hasData NOTIFY updated)
    Q_PROPERTY(int samples READ samples NOTIFY updated)
    Q_PROPERTY(bool hasExperts READ hasExperts NOTIFY updated)
    Q_PROPERTY(qlonglong tokensProcessed READ tokensProcessed NOTIFY updated)
    Q_PROPERTY(double computeSeconds READ computeSeconds NOTIFY updated)
    Q_PROPERTY(double hitRateTotal READ hitRateTotal NOTIFY updated)
    Q_PROPERTY(double hitRateRecent READ hitRateRecent NOTIFY updated)
    Q_PROPERTY(double bytesPerToken READ bytesPerToken NOTIFY updated)
    Q_PROPERTY(double bytesLoaded READ bytesLoaded NOTIFY updated)
    Q_PROPERTY(double stallFraction READ stallFraction NOTIFY updated)
    Q_PROPERTY(double prefetchPrecision READ prefetchPrecision NOTIFY updated)
    Q_PROPERTY(double prefetchRecall READ prefetchRecall NOTIFY updated)
    Q_PROPERTY(qlonglong expertSlots READ expertSlots NOTIFY updated)
    Q_PROPERTY(double expertSlotBytes READ expertSlotBytes NOTIFY updated)
    Q_PROPERTY(QString policy READ policy NOTIFY updated)
    Q_PROPERTY(double tokensPerSecond READ tokensPerSecond NOTIFY updated)
    Q_PROPERTY(int nLayer READ nLayer NOTIFY updated)
    Q_PROPERTY(int nExpert READ nExpert NOTIFY updated)
    Q_PROPERTY(int residentExperts READ residentExperts NOTIFY updated)
    // Experts a GPU engine computes on the CPU (hybrid placement, --cpu-moe layers).
    Q_PROPERTY(int cpuExperts READ cpuExperts NOTIFY updated)
    // A GPU's missing experts since load by path (hybrid placement): "" when
    // none, else e.g. "62% computed on the CPU, 30% copied, 8% both".
    Q_PROPERTY(QString missPaths READ missPaths NOTIFY updated)
    Q_PROPERTY(int pinnedExperts READ pinnedExperts NOTIFY updated)
    Q_PROPERTY(int loadingExperts READ loadingExperts NOTIFY updated)
    Q_PROPERTY(double maxHeat READ maxHeat NOTIFY updated)
    // The CPU kernel level and the weight bytes repacked in place for it.
    Q_PROPERTY(QString kernels READ kernels NOTIFY updated)
    Q_PROPERTY(QString device READ device NOTIFY updated)
    Q_PROPERTY(double repackedBytes READ repackedBytes NOTIFY updated)
    // [{tier, description, budget (0: none), reserved, used, accounts: [{account, reserved, used}]}]
    Q_PROPERTY(QVariantList ledger READ ledger NOTIFY updated)
    Q_PROPERTY(QList<qreal> hitRateHistory READ hitRateHistory NOTIFY updated)
    Q_PROPERTY(QList<qreal> bytesPerTokenHistory READ bytesPerTokenHistory NOTIFY updated)
    Q_PROPERTY(QList<qreal> tokensPerSecondHistory READ tokensPerSecondHistory NOTIFY updated)
    // Where the figures come from: "engine" (the local engine), "server" (a
    // Strata server's /metrics), "answers" (a server that reports no engine
    // figures: only what its answers measure), "" (nothing yet).
    Q_PROPERTY(QString source READ source NOTIFY updated)
    // One line on the source, for the panels: which server, what it does not report.
    Q_PROPERTY(QString sourceNote READ sourceNote NOTIFY updated)
    // The last answer's time to first token in ms (-1: none yet), as the app measured it.
    Q_PROPERTY(double lastTtftMs READ lastTtftMs NOTIFY updated)
    // A Strata server's serving figures: {tokensPerSecond, ttftMeanMs, running, waiting, kvUsed, kvTotal}; empty otherwise.
    Q_PROPERTY(QVariantMap server READ server NOTIFY updated)
public:
    static constexpr int kHistory = 120;
    explicit TelemetryModel(QObject* parent = nullptr);

    void push(const TelemetrySnapshot& s);
    void clear();  // a model was unloaded or is loading
    void set_source(const QString& source, const QString& note);
    void set_server_figures(const QVariantMap& figures);
    // An answer of a server finished: its tokens/s and TTFT as measured here.
    // With source "answers" these are the panels' only figures.
    void record_answer(double tok_s, double ttft_ms, qint64 tokens);
    const TelemetrySnapshot& snapshot() const { return snap_; }

    bool hasData() const { return samples_ > 0; }
    int samples() const { return samples_; }
    bool hasExperts() const { return snap_.n_expert > 0; }
    qlonglong tokensProcessed() const { return snap_.tokens_processed; }
    double computeSeconds() const { return snap_.compute_seconds; }
    double hitRateTotal() const { return snap_.hit_rate_total; }
    double hitRateRecent() const { return snap_.hit_rate_recent; }
    double bytesPerToken() const { return snap_.bytes_loaded_per_token; }
    double bytesLoaded() const { return double(snap_.bytes_loaded); }
    double stallFraction() const { return snap_.stall_fraction; }
    double prefetchPrecision() const { return snap_.prefetch_precision; }
    double prefetchRecall() const { return snap_.prefetch_recall; }
    qlonglong expertSlots() const { return snap_.expert_slots; }
    double expertSlotBytes() const { return double(snap_.expert_slot_bytes); }
    QString policy() const { return QString::fromStdString(snap_.policy); }
    double tokensPerSecond() const { return tok_s_; }
    int nLayer() const { return int(snap_.n_layer); }
    int nExpert() const { return int(snap_.n_expert); }
    int residentExperts() const { return resident_; }
    int cpuExperts() const { return on_cpu_; }
    QString missPaths() const;
    int pinnedExperts() const { return pinned_; }
    int loadingExperts() const { return loading_; }
    double maxHeat() const { return max_heat_; }
    QString kernels() const { return QString::fromStdString(snap_.kernels); }
    // Which device computes the loaded model, and why (a GPU that failed its check says so).
    QString device() const { return QString::fromStdString(snap_.device); }
    double repackedBytes() const { return double(snap_.repacked_bytes); }
    QVariantList ledger() const { return ledger_; }
    QList<qreal> hitRateHistory() const { return hit_hist_; }
    QList<qreal> bytesPerTokenHistory() const { return bytes_hist_; }
    QList<qreal> tokensPerSecondHistory() const { return tps_hist_; }
    QString source() const { return source_; }
    QString sourceNote() const { return source_note_; }
    double lastTtftMs() const { return last_ttft_ms_; }
    QVariantMap server() const { return server_; }

    // Every figure the panels show, for --report.
    Q_INVOKABLE QVariantMap figures() const;

Q_SIGNALS:
    void updated();

private:
    TelemetrySnapshot snap_;
    int samples_ = 0;
    double tok_s_ = 0;
    int resident_ = 0, pinned_ = 0, loading_ = 0, on_cpu_ = 0;
    double max_heat_ = 0;
    QVariantList ledger_;
    QList<qreal> hit_hist_, bytes_hist_, tps_hist_;
    QString source_, source_note_;
    double last_ttft_ms_ = -1;
    QVariantMap server_;
};

}  // namespace strata::desktop
