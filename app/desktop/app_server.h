// "Serve the loaded model at http://127.0.0.1:PORT" (Settings): the
// OpenAI-compatible server (serve/http_server.h) over the app's own engine
// worker (serve_backend.h), as GPT4All and LM Studio offer. Loopback only;
// an optional API key. The choice is remembered (QSettings "serve/*") and the
// server comes back on the next launch.
#pragma once

#include <QObject>
#include <QSettings>
#include <QString>
#include <memory>

namespace strata::serve {
class HttpServer;
}

namespace strata::desktop {

class EngineWorker;
class WorkerBackend;

class AppServer : public QObject {
    Q_OBJECT
    Q_PROPERTY(bool enabled READ enabled NOTIFY stateChanged)
    Q_PROPERTY(bool running READ running NOTIFY stateChanged)
    Q_PROPERTY(int port READ port NOTIFY stateChanged)
    Q_PROPERTY(QString apiKey READ apiKey NOTIFY stateChanged)
    Q_PROPERTY(QString url READ url NOTIFY stateChanged)
    Q_PROPERTY(QString error READ error NOTIFY stateChanged)
    // Completion requests other apps sent since the server started (the badge in the tool bar).
    Q_PROPERTY(qint64 requests READ requests NOTIFY requestsChanged)

public:
    // `settings` may be null: organisation "Strata", app "strata".
    AppServer(EngineWorker* worker, QSettings* settings = nullptr, QObject* parent = nullptr);
    ~AppServer() override;

    // On only while it serves: a failed start (port in use) turns it off again.
    bool enabled() const { return enabled_; }
    bool running() const { return http_ != nullptr; }
    // The port asked for; while running, the one bound (they differ for 0, "any free port").
    int port() const;
    QString apiKey() const { return key_; }
    QString url() const;
    QString error() const { return error_; }
    qint64 requests() const;

    // Turns serving on or off with this port and key (saved). Returns "" when
    // serving (or off as asked), else the reason in the app's words (port in
    // use, bad port); serving is then off.
    Q_INVOKABLE QString setServing(bool on, int port, const QString& apiKey);
    // Starts the server if the saved settings say so (at launch).
    void restore();

Q_SIGNALS:
    void stateChanged();
    void requestsChanged();

private:
    QString start();
    void stop();

    EngineWorker* worker_;
    std::unique_ptr<QSettings> owned_;
    QSettings* store_;
    std::shared_ptr<WorkerBackend> backend_;
    std::unique_ptr<serve::HttpServer> http_;
    bool enabled_ = false;
    int port_ = 8080;
    QString key_;
    QString error_;
};

}  // namespace strata::desktop
