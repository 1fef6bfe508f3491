// ChatController's model lifecycle: the memory plan before a load, load,
// reload (refused when the new plan does not fit), unload, cancel, and the
// recent models. The rest of the controller is in chat_controller.cpp.
#include <QFileInfo>
#include <QUrl>

#include "chat_controller.h"
#include "common/error.h"
#include "settings_model.h"
#include "telemetry_model.h"

namespace strata::desktop {

void ChatController::planModel(const QUrl& urlOrPath) {
    const QString path = localPath(urlOrPath);
    const quint64 id = ++plan_id_;
    plan_state_ = QStringLiteral("planning");
    plan_.clear();
    plan_error_.clear();
    plan_[QStringLiteral("path")] = path;
    Q_EMIT planChanged();
    const EngineSettings s = settings_->engine_settings();
    plan_pool_.start([this, id, path, s] {
        QVariantMap result;
        QString error;
        try {
            if (!QFileInfo(path).isFile()) throw Error(path.toStdString() + ": no such file");
            result = plan_model(path, s);
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(this, [this, id, path, result, error] {
            if (id != plan_id_) return;
            plan_state_ = error.isEmpty() ? QStringLiteral("ready") : QStringLiteral("failed");
            plan_ = result;
            plan_[QStringLiteral("path")] = path;
            plan_error_ = error;
            Q_EMIT planChanged();
        }, Qt::QueuedConnection);
    });
}

void ChatController::loadModel(const QUrl& urlOrPath) {
    const QString path = localPath(urlOrPath);
    remote_active_ = false;
    local_before_remote_.clear();  // this model now, not the one before a server
    remote_metrics_->stop();
    if (next_request_) worker_->requestStopUpTo(next_request_);
    if (model_state_ == QLatin1String("loading")) worker_->requestCancelLoad(load_id_);
    const quint64 id = ++load_id_;
    model_state_ = QStringLiteral("loading");
    model_path_ = path;
    model_error_.clear();
    model_info_.clear();
    load_stage_ = QStringLiteral("opening");
    load_fraction_ = 0;
    telemetry_->clear();
    Q_EMIT modelChanged();
    Q_EMIT loadProgressChanged();
    if (!QFileInfo(path).isFile()) {
        // Said at once, in the same words the engine would use.
        const QString msg = path.isEmpty() ? QStringLiteral("no model file given") : path + QStringLiteral(": no such file");
        QMetaObject::invokeMethod(this, [this, id, msg] {
            if (id != load_id_) return;
            model_state_ = QStringLiteral("failed");
            model_error_ = msg;
            Q_EMIT modelChanged();
            Q_EMIT modelLoadFailed(msg);
        }, Qt::QueuedConnection);
        return;
    }
    const EngineSettings s = settings_->engine_settings();
    EngineWorker* w = worker_;
    w->post([w, id, path, s] { w->load(id, path, s); });
}

bool ChatController::reloadModel() {
    if (remote_active_ || model_path_.isEmpty()) return false;  // a server, or nothing loaded: nothing to reload
    // The working model is not given up for settings it cannot load with: the
    // plan comes first (a header read, no weights), and a plan that does not
    // fit is said and the model stays.
    if (model_state_ == QLatin1String("ready")) {
        try {
            const QVariantMap plan = plan_model(model_path_, settings_->engine_settings());
            if (!plan.value(QStringLiteral("fits")).toBool()) {
                set_error(QStringLiteral("Not reloaded: with the new settings the model does not fit (%1). The loaded model stays; "
                                         "change the settings, or see the plan with Load model….")
                              .arg(plan.value(QStringLiteral("reason")).toString()));
                return false;
            }
        } catch (const std::exception& e) {
            set_error(QStringLiteral("Not reloaded: %1. The loaded model stays.").arg(QString::fromUtf8(e.what())));
            return false;
        }
    }
    loadModel(QUrl::fromLocalFile(model_path_));
    return true;
}

void ChatController::unloadModel() {
    if (model_state_ == QLatin1String("none")) return;
    // Disconnecting from a server: the local model it replaced comes back.
    if (remote_active_ && !local_before_remote_.isEmpty() && QFileInfo(local_before_remote_).isFile()) {
        const QString path = local_before_remote_;
        loadModel(QUrl::fromLocalFile(path));
        set_notice(QStringLiteral("Disconnected from the server; loading %1 again.").arg(QFileInfo(path).fileName()));
        return;
    }
    local_before_remote_.clear();
    if (next_request_) worker_->requestStopUpTo(next_request_);
    if (model_state_ == QLatin1String("loading")) worker_->requestCancelLoad(load_id_);
    ++load_id_;  // whatever load is in flight no longer counts
    const bool was_remote = remote_active_;
    remote_active_ = false;
    remote_metrics_->stop();
    model_state_ = QStringLiteral("none");
    model_error_.clear();
    model_info_.clear();
    model_path_.clear();
    settings_->set_preset_model(QString());
    telemetry_->clear();
    EngineWorker* w = worker_;
    w->post([w] { w->unload(); });
    Q_EMIT modelChanged();
    set_notice(was_remote ? QStringLiteral("Disconnected from the server.")
                          : QStringLiteral("The model was unloaded and its memory freed; your conversations are kept."));
}

void ChatController::cancelModelLoad() {
    if (model_state_ == QLatin1String("loading")) worker_->requestCancelLoad(load_id_);
}

void ChatController::forgetRecentModel(const QString& path) {
    settings_->remove_recent_model(path);
    Q_EMIT recentModelsChanged();
}

}  // namespace strata::desktop
