// While the chat goes to a server: its /metrics, once a second. A Strata
// server's figures (its engine's ledger, heat map, expert cache, tokens/s and
// its serving queue) feed the panels as the local engine's do. Another server
// (vLLM, llama-server, Ollama...) does not report them; the panels then show
// what its answers measure and say plainly what is missing.
#pragma once

#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QTimer>
#include <QUrl>

class QNetworkReply;

namespace strata::desktop {

class TelemetryModel;

// "http://host:8000/v1" -> "http://host:8000/metrics?experts=1" (the path
// before the trailing /v1 is kept, for a server behind a reverse proxy).
QUrl metrics_url(const QUrl& base_v1);

class RemoteMetrics : public QObject {
    Q_OBJECT
public:
    explicit RemoteMetrics(TelemetryModel* telemetry, QObject* parent = nullptr);

    // Starts (or restarts) polling the server whose API is at base_v1.
    void start(const QUrl& base_v1, const QString& api_key);
    void stop();
    bool running() const { return timer_.isActive(); }
    void set_interval_ms(int ms) { timer_.setInterval(ms); }

Q_SIGNALS:
    // After each poll: "server" (figures read) or "answers" (none reported).
    void polled(const QString& source);

private:
    void poll();
    void on_reply(QNetworkReply* reply, quint64 generation);

    TelemetryModel* telemetry_;
    QNetworkAccessManager net_;
    QTimer timer_;
    QUrl url_;
    QString key_, where_;
    QPointer<QNetworkReply> inflight_;
    quint64 generation_ = 0;   // replies of an earlier start() are dropped
    bool strata_ = false;      // the server has answered with Strata's figures
};

}  // namespace strata::desktop
