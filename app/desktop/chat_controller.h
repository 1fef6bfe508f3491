// ChatController (GUI thread; "chat" in QML): the conversations in the
// ChatStore, the open conversation's messages, the model being planned,
// loaded or used, and the EngineWorker thread that runs it.
//
// Sending: the user message is stored, an empty assistant message (partial)
// is stored and shown, and the conversation goes to the worker. Several
// conversations may generate at once (one answer per conversation): each
// answer is a request of its own, streamed into its own message; Stop stops
// the open conversation's answer only. Chunks are
// appended to that message as they stream; the store is updated at most every
// 500 ms while streaming (partial=1) and once at the end with the figures
// (partial=0; an answer that was stopped keeps its text, marked partial, with
// finish "cancelled"). Nothing here waits on the worker.
//
// Models: planModel(path) computes the plan (on a pool thread) for the model
// dialog; loadModel(path) loads with progress and cancelModelLoad() cancels.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QStringList>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <QUrl>
#include <QVariantMap>
#include <functional>
#include <memory>
#include <optional>

#include "chat_store.h"
#include "chat_tools.h"
#include "conversation_list_model.h"
#include "engine_worker.h"
#include "message_list_model.h"
#include "model_library.h"
#include "remote_engine.h"
#include "remote_metrics.h"
#include "serve/tool_calls.h"

namespace strata::desktop {

class SettingsModel;
class TelemetryModel;

class ChatController : public QObject {
    Q_OBJECT
    Q_PROPERTY(strata::desktop::ConversationListModel* conversations READ conversations CONSTANT)
    Q_PROPERTY(strata::desktop::MessageListModel* messages READ messages CONSTANT)
    Q_PROPERTY(strata::desktop::ModelLibrary* library READ library CONSTANT)
    Q_PROPERTY(qint64 currentConversationId READ currentConversationId NOTIFY currentConversationChanged)
    Q_PROPERTY(QString currentTitle READ currentTitle NOTIFY currentConversationChanged)
    // The model file the open conversation last answered with, when it is
    // not the one loaded now and still exists ("" otherwise): the chat
    // offers to load it (each conversation keeps its model, as in GPT4All).
    Q_PROPERTY(QString conversationModel READ conversationModel NOTIFY conversationModelChanged)
    Q_PROPERTY(QString systemPrompt READ systemPrompt NOTIFY currentConversationChanged)
    Q_PROPERTY(QString searchText READ searchText NOTIFY searchTextChanged)
    // The open conversation has an answer being generated.
    Q_PROPERTY(bool generating READ generating NOTIFY generatingChanged)
    // Any conversation has; and which ones.
    Q_PROPERTY(bool anyGenerating READ anyGenerating NOTIFY generatingChanged)
    Q_PROPERTY(QVariantList generatingConversations READ generatingConversations NOTIFY generatingChanged)
    // Speculative decoding is on (Settings): answers run one conversation at a time.
    Q_PROPERTY(bool speculative READ speculative NOTIFY speculativeChanged)
    // Calibration: "idle" | "running" | "done" | "failed" | "cancelled"
    Q_PROPERTY(QString calibrationState READ calibrationState NOTIFY calibrationChanged)
    Q_PROPERTY(double calibrationFraction READ calibrationFraction NOTIFY calibrationChanged)
    Q_PROPERTY(QString calibrationMessage READ calibrationMessage NOTIFY calibrationChanged)
    Q_PROPERTY(QString defaultPromptsFile READ defaultPromptsFile NOTIFY modelChanged)
    Q_PROPERTY(QString lastError READ lastError NOTIFY lastErrorChanged)
    Q_PROPERTY(QString notice READ notice NOTIFY noticeChanged)
    Q_PROPERTY(QString databasePath READ databasePath CONSTANT)
    // Model state: "none" | "loading" | "ready" | "failed"
    Q_PROPERTY(QString modelState READ modelState NOTIFY modelChanged)
    Q_PROPERTY(QString modelPath READ modelPath NOTIFY modelChanged)
    Q_PROPERTY(QVariantMap modelInfo READ modelInfo NOTIFY modelChanged)
    Q_PROPERTY(QString modelError READ modelError NOTIFY modelChanged)
    Q_PROPERTY(QString loadStage READ loadStage NOTIFY loadProgressChanged)
    Q_PROPERTY(double loadFraction READ loadFraction NOTIFY loadProgressChanged)
    Q_PROPERTY(QStringList recentModels READ recentModels NOTIFY recentModelsChanged)
    Q_PROPERTY(QString demoModelPath READ demoModelPath CONSTANT)
    // Plan for the model dialog: "idle" | "planning" | "ready" | "failed"
    Q_PROPERTY(QString planState READ planState NOTIFY planChanged)
    Q_PROPERTY(QVariantMap plan READ plan NOTIFY planChanged)
    Q_PROPERTY(QString planError READ planError NOTIFY planChanged)
    Q_PROPERTY(bool settingsNeedReload READ settingsNeedReload NOTIFY settingsNeedReloadChanged)
    // The model loadAtLaunch() planned and did not load (or is planning):
    // {state: "" | "planning" | "held", path, message, canLoad}. The start
    // screen says why and offers loadLaunchModel().
    Q_PROPERTY(QVariantMap launch READ launch NOTIFY launchChanged)
    // Chatting with a server (remote_engine.h) instead of the local engine.
    Q_PROPERTY(bool remote READ remote NOTIFY modelChanged)
    // The last server used (to fill the dialog): address, key, model.
    Q_PROPERTY(QString remoteUrl READ remoteUrl NOTIFY modelChanged)
    Q_PROPERTY(QString remoteKey READ remoteKey NOTIFY modelChanged)
    Q_PROPERTY(QString remoteModel READ remoteModel NOTIFY modelChanged)

public:
    // `store_path`: the SQLite file. Throws app::StoreError when it cannot be opened.
    ChatController(const QString& store_path, SettingsModel* settings, TelemetryModel* telemetry,
                   QObject* parent = nullptr);
    ~ChatController() override;

    ConversationListModel* conversations() { return &conversations_; }
    ModelLibrary* library() { return library_; }
    MessageListModel* messages() { return &messages_; }
    qint64 currentConversationId() const { return current_; }
    QString currentTitle() const;
    QString conversationModel() const;
    QString systemPrompt() const;
    QString searchText() const { return search_; }
    bool generating() const { return request_for(current_) != 0; }
    bool anyGenerating() const { return !streams_.isEmpty(); }
    QVariantList generatingConversations() const;
    bool speculative() const;
    QString calibrationState() const { return calibration_state_; }
    double calibrationFraction() const { return calibration_fraction_; }
    QString calibrationMessage() const { return calibration_message_; }
    // The prompts file beside the loaded model (<model>.prompts.txt), else the demo model's.
    QString defaultPromptsFile() const;
    QString lastError() const { return last_error_; }
    QString notice() const { return notice_; }
    QString databasePath() const { return store_->path(); }
    QString modelState() const { return model_state_; }
    QString modelPath() const { return model_path_; }
    QVariantMap modelInfo() const { return model_info_; }
    QString modelError() const { return model_error_; }
    QString loadStage() const { return load_stage_; }
    double loadFraction() const { return load_fraction_; }
    QStringList recentModels() const;
    QString demoModelPath() const;
    QString planState() const { return plan_state_; }
    QVariantMap plan() const { return plan_; }
    QString planError() const { return plan_error_; }
    bool settingsNeedReload() const { return needs_reload_; }
    QVariantMap launch() const { return launch_; }
    app::ChatStore& store() { return *store_; }
    EngineWorker* worker() { return worker_; }
    // Tokens reach the view at most every kFlushMs: a chunk on the leading
    // edge at once, the rest gathered until the interval ends. The engine
    // may stream hundreds of tokens a second; the view gains nothing from
    // more than a screen refresh's worth of updates, and each costs a layout.
    static constexpr int kFlushMs = 50;
    // Answers of at most n tokens, whatever the settings say (strata --max-tokens; not saved). 0: the settings'.
    void set_max_tokens_override(int n) { max_tokens_override_ = n; }
    // Tests: adjusts each request's sampling; `round` counts an answer's tool
    // rounds before it (e.g. a grammar that makes the demo model call a tool).
    void set_sampling_hook(std::function<void(sched::SamplingParams&, int round)> hook) { sampling_hook_ = std::move(hook); }
    RemoteEngine* remoteEngine() { return &remote_; }
    bool remote() const { return remote_active_; }
    QString remoteUrl() const;
    QString remoteKey() const;
    QString remoteModel() const;

    // Conversations.
    Q_INVOKABLE qint64 newConversation();
    Q_INVOKABLE void selectConversation(qint64 id);
    Q_INVOKABLE void renameConversation(qint64 id, const QString& title);
    Q_INVOKABLE void deleteConversation(qint64 id);
    Q_INVOKABLE void search(const QString& text);
    Q_INVOKABLE void setSystemPrompt(const QString& text);

    // Messages. Each returns false (with lastError set) when it cannot act now.
    Q_INVOKABLE bool send(const QString& text);
    Q_INVOKABLE void stop();  // the open conversation's answer
    Q_INVOKABLE void stopConversation(qint64 conversationId);
    Q_INVOKABLE bool isGenerating(qint64 conversationId) const { return request_for(conversationId) != 0; }

    // Calibration of hot experts on the loaded model over a prompts file
    // (empty: defaultPromptsFile()); writes <data dir>/calibration/<model>.hot.json
    // and makes it the pin file. Returns false (lastError) when it cannot start.
    Q_INVOKABLE bool calibrate(const QUrl& promptsFile = QUrl());
    Q_INVOKABLE void cancelCalibration();
    Q_INVOKABLE bool regenerate();
    Q_INVOKABLE bool editAndResend(qint64 messageId, const QString& newText);

    // Exports of the open conversation; `url` is a file URL or a path.
    Q_INVOKABLE bool exportMarkdown(const QUrl& url);
    Q_INVOKABLE bool exportJson(const QUrl& url);
    // kind "markdown" or "json", to exactly `path` (a plain path, not a URL:
    // '#' and '?' are file name characters here); "~/" is the home folder.
    Q_INVOKABLE bool exportToPath(const QString& kind, const QString& path);
    // "<title>.md" with characters unsafe in file names replaced.
    Q_INVOKABLE QString suggestedFileName(const QString& extension) const;
    // Where an export goes first: the folder of the last export, else the
    // user's Documents, else home (never the app's hidden data folder).
    Q_INVOKABLE QString exportFolder() const;

    // Models.
    Q_INVOKABLE void planModel(const QUrl& urlOrPath);
    Q_INVOKABLE void loadModel(const QUrl& urlOrPath);
    // A server: lists its models (remoteModelsListed answers), then chats
    // with one of them. useRemote() returns "" or why not (a bad address).
    Q_INVOKABLE void listRemoteModels(const QString& baseUrl, const QString& apiKey);
    Q_INVOKABLE QString useRemote(const QString& baseUrl, const QString& apiKey, const QString& model);
    // Loads the model again with the current settings; false (with
    // lastError) when its plan does not fit them: the loaded model stays.
    Q_INVOKABLE bool reloadModel();
    Q_INVOKABLE void cancelModelLoad();
    // At launch, the last model is planned first (an mmap, no weights read)
    // and loaded only when it fits comfortably (launch_verdict); otherwise
    // it stays unloaded and `launch` says why. check false (a model the user
    // named on the command line, an unattended run): loads as loadModel().
    void loadAtLaunch(const QUrl& urlOrPath, bool check = true);
    // "Load anyway" on the start screen: loads the model loadAtLaunch held.
    Q_INVOKABLE void loadLaunchModel();
    // The launch rule: "" when a plan (plan_model's map) lets the app load
    // the model unasked with `available` bytes of RAM free (0: unknown),
    // else why not. The plan must fit and take at most two thirds of what is
    // available, leaving a third to the system and the user's other programs
    // (an expert cache streaming from disk grows to the whole budget, so such
    // a model always waits for a click).
    static QString launch_verdict(const QVariantMap& plan, uint64_t available);
    // The last answer's other versions (Regenerate keeps the answers it
    // replaces): delta -1 / +1 shows the previous / next one. False (with
    // lastError) while generating or when there is none that way.
    Q_INVOKABLE bool showAnswerVersion(int delta);
    // Frees the model's memory (or leaves the server); the conversations stay.
    Q_INVOKABLE void unloadModel();
    Q_INVOKABLE void forgetRecentModel(const QString& path);

    Q_INVOKABLE void clearError();
    Q_INVOKABLE void clearNotice();
    Q_INVOKABLE void showNotice(const QString& text) { set_notice(text); }
    Q_INVOKABLE QString localPath(const QUrl& url) const;

Q_SIGNALS:
    void currentConversationChanged();
    // A conversation was opened: a new chat (an empty one reused too) or
    // another chosen. The message box takes the keyboard focus.
    void conversationOpened();
    void conversationModelChanged();
    void searchTextChanged();
    void generatingChanged();
    void lastErrorChanged();
    void noticeChanged();
    void modelChanged();
    void loadProgressChanged();
    void recentModelsChanged();
    void planChanged();
    void launchChanged();
    void settingsNeedReloadChanged();
    void speculativeChanged();
    void calibrationChanged();
    void calibrationFinished(bool ok, const QString& message);
    void answerFinished(qint64 messageId, const QString& finish);
    void answerFailed(qint64 messageId, const QString& message);
    void modelLoaded();
    void remoteModelsListed(const QStringList& ids, const QString& error);
    void modelLoadFailed(const QString& message);
    // A chunk arrived (the view scrolls to the end).
    void streamed();

private:
    void refresh_conversations();
    // The version figures of the open conversation's last answer.
    void refresh_versions();
    void reload_messages();
    // The open conversation as stored; nullopt when none is open or it cannot be read.
    std::optional<app::Conversation> stored_current() const;
    void clear_search();  // and tell QML, when there was one
    bool start_generation(const QString& what);
    void set_error(const QString& message);
    void set_notice(const QString& message);
    // RAM the loaded local model gives back before the next load (plans count it).
    uint64_t ram_returned_by_load() const;
    // Settings checked against the model the next load uses (the context size).
    void install_model_validators();
    struct Stream {
        qint64 message = 0;
        qint64 conversation = 0;
        QString text;     // this round's answer as shown (a tool call's text held back)
        QString unshown;  // streamed since the view was last updated (see flush_streamed)
        QElapsedTimer saved;
        // What the next round needs: the turns sent, the sampling, the tools
        // offered ("" for none), the tool rounds so far; the local engine's
        // reply is read for calls in the template's syntax (a server returns them parsed).
        QList<ChatTurn> turns;
        sched::SamplingParams params;
        QByteArray tools;
        QList<ToolRound> rounds;
        std::shared_ptr<const nlohmann::ordered_json> tool_defs;
        std::shared_ptr<serve::ToolCallStream> calls;
        qint64 tokens_before = 0;    // generated in earlier rounds
        double seconds_before = 0;
        bool remote = false;          // began on a server (Remote), not the local engine
        bool stop_requested = false;  // Stop (or the conversation's deletion): no further round
    };
    void submit_round(quint64 id, const Stream& s);
    // Stops request `req` (on the server or the local engine), and any tool round after it.
    void stop_request(quint64 req);
    // A round ended with calls: runs them, shows and saves them, and sends the results back.
    void continue_with_tools(Stream s, const QVariantList& calls, const QVariantMap& stats);
    std::shared_ptr<serve::ToolCallStream> call_reader(const Stream& s) const;
    void flush_streamed();
    QTimer flush_timer_;
    int max_tokens_override_ = 0;
    std::function<void(sched::SamplingParams&, int)> sampling_hook_;
    quint64 request_for(qint64 conversation) const;
    void streams_changed();
    void save_streaming(Stream& s, bool final_commit, const QVariantMap* stats, const QString& finish);
    void on_token(quint64 id, const QString& text);
    void on_finished(quint64 id, const QVariantMap& stats);
    void on_failed(quint64 id, const QString& message, const QString& partial_text);
    void on_setting_changed(const QString& key, const QString& applies);
    bool write_export(const QString& path, const QByteArray& data);
    bool export_conversation(const QString& path, QByteArray (app::ChatStore::*render)(qint64) const);

    std::unique_ptr<app::ChatStore> store_;
    SettingsModel* settings_;
    TelemetryModel* telemetry_;
    ConversationListModel conversations_;
    MessageListModel messages_;
    QThread thread_;
    EngineWorker* worker_ = nullptr;
    RemoteEngine remote_;
    ModelLibrary* library_ = nullptr;  // a child
    RemoteMetrics* remote_metrics_ = nullptr;  // the server's /metrics while remote_active_
    bool remote_active_ = false;
    // The local model that connecting to a server unloaded (its memory freed,
    // no longer served); disconnecting loads it again. "" when there was none.
    QString local_before_remote_;

    qint64 current_ = 0;
    QString search_;
    QString last_error_, notice_;

    // The answers being generated, by request id.
    quint64 next_request_ = 0;
    QHash<quint64, Stream> streams_;

    QString calibration_state_ = QStringLiteral("idle");
    double calibration_fraction_ = 0;
    QString calibration_message_;
    quint64 calibration_id_ = 0;

    QString model_state_ = QStringLiteral("none");
    QString model_path_, model_error_, load_stage_;
    QVariantMap model_info_;
    double load_fraction_ = 0;
    quint64 load_id_ = 0;
    bool needs_reload_ = false;

    QVariantMap launch_;
    quint64 launch_id_ = 0;
    QString plan_state_ = QStringLiteral("idle");
    QVariantMap plan_;
    QString plan_error_;
    quint64 plan_id_ = 0;
    QThreadPool plan_pool_;  // last: destroyed (and waited for) first
};

}  // namespace strata::desktop
