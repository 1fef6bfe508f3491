// "Serve the loaded model" in the app: another client gets answers from the
// app's engine while the app chats, through the same scheduler; the server
// reports a missing model plainly, a port in use is an error on the toggle
// (in the app's words) that turns it back off, the requests served are
// counted for the tool bar's badge, and turning it off closes the port.
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "app_server.h"
#include "chat_controller.h"
#include "engine_worker.h"
#include "settings_model.h"
#include "telemetry_model.h"

using namespace strata::desktop;
using nlohmann::json;

namespace {
const QString kDemo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");

struct Reply {
    int status = 0;
    json body;
};

Reply post(int port, const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    Reply r;
    if (!res) return r;
    r.status = res->status;
    r.body = json::parse(res->body, nullptr, false);
    return r;
}
}  // namespace

class TestAppServer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::unique_ptr<QSettings> qs_;
    std::unique_ptr<SettingsModel> settings_;
    std::unique_ptr<TelemetryModel> telemetry_;
    std::unique_ptr<ChatController> chat_;
    std::unique_ptr<AppServer> server_;

    bool load(const QString& path) {
        QSignalSpy ok(chat_.get(), &ChatController::modelLoaded);
        QSignalSpy bad(chat_.get(), &ChatController::modelLoadFailed);
        chat_->loadModel(QUrl::fromLocalFile(path));
        QDeadlineTimer deadline(60000);
        while (ok.count() + bad.count() == 0 && !deadline.hasExpired()) QTest::qWait(20);
        return ok.count() == 1;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        if (!QFile::exists(kDemo)) QSKIP("the demo model is not in resources/models");
        qs_ = std::make_unique<QSettings>(dir_.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
        settings_ = std::make_unique<SettingsModel>(qs_.get());
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 0.0), QString());
        telemetry_ = std::make_unique<TelemetryModel>();
        chat_ = std::make_unique<ChatController>(dir_.filePath(QStringLiteral("chats.sqlite")), settings_.get(),
                                                 telemetry_.get());
        server_ = std::make_unique<AppServer>(chat_->worker(), qs_.get());
        QVERIFY(!server_->running());
        QCOMPARE(server_->setServing(true, 0, QString()), QString());
        QVERIFY(server_->running());
        QVERIFY(server_->url().startsWith(QStringLiteral("http://127.0.0.1:")));
    }

    void cleanupTestCase() {
        server_.reset();  // before the worker it serves through
        chat_.reset();
    }

    void without_a_model_requests_get_503() {
        const Reply r = post(server_->port(), "/v1/completions", json{{"prompt", "x"}});
        QCOMPARE(r.status, 503);
        httplib::Client c("127.0.0.1", server_->port());
        QCOMPARE(c.Get("/health")->status, 503);
        QCOMPARE(server_->requests(), qint64(0));  // refused before the engine: not a request served
    }

    void another_client_gets_answers_while_the_app_chats() {
        QVERIFY(load(kDemo));
        httplib::Client c("127.0.0.1", server_->port());
        auto models = c.Get("/v1/models");
        QVERIFY(models && models->status == 200);
        QCOMPARE(json::parse(models->body)["data"][0]["id"].get<std::string>(), std::string("strata-demo-moe"));

        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QSignalSpy counted(server_.get(), &AppServer::requestsChanged);
        QVERIFY(chat_->send(QStringLiteral("And the LORD said unto Moses,")));
        Reply served;
        std::thread client([&] {
            served = post(server_->port(), "/v1/chat/completions",
                          json{{"messages", json::array({{{"role", "user"}, {"content", "Blessed are the poor"}}})},
                               {"max_tokens", 24},
                               {"temperature", 0}});
        });
        // The app's own answer streams meanwhile (the event loop runs here).
        QVERIFY(done.wait(60000) || !done.isEmpty());
        client.join();
        QCOMPARE(served.status, 200);
        QVERIFY(!served.body["choices"][0]["message"]["content"].get<std::string>().empty());
        QVERIFY(served.body["usage"]["completion_tokens"].get<int>() > 0);
        QVERIFY(!chat_->anyGenerating());
        // The badge's count: the one request another app sent (the app's own chat is not one).
        QCOMPARE(server_->requests(), qint64(1));
        QTRY_VERIFY(!counted.isEmpty());
    }

    // One conversation through the app's chat and through HTTP: the same
    // prompt tokens (one preparation for both, chat/prompt.h) and, greedy,
    // the same answer.
    void a_conversation_gives_the_same_tokens_in_the_app_and_over_http() {
        QCOMPARE(chat_->modelState(), QStringLiteral("ready"));  // loaded by the test before
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 12), QString());
        QList<QVariantMap> finished;  // the worker's stats of each answer, in order
        QObject scope;                // the connection ends with this test
        connect(chat_->worker(), &EngineWorker::finished, &scope,
                [&](quint64, const QVariantMap& s) { finished.push_back(s); });
        QVERIFY(chat_->newConversation() != 0);
        for (const QString& text : {QStringLiteral("In the beginning"), QStringLiteral("And the earth")}) {
            QSignalSpy done(chat_.get(), &ChatController::answerFinished);
            QVERIFY(chat_->send(text));
            QVERIFY(done.wait(60000));
        }
        QCOMPARE(chat_->messages()->rowCount(), 4);
        // The controller hears `finished` first: the second answer's stats may still be on their way.
        QTRY_COMPARE(finished.size(), 2);
        const QVariantMap stats = finished[1];
        json messages = json::array();
        if (!chat_->systemPrompt().isEmpty())
            messages.push_back({{"role", "system"}, {"content", chat_->systemPrompt().toStdString()}});
        for (int row = 0; row < 3; ++row) {
            const QVariantMap m = chat_->messages()->get(row);
            messages.push_back({{"role", m[QStringLiteral("role")].toString().toStdString()},
                                {"content", m[QStringLiteral("content")].toString().toStdString()}});
        }
        const Reply r = post(server_->port(), "/v1/chat/completions",
                             json{{"messages", messages},
                                  {"max_tokens", 12},
                                  {"temperature", 0},
                                  {"repeat_penalty", settings_->value(QStringLiteral("repeat_penalty")).toDouble()}});
        QCOMPARE(r.status, 200);
        QVERIFY(stats[QStringLiteral("promptTokens")].toLongLong() > 10);  // two turns and an answer
        QVERIFY(!chat_->messages()->get(3)[QStringLiteral("content")].toString().isEmpty());
        QCOMPARE(r.body["usage"]["prompt_tokens"].get<qint64>(), stats[QStringLiteral("promptTokens")].toLongLong());
        QCOMPARE(QString::fromStdString(r.body["choices"][0]["message"]["content"].get<std::string>()),
                 chat_->messages()->get(3)[QStringLiteral("content")].toString());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 256), QString());
    }

    void a_port_in_use_is_an_error_on_the_toggle() {
        QSettings other_settings(dir_.filePath(QStringLiteral("other.ini")), QSettings::IniFormat);
        AppServer second(chat_->worker(), &other_settings);
        const QString err = second.setServing(true, server_->port(), QString());
        // In the settings' words, not the command line's (--port, --host).
        QCOMPARE(err, QStringLiteral("Port %1 is in use by another program: choose another port").arg(server_->port()));
        QVERIFY(!second.running());
        QCOMPARE(second.error(), err);
        // The toggle shows what is: off, and off next launch too.
        QVERIFY(!second.enabled());
        QCOMPARE(other_settings.value(QStringLiteral("serve/enabled")).toBool(), false);
        QVERIFY(!second.setServing(true, 70000, QString()).isEmpty());
    }

    void the_key_is_required_when_set_and_off_closes_the_port() {
        QCOMPARE(server_->setServing(true, 0, QStringLiteral("k3y")), QString());
        const int port = server_->port();
        QCOMPARE(post(port, "/v1/completions", json{{"prompt", "x"}}).status, 401);
        QCOMPARE(server_->setServing(false, port, QString()), QString());
        QVERIFY(!server_->running());
        QCOMPARE(post(port, "/v1/completions", json{{"prompt", "x"}}).status, 0);  // refused
        // Remembered for the next launch.
        QCOMPARE(qs_->value(QStringLiteral("serve/enabled")).toBool(), false);
    }
};

QTEST_MAIN(TestAppServer)
#include "test_app_server.moc"
