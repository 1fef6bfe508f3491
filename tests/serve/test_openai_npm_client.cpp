// The acceptance check of the server with a client no one here wrote: the
// official `openai` package from npm (installed by this test into the build
// folder) lists the models, streams a chat completion and gets a non-streaming
// one from `strata-cli serve`; at temperature 0 the text equals `strata-cli run`
// on the same prompt and template. Skips, saying why, without node/npm or when
// npm cannot install the package (no network).
#include <QtTest>

#include <cmath>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>

namespace {

const QString kCli = QStringLiteral(STRATA_CLI);
const QString kPkgDir = QStringLiteral(STRATA_BINARY_DIR "/npm-openai");
const QString kPrompt = QStringLiteral("Who is the LORD?");
const int kMaxTokens = 24;

QString run_cli(const QStringList& args) {
    QProcess p;
    p.start(kCli, args);
    if (!p.waitForFinished(120000)) return QStringLiteral("<timeout>");
    QString out = QString::fromUtf8(p.readAllStandardOutput());
    if (out.endsWith('\n')) out.chop(1);  // run ends its output with a newline
    return out;
}

}  // namespace

class TestOpenAiNpmClient : public QObject {
    Q_OBJECT
    QString node_;
    QProcess server_;
    QString base_url_;

private Q_SLOTS:
    void initTestCase() {
        node_ = QStandardPaths::findExecutable(QStringLiteral("node"));
        const QString npm = QStandardPaths::findExecutable(QStringLiteral("npm"));
        if (node_.isEmpty() || npm.isEmpty()) QSKIP("node and npm are not installed (Debian: apt install nodejs npm)");
        if (!QFileInfo::exists(kPkgDir + "/node_modules/openai/package.json")) {
            QDir().mkpath(kPkgDir);
            QProcess install;
            install.setProcessChannelMode(QProcess::MergedChannels);
            install.start(npm, {"install", "--no-audit", "--no-fund", "--prefix", kPkgDir, "openai@4"});
            const bool done = install.waitForFinished(300000);
            if (!done || install.exitCode() != 0)
                QSKIP(qPrintable("npm could not install the openai package (no network?): " +
                                 QString::fromUtf8(install.readAll()).right(400)));
        }
        server_.setProcessChannelMode(QProcess::SeparateChannels);
        server_.start(kCli, {"serve", "--port", "0"});
        QVERIFY(server_.waitForStarted());
        QRegularExpression url(QStringLiteral("at (http://[^ ]+/v1) "));
        QString first;
        for (int i = 0; i < 600 && !first.contains('\n'); ++i) {
            server_.waitForReadyRead(100);
            first += QString::fromUtf8(server_.readAllStandardOutput());
        }
        const auto m = url.match(first);
        QVERIFY2(m.hasMatch(), qPrintable("serve did not say where it listens: " + first +
                                          QString::fromUtf8(server_.readAllStandardError())));
        base_url_ = m.captured(1);
    }

    void cleanupTestCase() {
        if (server_.state() == QProcess::NotRunning) return;
        server_.terminate();
        if (!server_.waitForFinished(10000)) server_.kill();
    }

    void the_official_client_gets_what_run_gives() {
        QProcess node;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("STRATA_BASE_URL", base_url_);
        env.insert("OPENAI_PKG_DIR", kPkgDir);
        env.insert("STRATA_PROMPT", kPrompt);
        env.insert("STRATA_MAX_TOKENS", QString::number(kMaxTokens));
        node.setProcessEnvironment(env);
        node.start(node_, {QStringLiteral(STRATA_SOURCE_DIR "/tests/serve/openai_client.mjs")});
        QVERIFY(node.waitForFinished(120000));
        const QByteArray err = node.readAllStandardError();
        QVERIFY2(node.exitCode() == 0, err.constData());
        const QJsonObject got = QJsonDocument::fromJson(node.readAllStandardOutput()).object();
        QVERIFY2(!got.isEmpty(), err.constData());

        QCOMPARE(got["models"].toArray().first().toString(), QStringLiteral("strata-demo-moe"));
        const QString chat = run_cli({"run", "--chat", "-p", kPrompt, "-n", QString::number(kMaxTokens), "--temp", "0"});
        QVERIFY(!chat.isEmpty());
        QCOMPARE(got["stream_text"].toString(), chat);
        QCOMPARE(got["full_text"].toString(), chat);
        QVERIFY(got["stream_chunks"].toInt() > 2);
        QVERIFY(!got["stream_finish"].toString().isEmpty());
        QCOMPARE(got["stream_usage"].toObject()["completion_tokens"].toInt(),
                 got["full_usage"].toObject()["completion_tokens"].toInt());
        QVERIFY(got["full_usage"].toObject()["prompt_tokens"].toInt() > 0);
        const QString plain = run_cli({"run", "-p", kPrompt, "-n", QString::number(kMaxTokens), "--temp", "0"});
        QCOMPARE(kPrompt + got["completion_text"].toString(), plain);
        QCOMPARE(got["unknown_model"].toString(), QStringLiteral("404 model_not_found"));
        QCOMPARE(got["embedding_dims"].toInt(), 256);  // the demo model's width
        QVERIFY(std::fabs(got["embedding_norm"].toDouble() - 1.0) < 1e-5);
        QVERIFY(got["embeddings_equal"].toBool());
        // /v1/responses: the chat's greedy text, whole and streamed (the client's accumulator).
        QCOMPARE(got["responses_text"].toString(), chat);
        QCOMPARE(got["responses_stream_text"].toString(), chat);
        QVERIFY(got["responses_stream_deltas"].toInt() > 2);
        QCOMPARE(got["responses_usage"].toObject()["output_tokens"].toInt(),
                 got["full_usage"].toObject()["completion_tokens"].toInt());
        QCOMPARE(got["responses_tool_turn"].toString(), QStringLiteral("incomplete true"));
        QVERIFY(got["responses_chain"].toBool());      // the second request's prompt carries the first exchange
        QVERIFY(got["responses_retrieved"].toBool());
        QCOMPARE(got["responses_deleted"].toString(), QStringLiteral("404 previous_response_not_found"));

        // Constrained output, streamed and not: every call's arguments and
        // every JSON reply parse and validate against their schema.
        for (const char* key : {"required_calls", "required_stream_calls", "schema_json", "schema_stream_json",
                                 "responses_calls", "responses_stream_calls", "responses_json", "responses_stream_json"}) {
            const QJsonArray runs = got[QLatin1String(key)].toArray();
            QVERIFY2(runs.size() >= 3, key);
            const QString k = QString::fromLatin1(key);
            const QString want = k.startsWith(QLatin1String("responses")) ? QStringLiteral("completed valid")
                                 : k.startsWith(QLatin1String("required")) ? QStringLiteral("tool_calls valid")
                                                                           : QStringLiteral("stop valid");
            for (const QJsonValue& r : runs) QVERIFY2(r.toString() == want, qPrintable(QString(key) + ": " + r.toString()));
        }
        const QString refused = got["unsupported_schema"].toString();
        QVERIFY2(refused.startsWith(QLatin1String("400 response_format: ")) && refused.contains(QLatin1String("'pattern'")),
                 qPrintable(refused));
    }
};

QTEST_GUILESS_MAIN(TestOpenAiNpmClient)
#include "test_openai_npm_client.moc"
