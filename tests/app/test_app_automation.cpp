// The real `strata` binary, unattended and offscreen: one exchange with the
// demo model, then the screenshot, the panel figures (--report) and the
// scratch chat database are checked. The screenshot and report stay under
// <build>/test-artifacts/ for people to look at.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <string_view>
#include <QTemporaryDir>
#include <QtTest>

#include "chat_store.h"

namespace {

const QString kDemo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");

struct Run {
    int code = -1;
    QString err;
};

Run run_strata(const QStringList& args, int timeout_ms = 240000, const QString& platform = QStringLiteral("offscreen")) {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), platform);
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(STRATA_APP_BINARY), args);
    Run r;
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        r.err = QStringLiteral("timed out");
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace

class TestAppAutomation : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void help_and_version() {
        Run r = run_strata({QStringLiteral("--version")}, 30000);
        QCOMPARE(r.code, 0);
        r = run_strata({QStringLiteral("--help")}, 30000);
        QCOMPARE(r.code, 0);
        r = run_strata({QStringLiteral("--no-such-option")}, 30000);
        QVERIFY(r.code != 0);
        r = run_strata({QStringLiteral("--max-tokens"), QStringLiteral("0")}, 30000);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("--max-tokens")), qPrintable(r.err));
    }

    // In a terminal without a display (ssh, a container), --help still prints
    // the help: the GUI platform is not started to print it.
    void help_without_a_display() {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("DISPLAY"));
        env.remove(QStringLiteral("WAYLAND_DISPLAY"));
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("xcb"));
        p.setProcessEnvironment(env);
        for (const char* arg : {"--help", "--version"}) {
            p.start(QStringLiteral(STRATA_APP_BINARY), {QString::fromLatin1(arg)});
            QVERIFY(p.waitForFinished(30000));
            QCOMPARE(p.exitStatus(), QProcess::NormalExit);
            QCOMPARE(p.exitCode(), 0);
            const QByteArray out = p.readAllStandardOutput();
            QVERIFY2(arg == std::string_view("--version") || out.contains("--max-tokens"), out.constData());
        }

    }

    // "-v" as a prompt is a prompt, not --version: the app starts its GUI
    // and answers it (it once took it for --version and crashed without a GUI).
    void a_prompt_that_looks_like_an_option() {
        if (!QFile::exists(kDemo)) QSKIP("the demo model is not in resources/models");
        QTemporaryDir data;
        const Run r = run_strata({QStringLiteral("--model"), kDemo, QStringLiteral("--prompt"), QStringLiteral("-v"),
                                  QStringLiteral("--quit-after-reply"), QStringLiteral("--max-tokens"), QStringLiteral("4"),
                                  QStringLiteral("--data-dir"), data.path()},
                                 120000);
        QVERIFY2(r.code == 0, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err)));
        strata::app::ChatStore store(data.filePath(QStringLiteral("chats.sqlite")));
        QCOMPARE(store.messages(store.conversations().first().id).first().content, QStringLiteral("-v"));
    }

    void one_exchange_screenshot_and_figures() {
        if (!QFile::exists(kDemo)) QSKIP("the demo model is not in resources/models");
        QTemporaryDir data;
        const QString dir = QStringLiteral(STRATA_ARTIFACT_DIR);
        QDir().mkpath(dir);
        const QString shot = dir + QStringLiteral("/app-screenshot.png");
        const QString report = dir + QStringLiteral("/app-report.json");
        QFile::remove(shot);
        QFile::remove(report);
        const Run r = run_strata({QStringLiteral("--model"), kDemo, QStringLiteral("--prompt"), QStringLiteral("In the beginning"),
                                  QStringLiteral("--screenshot"), shot, QStringLiteral("--report"), report,
                                  QStringLiteral("--quit-after-reply"), QStringLiteral("--data-dir"), data.path(),
                                  QStringLiteral("--max-tokens"), QStringLiteral("40")});
        QVERIFY2(r.code == 0, qPrintable(QStringLiteral("exit %1: %2").arg(r.code).arg(r.err)));
        // Quitting is clean: no timer destroyed from a thread not its own.
        QVERIFY2(!r.err.contains(QStringLiteral("Timers cannot be stopped")), qPrintable(r.err));
        QFile log(data.filePath(QStringLiteral("strata.log")));
        if (log.open(QIODevice::ReadOnly)) QVERIFY(!log.readAll().contains("Timers cannot be stopped"));

        // The screenshot: the whole 1280x800 window.
        const QImage img(shot);
        QVERIFY2(!img.isNull(), qPrintable(shot));
        QVERIFY(img.width() >= 1280 && img.height() >= 800);
        QVERIFY(QFileInfo(shot).size() > 20000);

        // Every panel has non-zero figures.
        QFile f(report);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
        QVERIFY(!o[QStringLiteral("answer")].toString().trimmed().isEmpty());
        // The app's own cost: the GUI thread's CPU time while the answer streamed.
        QVERIFY(o[QStringLiteral("answerSeconds")].toDouble() > 0);
        QVERIFY(o[QStringLiteral("guiCpuSeconds")].toDouble() > 0);
        QVERIFY(o[QStringLiteral("guiCpuSeconds")].toDouble() < 2 * o[QStringLiteral("answerSeconds")].toDouble());
        // The GUI thread yields to the engine's threads, which keep the default priority.
        QCOMPARE(o[QStringLiteral("guiThreadNice")].toInt(), 10);
        QVERIFY(o[QStringLiteral("threadNices")].toArray().contains(QJsonValue(0)));
        const QJsonObject t = o[QStringLiteral("telemetry")].toObject();
        QVERIFY(t[QStringLiteral("tokensProcessed")].toDouble() > 0);
        // ledger
        const QJsonArray ledger = t[QStringLiteral("ledger")].toArray();
        QVERIFY(ledger.size() == 2);
        QVERIFY(ledger[0].toObject()[QStringLiteral("reserved")].toDouble() > 0);
        QVERIFY(ledger[0].toObject()[QStringLiteral("used")].toDouble() > 0);
        QVERIFY(ledger[0].toObject()[QStringLiteral("accounts")].toArray().size() >= 4);
        // the CPU kernels (the demo model's q8_0 experts are repacked where the level has a layout for them)
        QVERIFY(!t[QStringLiteral("kernels")].toString().isEmpty());
        if (t[QStringLiteral("kernels")].toString() == QStringLiteral("avx512"))
            QVERIFY(t[QStringLiteral("repackedBytes")].toDouble() > 0);
        // heat map
        QVERIFY(t[QStringLiteral("maxHeat")].toDouble() > 0);
        QVERIFY(t[QStringLiteral("residentExperts")].toDouble() + t[QStringLiteral("pinnedExperts")].toDouble() > 0);
        QCOMPARE(t[QStringLiteral("nExpert")].toDouble(), 32.0);
        // hit rate and bytes per token
        QVERIFY(t[QStringLiteral("hitRateTotal")].toDouble() > 0);
        QVERIFY(t[QStringLiteral("bytesPerToken")].toDouble() > 0);
        QVERIFY(!t[QStringLiteral("hitRateHistory")].toArray().isEmpty());
        QVERIFY(!t[QStringLiteral("bytesPerTokenHistory")].toArray().isEmpty());
        // tokens/s
        QVERIFY(t[QStringLiteral("tokensPerSecond")].toDouble() > 0);
        QVERIFY(!t[QStringLiteral("tokensPerSecondHistory")].toArray().isEmpty());

        // The store in the scratch directory holds the exchange.
        strata::app::ChatStore store(data.filePath(QStringLiteral("chats.sqlite")));
        const auto convs = store.conversations();
        QCOMPARE(convs.size(), 1);
        const auto msgs = store.messages(convs[0].id);
        QCOMPARE(msgs.size(), 2);
        QCOMPARE(msgs[0].content, QStringLiteral("In the beginning"));
        QCOMPARE(msgs[1].role, QStringLiteral("assistant"));
        QVERIFY(!msgs[1].content.trimmed().isEmpty());
        QCOMPARE(msgs[1].partial, false);
        QVERIFY(msgs[1].stats.tokens > 0 && msgs[1].stats.tokens <= 40);  // --max-tokens
        QCOMPARE(msgs[1].content, o[QStringLiteral("answer")].toString());
        QVERIFY(QFile::exists(data.filePath(QStringLiteral("strata.log"))));
    }

    // The window opens at the size it was closed at (--size sets it and it is kept).
    void window_size_is_restored() {
        if (!QFile::exists(kDemo)) QSKIP("the demo model is not in resources/models");
        QTemporaryDir data;
        const QString first = data.filePath(QStringLiteral("first.png")), second = data.filePath(QStringLiteral("second.png"));
        const QStringList common = {QStringLiteral("--model"), kDemo, QStringLiteral("--show"), QStringLiteral("about"),
                                    QStringLiteral("--quit-after-reply"), QStringLiteral("--data-dir"), data.path()};
        Run r = run_strata(common + QStringList{QStringLiteral("--size"), QStringLiteral("1100x700"), QStringLiteral("--screenshot"), first});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(QImage(first).size(), QSize(1100, 700));
        r = run_strata(common + QStringList{QStringLiteral("--screenshot"), second});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(QImage(second).size(), QSize(1100, 700));
        QCOMPARE(run_strata({QStringLiteral("--size"), QStringLiteral("800x600")}).code, 2);  // below the minimum
    }

    void bad_model_fails_with_a_message() {
        QTemporaryDir data;
        const QString junk = data.filePath(QStringLiteral("broken.gguf"));
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("GGUF") + QByteArray(60, '\xff'));
        f.close();
        Run r = run_strata({QStringLiteral("--model"), junk, QStringLiteral("--prompt"), QStringLiteral("hello"),
                            QStringLiteral("--quit-after-reply"), QStringLiteral("--data-dir"), data.path()},
                           60000);
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains(QStringLiteral("cannot load the model")) && r.err.contains(QStringLiteral("broken.gguf")),
                 qPrintable(r.err));
        r = run_strata({QStringLiteral("--model"), data.filePath(QStringLiteral("absent.gguf")), QStringLiteral("--quit-after-reply"),
                        QStringLiteral("--data-dir"), data.path()},
                       60000);
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains(QStringLiteral("no such file")), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestAppAutomation)
#include "test_app_automation.moc"
