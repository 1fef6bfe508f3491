#include "chat_controller.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QThreadPool>
#include <algorithm>

#include "chat/chat_template.h"
#include "common/error.h"
#include "common/log.h"
#include "core/default_model.h"
#include "settings_model.h"
#include "telemetry_model.h"

namespace strata::desktop {

namespace {

const QString kNewChat = QStringLiteral("New chat");

// A conversation made by "New chat" that nothing was written to yet.
bool untouched_new_chat(const app::Conversation& c) { return c.message_count == 0 && c.title == kNewChat; }

QString title_from(const QString& text) {
    QString t = text.simplified();
    if (t.size() > 48) t = t.left(47).trimmed() + QChar(0x2026);
    return t.isEmpty() ? kNewChat : t;
}

// A new conversation starts with the loaded model's saved system prompt (Settings: per-model defaults).
void start_with_preset_prompt(app::ChatStore& store, const SettingsModel& settings, qint64 conversation) {
    const QString prompt = settings.preset_system_prompt();
    if (!prompt.isEmpty() && store.conversation(conversation).system_prompt.isEmpty())
        store.set_system_prompt(conversation, prompt);
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
        remote_active_ = false;
        model_state_ = QStringLiteral("ready");
        model_info_ = info;
        model_path_ = info.value(QStringLiteral("path")).toString();
        model_error_.clear();
        needs_reload_ = false;
        settings_->add_recent_model(model_path_);
        settings_->set_preset_model(QFileInfo(model_path_).fileName());
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
    flush_timer_.setSingleShot(true);
    flush_timer_.setInterval(kFlushMs);
    connect(&flush_timer_, &QTimer::timeout, this, &ChatController::flush_streamed);
    connect(&remote_, &RemoteEngine::token, this, &ChatController::on_token);
    connect(&remote_, &RemoteEngine::finished, this, &ChatController::on_finished);
    connect(&remote_, &RemoteEngine::failed, this, &ChatController::on_failed);
    connect(&remote_, &RemoteEngine::modelsListed, this, &ChatController::remoteModelsListed);
    connect(worker_, &EngineWorker::token, this, &ChatController::on_token);
    connect(worker_, &EngineWorker::promptProgress, this, [this](quint64 id, qint64 done, qint64 total) {
        const auto it = streams_.find(id);
        if (it != streams_.end() && it->conversation == current_ && it->message) messages_.set_prompt_progress(it->message, done, total);
    });
    connect(worker_, &EngineWorker::finished, this, &ChatController::on_finished);
    connect(worker_, &EngineWorker::failed, this, &ChatController::on_failed);
    remote_metrics_ = new RemoteMetrics(telemetry_, this);
    connect(worker_, &EngineWorker::telemetry, this, [this](const TelemetrySnapshot& s) {
        // While the chat goes to a server the panels show the server's figures, not the idle local engine's.
        if (model_state_ != QLatin1String("ready") || remote_active_) return;
        telemetry_->set_source(QStringLiteral("engine"), QString());
        telemetry_->push(s);
    });
    connect(worker_, &EngineWorker::settingApplied, this, [this](const QString& group, const QString& error) {
        const QString msg = error.isEmpty() ? QString() : QStringLiteral("not applied: ") + error;
        if (group == QLatin1String("cache")) settings_->set_error(QStringLiteral("expert_cache_fraction"), msg);
        else if (group == QLatin1String("policy")) settings_->set_error(QStringLiteral("policy"), msg);
        else if (group == QLatin1String("pins")) settings_->set_error(QStringLiteral("pin_file"), msg);
        else if (group == QLatin1String("prefetch")) settings_->set_error(QStringLiteral("prefetch_width"), msg);
        else if (group == QLatin1String("batch")) settings_->set_error(QStringLiteral("max_batch"), msg);
    });
    connect(settings_, &SettingsModel::changed, this, &ChatController::on_setting_changed);
    connect(worker_, &EngineWorker::calibrationProgress, this, [this](quint64 id, int done, int total) {
        if (id != calibration_id_) return;
        calibration_fraction_ = total > 0 ? double(done) / total : 0.0;
        calibration_message_ = QStringLiteral("Calibrating: prompt %1 of %2").arg(std::min(done + 1, total)).arg(total);
        Q_EMIT calibrationChanged();
    });
    connect(worker_, &EngineWorker::calibrationFinished, this,
            [this](quint64 id, const QString& file, const QString& error, bool cancelled, const QString& summary) {
                if (id != calibration_id_) return;
                if (cancelled) {
                    calibration_state_ = QStringLiteral("cancelled");
                    calibration_message_ = QStringLiteral("Calibration was cancelled; the pin file is unchanged.");
                } else if (!error.isEmpty()) {
                    calibration_state_ = QStringLiteral("failed");
                    calibration_message_ = QStringLiteral("Calibration failed: ") + error;
                } else {
                    const QString err = settings_->setValue(QStringLiteral("pin_file"), file);
                    calibration_state_ = err.isEmpty() ? QStringLiteral("done") : QStringLiteral("failed");
                    calibration_message_ = err.isEmpty() ? summary + QStringLiteral(". Pin file: ") + file
                                                         : QStringLiteral("The pin file was written but not accepted: ") + err;
                    calibration_fraction_ = 1.0;
                }
                Q_EMIT calibrationChanged();
                Q_EMIT calibrationFinished(calibration_state_ == QLatin1String("done"), calibration_message_);
            });
    // A draft file must share the loaded model's vocabulary.
    settings_->set_validator(QStringLiteral("spec_draft_file"), [this](const QString& path) -> QString {
        if (path.isEmpty()) return {};
        return draft_mismatch(model_state_ == QLatin1String("ready") ? model_path_ : QString(), path);
    });
    install_model_validators();  // chat_controller_model.cpp
    {
        const int mb = int(settings_->value(QStringLiteral("max_batch")).toLongLong());
        EngineWorker* w = worker_;
        w->post([w, mb] { w->set_max_batch(mb); });
    }

    library_ = new ModelLibrary(
        settings_, [this] { return settings_->engine_settings(); }, [this] { return ram_returned_by_load(); }, this);
    library_->set_initial_folder(
        ModelLibrary::default_folder(settings_->uiString(QStringLiteral("modelsFolder")), settings_->recent_models()));

    // The conversation open when the app last closed, if it is still there.
    const qint64 last = settings_->uiString(QStringLiteral("lastConversation")).toLongLong();
    if (last > 0) {
        try {
            (void)store_->conversation(last);
            current_ = last;
            reload_messages();
        } catch (const std::exception&) {
        }
    }
    connect(this, &ChatController::currentConversationChanged, this,
            [this] { settings_->setUiString(QStringLiteral("lastConversation"), QString::number(current_)); });
    connect(this, &ChatController::currentConversationChanged, this, &ChatController::conversationModelChanged);
    connect(this, &ChatController::modelChanged, this, &ChatController::conversationModelChanged);
    refresh_conversations();
}

ChatController::~ChatController() {
    plan_pool_.waitForDone();
    worker_->requestStopUpTo(~quint64(0) >> 1);
    worker_->requestCancelLoad(~quint64(0) >> 1);
    worker_->requestCancelCalibration(~quint64(0) >> 1);
    EngineWorker* w = worker_;
    QThread* owner = QThread::currentThread();
    // Run now, and wait: a call merely posted before quit() is dropped with
    // the thread's event loop (the timer then died here, from the wrong thread).
    QMetaObject::invokeMethod(w, [w, owner] { w->shutdown(owner); }, Qt::BlockingQueuedConnection);
    thread_.quit();
    thread_.wait();
    delete worker_;
    for (const Stream& s : std::as_const(streams_)) {
        if (!s.message) continue;
        // Keep what was streamed: marked partial, as a killed app would leave it.
        try {
            app::MessageStats st;
            st.finish = QStringLiteral("cancelled");
            st.tool_turns = QString::fromUtf8(tool_rounds_json(s.rounds));  // the calls made so far stay
            store_->update_message(s.message, s.text, true, st);
        } catch (const std::exception&) {
        }
    }
}

std::optional<app::Conversation> ChatController::stored_current() const {
    if (current_ == 0) return std::nullopt;
    try {
        return store_->conversation(current_);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

QString ChatController::currentTitle() const {
    if (const app::Conversation* c = conversations_.at(conversations_.row_of(current_))) return c->title;
    const std::optional<app::Conversation> c = stored_current();
    return c ? c->title : QString();
}

QString ChatController::conversationModel() const {
    if (remote_active_) return {};
    const app::Conversation* c = conversations_.at(conversations_.row_of(current_));
    std::optional<app::Conversation> stored;
    if (!c) {
        stored = stored_current();
        c = stored ? &*stored : nullptr;
    }
    if (!c || c->model.isEmpty() || c->model == model_path_ || !QFileInfo(c->model).isFile()) return {};
    return c->model;
}

QString ChatController::systemPrompt() const {
    const std::optional<app::Conversation> c = stored_current();
    return c ? c->system_prompt : QString();
}

void ChatController::clear_search() {
    if (search_.isEmpty()) return;
    search_.clear();
    Q_EMIT searchTextChanged();
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
        const quint64 req = request_for(current_);
        const Stream* st = req ? &streams_[req] : nullptr;
        if (st) {
            for (app::Message& m : list)
                if (m.id == st->message) m.content = st->text;
        }
        for (Stream& s : streams_) s.unshown.clear();  // the list shows all streamed text now
        messages_.set_messages(list);
        messages_.set_streaming(st ? st->message : 0);
        refresh_versions();
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
            if (untouched_new_chat(c)) {
                start_with_preset_prompt(*store_, *settings_, current_);
                Q_EMIT currentConversationChanged();  // its system prompt may be the preset's now
                Q_EMIT conversationOpened();
                return current_;
            }
        }
        current_ = store_->create_conversation(kNewChat);
        start_with_preset_prompt(*store_, *settings_, current_);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return 0;
    }
    clear_search();
    reload_messages();
    refresh_conversations();
    Q_EMIT conversationOpened();
    return current_;
}

void ChatController::selectConversation(qint64 id) {
    if (id == current_) return;
    current_ = id;
    reload_messages();
    Q_EMIT currentConversationChanged();
    Q_EMIT generatingChanged();
    Q_EMIT conversationOpened();
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
    if (const quint64 req = request_for(id)) {
        Stream& s = streams_[req];
        s.conversation = 0;  // nothing to save to any more (set first: a server's stop ends it at once)
        s.message = 0;
        stop_request(req);
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
    if (generating()) {
        set_error(QStringLiteral("An answer is still being generated in this conversation: stop it first."));
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
            start_with_preset_prompt(*store_, *settings_, current_);
            clear_search();
            reload_messages();
        } else {
            const app::Conversation c = store_->conversation(current_);
            if (untouched_new_chat(c)) store_->rename_conversation(current_, title_from(text));
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
    sched::SamplingParams sp = settings_->sampling_params();
    if (max_tokens_override_ > 0) sp.max_tokens = max_tokens_override_;
    if (const std::string err = sp.validate(); !err.empty()) {
        set_error(QStringLiteral("Sampling settings: ") + QString::fromStdString(err));
        return false;
    }
    QList<ChatTurn> turns;
    const QString system = systemPrompt();
    if (!system.isEmpty()) turns.append({QStringLiteral("system"), system});
    for (const app::Message& m : messages_.messages()) {
        const QList<ToolRound> rounds = tool_rounds_from_json(m.stats.tool_turns.toUtf8());
        if (m.role == QLatin1String("assistant") && m.content.isEmpty() && rounds.isEmpty()) continue;
        if (m.role == QLatin1String("assistant")) append_answer_turns(turns, rounds, m.content);
        else turns.append({m.role, m.content});
    }
    try {
        // The conversation's model: written when it changes (not on every message).
        const app::Conversation* conv = conversations_.at(conversations_.row_of(current_));
        if (!remote_active_ && !model_path_.isEmpty() && (!conv || conv->model != model_path_))
            store_->set_conversation_model(current_, model_path_);
        app::Message a;
        a.id = store_->append_message(current_, QStringLiteral("assistant"), QString(), /*partial=*/true);
        a.conversation_id = current_;
        a.role = QStringLiteral("assistant");
        a.partial = true;
        a.created = QDateTime::currentDateTimeUtc();
        a.stats.model = model_info_.value(QStringLiteral("fileName")).toString();
        messages_.append(a);
        refresh_versions();
        const quint64 id = ++next_request_;
        Stream& st = streams_[id];
        st.message = a.id;
        st.conversation = current_;
        st.saved.start();
        st.turns = turns;
        st.params = sp;
        st.remote = remote_active_;
        if (settings_->value(QStringLiteral("tools")).toBool()) {
            st.tools = chat_tool_definitions();
            st.tool_defs = std::make_shared<const nlohmann::ordered_json>(nlohmann::ordered_json::parse(st.tools.toStdString()));
            st.calls = call_reader(st);
        }
        messages_.set_streaming(a.id);
        submit_round(id, st);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
    clearError();
    streams_changed();
    refresh_conversations();
    return true;
}

void ChatController::submit_round(quint64 id, const Stream& s) {
    sched::SamplingParams sp = s.params;
    if (sampling_hook_) sampling_hook_(sp, int(s.rounds.size()));
    if (remote_active_) {
        remote_.generate(id, s.turns, sp, s.tools);
        return;
    }
    const DraftSettings draft = settings_->draft_settings();
    EngineWorker* w = worker_;
    w->post([w, id, turns = s.turns, sp, draft, tools = s.tools] { w->generate(id, turns, sp, draft, tools); });
}

std::shared_ptr<serve::ToolCallStream> ChatController::call_reader(const Stream& s) const {
    if (remote_active_ || s.tools.isEmpty()) return nullptr;  // a server returns the calls parsed
    const auto syntax = serve::ToolSyntax(model_info_.value(QStringLiteral("toolSyntax")).toInt());
    return std::make_shared<serve::ToolCallStream>(syntax, s.tool_defs.get());
}

void ChatController::continue_with_tools(Stream s, const QVariantList& calls, const QVariantMap& stats) {
    ToolRound round;
    // What it said before the calls, less its reasoning (a template writes that part itself, if at all).
    round.content = QString::fromStdString(chat::split_reply(s.text.toStdString()).answer).trimmed();
    for (const QVariant& v : calls) {
        const QVariantMap c = v.toMap();
        ToolCallRecord r;
        r.id = c.value(QStringLiteral("id")).toString();
        if (r.id.isEmpty()) r.id = QStringLiteral("call_%1_%2").arg(s.rounds.size()).arg(round.calls.size());
        r.name = c.value(QStringLiteral("name")).toString();
        r.arguments = c.value(QStringLiteral("arguments")).toString();
        r.result = run_chat_tool(r.name, r.arguments);
        round.calls.append(r);
    }
    s.rounds.append(round);
    append_answer_turns(s.turns, {round}, QString());
    s.tokens_before += stats.value(QStringLiteral("tokens")).toLongLong();
    s.seconds_before += stats.value(QStringLiteral("seconds")).toDouble();
    s.text.clear();
    s.unshown.clear();
    s.calls = call_reader(s);
    // The calls are shown (and saved) above the answer, which starts afresh.
    if (const app::Message* old = messages_.find(s.message)) {
        app::Message m = *old;
        m.content.clear();
        m.stats.tool_turns = QString::fromUtf8(tool_rounds_json(s.rounds));
        messages_.update(m);
    }
    save_streaming(s, false, nullptr, QString());
    const quint64 next = ++next_request_;
    streams_.insert(next, s);
    submit_round(next, s);
}

void ChatController::save_streaming(Stream& s, bool final_commit, const QVariantMap* stats, const QString& finish) {
    if (!s.message) return;
    app::MessageStats st;
    st.model = model_info_.value(QStringLiteral("fileName")).toString();
    if (stats) {
        st.prompt_tokens = stats->value(QStringLiteral("promptTokens")).toLongLong();
        st.tokens = stats->value(QStringLiteral("tokens")).toLongLong();
        st.tok_s = stats->value(QStringLiteral("tokS")).toDouble();
        st.ttft_ms = stats->value(QStringLiteral("ttftMs")).toDouble();
        st.seconds = stats->value(QStringLiteral("seconds")).toDouble();
        if (stats->contains(QStringLiteral("model"))) st.model = stats->value(QStringLiteral("model")).toString();
        st.cached_tokens = stats->value(QStringLiteral("reusedTokens")).toLongLong();
        st.spec_acceptance = stats->value(QStringLiteral("specAcceptance"), -1.0).toDouble();
        st.tokens += s.tokens_before;  // the answer's, over its tool rounds
        st.seconds += s.seconds_before;
    }
    st.tool_turns = QString::fromUtf8(tool_rounds_json(s.rounds));
    st.finish = finish;
    const bool partial = !final_commit || finish == QLatin1String("cancelled") || finish == QLatin1String("error");
    try {
        store_->update_message(s.message, s.text, partial, st);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
    }
    if (final_commit) {
        if (const app::Message* old = messages_.find(s.message)) {
            app::Message m = *old;
            m.content = s.text;
            m.partial = partial;
            m.stats = st;
            messages_.update(m);
        }
    }
    s.saved.restart();
}

quint64 ChatController::request_for(qint64 conversation) const {
    if (conversation == 0) return 0;
    for (auto it = streams_.cbegin(); it != streams_.cend(); ++it)
        if (it->conversation == conversation) return it.key();
    return 0;
}

QVariantList ChatController::generatingConversations() const {
    QVariantList out;
    for (const Stream& s : streams_)
        if (s.conversation) out << s.conversation;
    return out;
}

void ChatController::streams_changed() {
    QSet<qint64> ids;
    for (const Stream& s : std::as_const(streams_))
        if (s.conversation) ids.insert(s.conversation);
    conversations_.set_generating(ids);
    Q_EMIT generatingChanged();
}

bool ChatController::speculative() const {
    return settings_->draft_settings().on();
}

void ChatController::on_token(quint64 id, const QString& text) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    Stream& s = *it;
    const bool first = s.text.isEmpty();
    // A tool call's text is held back (it is shown as a call once it is read).
    const QString shown = s.calls ? QString::fromStdString(s.calls->feed(text.toStdString())) : text;
    if (shown.isEmpty()) return;
    s.text += shown;
    if (s.conversation == current_ && s.message) s.unshown += shown;
    if (s.saved.elapsed() >= 500) save_streaming(s, false, nullptr, QString());
    // An answer's first words are shown at once, even while another answer's
    // interval runs: the time to the first token is what the user waits.
    if (first || !flush_timer_.isActive()) flush_streamed();
}

void ChatController::flush_streamed() {
    bool any = false;
    for (Stream& s : streams_) {
        if (s.unshown.isEmpty()) continue;
        if (s.conversation == current_ && s.message) {
            messages_.set_prompt_progress(s.message, 0, 0);  // the prompt is read: the answer has begun
            messages_.append_text(s.message, s.unshown);
        }
        s.unshown.clear();
        any = true;
    }
    if (!any) return;
    flush_timer_.start();  // the next chunk waits for the interval's end
    Q_EMIT streamed();
}

void ChatController::on_finished(quint64 id, const QVariantMap& stats) {
    if (!streams_.contains(id)) return;
    // Text still waiting for the interval's end is shown now: an answer that
    // ends within one interval (a fast, short one) was otherwise never shown
    // streaming, only replaced whole.
    flush_streamed();
    auto it = streams_.find(id);
    Stream s = *it;
    const QString finish = store_finish(stats.value(QStringLiteral("finish")).toString());
    if (stats.value(QStringLiteral("remote")).toBool())
        telemetry_->record_answer(stats.value(QStringLiteral("tokS")).toDouble(), stats.value(QStringLiteral("ttftMs")).toDouble(),
                                  stats.value(QStringLiteral("tokens")).toLongLong());
    QVariantList calls;
    if (s.calls) {
        const serve::ParsedReply rest = s.calls->finish("call_" + std::to_string(id) + "_");
        const QString more = QString::fromStdString(rest.content);
        s.text += more;
        if (s.conversation == current_ && s.message && !more.isEmpty()) messages_.append_text(s.message, more);
        for (const serve::ToolCall& c : rest.calls)
            calls.append(QVariantMap{{QStringLiteral("id"), QString::fromStdString(c.id)},
                                     {QStringLiteral("name"), QString::fromStdString(c.name)},
                                     {QStringLiteral("arguments"), QString::fromStdString(c.arguments)}});
    } else {
        if (stats.contains(QStringLiteral("text"))) s.text = stats.value(QStringLiteral("text")).toString();
        if (!s.tools.isEmpty()) calls = stats.value(QStringLiteral("toolCalls")).toList();
    }
    // Another round only for an answer still wanted, on the engine that began it.
    const bool go_on = !s.stop_requested && s.message && s.remote == remote_active_;
    if (!calls.isEmpty() && finish != QLatin1String("cancelled") && go_on) {
        if (s.rounds.size() < kMaxToolRounds) {
            streams_.erase(it);
            return continue_with_tools(s, calls, stats);
        }
        set_notice(QStringLiteral("The model called tools %1 times in a row without answering; its last calls were not run.")
                       .arg(kMaxToolRounds));
    }
    const qint64 message = s.message;
    const bool here = s.conversation == current_;
    save_streaming(s, true, &stats, finish);
    streams_.erase(it);
    if (here) messages_.set_streaming(0);
    if (const int dropped = stats.value(QStringLiteral("droppedMessages")).toInt(); dropped > 0) {
        set_notice(QStringLiteral("The oldest %1 message(s) did not fit the model's context (%2 tokens) and were left out of the prompt.")
                       .arg(dropped)
                       .arg(model_info_.value(QStringLiteral("context")).toLongLong()));
    }
    streams_changed();
    refresh_conversations();
    Q_EMIT answerFinished(message, finish);
}

void ChatController::on_failed(quint64 id, const QString& message, const QString& partial_text) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    Stream s = *it;
    s.text = partial_text;
    const qint64 mid = s.message;
    const bool here = s.conversation == current_;
    save_streaming(s, true, nullptr, QStringLiteral("error"));
    streams_.erase(it);
    if (here) messages_.set_streaming(0);
    set_error(message);
    streams_changed();
    refresh_conversations();
    Q_EMIT answerFailed(mid, message);
}

void ChatController::stop() { stopConversation(current_); }

void ChatController::stopConversation(qint64 conversation) {
    if (const quint64 req = request_for(conversation)) stop_request(req);
}

void ChatController::stop_request(quint64 req) {
    streams_[req].stop_requested = true;  // no further tool round either
    if (remote_.running(req)) remote_.stop(req);
    else worker_->requestStop(req);
}

QString ChatController::remoteUrl() const { return settings_->uiString(QStringLiteral("remote_url"), QString()); }
QString ChatController::remoteKey() const { return settings_->uiString(QStringLiteral("remote_key"), QString()); }
QString ChatController::remoteModel() const { return settings_->uiString(QStringLiteral("remote_model"), QString()); }

void ChatController::listRemoteModels(const QString& baseUrl, const QString& apiKey) {
    remote_.list_models(baseUrl, apiKey.trimmed());
}

QString ChatController::useRemote(const QString& baseUrl, const QString& apiKey, const QString& model) {
    QString err;
    const QUrl base = normalize_base_url(baseUrl, &err);
    if (base.isEmpty()) return err;
    if (model.trimmed().isEmpty()) return QStringLiteral("Choose a model of the server first (List models).");
    // Whatever the local engine was doing for the chat stops, and the local
    // model is unloaded: its memory is freed and the app's server stops
    // answering with it (a model nobody sees must not hold the RAM). It is
    // remembered, and Disconnect loads it again.
    if (next_request_) worker_->requestStopUpTo(next_request_);
    bool unloaded_local = false;
    if (!remote_active_) {
        const bool local = model_state_ == QLatin1String("ready") || model_state_ == QLatin1String("loading");
        local_before_remote_ = local ? model_path_ : QString();
        if (local) {
            if (model_state_ == QLatin1String("loading")) worker_->requestCancelLoad(load_id_);
            ++load_id_;  // whatever load is in flight no longer counts
            EngineWorker* w = worker_;
            w->post([w] { w->unload(); });
            unloaded_local = true;
        }
    }
    remote_.set_endpoint({base.toString(), apiKey.trimmed(), model.trimmed()});
    remote_active_ = true;
    settings_->set_preset_model(QString());  // per-model defaults are for local model files
    settings_->setUiString(QStringLiteral("remote_url"), baseUrl.trimmed());
    settings_->setUiString(QStringLiteral("remote_key"), apiKey.trimmed());
    settings_->setUiString(QStringLiteral("remote_model"), model.trimmed());
    model_state_ = QStringLiteral("ready");
    model_error_.clear();
    model_path_ = base.toString();
    model_info_.clear();
    model_info_[QStringLiteral("remote")] = true;
    model_info_[QStringLiteral("url")] = base.toString();
    model_info_[QStringLiteral("fileName")] = model.trimmed() + QStringLiteral(" @ ") + base.host() +
                                              (base.port() > 0 ? QStringLiteral(":%1").arg(base.port()) : QString());
    model_info_[QStringLiteral("name")] = model.trimmed();
    model_info_[QStringLiteral("templateNote")] = QStringLiteral("the server applies its own chat template");
    telemetry_->clear();
    remote_metrics_->start(base, apiKey.trimmed());
    Q_EMIT modelChanged();
    Q_EMIT modelLoaded();
    if (unloaded_local)
        set_notice(QStringLiteral("Chatting with %1 on the server. %2 was unloaded to free its memory (and is no longer "
                                  "served to other apps); Disconnect loads it again.")
                       .arg(model.trimmed(), QFileInfo(local_before_remote_).fileName()));
    return QString();
}

QString ChatController::defaultPromptsFile() const {
    if (!model_path_.isEmpty()) {
        const QFileInfo fi(model_path_);
        const QString beside = fi.absolutePath() + QLatin1Char('/') + fi.completeBaseName() + QStringLiteral(".prompts.txt");
        if (QFileInfo::exists(beside)) return beside;
    }
    const QString demo = demoModelPath();
    if (demo.isEmpty()) return {};
    const QFileInfo di(demo);
    const QString p = di.absolutePath() + QLatin1Char('/') + di.completeBaseName() + QStringLiteral(".prompts.txt");
    return QFileInfo::exists(p) ? p : QString();
}

bool ChatController::calibrate(const QUrl& promptsFile) {
    if (model_state_ != QLatin1String("ready")) {
        set_error(QStringLiteral("Load a model to calibrate its hot experts."));
        return false;
    }
    if (calibration_state_ == QLatin1String("running")) {
        set_error(QStringLiteral("A calibration is already running."));
        return false;
    }
    if (anyGenerating()) {
        set_error(QStringLiteral("Answers are being generated: calibrate when they are done."));
        return false;
    }
    const QString prompts = promptsFile.isEmpty() ? defaultPromptsFile() : localPath(promptsFile);
    if (prompts.isEmpty() || !QFileInfo(prompts).isFile()) {
        set_error(prompts.isEmpty() ? QStringLiteral("Calibration needs a prompts file: choose one.")
                                    : QStringLiteral("%1: no such file").arg(prompts));
        return false;
    }
    const QString dir = QFileInfo(store_->path()).absolutePath() + QStringLiteral("/calibration");
    QDir().mkpath(dir);
    const QString out = dir + QLatin1Char('/') + QFileInfo(model_path_).completeBaseName() + QStringLiteral(".hot.json");
    const quint64 id = ++calibration_id_;
    calibration_state_ = QStringLiteral("running");
    calibration_fraction_ = 0;
    calibration_message_ = QStringLiteral("Calibrating on %1").arg(QFileInfo(prompts).fileName());
    Q_EMIT calibrationChanged();
    EngineWorker* w = worker_;
    w->post([w, id, prompts, out] { w->calibrate(id, prompts, out); });
    return true;
}

void ChatController::cancelCalibration() {
    if (calibration_state_ == QLatin1String("running")) worker_->requestCancelCalibration(calibration_id_);
}

bool ChatController::regenerate() {
    if (generating()) {
        set_error(QStringLiteral("An answer is still being generated in this conversation: stop it first."));
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
            store_->archive_answer(last.id);  // kept as a version of the answer (‹ 1/2 ›)
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
    if (generating()) {
        set_error(QStringLiteral("An answer is still being generated in this conversation: stop it first."));
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

void ChatController::refresh_versions() {
    const QList<app::Message>& list = messages_.messages();
    const int n = int(list.size());
    if (n < 2 || list[n - 1].role != QLatin1String("assistant") || list[n - 2].role != QLatin1String("user")) {
        messages_.set_versions(0, 0, 0);
        return;
    }
    const app::Message& shown = list[n - 1];
    try {
        const QList<app::Message> kept = store_->answer_versions(list[n - 2].id);
        int before = 0;
        for (const app::Message& v : kept)
            if (v.created < shown.created) ++before;
        messages_.set_versions(shown.id, before + 1, int(kept.size()) + 1);
    } catch (const std::exception& e) {
        messages_.set_versions(0, 0, 0);
        set_error(QString::fromUtf8(e.what()));
    }
}

bool ChatController::showAnswerVersion(int delta) {
    if (generating()) {
        set_error(QStringLiteral("An answer is still being generated in this conversation: stop it first."));
        return false;
    }
    const QList<app::Message>& list = messages_.messages();
    const int n = int(list.size());
    if (n < 2 || list[n - 1].role != QLatin1String("assistant") || list[n - 2].role != QLatin1String("user")) {
        set_error(QStringLiteral("This answer has no other versions."));
        return false;
    }
    try {
        const qint64 message = list[n - 1].id;
        QList<app::Message> all = store_->answer_versions(list[n - 2].id);
        app::Message shown = list[n - 1];
        shown.id = -1;  // versions' ids are another table's: -1 marks the answer shown
        all.append(shown);
        std::stable_sort(all.begin(), all.end(), [](const app::Message& a, const app::Message& b) { return a.created < b.created; });
        int at = 0;
        for (int i = 0; i < all.size(); ++i)
            if (all[i].id == -1) at = i;
        const int to = at + delta;
        if (delta == 0 || to < 0 || to >= all.size()) {
            set_error(QStringLiteral("There is no other version that way."));
            return false;
        }
        store_->swap_answer_version(message, all[to].id);
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
    reload_messages();
    refresh_conversations();
    return true;
}

void ChatController::on_setting_changed(const QString& key, const QString& applies) {
    if (key == QLatin1String("spec_draft")) Q_EMIT speculativeChanged();
    if (key == QLatin1String("max_batch")) {
        // Live, loaded or not (the worker keeps it for the next load).
        const int mb = int(settings_->value(key).toLongLong());
        EngineWorker* w = worker_;
        w->post([w, mb] { w->set_max_batch(mb); });
        return;
    }
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
