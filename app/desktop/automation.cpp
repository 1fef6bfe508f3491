#include "automation.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QDir>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QQuickWindow>
#include <cstdio>
#include <ctime>

#include "chat_controller.h"
#include "telemetry_model.h"
#include "thread_priority.h"

namespace strata::desktop {

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

Automation::Automation(AutomationOptions options, ChatController* chat, TelemetryModel* telemetry, QQuickWindow* window,
                       QObject* parent)
    : QObject(parent), opt_(std::move(options)), chat_(chat), telemetry_(telemetry), window_(window) {
    timeout_.setSingleShot(true);
    connect(&timeout_, &QTimer::timeout, this, [this] {
        fail(QStringLiteral("timed out after %1 s (model state: %2)").arg(opt_.timeout_s).arg(chat_->modelState()), 3);
    });
}

void Automation::start() {
    timeout_.start(opt_.timeout_s * 1000);
    connect(chat_, &ChatController::modelLoaded, this, &Automation::on_model_loaded);
    connect(chat_, &ChatController::modelLoadFailed, this,
            [this](const QString& message) { fail(QStringLiteral("cannot load the model: ") + message); });
    connect(chat_, &ChatController::answerFinished, this, &Automation::on_answer);
    connect(chat_, &ChatController::answerFailed, this,
            [this](qint64, const QString& message) { fail(QStringLiteral("the answer failed: ") + message); });
}

void Automation::on_model_loaded() {
    if (opt_.prompt.isEmpty()) {
        wait_for_panels();
        return;
    }
    chat_->newConversation();
    send(opt_.prompt);
}

void Automation::send(const QString& text) {
    cpu_at_send_ = thread_cpu_seconds();
    answer_clock_.start();
    if (!chat_->send(text)) fail(QStringLiteral("cannot send the prompt: ") + chat_->lastError());
}

void Automation::on_answer(qint64 message_id, const QString& finish) {
    if (message_id_ != 0) return;
    cpu_at_answer_ = thread_cpu_seconds();
    answer_seconds_ = answer_clock_.isValid() ? answer_clock_.nsecsElapsed() * 1e-9 : 0.0;
    if (next_prompt_ < opt_.more_prompts.size()) {
        // The next turn of the conversation; the report covers the last answer.
        const QString text = opt_.more_prompts[next_prompt_++];
        QTimer::singleShot(0, this, [this, text] { send(text); });
        return;
    }
    message_id_ = message_id;
    finish_ = finish;
    wait_for_panels();
}

void Automation::wait_for_panels() {
    // The panels show the engine's figures once a snapshot taken after tokens
    // ran has arrived; then one more frame so the scene has painted them.
    const bool ready = opt_.prompt.isEmpty() ? telemetry_->hasData()
                                             : telemetry_->tokensProcessed() > 0 && !telemetry_->tokensPerSecondHistory().isEmpty();
    if (!ready && ++waits_ < 100) {
        QTimer::singleShot(100, this, &Automation::wait_for_panels);
        return;
    }
    if (!ready) {
        fail(QStringLiteral("the panels received no telemetry"));
        return;
    }
    QTimer::singleShot(600, this, &Automation::show_then_capture);
}

void Automation::show_then_capture() {
    if (opt_.show.isEmpty()) return capture();
    if (!shown_) {
        shown_ = true;
        waits_ = 0;
        if (!window_ || !QMetaObject::invokeMethod(window_, "showDialog", Q_ARG(QVariant, QVariant(opt_.show))))
            return fail(QStringLiteral("cannot open the %1 dialog").arg(opt_.show));
    }
    // The model dialog shows the plan once it is computed.
    if (opt_.show == QLatin1String("model") && chat_->planState() == QLatin1String("planning") && ++waits_ < 100) {
        QTimer::singleShot(100, this, &Automation::show_then_capture);
        return;
    }
    QTimer::singleShot(800, this, &Automation::capture);
}

void Automation::capture() {
    if (capturing_) return;
    capturing_ = true;
    if (!opt_.screenshot.isEmpty()) {
        if (!window_) return fail(QStringLiteral("no window to capture"));
        const QImage img = window_->grabWindow();
        if (img.isNull()) return fail(QStringLiteral("the window could not be captured"));
        QDir().mkpath(QFileInfo(opt_.screenshot).absolutePath());
        if (!img.save(opt_.screenshot)) return fail(QStringLiteral("cannot write the screenshot to ") + opt_.screenshot);
    }
    if (!opt_.report.isEmpty()) {
        QVariantMap report;
        report[QStringLiteral("conversationId")] = chat_->currentConversationId();
        report[QStringLiteral("messageId")] = message_id_;
        report[QStringLiteral("finish")] = finish_;
        report[QStringLiteral("databasePath")] = chat_->databasePath();
        report[QStringLiteral("model")] = chat_->modelInfo();
        report[QStringLiteral("telemetry")] = telemetry_->figures();
        report[QStringLiteral("screenshot")] = opt_.screenshot;
        // The threads' priorities: the GUI thread's, and the others' (the engine's among them).
        QVariantList nices;
        for (int n : process_thread_nices()) nices << n;
        report[QStringLiteral("guiThreadNice")] = this_thread_nice();
        report[QStringLiteral("threadNices")] = nices;
        if (answer_seconds_ > 0) {
            report[QStringLiteral("guiCpuSeconds")] = cpu_at_answer_ - cpu_at_send_;
            report[QStringLiteral("answerSeconds")] = answer_seconds_;
        }
        for (const app::Message& m : chat_->messages()->messages()) {
            if (m.id != message_id_) continue;
            report[QStringLiteral("answer")] = m.content;
            report[QStringLiteral("tokens")] = m.stats.tokens;
            report[QStringLiteral("tokS")] = m.stats.tok_s;
            report[QStringLiteral("ttftMs")] = m.stats.ttft_ms;
        }
        QFile f(opt_.report);
        QDir().mkpath(QFileInfo(opt_.report).absolutePath());
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
            f.write(QJsonDocument(QJsonObject::fromVariantMap(report)).toJson()) < 0)
            return fail(QStringLiteral("cannot write the report to ") + opt_.report);
    }
    if (!opt_.screenshot.isEmpty()) std::fprintf(stderr, "strata: screenshot saved to %s\n", qPrintable(opt_.screenshot));
    if (opt_.quit_after_reply) QCoreApplication::exit(0);
}

void Automation::fail(const QString& message, int code) {
    std::fprintf(stderr, "strata: %s\n", qPrintable(message));
    QCoreApplication::exit(code);
}

}  // namespace strata::desktop
