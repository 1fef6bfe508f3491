#include "remote_metrics.h"

#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTime>
#include <QVariantMap>

#include "serve/metrics.h"
#include "telemetry_model.h"

namespace strata::desktop {

QUrl metrics_url(const QUrl& base_v1) {
    QUrl u = base_v1;
    QString path = u.path();
    while (path.endsWith(QLatin1Char('/'))) path.chop(1);
    if (path.endsWith(QLatin1String("/v1"))) path.chop(3);
    u.setPath(path + QStringLiteral("/metrics"));
    u.setQuery(QStringLiteral("experts=1"));
    return u;
}

RemoteMetrics::RemoteMetrics(TelemetryModel* telemetry, QObject* parent) : QObject(parent), telemetry_(telemetry) {
    timer_.setInterval(1000);
    connect(&timer_, &QTimer::timeout, this, &RemoteMetrics::poll);
}

void RemoteMetrics::start(const QUrl& base_v1, const QString& api_key) {
    stop();
    url_ = metrics_url(base_v1);
    key_ = api_key;
    where_ = base_v1.host() + (base_v1.port() > 0 ? QStringLiteral(":%1").arg(base_v1.port()) : QString());
    strata_ = false;
    timer_.start();
    poll();
}

void RemoteMetrics::stop() {
    timer_.stop();
    ++generation_;
    if (inflight_) inflight_->abort();
    inflight_ = nullptr;
}

void RemoteMetrics::poll() {
    if (inflight_) return;  // a slow server: one request at a time
    QNetworkRequest req(url_);
    req.setTransferTimeout(5000);
    if (!key_.isEmpty()) req.setRawHeader("Authorization", "Bearer " + key_.toUtf8());
    QNetworkReply* reply = net_.get(req);
    inflight_ = reply;
    const quint64 gen = generation_;
    connect(reply, &QNetworkReply::finished, this, [this, reply, gen] { on_reply(reply, gen); });
}

void RemoteMetrics::on_reply(QNetworkReply* reply, quint64 generation) {
    reply->deleteLater();
    if (generation != generation_) return;
    inflight_ = nullptr;
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QByteArray body = reply->readAll();
    QString why;
    TelemetrySnapshot snap;
    serve::ServeFigures fig;
    if (reply->error() != QNetworkReply::NoError && status == 0) {
        why = reply->errorString();
    } else if (status != 200) {
        why = QStringLiteral("its /metrics answered HTTP %1").arg(status);
    } else {
        std::string error;
        if (!serve::read_metrics(body.toStdString(), &snap, &fig, &error)) why = QStringLiteral("its /metrics has no Strata figures");
    }
    if (!why.isEmpty()) {
        if (strata_) {
            // A Strata server that stopped answering: keep its last figures, say since when.
            telemetry_->set_source(QStringLiteral("server"),
                                   QStringLiteral("Strata server at %1: no figures since %2 (%3).")
                                       .arg(where_, QTime::currentTime().toString(QStringLiteral("HH:mm:ss")), why));
        } else {
            telemetry_->set_source(QStringLiteral("answers"),
                                   QStringLiteral("%1 does not report its engine (%2): its memory ledger, expert heat map and "
                                                  "expert cache are unknown here. Tokens/s and time to first token are measured "
                                                  "from its answers.")
                                       .arg(where_, why));
        }
        Q_EMIT polled(telemetry_->source());
        return;
    }
    strata_ = true;
    telemetry_->set_source(QStringLiteral("server"), QStringLiteral("Figures of the Strata server at %1, from its /metrics.").arg(where_));
    QVariantMap server;
    server[QStringLiteral("tokensPerSecond")] = fig.tokens_per_second;
    server[QStringLiteral("ttftMeanMs")] = fig.ttft_count > 0 ? 1000.0 * fig.ttft_sum_s / double(fig.ttft_count) : -1.0;
    server[QStringLiteral("finished")] = qlonglong(fig.finished);
    server[QStringLiteral("running")] = qlonglong(fig.running);
    server[QStringLiteral("waiting")] = qlonglong(fig.waiting);
    server[QStringLiteral("kvUsed")] = qlonglong(fig.kv_blocks_used);
    server[QStringLiteral("kvTotal")] = qlonglong(fig.kv_blocks_total);
    telemetry_->set_server_figures(server);
    telemetry_->push(snap);
    Q_EMIT polled(telemetry_->source());
}

}  // namespace strata::desktop
