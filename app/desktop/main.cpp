// strata: the desktop app. See automation.h for the unattended mode.
#include <QCommandLineParser>
#include <QFileInfo>
#include <QGuiApplication>
#include <QIcon>
#include <QQmlApplicationEngine>
#include <QQmlContext>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QScreen>
#include <QSettings>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "app_paths.h"
#include "app_server.h"
#include "automation.h"
#include "chat_controller.h"
#include "common/log.h"
#include "qml_types.h"
#include "settings_model.h"
#include "thread_priority.h"
#include "telemetry_model.h"

using namespace strata::desktop;

namespace {

// Qt's own messages (QML warnings among them) go to the app's log too.
void qt_message(QtMsgType type, const QMessageLogContext&, const QString& msg) {
    static const auto log = strata::logger("qt");
    const std::string text = msg.toStdString();
    switch (type) {
        case QtDebugMsg: log->debug("{}", text); break;
        case QtInfoMsg: log->info("{}", text); break;
        case QtWarningMsg: log->warn("{}", text); break;
        case QtCriticalMsg:
        case QtFatalMsg: log->error("{}", text); break;
    }
}

// The window's last size and place ("ui/windowRect", "ui/windowMaximized"),
// when it still fits a screen (a monitor may have gone since).
void restore_window(QQuickWindow* w, const QSettings& s) {
    const QRect r = s.value(QStringLiteral("ui/windowRect")).toRect();
    if (r.width() >= w->minimumWidth() && r.height() >= w->minimumHeight()) {
        bool on_screen = false;
        for (const QScreen* screen : QGuiApplication::screens())
            on_screen = on_screen || screen->availableGeometry().intersects(r);
        if (on_screen) w->setGeometry(r);
        else w->resize(r.size());
    }
    if (s.value(QStringLiteral("ui/windowMaximized")).toBool()) w->showMaximized();
}

void save_window(const QQuickWindow* w, QSettings& s) {
    const bool maximized = w->visibility() == QWindow::Maximized || w->visibility() == QWindow::FullScreen;
    s.setValue(QStringLiteral("ui/windowMaximized"), maximized);
    if (!maximized) s.setValue(QStringLiteral("ui/windowRect"), w->geometry());
}

}  // namespace

int main(int argc, char** argv) {
    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral(
        "Strata: chat with Mixture-of-Experts models larger than memory, with the engine's memory ledger,\n"
        "expert heat map, cache hit rate and tokens/s beside the conversation.\n\n"
        "Unattended: --model M --prompt TEXT --screenshot OUT.png --quit-after-reply runs one exchange,\n"
        "saves a screenshot of the window with its panels, and exits 0 (1 with a message on failure)."));
    cli.addHelpOption();
    cli.addVersionOption();
    const QCommandLineOption model_opt({QStringLiteral("m"), QStringLiteral("model")},
                                       QStringLiteral("Load this GGUF model at start (default: the last one used, else the demo model)."),
                                       QStringLiteral("PATH"));
    const QCommandLineOption prompt_opt({QStringLiteral("p"), QStringLiteral("prompt")},
                                        QStringLiteral("Send TEXT in a new conversation once the model is loaded; given again, "
                                                       "each further TEXT is the next message of that conversation."),
                                        QStringLiteral("TEXT"));
    const QCommandLineOption shot_opt(QStringLiteral("screenshot"),
                                      QStringLiteral("After the answer, save a screenshot of the window (panels open) to FILE."),
                                      QStringLiteral("FILE"));
    const QCommandLineOption report_opt(QStringLiteral("report"),
                                        QStringLiteral("After the answer, write the answer and every panel figure as JSON to FILE."),
                                        QStringLiteral("FILE"));
    const QCommandLineOption quit_opt(QStringLiteral("quit-after-reply"),
                                      QStringLiteral("Quit once the answer, screenshot and report are done."));
    const QCommandLineOption data_opt(QStringLiteral("data-dir"),
                                      QStringLiteral("Keep chats, settings and the log in DIR instead of the user's directories."),
                                      QStringLiteral("DIR"));
    const QCommandLineOption timeout_opt(QStringLiteral("timeout"),
                                         QStringLiteral("With --quit-after-reply: give up after SECONDS (default 600)."),
                                         QStringLiteral("SECONDS"), QStringLiteral("600"));
    const QCommandLineOption show_opt(QStringLiteral("show"),
                                      QStringLiteral("Before the screenshot, open a dialog: settings, model (the load plan of the model), models (the models folder), about or remote (connect to a server)."),
                                      QStringLiteral("DIALOG"));
    const QCommandLineOption server_opt(QStringLiteral("server"),
                                        QStringLiteral("Chat with the OpenAI-compatible server at URL (e.g. http://127.0.0.1:8080/v1) instead of loading a model; needs --server-model."),
                                        QStringLiteral("URL"));
    const QCommandLineOption server_model_opt(QStringLiteral("server-model"), QStringLiteral("With --server: the model id to chat with (one of its /v1/models)."),
                                              QStringLiteral("ID"));
    const QCommandLineOption server_key_opt(QStringLiteral("server-key"), QStringLiteral("With --server: its API key."), QStringLiteral("KEY"));
    const QCommandLineOption size_opt(QStringLiteral("size"),
                                      QStringLiteral("Open the window at WIDTHxHEIGHT pixels (e.g. 960x600) instead of where it was left."),
                                      QStringLiteral("WxH"));
    const QCommandLineOption max_tokens_opt(QStringLiteral("max-tokens"),
                                            QStringLiteral("With --prompt: answers of at most N tokens, whatever the settings say (not saved)."),
                                            QStringLiteral("N"));
    cli.addOptions({model_opt, prompt_opt, shot_opt, report_opt, quit_opt, data_opt, timeout_opt, show_opt, server_opt, server_model_opt,
                    server_key_opt, size_opt, max_tokens_opt});
    // --help and --version only print: they are answered without a display (a
    // QGuiApplication aborts where there is none, and a terminal is all they
    // need). Parsed first, so a "-v" that is an option's value is not one.
    QStringList args;
    for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
    const bool only_prints =
        cli.parse(args) && (cli.isSet(QStringLiteral("help")) || cli.isSet(QStringLiteral("help-all")) || cli.isSet(QStringLiteral("version")));
    const std::unique_ptr<QCoreApplication> app_owner =
        only_prints ? std::make_unique<QCoreApplication>(argc, argv) : std::make_unique<QGuiApplication>(argc, argv);
    QCoreApplication& app = *app_owner;
    QGuiApplication::setApplicationName(QStringLiteral("strata"));
    QGuiApplication::setOrganizationName(QStringLiteral("Strata"));
    QGuiApplication::setApplicationDisplayName(QStringLiteral("Strata"));
    QGuiApplication::setApplicationVersion(QStringLiteral(STRATA_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral("strata"));

    cli.process(app);  // --help / --version exit here; unknown options exit 1 with a message

    bool ok = false;
    const int timeout = cli.value(timeout_opt).toInt(&ok);
    if (!ok || timeout <= 0) {
        std::fprintf(stderr, "strata: --timeout: '%s' is not a positive number of seconds\n", qPrintable(cli.value(timeout_opt)));
        return 2;
    }
    int max_tokens = 0;
    if (cli.isSet(max_tokens_opt)) {
        max_tokens = cli.value(max_tokens_opt).toInt(&ok);
        if (!ok || max_tokens <= 0) {
            std::fprintf(stderr, "strata: --max-tokens: '%s' is not a positive number of tokens\n", qPrintable(cli.value(max_tokens_opt)));
            return 2;
        }
    }
    const QStringList prompts = cli.values(prompt_opt);
    if (std::any_of(prompts.begin(), prompts.end(), [](const QString& p) { return p.trimmed().isEmpty(); })) {
        std::fprintf(stderr, "strata: --prompt: the prompt is empty\n");
        return 2;
    }
    if (cli.isSet(show_opt) && cli.value(show_opt) != QLatin1String("settings") && cli.value(show_opt) != QLatin1String("model") &&
        cli.value(show_opt) != QLatin1String("remote") && cli.value(show_opt) != QLatin1String("models") &&
        cli.value(show_opt) != QLatin1String("about")) {
        std::fprintf(stderr, "strata: --show: expected settings, model, models, about or remote, got '%s'\n", qPrintable(cli.value(show_opt)));
        return 2;
    }
    if (cli.isSet(server_opt) != cli.isSet(server_model_opt)) {
        std::fprintf(stderr, "strata: --server and --server-model go together (the model: one of the server's /v1/models)\n");
        return 2;
    }
    if (cli.isSet(server_opt) && cli.isSet(model_opt)) {
        std::fprintf(stderr, "strata: --server and --model exclude each other: chat with a server or load a model\n");
        return 2;
    }
    QSize size;
    if (cli.isSet(size_opt)) {
        const QStringList wh = cli.value(size_opt).split(QLatin1Char('x'));
        bool okw = false, okh = false;
        if (wh.size() == 2) size = QSize(wh[0].toInt(&okw), wh[1].toInt(&okh));
        if (!okw || !okh || size.width() < 960 || size.height() < 600 || size.width() > 16384 || size.height() > 16384) {
            std::fprintf(stderr, "strata: --size: expected WIDTHxHEIGHT of at least 960x600 (the window's minimum), got '%s'\n",
                         qPrintable(cli.value(size_opt)));
            return 2;
        }
    }
    const bool unattended = cli.isSet(show_opt) || cli.isSet(quit_opt) || cli.isSet(shot_opt) || cli.isSet(report_opt) || cli.isSet(prompt_opt);

    const AppPaths paths = resolve_paths(cli.value(data_opt));
    if (const QString err = setup_logging(paths.log_file); !err.isEmpty()) std::fprintf(stderr, "strata: %s\n", qPrintable(err));
    qInstallMessageHandler(qt_message);
    strata::logger("app")->info("strata {} starting; data in {}", STRATA_VERSION, paths.data_dir.toStdString());

    // Settings: the user's (QSettings, Strata/strata), or a scratch file beside a --data-dir.
    std::unique_ptr<QSettings> qsettings =
        cli.isSet(data_opt) ? std::make_unique<QSettings>(paths.data_dir + QStringLiteral("/settings.ini"), QSettings::IniFormat)
                            : std::make_unique<QSettings>();
    SettingsModel settings(qsettings.get());
    TelemetryModel telemetry;
    std::unique_ptr<ChatController> chat;
    try {
        chat = std::make_unique<ChatController>(paths.database(), &settings, &telemetry);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "strata: cannot open the chat database: %s\n", e.what());
        return 1;
    }
    if (max_tokens > 0) chat->set_max_tokens_override(max_tokens);
    // The engine's worker runs now: from here this thread yields to it (thread_priority.h).
    // STRATA_GUI_NICE=0 keeps the default.
    const int gui_nice = qEnvironmentVariableIsSet("STRATA_GUI_NICE") ? qEnvironmentVariableIntValue("STRATA_GUI_NICE") : kGuiNice;
    if (gui_nice > 0 && !lower_this_thread_priority(gui_nice))
        strata::logger("app")->warn("could not lower the GUI thread's priority; it competes with the engine's threads");
    AppInfo info(paths.log_file, paths.data_dir);
    // Serving the loaded model to other clients (Settings); destroyed before the chat's worker.
    AppServer server(chat->worker(), qsettings.get());
    server.restore();

    QQuickStyle::setStyle(QStringLiteral("Fusion"));
    register_qml_types();
    QQmlApplicationEngine engine;
    engine.rootContext()->setContextProperty(QStringLiteral("chat"), chat.get());
    engine.rootContext()->setContextProperty(QStringLiteral("appSettings"), &settings);
    engine.rootContext()->setContextProperty(QStringLiteral("telemetry"), &telemetry);
    engine.rootContext()->setContextProperty(QStringLiteral("appInfo"), &info);
    engine.rootContext()->setContextProperty(QStringLiteral("appServer"), &server);
    engine.rootContext()->setContextProperty(QStringLiteral("unattended"), unattended);
    engine.load(QUrl(QStringLiteral("qrc:/ui/Main.qml")));
    if (engine.rootObjects().isEmpty()) {
        std::fprintf(stderr, "strata: the user interface failed to load (see the messages above)\n");
        return 1;
    }
    auto* window = qobject_cast<QQuickWindow*>(engine.rootObjects().constFirst());
    // The window as the user left it (size, place, maximised), or as --size
    // asks; kept at quit for the next launch.
    if (size.isValid()) window->resize(size);
    else restore_window(window, *qsettings);
    QObject::connect(&app, &QCoreApplication::aboutToQuit, window, [window, &qsettings] { save_window(window, *qsettings); });

    std::unique_ptr<Automation> automation;
    if (unattended) {
        AutomationOptions o;
        o.prompt = prompts.value(0);
        o.more_prompts = prompts.mid(1);
        o.screenshot = cli.value(shot_opt);
        o.report = cli.value(report_opt);
        o.quit_after_reply = cli.isSet(quit_opt);
        o.show = cli.value(show_opt);
        o.timeout_s = timeout;
        automation = std::make_unique<Automation>(o, chat.get(), &telemetry, window);
        automation->start();
    }

    if (cli.isSet(server_opt)) {
        if (const QString err = chat->useRemote(cli.value(server_opt), cli.value(server_key_opt), cli.value(server_model_opt));
            !err.isEmpty()) {
            std::fprintf(stderr, "strata: --server: %s\n", qPrintable(err));
            return 2;
        }
    } else {
        // The first model: as asked, else the last one used, else the demo model.
        QString model = cli.value(model_opt);
        if (model.isEmpty() && !chat->recentModels().isEmpty()) model = chat->recentModels().constFirst();
        if (model.isEmpty()) model = chat->demoModelPath();
        if (!model.isEmpty()) {
            // A model the user named (or an unattended run) loads; the last one used is planned first
            // and loads by itself only when it fits comfortably (ChatController::launch_verdict).
            chat->loadAtLaunch(QUrl::fromLocalFile(QFileInfo(model).absoluteFilePath()),
                               /*check=*/cli.value(model_opt).isEmpty() && !unattended);
        } else if (unattended) {
            std::fprintf(stderr, "strata: no --model given and the demo model was not found\n");
            return 1;
        }
    }
    const int rc = app.exec();
    automation.reset();
    return rc;
}
