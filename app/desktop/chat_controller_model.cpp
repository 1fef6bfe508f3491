// ChatController's model lifecycle: the memory plan before a load, load,
// reload (refused when the new plan does not fit), unload, cancel, and the
// recent models. The rest of the controller is in chat_controller.cpp.
#include <QFileInfo>
#include <QUrl>

#include "chat_controller.h"
#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf.h"
#include "memory/ledger.h"
#include "memory/system_memory.h"
#include "model/config.h"
#include "settings_model.h"
#include "telemetry_model.h"

namespace strata::desktop {

// The context size against what the model the next load uses was trained on
// (issue 45: a context of 1,000,000 was accepted until the next plan). That
// model is the one loaded (or loading), else the most recent one; its header
// says (an mmap, no weights read). No model or an unreadable file: the
// field's own range only.
void ChatController::install_model_validators() {
    settings_->set_validator(QStringLiteral("n_ctx"), [this](const QString& value) -> QString {
        const qlonglong n = value.toLongLong();
        if (n <= 0) return {};  // 0: the model's own
        QString path = !remote_active_ && model_state_ != QLatin1String("none") ? model_path_ : QString();
        if (path.isEmpty() && !settings_->recent_models().isEmpty()) path = settings_->recent_models().constFirst();
        if (path.isEmpty() || !QFileInfo(path).isFile()) return {};
        int64_t trained = 0;
        try {
            trained = model::ModelConfig::from_gguf(*gguf::File::open(path.toStdString())).n_ctx_train;
        } catch (const std::exception&) {
            return {};  // the load will say what is wrong with the file
        }
        if (trained <= 0 || n <= trained) return {};
        return QStringLiteral("a context of %1 tokens is more than %2 was trained on (%3 tokens): past that its answers "
                              "fall apart; use at most %3 (0: the model's own, at most 4096)")
            .arg(n)
            .arg(QFileInfo(path).fileName())
            .arg(qlonglong(trained));
    });
}

// A load unloads the local model first (EngineWorker::load): its RAM is the
// next load's too, so a plan counts it as available (issue 45).
uint64_t ChatController::ram_returned_by_load() const {
    return !remote_active_ && model_state_ == QLatin1String("ready") ? worker_->ram_held() : 0;
}

void ChatController::planModel(const QUrl& urlOrPath) {
    const QString path = localPath(urlOrPath);
    const quint64 id = ++plan_id_;
    plan_state_ = QStringLiteral("planning");
    plan_.clear();
    plan_error_.clear();
    plan_[QStringLiteral("path")] = path;
    Q_EMIT planChanged();
    const EngineSettings s = settings_->engine_settings();
    const uint64_t returned = ram_returned_by_load();
    plan_pool_.start([this, id, path, s, returned] {
        QVariantMap result;
        QString error;
        try {
            if (!QFileInfo(path).isFile()) throw Error(path.toStdString() + ": no such file");
            result = plan_model(path, s, returned, /*speed=*/true);
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

QString ChatController::launch_verdict(const QVariantMap& plan, uint64_t available) {
    const QString name = QFileInfo(plan.value(QStringLiteral("path")).toString()).fileName();
    if (!plan.value(QStringLiteral("fits")).toBool())
        return QStringLiteral("%1 was not loaded at launch: %2").arg(name, plan.value(QStringLiteral("reason")).toString());
    const double total = plan.value(QStringLiteral("fastTotal")).toDouble();
    if (available == 0 || total * 3 <= double(available) * 2) return {};
    const double slots = plan.value(QStringLiteral("expertSlots")).toDouble();
    const double experts = plan.value(QStringLiteral("expertsTotal")).toDouble();
    const QString streaming =
        experts > 0 && slots < experts
            ? QStringLiteral(", and with %1% of its experts in memory the rest would stream from disk")
                  .arg(qRound(100.0 * slots / experts))
            : QString();
    return QStringLiteral("%1 was not loaded at launch: it would take %2 of the %3 of RAM available (%4%), leaving little "
                          "to the rest of the system%5. At launch Strata loads the last model by itself only when it "
                          "takes at most two thirds of the RAM available. Load it anyway, or choose another model.")
        .arg(name, QString::fromStdString(memory::format_bytes(uint64_t(total))),
             QString::fromStdString(memory::format_bytes(available)))
        .arg(qRound(100.0 * total / double(available)))
        .arg(streaming);
}

void ChatController::loadAtLaunch(const QUrl& urlOrPath, bool check) {
    if (!check) {
        loadModel(urlOrPath);
        return;
    }
    const QString path = localPath(urlOrPath);
    const quint64 id = ++launch_id_;
    launch_ = QVariantMap{{QStringLiteral("state"), QStringLiteral("planning")},
                          {QStringLiteral("path"), path},
                          {QStringLiteral("message"), QStringLiteral("Planning %1…").arg(QFileInfo(path).fileName())},
                          {QStringLiteral("canLoad"), false}};
    Q_EMIT launchChanged();
    const EngineSettings s = settings_->engine_settings();
    plan_pool_.start([this, id, path, s] {
        QVariantMap plan;
        QString error;
        try {
            if (!QFileInfo(path).isFile()) throw Error(path.toStdString() + ": no such file");
            plan = plan_model(path, s);
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        const uint64_t available = memory::available_ram_bytes();  // nothing of ours is loaded yet
        QMetaObject::invokeMethod(this, [this, id, path, plan, error, available] {
            if (id != launch_id_) return;  // a load (or another launch) came first
            QVariantMap p = plan;
            p[QStringLiteral("path")] = path;
            const QString why = error.isEmpty() ? launch_verdict(p, available)
                                                : QStringLiteral("%1 was not loaded at launch: %2")
                                                      .arg(QFileInfo(path).fileName(), error);
            if (why.isEmpty()) {
                launch_.clear();
                Q_EMIT launchChanged();
                loadModel(QUrl::fromLocalFile(path));
                return;
            }
            logger("app")->info("{}", why.toStdString());
            launch_ = QVariantMap{{QStringLiteral("state"), QStringLiteral("held")},
                                  {QStringLiteral("path"), path},
                                  {QStringLiteral("message"), why},
                                  {QStringLiteral("canLoad"), error.isEmpty() && plan.value(QStringLiteral("fits")).toBool()}};
            Q_EMIT launchChanged();
        }, Qt::QueuedConnection);
    });
}

void ChatController::loadLaunchModel() {
    const QString path = launch_.value(QStringLiteral("path")).toString();
    if (!path.isEmpty()) loadModel(QUrl::fromLocalFile(path));
}

void ChatController::loadModel(const QUrl& urlOrPath) {
    const QString path = localPath(urlOrPath);
    // Whatever the launch held back is superseded by this load.
    ++launch_id_;
    if (!launch_.isEmpty()) {
        launch_.clear();
        Q_EMIT launchChanged();
    }
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
            const QVariantMap plan = plan_model(model_path_, settings_->engine_settings(), ram_returned_by_load());
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
