#include "app_server.h"

#include "common/error.h"
#include "common/log.h"
#include "engine_worker.h"
#include "serve/http_server.h"
#include "serve_backend.h"

namespace strata::desktop {

AppServer::AppServer(EngineWorker* worker, QSettings* settings, QObject* parent)
    : QObject(parent), worker_(worker) {
    if (!settings) {
        owned_ = std::make_unique<QSettings>(QStringLiteral("Strata"), QStringLiteral("strata"));
        settings = owned_.get();
    }
    store_ = settings;
    enabled_ = store_->value(QStringLiteral("serve/enabled"), false).toBool();
    port_ = store_->value(QStringLiteral("serve/port"), 8080).toInt();
    key_ = store_->value(QStringLiteral("serve/apiKey"), QString()).toString();
}

AppServer::~AppServer() { stop(); }

int AppServer::port() const { return running() && port_ == 0 ? http_->port() : port_; }

QString AppServer::url() const {
    return running() ? QString::fromStdString(http_->url()) + QStringLiteral("/v1") : QString();
}

qint64 AppServer::requests() const { return backend_ ? backend_->requests() : 0; }

void AppServer::restore() {
    if (enabled_) error_ = start();
    // The toggle shows what is: off when the port could not be had. The saved
    // choice stays, so the next launch tries again (the port may be free then).
    if (!error_.isEmpty()) {
        stop();
        enabled_ = false;
    }
    Q_EMIT stateChanged();
}

QString AppServer::setServing(bool on, int port, const QString& apiKey) {
    if (port < 0 || port > 65535) {
        error_ = QStringLiteral("port %1 is out of range: choose 1024..65535 (0: any free port)").arg(port);
        Q_EMIT stateChanged();
        return error_;
    }
    stop();
    enabled_ = on;
    port_ = port;
    key_ = apiKey.trimmed();
    store_->setValue(QStringLiteral("serve/enabled"), enabled_);
    store_->setValue(QStringLiteral("serve/port"), port_);
    store_->setValue(QStringLiteral("serve/apiKey"), key_);
    error_ = on ? start() : QString();
    if (!error_.isEmpty()) {
        // Not serving: the toggle goes back off, and so does the saved choice.
        stop();
        enabled_ = false;
        store_->setValue(QStringLiteral("serve/enabled"), false);
    }
    Q_EMIT stateChanged();
    Q_EMIT requestsChanged();
    return error_;
}

QString AppServer::start() {
    backend_ = std::make_shared<WorkerBackend>(worker_);
    // Counted on the HTTP threads; the badge hears of it on the GUI thread.
    backend_->set_on_request([this] {
        QMetaObject::invokeMethod(this, [this] { Q_EMIT requestsChanged(); }, Qt::QueuedConnection);
    });
    {
        EngineWorker* w = worker_;
        std::shared_ptr<WorkerBackend> b = backend_;
        w->post([w, b] { w->set_serve_backend(b); });
    }
    serve::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = port_;
    so.api_key = key_.toStdString();
    try {
        auto http = std::make_unique<serve::HttpServer>(*backend_, so);
        http->start();
        http_ = std::move(http);
        logger("app")->info("serving the loaded model at {}/v1", http_->url());
        return QString();
    } catch (const Error& e) {
        // The server's own message speaks to the command line (--port,
        // --host); the app binds 127.0.0.1 itself, so only the port can be
        // the trouble: said in the settings' words.
        logger("app")->warn("cannot serve: {}", e.what());
        if (port_ > 0 && port_ < 1024)
            return QStringLiteral("Port %1 is reserved for the system (ports below 1024 need administrator rights): "
                                  "choose a port from 1024 to 65535").arg(port_);
        return QStringLiteral("Port %1 is in use by another program: choose another port").arg(port_);
    }
}

void AppServer::stop() {
    if (http_) {
        http_->stop();  // no request comes in after this
        http_.reset();
    }
    if (backend_) {
        EngineWorker* w = worker_;
        w->post([w] { w->set_serve_backend(nullptr); });
        backend_.reset();
    }
}

}  // namespace strata::desktop
