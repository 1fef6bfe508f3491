#include "chat_controller.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>
#include <QThreadPool>

#include "common/error.h"
#include "common/log.h"
#include "core/default_model.h"
#include "settings_model.h"
#include "telemetry_model.h"

namespace strata::desktop {

namespace {

const QString kNewChat = QStringLiteral("New chat");

QString title_from(const QString& text) {
    QString t = text.simplified();
    if (t.size() > 48) t = t.left(47).trimmed() + QChar(0x2026);
    return t.isEmpty() ? kNewChat : t;
}

QString store_finish(const QString& engine_finish) {
    if (engine_finish == QLatin1String("eos")) return QStringLiteral("end");
    return engine_finish;  // stop, length, context, cancelled
}

}  // namespace

ChatController::ChatController(const QString& store_path, SettingsModel* settings, TelemetryModel* telemetry,
                               QObject* parent)
    : QObject(parent), store_(std::make_unique<app::ChatStore>(store_path)), settings_(settings), telemetry_(telemetry) {
    thread_.setObjectName(QStringLiteral("EngineWorker"));
    worker_ = new EngineWorker();
    worker_->moveToThread(&thread_);
    thread_.start();

    connect(worker_, &EngineWorker::loadProgress, this, [this](quint64 id, const QString& stage, double f) {
        if (id != load_id_) return;
        load_stage_ = stage;
        load_fraction_ = f;
        Q_EMIT loadProgressChanged();
    });
    connect(worker_, &EngineWorker::loaded, this, [this](quint64 id, const QVariantMap& info) {
        if (id != load_id_) return;
        model_state_ = QStringLiteral("ready");
        model_info_ = info;
        model_path_ = info.value(QStringLiteral("path")).toString();
        model_error_.clear();
        needs_reload_ = false;
        settings_->add_recent_model(model_path_);
        Q_EMIT recentModelsChanged();
        Q_EMIT settingsNeedReloadChanged();
        Q_EMIT modelChanged();
        Q_EMIT modelLoaded();
    });
    connect(worker_, &EngineWorker::loadFailed, this, [this](quint64 id, const QString& message, bool cancelled) {
        if (id != load_id_) return;
        model_state_ = cancelled ? QStringLiteral("none") : QStringLiteral("failed");
        model_error_ = cancelled ? QString() : message;
        model_info_.clear();
        Q_EMIT modelChanged();
        if (!cancelled) Q_EMIT modelLoadFailed(message);
        else set_notice(QStringLiteral("Loading was cancelled."));
    });
    connect(worker_, &EngineWorker::token, this, &ChatController::on_token);
    connect(worker_, &EngineWorker::finished, this, &ChatController::on_finished);
    connect(worker_, &EngineWorker::failed, this, &ChatController::on_failed);
    connect(worker_, &EngineWorker::telemetry, this, [this](const TelemetrySnapshot& s) {
        if (model_state_ == QLatin1String("ready")) telemetry_->push(s);
    });
    connect(worker_, &EngineWorker::settingApplied, this, [this](const QString& group, const QString& error) {
        const QString msg = error.isEmpty() ? QString() : QStringLiteral("not applied: ") + error;
        if (group == QLatin1String("cache")) settings_->set_error(QStringLiteral("expert_cache_fraction"), msg);
        else if (group == QLatin1String("policy")) settings_->set_error(QStringLiteral("policy"), msg);
        else if (group == QLatin1String("pins")) settings_->set_error(QStringLiteral("pin_file"), msg);
        else if (group == QLatin1String("prefetch")) settings_->set_error(QStringLiteral("prefetch_width"), msg);
    });
    connect(settings_, &SettingsModel::changed, this, &ChatController::on_setting_changed);

    refresh_conversations();
}

ChatController::~ChatController() {
    plan_pool_.waitForDone();
    worker_->requestStop(~quint64(0) >> 1);
    worker_->requestCancelLoad(~quint64(0) >> 1);
    EngineWorker* w = worker_;
    w->post([w] { w->unload(); });
    thread_.quit();
    thread_.wait();
    delete worker_;
    if (request_ && stream_message_) {
        // Keep what was streamed: marked partial, as a killed app would leave it.
        try {
            app::MessageStats st;
            st.finish = QStringLiteral("cancelled");
            store_->update_message(stream_message_, stream_text_, true, st);
        } catch (const std::exception&) {
        }
    }
}

QString ChatController::currentTitle() const {
    const app::Conversation* c = conversations_.at(conversations_.row_of(current_));
    if (c) return c->title;
    if (current_ == 0) return {};
    try {
        return store_->conversation(current_).title;
    } catch (const std::exception&) {
        return {};
    }
}

QString ChatController::systemPrompt() const {
    if (current_ == 0) return {};
    try {
        return store_->conversation(current_).system_prompt;
    } catch (const std::exception&) {
        return {};
    }
}

QStringList ChatController::recentModels() const {
    QStringList out;
    for (const QString& p : settings_->recent_models())
        if (QFileInfo::exists(p)) out << p;
    return out;
}

QString ChatController::demoModelPath() const { return QString::fromStdString(core::default_model_path()); }

void ChatController::set_error(const QString& message) {
    last_error_ = message;
    if (!message.isEmpty()) logger("app")->warn("{}", message.toStdString());
    Q_EMIT lastErrorChanged();
}

void ChatController::set_notice(const QString& message) {
    notice_ = message;
    Q_EMIT noticeChanged();
}

void ChatController::clearError() { set_error({}); }
void ChatController::clearNotice() { set_notice({}); }

QString ChatController::localPath(const QUrl& url) const {
    if (url.isLocalFile()) return url.toLocalFile();
    return url.toString(QUrl::PreferLocalFile);
}

void ChatController::refresh_conversations() {
    try {
        conversations_.set_conversations(store_->conversations(search_));
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    Q_EMIT currentConversationChanged();
}

void ChatController::reload_messages() {
    if (current_ == 0) {
        messages_.set_messages({});
        return;
    }
    try {
        QList<app::Message> list = store_->messages(current_);
        // The answer streaming into this conversation: show all of it, not the last save.
        if (request_ && stream_conversation_ == current_) {
            for (app::Message& m : list)
                if (m.id == stream_message_) m.content = stream_text_;
        }
        messages_.set_messages(list);
        messages_.set_streaming(request_ && stream_conversation_ == current_ ? stream_message_ : 0);
    } catch (const std::exception& e) {
        messages_.set_messages({});
        set_error(QString::fromUtf8(e.what()));
    }
}

qint64 ChatController::newConversation() {
    try {
        // An empty "New chat" already open is reused rather than piling up.
        if (current_ != 0) {
            const app::Conversation c = store_->conversation(current_);
            if (c.message_count == 0 && c.title == kNewChat) return current_;
        }
        current_ = store_->create_conversation(kNewChat);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return 0;
    }
    if (!search_.isEmpty()) {
        search_.clear();
        Q_EMIT searchTextChanged();
    }
    reload_messages();
    refresh_conversations();
    return current_;
}

void ChatController::selectConversation(qint64 id) {
    if (id == current_) return;
    current_ = id;
    reload_messages();
    Q_EMIT currentConversationChanged();
}

void ChatController::renameConversation(qint64 id, const QString& title) {
    const QString t = title.simplified();
    if (t.isEmpty()) {
        set_error(QStringLiteral("A conversation needs a title."));
        return;
    }
    try {
        store_->rename_conversation(id, t);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    refresh_conversations();
}

void ChatController::deleteConversation(qint64 id) {
    if (request_ && stream_conversation_ == id) {
        worker_->requestStop(request_);
        stream_conversation_ = 0;  // nothing to save to any more
        stream_message_ = 0;
    }
    try {
        store_->delete_conversation(id);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    if (current_ == id) {
        current_ = 0;
        reload_messages();
    }
    refresh_conversations();
}

void ChatController::search(const QString& text) {
    if (text == search_) return;
    search_ = text;
    Q_EMIT searchTextChanged();
    refresh_conversations();
}

void ChatController::setSystemPrompt(const QString& text) {
    if (current_ == 0 && newConversation() == 0) return;
    try {
        store_->set_system_prompt(current_, text.trimmed());
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    refresh_conversations();
}

bool ChatController::send(const QString& text_in) {
    const QString text = text_in.trimmed();
    if (text.isEmpty()) {
        set_error(QStringLiteral("Type a message first."));
        return false;
    }
    if (request_) {
        set_error(QStringLiteral("An answer is still being generated: stop it first."));
        return false;
    }
    if (model_state_ != QLatin1String("ready")) {
        set_error(model_state_ == QLatin1String("loading") ? QStringLiteral("The model is still loading; send again when it is ready.")
                                                           : QStringLiteral("No model is loaded: load one with \"Load model…\"."));
        return false;
    }
    try {
        if (current_ == 0) {
            current_ = store_->create_conversation(title_from(text));
            if (!search_.isEmpty()) {
                search_.clear();
                Q_EMIT searchTextChanged();
            }
            reload_messages();
        } else {
            const app::Conversation c = store_->conversation(current_);
            if (c.message_count == 0 && c.title == kNewChat) store_->rename_conversation(current_, title_from(text));
        }
        const qint64 id = store_->append_message(current_, QStringLiteral("user"), text);
        app::Message m;
        m.id = id;
        m.conversation_id = current_;
        m.role = QStringLiteral("user");
        m.content = text;
        m.created = QDateTime::currentDateTimeUtc();
        messages_.append(m);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
    return start_generation(text);
}

bool ChatController::start_generation(const QString&) {
    const sched::SamplingParams sp = settings_->sampling_params();
    if (const std::string err = sp.validate(); !err.empty()) {
        set_error(QStringLiteral("Sampling settings: ") + QString::fromStdString(err));
        return false;
    }
    QList<ChatTurn> turns;
    const QString system = systemPrompt();
    if (!system.isEmpty()) turns.append({QStringLiteral("system"), system});
    for (const app::Message& m : messages_.messages()) {
        if (m.role == QLatin1String("assistant") && m.content.isEmpty()) continue;
        turns.append({m.role, m.content});
    }
    try {
        app::Message a;
        a.id = store_->append_message(current_, QStringLiteral("assistant"), QString(), /*partial=*/true);
        a.conversation_id = current_;
        a.role = QStringLiteral("assistant");
        a.partial = true;
        a.created = QDateTime::currentDateTimeUtc();
        a.stats.model = model_info_.value(QStringLiteral("fileName")).toString();
        messages_.append(a);
        stream_message_ = a.id;
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
    stream_conversation_ = current_;
    stream_text_.clear();
    stream_saved_.start();
    request_ = ++next_request_;
    messages_.set_streaming(stream_message_);
    const quint64 id = request_;
    EngineWorker* w = worker_;
    w->post([w, id, turns, sp] { w->generate(id, turns, sp); });
    clearError();
    Q_EMIT generatingChanged();
    refresh_conversations();
    return true;
}

void ChatController::save_streaming(bool final_commit, const QVariantMap* stats, const QString& finish) {
    if (!stream_message_) return;
    app::MessageStats st;
    st.model = model_info_.value(QStringLiteral("fileName")).toString();
    if (stats) {
        st.prompt_tokens = stats->value(QStringLiteral("promptTokens")).toLongLong();
        st.tokens = stats->value(QStringLiteral("tokens")).toLongLong();
        st.tok_s = stats->value(QStringLiteral("tokS")).toDouble();
        st.ttft_ms = stats->value(QStringLiteral("ttftMs")).toDouble();
        st.seconds = stats->value(QStringLiteral("seconds")).toDouble();
        if (stats->contains(QStringLiteral("model"))) st.model = stats->value(QStringLiteral("model")).toString();
    }
    st.finish = finish;
    const bool partial = !final_commit || finish == QLatin1String("cancelled") || finish == QLatin1String("error");
    try {
        store_->update_message(stream_message_, stream_text_, partial, st);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    if (final_commit) {
        if (const app::Message* old = messages_.find(stream_message_)) {
            app::Message m = *old;
            m.content = stream_text_;
            m.partial = partial;
            m.stats = st;
            messages_.update(m);
        }
    }
    stream_saved_.restart();
}

void ChatController::on_token(quint64 id, const QString& text) {
    if (id != request_) return;
    stream_text_ += text;
    if (stream_conversation_ == current_) messages_.append_text(stream_message_, text);
    if (stream_saved_.elapsed() >= 500) save_streaming(false, nullptr, QString());
    Q_EMIT streamed();
}

void ChatController::on_finished(quint64 id, const QVariantMap& stats) {
    if (id != request_) return;
    const QString finish = store_finish(stats.value(QStringLiteral("finish")).toString());
    stream_text_ = stats.value(QStringLiteral("text")).toString();
    const qint64 message = stream_message_;
    save_streaming(true, &stats, finish);
    request_ = 0;
    stream_message_ = 0;
    stream_conversation_ = 0;
    messages_.set_streaming(0);
    if (const int dropped = stats.value(QStringLiteral("droppedMessages")).toInt(); dropped > 0) {
        set_notice(QStringLiteral("The oldest %1 message(s) did not fit the model's context (%2 tokens) and were left out of the prompt.")
                       .arg(dropped)
                       .arg(model_info_.value(QStringLiteral("context")).toLongLong()));
    }
    Q_EMIT generatingChanged();
    refresh_conversations();
    Q_EMIT answerFinished(message, finish);
}

void ChatController::on_failed(quint64 id, const QString& message, const QString& partial_text) {
    if (id != request_) return;
    stream_text_ = partial_text;
    const qint64 mid = stream_message_;
    save_streaming(true, nullptr, QStringLiteral("error"));
    request_ = 0;
    stream_message_ = 0;
    stream_conversation_ = 0;
    messages_.set_streaming(0);
    set_error(message);
    Q_EMIT generatingChanged();
    refresh_conversations();
    Q_EMIT answerFailed(mid, message);
}

void ChatController::stop() {
    if (request_) worker_->requestStop(request_);
}

bool ChatController::regenerate() {
    if (request_) {
        set_error(QStringLiteral("An answer is still being generated: stop it first."));
        return false;
    }
    if (model_state_ != QLatin1String("ready")) {
        set_error(QStringLiteral("No model is loaded: load one with \"Load model…\"."));
        return false;
    }
    const QList<app::Message>& list = messages_.messages();
    if (list.isEmpty()) {
        set_error(QStringLiteral("There is no answer to regenerate."));
        return false;
    }
    const app::Message last = list.last();
    if (last.role == QLatin1String("assistant")) {
        try {
            store_->delete_messages_from(last.id);
        } catch (const std::exception& e) {
            set_error(QString::fromUtf8(e.what()));
            return false;
        }
        messages_.remove_from(last.id);
    }
    if (messages_.messages().isEmpty() || messages_.messages().last().role != QLatin1String("user")) {
        set_error(QStringLiteral("There is no question to answer."));
        return false;
    }
    return start_generation(QString());
}

bool ChatController::editAndResend(qint64 messageId, const QString& newText) {
    const QString text = newText.trimmed();
    const app::Message* m = messages_.find(messageId);
    if (!m || m->role != QLatin1String("user")) {
        set_error(QStringLiteral("Only your own messages can be edited."));
        return false;
    }
    if (text.isEmpty()) {
        set_error(QStringLiteral("The edited message is empty."));
        return false;
    }
    if (request_) {
        set_error(QStringLiteral("An answer is still being generated: stop it first."));
        return false;
    }
    if (model_state_ != QLatin1String("ready")) {
        set_error(QStringLiteral("No model is loaded: load one with \"Load model…\"."));
        return false;
    }
    try {
        store_->delete_messages_from(messageId);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
    messages_.remove_from(messageId);
    return send(text);
}

QString ChatController::suggestedFileName(const QString& extension) const {
    QString t = currentTitle();
    if (t.isEmpty()) t = QStringLiteral("conversation");
    static const QRegularExpression bad(QStringLiteral("[\\\\/:*?\"<>|\\x00-\\x1f]"));
    t.replace(bad, QStringLiteral("_"));
    return t.left(80) + QLatin1Char('.') + extension;
}

bool ChatController::write_export(const QUrl& url, const QByteArray& data) {
    const QString path = localPath(url);
    if (path.isEmpty()) {
        set_error(QStringLiteral("Export: no file chosen."));
        return false;
    }
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(data) != data.size() || !f.commit()) {
        set_error(QStringLiteral("Export to %1 failed: %2").arg(path, f.errorString()));
        return false;
    }
    set_notice(QStringLiteral("Exported to %1").arg(QDir::toNativeSeparators(path)));
    return true;
}

bool ChatController::exportMarkdown(const QUrl& url) {
    if (current_ == 0) {
        set_error(QStringLiteral("Open a conversation to export it."));
        return false;
    }
    try {
        return write_export(url, store_->export_markdown(current_));
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
}

bool ChatController::exportJson(const QUrl& url) {
    if (current_ == 0) {
        set_error(QStringLiteral("Open a conversation to export it."));
        return false;
    }
    try {
        return write_export(url, store_->export_json(current_));
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
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
    if (request_) worker_->requestStop(request_);
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

void ChatController::reloadModel() {
    if (!model_path_.isEmpty()) loadModel(QUrl::fromLocalFile(model_path_));
}

void ChatController::cancelModelLoad() {
    if (model_state_ == QLatin1String("loading")) worker_->requestCancelLoad(load_id_);
}

void ChatController::forgetRecentModel(const QString& path) {
    settings_->remove_recent_model(path);
    Q_EMIT recentModelsChanged();
}

void ChatController::on_setting_changed(const QString& key, const QString& applies) {
    if (model_state_ != QLatin1String("ready")) return;
    if (applies == QLatin1String("live")) {
        const QString group = SettingsModel::live_group(key);
        if (group.isEmpty()) return;
        const EngineSettings s = settings_->engine_settings();
        EngineWorker* w = worker_;
        w->post([w, group, s] { w->apply_live(group, s); });
    } else if (applies == QLatin1String("next load") && !needs_reload_) {
        needs_reload_ = true;
        Q_EMIT settingsNeedReloadChanged();
    }
}

}  // namespace strata::desktop
