// Unattended runs: `strata --model M --prompt TEXT --screenshot OUT.png
// --quit-after-reply [--report OUT.json]` loads the model, starts a new
// conversation, sends TEXT, waits for the whole answer and for the panels to
// show the engine's figures, saves a screenshot of the window (panels open)
// and the figures as JSON, then quits: exit 0, or 1 with a message on stderr
// (bad model, failed answer, no screenshot), 3 on a time-out. `--show
// settings|model` opens the settings dialog or the model dialog (with the
// plan of the loaded model) before the screenshot. --prompt given several
// times sends each in turn in the same conversation (a multi-turn chat); the
// screenshot and report follow the last answer. The report has the GUI
// thread's CPU seconds while the last answer streamed (guiCpuSeconds, beside
// answerSeconds): what the app itself costs per answer.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QTimer>

class QQuickWindow;

namespace strata::desktop {

class ChatController;
class TelemetryModel;

struct AutomationOptions {
    QString prompt;            // empty: no exchange, just the screenshot once the model is loaded
    QStringList more_prompts;  // sent after prompt, one per answer, in the same conversation
    QString screenshot;        // empty: none
    QString report;            // empty: none
    QString show;              // "settings" | "model": open that dialog before the screenshot
    bool quit_after_reply = false;
    int timeout_s = 600;
};

class Automation : public QObject {
    Q_OBJECT
public:
    Automation(AutomationOptions options, ChatController* chat, TelemetryModel* telemetry, QQuickWindow* window,
               QObject* parent = nullptr);
    // Begins once the model has loaded (the caller starts the load).
    void start();

private:
    void on_model_loaded();
    void on_answer(qint64 message_id, const QString& finish);
    void wait_for_panels();
    void show_then_capture();
    void capture();
    void fail(const QString& message, int code = 1);

    AutomationOptions opt_;
    ChatController* chat_;
    TelemetryModel* telemetry_;
    QPointer<QQuickWindow> window_;
    QTimer timeout_;
    qint64 message_id_ = 0;
    QString finish_;
    bool capturing_ = false;
    int waits_ = 0;
    bool shown_ = false;
    int next_prompt_ = 0;  // index into more_prompts
    // This (the GUI) thread's CPU time and the wall clock when the last prompt
    // was sent and when its answer ended: the app's own cost while it streams.
    double cpu_at_send_ = 0, cpu_at_answer_ = 0;
    QElapsedTimer answer_clock_;
    double answer_seconds_ = 0;
    void send(const QString& text);
};

}  // namespace strata::desktop
