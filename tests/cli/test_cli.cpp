// strata-cli as a user runs it: every command has --help, every error is one
// clear line and a non-zero exit, and eval writes the fixtures' layout.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "test_support.h"

namespace {

struct Run {
    int code = -1;
    QString out, err;
};

Run cli(const QStringList& args, int timeout_ms = 120000) {
    QProcess p;
    p.start(QStringLiteral(STRATA_CLI), args);
    p.closeWriteChannel();
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
    }
    Run r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

// An error is exactly one line on stderr, nothing on stdout.
void expect_one_line_error(const Run& r, int code, const QString& must_contain) {
    QCOMPARE(r.code, code);
    QVERIFY2(r.err.trimmed().count('\n') == 0, qPrintable("more than one line: " + r.err));
    QVERIFY2(r.err.contains(must_contain), qPrintable("'" + r.err.trimmed() + "' lacks '" + must_contain + "'"));
}

}  // namespace

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void help_for_every_command() {
        const Run top = cli({"--help"});
        QCOMPARE(top.code, 0);
        for (const QString cmd : {"inspect", "run", "eval", "tokenize", "make-model", "routing-stats"}) {
            QVERIFY2(top.out.contains(cmd), qPrintable(cmd));
            const Run r = cli({cmd, "--help"});
            QCOMPARE(r.code, 0);
            QVERIFY2(r.out.startsWith("usage: strata-cli " + cmd), qPrintable(r.out));
            QVERIFY(r.out.contains("--help"));
        }
    }

    void usage_errors() {
        const Run bare = cli({});
        QCOMPARE(bare.code, 2);
        QVERIFY(bare.err.startsWith("usage: strata-cli COMMAND"));
        expect_one_line_error(cli({"frobnicate"}), 2, "unknown command 'frobnicate'");
        expect_one_line_error(cli({"inspect"}), 2, "missing MODEL");
        expect_one_line_error(cli({"run", "x.gguf", "--bogus"}), 2, "unknown option '--bogus'");
        expect_one_line_error(cli({"run", "x.gguf", "-p", "hi", "--top-p", "1.5"}), 2, "--top-p");
        expect_one_line_error(cli({"run", "x.gguf", "-p", "hi", "--temp", "warm"}), 2, "not a number");
        expect_one_line_error(cli({"make-model", "/tmp/x.gguf", "--type", "q9_9"}), 2, "unknown weight type 'q9_9'");
        expect_one_line_error(cli({"make-model", "/tmp/x.gguf", "--dim", "128", "--type", "q4_k"}), 2, "block size");
    }

    void file_errors() {
        QTemporaryDir dir;
        expect_one_line_error(cli({"inspect", dir.path() + "/missing.gguf"}), 1, "missing.gguf: cannot open");
        QFile junk(dir.path() + "/junk.gguf");
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write(QByteArray(100, 'x'));
        junk.close();
        expect_one_line_error(cli({"run", junk.fileName(), "-p", "hi"}), 1, "not a GGUF file");
        expect_one_line_error(cli({"eval", junk.fileName(), "--prompts", dir.path() + "/none.txt", "--logits",
                                   dir.path() + "/o.f32"}),
                              1, "none.txt");
    }

    void make_model_inspect_run() {
        QTemporaryDir dir;
        const QString path = dir.path() + "/m.gguf";
        const Run made = cli({"make-model", path, "--arch", "qwen2moe", "--layers", "2", "--dim", "64", "--heads", "4",
                              "--kv-heads", "2", "--experts", "4", "--used", "2", "--expert-ff", "32", "--shared-ff",
                              "64", "--type", "q8_0"});
        QCOMPARE(made.code, 0);
        const Run info = cli({"inspect", path});
        QCOMPARE(info.code, 0);
        QVERIFY(info.out.contains("architecture  qwen2moe"));
        QVERIFY(info.out.contains("blk.1.ffn_down_exps.weight"));
        QVERIFY(info.out.contains("layer   1 expert   3"));
        QVERIFY(info.out.contains("read per token"));
        const Run gen = cli({"run", path, "-p", "hello", "-n", "5", "--temp", "0"});
        QCOMPARE(gen.code, 0);
        QVERIFY(gen.out.startsWith("hello"));
        QVERIFY2(gen.err.contains("generation: 5 tokens"), qPrintable(gen.err));
    }

    void routing_stats_fixture() {
        STRATA_REQUIRE_FIXTURES();
        const QString models = strata::test::fixtures_dir() + "/models/";
        const Run r = cli({"routing-stats", models + "moe-tiny-f32.gguf", "--prompts", models + "prompts.txt", "--json"});
        QCOMPARE(r.code, 0);
        const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(o["n_expert"].toInt(), 8);
        QCOMPARE(o["layers"].toArray().size(), 4);
        QVERIFY(o["mean_entropy_bits"].toDouble() <= o["max_entropy_bits"].toDouble());
        QCOMPARE(o["lru"].toArray().size(), 2);
        const Run dense = cli({"routing-stats", models + "stories260K.gguf", "--prompts", models + "prompts.txt"});
        expect_one_line_error(dense, 1, "not a mixture-of-experts model");
    }

    void tokenize_fixture() {
        STRATA_REQUIRE_FIXTURES();
        const Run r = cli({"tokenize", QString::fromStdString(strata::test::fixture_path("models/stories260K.gguf")),
                           "Once upon a time", "--ids"});
        QCOMPARE(r.code, 0);
        QCOMPARE(r.out.trimmed(), QString("1 403 407 261 378"));
    }

    // eval reproduces the fixture's JSON layout, tokens and greedy ids for the
    // F32 reference model, and writes one logits row per prompt position.
    void eval_matches_fixture_layout() {
        STRATA_REQUIRE_FIXTURES();
        QTemporaryDir dir;
        const QString models = strata::test::fixtures_dir() + "/models/";
        const Run r = cli({"eval", models + "stories260K.gguf", "--prompts", models + "prompts.txt", "--logits",
                           dir.path() + "/out.f32", "--greedy", "32"});
        QCOMPARE(r.code, 0);
        QFile ref(models + "stories260K.ref.jsonl");
        QVERIFY(ref.open(QIODevice::ReadOnly));
        const QList<QByteArray> want = ref.readAll().trimmed().split('\n');
        const QStringList got = r.out.trimmed().split('\n');
        QCOMPARE(got.size(), want.size());
        int64_t rows = 0;
        for (int i = 0; i < got.size(); ++i) {
            const QJsonObject g = QJsonDocument::fromJson(got[i].toUtf8()).object();
            const QJsonObject w = QJsonDocument::fromJson(want[i]).object();
            for (const char* key : {"prompt", "tokens", "logits_offset_rows", "greedy"}) QCOMPARE(g[key], w[key]);
            rows += g["tokens"].toArray().size();
        }
        QCOMPARE(QFileInfo(dir.path() + "/out.f32").size(), rows * 512 * 4);
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
