// The app chatting with a server instead of its own engine: against
// `strata-cli serve` on loopback, the models are listed, an exchange streams
// into the conversation store, stop keeps what streamed, and a dead endpoint,
// a bad address or an HTTP error is a clear message with the user's message kept
// (an HTML error page reduced to plain words).
// The panels show the Strata server's engine from its /metrics; a server that
// reports none (a fake OpenAI server here) is said plainly, with what its
// answers measure.
#include <QFile>
#include <QJsonObject>
#include <QJsonDocument>
#include <QJsonArray>
#include <QTcpServer>
#include <QTcpSocket>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "chat_controller.h"
#include "settings_model.h"
#include "telemetry_model.h"

using namespace strata::desktop;

// A minimal OpenAI-compatible server that is not Strata: its chat completions
// stream two chunks, and it has no /metrics (404), as llama-server without
// --metrics or a hosted API.
class ForeignServer : public QTcpServer {
public:
    ForeignServer() {
        connect(this, &QTcpServer::newConnection, this, [this] {
            while (QTcpSocket* s = nextPendingConnection()) {
                connect(s, &QTcpSocket::readyRead, s, [s] {
                    QByteArray& buf = pending_[s];
                    buf += s->readAll();
                    const qsizetype head_end = buf.indexOf("\r\n\r\n");
                    if (head_end < 0) return;
                    const QByteArray head = buf.left(head_end);
                    const auto m = QRegularExpression(QStringLiteral("(?i)content-length: *(\\d+)")).match(QString::fromLatin1(head));
                    const qsizetype body = m.hasMatch() ? m.captured(1).toLongLong() : 0;
                    if (buf.size() < head_end + 4 + body) return;
                    pending_.remove(s);
                    if (head.startsWith("GET /metrics")) {
                        s->write("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
                    } else {
                        QByteArray sse;
                        for (const char* piece : {"Hello", " there"})
                            sse += QByteArray("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"") + piece +
                                   "\"},\"finish_reason\":null}]}\n\n";
                        sse += "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
                               "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
                               "data: [DONE]\n\n";
                        s->write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + sse);
                    }
                    s->disconnectFromHost();
                });
                connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
            }
        });
    }

private:
    static inline QHash<QTcpSocket*, QByteArray> pending_;
};

// An OpenAI server whose model calls a tool: to a request with tools and no
// tool result yet it answers with a calculate call, streamed in pieces as
// OpenAI streams calls (the name repeated in a later piece, as some servers
// do); to one with the result, with text. Keeps the bodies.
class ToolServer : public QTcpServer {
public:
    QList<QByteArray> bodies;
    ToolServer() {
        connect(this, &QTcpServer::newConnection, this, [this] {
            while (QTcpSocket* s = nextPendingConnection()) {
                connect(s, &QTcpSocket::readyRead, s, [this, s] {
                    buf_[s] += s->readAll();
                    QByteArray& buf = buf_[s];
                    const qsizetype head_end = buf.indexOf("\r\n\r\n");
                    if (head_end < 0) return;
                    const auto m = QRegularExpression(QStringLiteral("(?i)content-length: *(\\d+)"))
                                       .match(QString::fromLatin1(buf.left(head_end)));
                    const qsizetype length = m.hasMatch() ? m.captured(1).toLongLong() : 0;
                    if (buf.size() < head_end + 4 + length) return;
                    const QByteArray body = buf.mid(head_end + 4, length);
                    const bool get = buf.startsWith("GET");
                    buf_.remove(s);
                    if (get) {
                        s->write("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        s->disconnectFromHost();
                        return;
                    }
                    bodies << body;
                    QByteArray sse;
                    if (!body.contains("\"role\":\"tool\"")) {
                        sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,"
                              "\"id\":\"call_9\",\"type\":\"function\",\"function\":{\"name\":\"calculate\",\"arguments\":\"\"}}]},"
                              "\"finish_reason\":null}]}\n\n"
                              "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
                              "{\"name\":\"calculate\",\"arguments\":\"{\\\"expression\\\":\"}}]},\"finish_reason\":null}]}\n\n"
                              "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
                              "{\"arguments\":\" \\\"6*7\\\"}\"}}]},\"finish_reason\":null}]}\n\n"
                              "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
                              "data: [DONE]\n\n";
                    } else {
                        sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"It is 42.\"},\"finish_reason\":null}]}\n\n"
                              "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                              "data: [DONE]\n\n";
                    }
                    s->write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + sse);
                    s->disconnectFromHost();
                });
                connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
            }
        });
    }

private:
    QHash<QTcpSocket*, QByteArray> buf_;
};

// A proxy in front of a server that is down: every request gets 502 and an
// HTML error page (nginx's, as a user behind one sees it).
class HtmlErrorServer : public QTcpServer {
public:
    HtmlErrorServer() {
        connect(this, &QTcpServer::newConnection, this, [this] {
            while (QTcpSocket* s = nextPendingConnection()) {
                connect(s, &QTcpSocket::readyRead, s, [s] {
                    const QByteArray page =
                        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                        "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n";
                    s->write("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: " +
                             QByteArray::number(page.size()) + "\r\n\r\n" + page);
                    s->disconnectFromHost();
                });
                connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
            }
        });
    }
};

class TestAppRemote : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QProcess server_;
    QString url_;
    std::unique_ptr<QSettings> qs_;
    std::unique_ptr<SettingsModel> settings_;
    std::unique_ptr<TelemetryModel> telemetry_;
    std::unique_ptr<ChatController> chat_;

    // Sends; returns (finish or "failed: message").
    QString exchange(const QString& text) {
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QSignalSpy failed(chat_.get(), &ChatController::answerFailed);
        if (!chat_->send(text)) return QStringLiteral("not sent: ") + chat_->lastError();
        QDeadlineTimer deadline(60000);
        while (done.isEmpty() && failed.isEmpty() && !deadline.hasExpired()) QTest::qWait(20);
        if (!failed.isEmpty()) return QStringLiteral("failed: ") + failed.first().at(1).toString();
        if (done.isEmpty()) return QStringLiteral("timeout");
        return done.first().at(1).toString();
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        server_.start(QStringLiteral(STRATA_CLI_BINARY), {"serve", "--port", "0"});
        QVERIFY(server_.waitForStarted());
        QString first;
        for (int i = 0; i < 600 && !first.contains('\n'); ++i) {
            server_.waitForReadyRead(100);
            first += QString::fromUtf8(server_.readAllStandardOutput());
        }
        const auto m = QRegularExpression(QStringLiteral("at (http://[^ ]+/v1) ")).match(first);
        QVERIFY2(m.hasMatch(), qPrintable(first + QString::fromUtf8(server_.readAllStandardError())));
        url_ = m.captured(1);
        qs_ = std::make_unique<QSettings>(dir_.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
        settings_ = std::make_unique<SettingsModel>(qs_.get());
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 0.0), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
        telemetry_ = std::make_unique<TelemetryModel>();
        chat_ = std::make_unique<ChatController>(dir_.filePath(QStringLiteral("chats.sqlite")), settings_.get(),
                                                 telemetry_.get());
    }

    void cleanupTestCase() {
        chat_.reset();
        server_.terminate();
        if (!server_.waitForFinished(10000)) server_.kill();
    }

    void lists_the_servers_models() {
        QSignalSpy listed(chat_.get(), &ChatController::remoteModelsListed);
        chat_->listRemoteModels(url_.chopped(3), QString());  // without /v1: added
        QVERIFY(listed.wait(20000));
        QCOMPARE(listed.first().at(0).toStringList(), QStringList{QStringLiteral("strata-demo-moe")});
        QCOMPARE(listed.first().at(1).toString(), QString());
    }

    void chats_through_the_server_into_the_store() {
        QCOMPARE(chat_->useRemote(url_, QString(), QStringLiteral("strata-demo-moe")), QString());
        QVERIFY(chat_->remote());
        QCOMPARE(chat_->modelState(), QStringLiteral("ready"));
        QSignalSpy streamed(chat_.get(), &ChatController::streamed);
        QCOMPARE(exchange(QStringLiteral("Who is the LORD?")), QStringLiteral("length"));
        QVERIFY(streamed.count() >= 1);  // shown while it streamed (in batches: ChatController::kFlushMs)
        const auto msgs = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(msgs.size(), qsizetype(2));
        QCOMPARE(msgs[0].content, QStringLiteral("Who is the LORD?"));
        QVERIFY(!msgs[1].content.isEmpty());
        QVERIFY(!msgs[1].partial);
        QCOMPARE(msgs[1].stats.tokens, qint64(24));
        QVERIFY(msgs[1].stats.model.contains(QStringLiteral("strata-demo-moe @ 127.0.0.1")));
        // The remembered server fills the dialog next time.
        QCOMPARE(chat_->remoteModel(), QStringLiteral("strata-demo-moe"));
    }

    void regenerate_and_stop_work_remotely() {
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QVERIFY(chat_->regenerate());
        QVERIFY(done.count() > 0 || done.wait(60000));
        // Greedy "In the beginning" loops without an end of text: long enough to stop.
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 2000), QString());
        chat_->newConversation();
        QSignalSpy streamed(chat_.get(), &ChatController::streamed);
        QSignalSpy stopped(chat_.get(), &ChatController::answerFinished);
        QVERIFY(chat_->send(QStringLiteral("In the beginning")));
        QVERIFY(streamed.count() > 0 || streamed.wait(30000));
        chat_->stop();
        QVERIFY(stopped.count() > 0 || stopped.wait(30000));
        QCOMPARE(stopped.first().at(1).toString(), QStringLiteral("cancelled"));
        const auto msgs = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(msgs.size(), qsizetype(2));
        QVERIFY(!msgs[1].content.isEmpty());  // what streamed is kept
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void panels_show_the_strata_servers_engine() {
        // Still chatting with the server of the tests above: its /metrics feed the panels.
        QCOMPARE(chat_->useRemote(url_, QString(), QStringLiteral("strata-demo-moe")), QString());
        QCOMPARE(exchange(QStringLiteral("Who is the LORD?")), QStringLiteral("length"));
        QTRY_VERIFY_WITH_TIMEOUT(telemetry_->source() == QStringLiteral("server") && telemetry_->tokensProcessed() > 0, 20000);
        QVERIFY2(telemetry_->sourceNote().contains(QStringLiteral("Strata server at 127.0.0.1")), qPrintable(telemetry_->sourceNote()));
        const strata::TelemetrySnapshot& s = telemetry_->snapshot();
        QCOMPARE(s.n_layer, int64_t(6));     // the demo model: 6 MoE layers of 32 experts
        QCOMPARE(s.n_expert, int64_t(32));
        QCOMPARE(s.heat.size(), size_t(6 * 32));
        QVERIFY(telemetry_->maxHeat() > 0.0);
        QVERIFY(telemetry_->residentExperts() + telemetry_->pinnedExperts() > 0);
        QVERIFY(!s.ledger.empty());
        QVERIFY(!s.kernels.empty());
        QVERIFY(telemetry_->server().value(QStringLiteral("kvTotal")).toLongLong() > 0);
        QVERIFY(telemetry_->server().value(QStringLiteral("finished")).toLongLong() > 0);
        QVERIFY(telemetry_->lastTtftMs() >= 0.0);
    }

    void a_server_without_engine_figures_is_said_plainly() {
        ForeignServer foreign;
        QVERIFY(foreign.listen(QHostAddress::LocalHost, 0));
        const QString base = QStringLiteral("http://127.0.0.1:%1/v1").arg(foreign.serverPort());
        QCOMPARE(chat_->useRemote(base, QString(), QStringLiteral("foreign")), QString());
        QTRY_COMPARE_WITH_TIMEOUT(telemetry_->source(), QStringLiteral("answers"), 20000);
        QVERIFY2(telemetry_->sourceNote().contains(QStringLiteral("does not report its engine")) &&
                     telemetry_->sourceNote().contains(QStringLiteral("HTTP 404")),
                 qPrintable(telemetry_->sourceNote()));
        chat_->newConversation();
        QCOMPARE(exchange(QStringLiteral("Hi")), QStringLiteral("end"));  // the store's name for "stop"
        const auto msgs = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(msgs.size(), qsizetype(2));
        QCOMPARE(msgs[1].content, QStringLiteral("Hello there"));
        // What its answers measure is all the panels have; the engine figures stay empty.
        QCOMPARE(telemetry_->tokensProcessed(), qlonglong(2));
        QCOMPARE(telemetry_->tokensPerSecondHistory().size(), qsizetype(1));
        QVERIFY(telemetry_->lastTtftMs() >= 0.0);
        QVERIFY(!telemetry_->hasExperts());
        QVERIFY(telemetry_->ledger().isEmpty());
    }

    // Tools with a server: they go as OpenAI tools, the server's streamed
    // call is run here, and its result goes back as a tool message.
    void a_servers_tool_calls_are_run_here() {
        ToolServer server;
        QVERIFY(server.listen(QHostAddress::LocalHost, 0));
        const QString base = QStringLiteral("http://127.0.0.1:%1/v1").arg(server.serverPort());
        QCOMPARE(chat_->useRemote(base, QString(), QStringLiteral("tooly")), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("tools"), true), QString());
        chat_->newConversation();
        QCOMPARE(exchange(QStringLiteral("What is six times seven?")), QStringLiteral("end"));
        QCOMPARE(settings_->setValue(QStringLiteral("tools"), false), QString());
        QCOMPARE(server.bodies.size(), qsizetype(2));
        const QJsonObject first = QJsonDocument::fromJson(server.bodies[0]).object();
        QCOMPARE(first[QStringLiteral("tools")].toArray().size(), 2);
        QCOMPARE(first[QStringLiteral("tools")][0][QStringLiteral("function")][QStringLiteral("name")].toString(), QStringLiteral("calculate"));
        const QJsonArray second = QJsonDocument::fromJson(server.bodies[1]).object()[QStringLiteral("messages")].toArray();
        QCOMPARE(second.size(), 3);  // user, the assistant's call, its result
        QCOMPARE(second[1][QStringLiteral("tool_calls")][0][QStringLiteral("id")].toString(), QStringLiteral("call_9"));
        QCOMPARE(second[1][QStringLiteral("tool_calls")][0][QStringLiteral("function")][QStringLiteral("arguments")].toString(),
                 QStringLiteral("{\"expression\": \"6*7\"}"));
        QVERIFY(second[1][QStringLiteral("content")].isNull());
        QCOMPARE(second[2][QStringLiteral("role")].toString(), QStringLiteral("tool"));
        QCOMPARE(second[2][QStringLiteral("tool_call_id")].toString(), QStringLiteral("call_9"));
        QCOMPARE(second[2][QStringLiteral("content")].toString(), QStringLiteral("42"));
        const auto msgs = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(msgs.size(), qsizetype(2));
        QCOMPARE(msgs[1].content, QStringLiteral("It is 42."));
        QVERIFY(msgs[1].stats.tool_turns.contains(QStringLiteral("\"result\":\"42\"")));
    }

    void failures_are_messages_and_the_users_text_is_kept() {
        QVERIFY(chat_->useRemote(QStringLiteral("ftp://nowhere"), QString(), QStringLiteral("m")).contains("not a server address"));
        // A port nothing listens on.
        QCOMPARE(chat_->useRemote(QStringLiteral("http://127.0.0.1:1"), QString(), QStringLiteral("m")), QString());
        chat_->newConversation();
        const QString r = exchange(QStringLiteral("Is anyone there?"));
        QVERIFY2(r.startsWith(QStringLiteral("failed: ")) && r.contains(QStringLiteral("refused")), qPrintable(r));
        const auto msgs = chat_->store().messages(chat_->currentConversationId());
        QVERIFY(!msgs.isEmpty());
        QCOMPARE(msgs[0].content, QStringLiteral("Is anyone there?"));
        // An HTTP error carries the server's message.
        QCOMPARE(chat_->useRemote(url_, QString(), QStringLiteral("no-such-model")), QString());
        const QString e = exchange(QStringLiteral("Hello?"));
        QVERIFY2(e.contains(QStringLiteral("HTTP 404")) && e.contains(QStringLiteral("no-such-model")), qPrintable(e));
        QSignalSpy listed(chat_.get(), &ChatController::remoteModelsListed);
        chat_->listRemoteModels(QStringLiteral("http://127.0.0.1:1"), QString());
        QVERIFY(listed.wait(20000));
        QVERIFY(listed.first().at(1).toString().contains(QStringLiteral("refused")));
    }

    // An HTML error page (a proxy's 502) is a plain message: the status and
    // its reason, no markup, when listing models and when chatting.
    void an_html_error_page_is_a_plain_message() {
        HtmlErrorServer proxy;
        QVERIFY(proxy.listen(QHostAddress::LocalHost));
        const QString url = QStringLiteral("http://127.0.0.1:%1/v1").arg(proxy.serverPort());
        QSignalSpy listed(chat_.get(), &ChatController::remoteModelsListed);
        chat_->listRemoteModels(url, QString());
        QVERIFY(listed.wait(20000));
        const QString err = listed.first().at(1).toString();
        QVERIFY2(err.startsWith(QStringLiteral("The server answered HTTP 502 (Bad Gateway).")), qPrintable(err));
        QVERIFY2(!err.contains(QLatin1Char('<')) && !err.contains(QStringLiteral("nginx")), qPrintable(err));
        QCOMPARE(chat_->useRemote(url, QString(), QStringLiteral("m")), QString());
        chat_->newConversation();
        const QString r = exchange(QStringLiteral("Hello?"));
        QVERIFY2(r.contains(QStringLiteral("HTTP 502")) && !r.contains(QLatin1Char('<')), qPrintable(r));

        // The reason, from each kind of body.
        QCOMPARE(http_error_reason(R"({"error":{"message":"model 'x' not found","type":"invalid_request_error"}})", QString()),
                 QStringLiteral("model 'x' not found"));
        QCOMPARE(http_error_reason("<!DOCTYPE html><html><head><title>Service &amp; API\n down</title></head><body><p>long</p></body></html>",
                                   QStringLiteral("text/html; charset=utf-8")),
                 QStringLiteral("Service & API down"));
        QCOMPARE(http_error_reason("<html><body><h1>Access denied</h1><p>...</p></body></html>", QString()), QStringLiteral("Access denied"));
        QCOMPARE(http_error_reason("<html><body><p>no title</p></body></html>", QStringLiteral("text/html")), QString());
        QCOMPARE(http_error_reason("upstream timed out\nmore detail", QStringLiteral("text/plain")), QStringLiteral("upstream timed out"));
        QCOMPARE(http_error_reason(QByteArray(500, 'x'), QString()).size(), 200);
    }
};

QTEST_MAIN(TestAppRemote)
#include "test_app_remote.moc"
