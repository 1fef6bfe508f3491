// strata-cli as a user runs it: every command has --help, every error is one
// clear line and a non-zero exit, and eval writes the fixtures' layout.
#include <fcntl.h>
#include <unistd.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QThread>
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

private Q_SLOTS:
    void help_for_every_command() {
        const Run top = cli({"--help"});
        QCOMPARE(top.code, 0);
        for (const QString cmd : {"inspect", "run", "eval", "tokenize", "chat-template", "make-model", "routing-stats", "plan", "trace", "simulate"}) {
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

    // quantize --calibration: an unreadable prompts file is one line of error
    // and nothing written; with prompts, the statistics are saved and reused.
    void quantize_with_calibration() {
        QTemporaryDir dir;
        const QString in = dir.path() + "/f32.gguf", out = dir.path() + "/q.gguf", dat = dir.path() + "/s.imatrix";
        QCOMPARE(cli({"make-model", in, "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--experts",
                      "4", "--used", "2", "--expert-ff", "64", "--type", "f32"})
                     .code,
                 0);
        expect_one_line_error(cli({"quantize", in, out, "--calibration", dir.path() + "/none.txt"}), 1, "none.txt");
        QVERIFY(!QFile::exists(out));
        expect_one_line_error(cli({"quantize", in, out, "--save-imatrix", dat}), 2, "--calibration");
        {
            QFile f(dir.path() + "/prompts.txt");
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("Once upon a time\nThe cat sat on the mat\n");
        }
        const Run q = cli({"quantize", in, out, "--recipe", "q8", "--calibration", dir.path() + "/prompts.txt",
                           "--save-imatrix", dat, "--quiet"});
        QVERIFY2(q.code == 0, qPrintable(q.err));
        QVERIFY2(q.out.contains("calibration: 2 prompts"), qPrintable(q.out));
        QVERIFY(QFile::exists(out) && QFile::exists(dat));
        const Run again = cli({"quantize", in, dir.path() + "/q2.gguf", "--recipe", "q8", "--imatrix", dat, "--quiet"});
        QVERIFY2(again.code == 0, qPrintable(again.err));
        QVERIFY2(again.out.contains("importance matrix " + dat), qPrintable(again.out));
        // The compensations: each needs its statistics, and says what it did.
        const QString comp = dir.path() + "/comp.gguf";
        expect_one_line_error(cli({"quantize", in, comp, "--gptq", "--imatrix", dat}), 2, "--calibration");
        expect_one_line_error(cli({"quantize", in, comp, "--awq"}), 2, "--calibration");
        QVERIFY(!QFile::exists(comp));
        const Run c = cli({"quantize", in, comp, "--recipe", "q4-experts", "--calibration", dir.path() + "/prompts.txt",
                           "--awq", "--gptq", "--quiet"});
        QVERIFY2(c.code == 0, qPrintable(c.err));
        QVERIFY2(c.out.contains("activation-aware scaling:"), qPrintable(c.out));
        QVERIFY2(c.out.contains("error compensation:"), qPrintable(c.out));
        QVERIFY(cli({"run", comp, "-p", "Once", "-n", "4", "--temp", "0"}).code == 0);
    }

    // --gptq's second moments over its memory budget are collected in more
    // passes over the prompts, with the same result; a single tensor over it
    // is refused, naming it.
    void quantize_gptq_in_passes() {
        QTemporaryDir dir;
        const QString in = dir.path() + "/f32.gguf", prompts = dir.path() + "/prompts.txt";
        QCOMPARE(cli({"make-model", in, "--layers", "2", "--dim", "512", "--heads", "8", "--kv-heads", "2", "--experts",
                      "4", "--used", "2", "--expert-ff", "512", "--type", "f32"})
                     .code,
                 0);
        {
            QFile f(prompts);
            QVERIFY(f.open(QIODevice::WriteOnly));
            for (int i = 0; i < 4; ++i)
                f.write("Once upon a time there was a little dog who lived by the sea, and every morning it ran along the "
                        "sand to find what the night had left there: shells, wood, a bottle with a letter in it.\n");
        }
        // 2 MiB of sums per attention matrix, 8 MiB per stacked expert tensor.
        const QString one = dir.path() + "/one.gguf", many = dir.path() + "/many.gguf";
        const Run a = cli({"quantize", in, one, "--calibration", prompts, "--gptq", "--quiet"});
        QVERIFY2(a.code == 0, qPrintable(a.err));
        const Run b = cli({"quantize", in, many, "--calibration", prompts, "--gptq", "--gptq-memory", "20", "--quiet"});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        QVERIFY2(b.out.contains(QRegularExpression("second moments in [3-9] passes")), qPrintable(b.out));
        QVERIFY2(a.out.contains(QRegularExpression("error compensation: [1-9][0-9]* matrices")), qPrintable(a.out));
        QFile fa(one), fb(many);
        QVERIFY(fa.open(QIODevice::ReadOnly) && fb.open(QIODevice::ReadOnly));
        QVERIFY(fa.readAll() == fb.readAll());
        const QString none = dir.path() + "/none.gguf";
        expect_one_line_error(cli({"quantize", in, none, "--calibration", prompts, "--gptq", "--gptq-memory", "7"}), 1,
                              "blk.0.ffn_gate_exps.weight");
        QVERIFY(!QFile::exists(none));
    }

    // A quantization killed at any moment (SIGKILL: no handler runs) leaves
    // OUT absent or whole, never a truncated file: the output is written to a
    // temporary name, synced and renamed into place.
    void quantize_killed_leaves_no_half_file() {
        QTemporaryDir dir;
        const QString in = dir.path() + "/f32.gguf", ref = dir.path() + "/ref.gguf";
        QCOMPARE(cli({"make-model", in, "--layers", "4", "--dim", "512", "--heads", "8", "--kv-heads", "2", "--experts",
                      "8", "--used", "2", "--expert-ff", "512", "--type", "f32"})
                     .code,
                 0);
        // A recipe that keeps every type: the run is mostly writing, so the
        // kills land in the write too (a non-atomic writer leaves a short file).
        const QString keep = dir.path() + "/keep.json";
        {
            QFile f(keep);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"({"name": "keep", "types": {}})");
        }
        QElapsedTimer clock;
        clock.start();
        QCOMPARE(cli({"quantize", in, ref, "--recipe", keep, "--threads", "1", "--quiet"}).code, 0);
        const qint64 full_ms = clock.elapsed();
        QFile whole(ref);
        QVERIFY(whole.open(QIODevice::ReadOnly));
        const QByteArray want = whole.readAll();
        int absent = 0, complete = 0;
        for (const double at : {0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.05}) {
            const QString out = dir.path() + QStringLiteral("/killed-%1.gguf").arg(static_cast<int>(at * 100));
            QProcess p;
            p.start(QStringLiteral(STRATA_CLI), {"quantize", in, out, "--recipe", keep, "--threads", "1", "--quiet"});
            QVERIFY(p.waitForStarted());
            QThread::msleep(static_cast<unsigned long>(at * static_cast<double>(full_ms)));
            p.kill();  // SIGKILL
            p.waitForFinished();
            QFile f(out);
            if (!f.exists()) {
                ++absent;
                continue;
            }
            QVERIFY(f.open(QIODevice::ReadOnly));
            QVERIFY2(f.readAll() == want, qPrintable(out + " is there but not whole"));
            ++complete;
        }
        qInfo("killed quantizations: %d left no file, %d a whole one (a full run %lld ms)", absent, complete, full_ms);
        QVERIFY(absent > 0);
        // Where the file system writes unnamed files (O_TMPFILE), a kill leaves
        // no temporary file behind either.
        const int probe = ::open(QFile::encodeName(dir.path()).constData(), O_TMPFILE | O_WRONLY, 0600);
        if (probe >= 0) {
            ::close(probe);
            const QStringList left = QDir(dir.path()).entryList({"*.tmp-*"}, QDir::Files | QDir::Hidden);
            QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
        } else {
            qInfo("%s cannot hold unnamed files: a killed write may leave its temporary name", qPrintable(dir.path()));
        }
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
#ifdef STRATA_CLI_HAS_CUDA
        QVERIFY(info.out.contains("on the CUDA backend: every op on the GPU"));
#endif
        const Run gen = cli({"run", path, "-p", "hello", "-n", "5", "--temp", "0"});
        QCOMPARE(gen.code, 0);
        QVERIFY(gen.out.startsWith("hello"));
        QVERIFY2(gen.err.contains("generation: 5 tokens"), qPrintable(gen.err));
    }

    void run_with_a_draft_is_plain_decoding_at_temperature_zero() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        const Run plain = cli({"run", demo, "-p", "And God said", "-n", "48", "--temp", "0"});
        QCOMPARE(plain.code, 0);
        for (const char* d : {"self:experts=1", "self:layers=4", "self:resident"}) {
            const Run spec = cli({"run", demo, "-p", "And God said", "-n", "48", "--temp", "0", "--draft", d,
                                  "--expert-cache-fraction", "0.5"});
            QCOMPARE(spec.code, 0);
            QCOMPARE(spec.out, plain.out);
            QVERIFY2(spec.err.contains("draft tokens accepted"), qPrintable(spec.err));
        }
        expect_one_line_error(cli({"run", demo, "-p", "x", "--draft", "self:bogus"}), 2, "--draft");
        if (strata::test::have_fixtures()) {
            const Run other = cli({"run", demo, "-p", "x", "--draft",
                                   QString::fromStdString(strata::test::fixture_path("models/moe-tiny-f32.gguf"))});
            expect_one_line_error(other, 1, "vocabular");
        }
    }

    // --draft mtp on a file without an MTP block: one line saying so.
    void run_with_the_mtp_draft_needs_the_block() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        expect_one_line_error(cli({"run", demo, "-p", "x", "-n", "4", "--draft", "mtp"}), 1, "no NextN/MTP block");
    }

    // chat-template prints what the Jinja renders, byte for byte (the tools
    // and --context variables included); a template that fails names its line.
    void chat_template_renders_and_names_the_failing_line() {
        QTemporaryDir dir;
        const auto write = [&](const QString& name, const QByteArray& text) {
            QFile f(dir.filePath(name));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(text);
        };
        write("t.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}\n{% endfor %}"
                         "{% if tools %}tools: {{ tools | map(attribute='function') | map(attribute='name') | join(',') }}\n{% endif %}"
                         "{% if add_generation_prompt %}[assistant]{% if think %} <think>{% endif %}{% endif %}");
        write("m.json", R"([{"role": "system", "content": " S "}, {"role": "user", "content": "Hi"}])");
        write("tools.json", R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}])");
        write("ctx.json", R"({"think": true})");
        const Run r = cli({"chat-template", dir.filePath("t.jinja"), "--messages", dir.filePath("m.json"), "--tools",
                           dir.filePath("tools.json"), "--context", dir.filePath("ctx.json"), "--bos", "<s>"});
        QCOMPARE(r.code, 0);
        QCOMPARE(r.out, QStringLiteral("<s>[system] S\n[user] Hi\ntools: f,g\n[assistant] <think>"));
        const Run closed = cli({"chat-template", dir.filePath("t.jinja"), "--messages", dir.filePath("m.json"),
                                "--no-generation-prompt"});
        QCOMPARE(closed.out, QStringLiteral("[system] S\n[user] Hi\n"));
        write("bad.jinja", "line one\n{% for m in messages %}\n{{ m.content | nosuchfilter }}\n{% endfor %}");
        expect_one_line_error(cli({"chat-template", dir.filePath("bad.jinja"), "--messages", dir.filePath("m.json")}), 1,
                              "template line 3");
        write("unclosed.jinja", "ok\n\n{% if x %}");
        expect_one_line_error(cli({"chat-template", dir.filePath("unclosed.jinja"), "--messages", dir.filePath("m.json")}), 1,
                              "template line 3");
        write("notjson.json", "[{");
        expect_one_line_error(cli({"chat-template", dir.filePath("t.jinja"), "--messages", dir.filePath("notjson.json")}), 1,
                              "not JSON");
        expect_one_line_error(cli({"chat-template", dir.filePath("t.jinja")}), 2, "--messages");
    }

    // bench names the kernels, the bytes repacked for them (as plan counts
    // them) and what the weight kernel alone streams, for the model's expert
    // type even when dense layers with f32 weights come first (the demo model:
    // two f32 dense layers, q8_0 experts); the roofline against the fastest
    // pass and against the sustained rate, which is never above it.
    void bench_reports_the_kernels() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        const Run b = cli({"bench", demo, "-n", "4", "--prompt-len", "4", "--warmup", "0", "--threads", "2", "--json"});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        const QJsonObject o = QJsonDocument::fromJson(b.out.toUtf8()).object();
        QCOMPARE(o["threads"].toInt(), 2);
        QVERIFY(!o["kernels"].toString().isEmpty());
        QVERIFY(o["kernel_stream_gbs"].toDouble() > 0);
        const double peak = o["machine_read_gbs"].toDouble(), sustained = o["machine_read_sustained_gbs"].toDouble();
        QVERIFY(sustained > 0 && sustained <= peak);
        QVERIFY(o["roofline_fraction_sustained"].toDouble() >= o["roofline_fraction"].toDouble());
        const Run p = cli({"plan", demo, "--json"});
        QCOMPARE(p.code, 0);
        QCOMPARE(o["repacked_weight_bytes"].toDouble(), QJsonDocument::fromJson(p.out.toUtf8()).object()["repacked_bytes"].toDouble());
        QVERIFY(o["repacked_bytes"].toDouble() >= o["repacked_weight_bytes"].toDouble());
        QVERIFY(!o.contains("profile"));
    }

    // --profile: per compute thread, where the decode time went; the parts
    // add up to the decode time (tokens / tok/s).
    void bench_profile_splits_each_threads_decode_time() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        const Run b = cli({"bench", demo, "-n", "8", "--prompt-len", "4", "--warmup", "0", "--threads", "2", "--profile", "--json"});
        QVERIFY2(b.code == 0, qPrintable(b.err));
        const QJsonObject o = QJsonDocument::fromJson(b.out.toUtf8()).object();
        const double decode_s = o["decode_tokens"].toDouble() / o["decode_tok_s"].toDouble();
        const QJsonObject prof = o["profile"].toObject();
        const QJsonArray threads = prof["threads"].toArray();
        QCOMPARE(threads.size(), 2);
        for (const QJsonValue& v : threads) {
            const QJsonObject t = v.toObject();
            double sum = 0;
            for (const char* k : {"quant_weights_s", "f32_weights_s", "attention_s", "waiting_in_regions_s", "other_in_regions_s",
                                  "outside_regions_s"}) {
                QVERIFY2(t.contains(k), k);
                QVERIFY(t[k].toDouble() >= 0);
                sum += t[k].toDouble();
            }
            // Thread 0's waits at the regions' ends are a part of its time outside them.
            QVERIFY(t.contains("region_end_wait_s"));
            QVERIFY(t["region_end_wait_s"].toDouble() >= 0);
            QVERIFY(t["region_end_wait_s"].toDouble() <= t["outside_regions_s"].toDouble());
            QVERIFY2(std::abs(sum - decode_s) <= 0.02 * decode_s, qPrintable(QString("parts %1 s, decode %2 s").arg(sum).arg(decode_s)));
        }
        QVERIFY(threads[0].toObject()["quant_weights_s"].toDouble() > 0);
        QVERIFY(prof["quant_weights_gbs"].toDouble() > 0);
        QVERIFY(prof["quant_weights_vs_machine"].toDouble() > 0);
        const Run text = cli({"bench", demo, "-n", "4", "--prompt-len", "4", "--warmup", "0", "--threads", "2", "--profile"});
        QCOMPARE(text.code, 0);
        QVERIFY2(text.out.contains("thread 1"), qPrintable(text.out));
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

    // eval reproduces the fixture's JSON layout, tokens, greedy ids and greedy
    // text for the F32 reference model, and writes one logits row per prompt
    // position.
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
            for (const char* key : {"prompt", "tokens", "logits_offset_rows", "greedy", "greedy_text"}) QCOMPARE(g[key], w[key]);
            rows += g["tokens"].toArray().size();
        }
        QCOMPARE(QFileInfo(dir.path() + "/out.f32").size(), rows * 512 * 4);
    }

    // plan: the table and the verdict, exit 0 whether or not the model fits;
    // bad settings are one-line usage errors with exit 2.
    void plan_table_and_verdict() {
        QTemporaryDir dir;
        const QString path = dir.path() + "/m.gguf";
        QCOMPARE(cli({"make-model", path, "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                      "--experts", "8", "--used", "2", "--expert-ff", "64", "--ctx", "256"})
                     .code,
                 0);
        const Run all = cli({"plan", path, "--threads", "1"});
        QCOMPARE(all.code, 0);
        for (const char* part : {"weights.shared", "weights.router", "experts.cache", "experts.pinned", "kv.pages",
                                 "activations", "transfer.buffers", "draft.model", "runtime.reserve", "experts.home",
                                 "resident minimum", "16 of 16 slots", "fits:"})
            QVERIFY2(all.out.contains(part), qPrintable(QString(part) + " missing in:\n" + all.out));

        const Run json = cli({"plan", path, "--threads", "1", "--expert-cache-fraction", "0.25", "--json"});
        QCOMPARE(json.code, 0);
        const QJsonObject o = QJsonDocument::fromJson(json.out.toUtf8()).object();
        QVERIFY2(!o.isEmpty(), qPrintable(json.out));
        QCOMPARE(o["experts_total"].toInt(), 16);
        QCOMPARE(o["expert_slots"].toInt(), 4);
        QCOMPARE(o["fits"].toBool(), true);
        // No --fast-budget: automatic, from the RAM available (a number); "none": no budget.
        QVERIFY(o["fast_budget_auto"].toBool());
        QVERIFY(o["fast_budget"].toDouble() > 0);
        QVERIFY(o["fast_available"].toDouble() > o["fast_budget"].toDouble());
        QVERIFY(o["device"].toString().startsWith("device auto: "));
        QVERIFY(o["gpus"].isArray());
        // A quarter of the experts cached: the rest stream from the file, and
        // the plan says how fast that can go (issue 45's missing speed line):
        // 3/4 of each token's expert bytes at the rate measured on this file.
        if (!o["device"].toString().contains("GPU")) {
            const QJsonObject st = o["stream"].toObject();
            QVERIFY2(!st.isEmpty(), qPrintable(json.out));
            QVERIFY(st["expert_bytes_per_token"].toDouble() > 0);
            QVERIFY(qAbs(st["disk_bytes_per_token"].toDouble() - st["expert_bytes_per_token"].toDouble() * 0.75) <= 1.0);
            QVERIFY(st["read_bps_low"].toDouble() > 0 && st["read_bps_high"].toDouble() >= st["read_bps_low"].toDouble());
            QVERIFY(st["tok_s_low"].toDouble() > 0);
            QVERIFY2(st["text"].toString().contains("tok/s") && st["text"].toString().contains("GB/s"),
                     qPrintable(st["text"].toString()));
            const Run table = cli({"plan", path, "--threads", "1", "--expert-cache-fraction", "0.25"});
            QVERIFY2(table.out.contains("Expected speed where experts stream from disk"), qPrintable(table.out));
        }
        QVERIFY2(!all.out.contains("Expected speed"), qPrintable(all.out));  // every expert cached: nothing streams
        const Run none = cli({"plan", path, "--threads", "1", "--fast-budget", "none", "--json"});
        QCOMPARE(none.code, 0);
        QVERIFY(QJsonDocument::fromJson(none.out.toUtf8()).object()["fast_budget"].isNull());
        const Run zero = cli({"plan", path, "--fast-budget", "0"});
        QCOMPARE(zero.code, 2);
        QVERIFY2(zero.err.contains("auto") && zero.err.contains("none"), qPrintable(zero.err));
        qint64 fast = 0;
        for (const QJsonValue r : o["rows"].toArray())
            if (r.toObject()["tier"].toString() == "fast") fast += r.toObject()["bytes"].toInteger();
        QCOMPARE(fast, o["fast_total"].toInteger());
        const qint64 minimum = o["resident_minimum"].toInteger();

        // One byte below the resident minimum: the verdict says so, still exit 0.
        const Run below = cli({"plan", path, "--threads", "1", "--fast-budget", QString::number(minimum - 1)});
        QCOMPARE(below.code, 0);
        QVERIFY2(below.out.contains("does not fit") && below.out.contains("resident minimum"), qPrintable(below.out));
        QVERIFY(below.out.contains("OVER by"));
        const Run at = cli({"plan", path, "--threads", "1", "--fast-budget", QString::number(minimum), "--json"});
        QCOMPARE(at.code, 0);
        const QJsonObject a = QJsonDocument::fromJson(at.out.toUtf8()).object();
        QCOMPARE(a["fits"].toBool(), true);
        QCOMPARE(a["expert_slots"].toInt(), 2);

        const Run slow = cli({"plan", path, "--slow-budget", "1K"});
        QCOMPARE(slow.code, 0);
        QVERIFY2(slow.out.contains("does not fit") && slow.out.contains("experts.home"), qPrintable(slow.out));
    }

    void plan_usage_errors() {
        QTemporaryDir dir;
        const QString path = dir.path() + "/m.gguf";
        QCOMPARE(cli({"make-model", path, "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                      "--experts", "4", "--used", "2", "--expert-ff", "64", "--ctx", "128"})
                     .code,
                 0);
        expect_one_line_error(cli({"plan"}), 2, "missing MODEL");
        expect_one_line_error(cli({"plan", path, "--slots", "0"}), 2, "zero slots");
        expect_one_line_error(cli({"plan", path, "--slots", "1"}), 2, "too few expert slots");
        expect_one_line_error(cli({"plan", path, "--expert-cache-fraction", "0"}), 2, "outside (0, 1]");
        expect_one_line_error(cli({"plan", path, "--expert-cache-fraction", "1.5"}), 2, "outside (0, 1]");
        expect_one_line_error(cli({"plan", path, "--fast-budget", "-5M"}), 2, "is not a size");
        expect_one_line_error(cli({"plan", path, "--fast-budget", "0"}), 2, "zero budget");
        expect_one_line_error(cli({"plan", path, "--pinned", "9"}), 2, "only 8 routed experts");
        expect_one_line_error(cli({"plan", dir.path() + "/missing.gguf"}), 1, "missing.gguf");
    }

    void plan_fixture() {
        STRATA_REQUIRE_FIXTURES();
        const QString model = strata::test::fixtures_dir() + "/models/moe-tiny-f32.gguf";
        const Run r = cli({"plan", model, "--threads", "1", "--json"});
        QCOMPARE(r.code, 0);
        const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(o["experts_total"].toInt(), 32);
        QCOMPARE(o["slow_total"].toInteger(), qint64{32} * 3 * 128 * 256 * 4);
        QCOMPARE(o["n_ctx"].toInt(), 512);
        const Run tight = cli({"plan", model, "--fast-budget", "2M"});
        QCOMPARE(tight.code, 0);
        QVERIFY2(tight.out.contains("does not fit: the fast budget of 2.00 MiB is below the resident minimum"),
                 qPrintable(tight.out));
    }

    // trace records the fixture's routing; simulate replays it for every
    // policy and two cache sizes, and projects it onto seed-125b.
    void trace_and_simulate_fixture() {
        STRATA_REQUIRE_FIXTURES();
        QTemporaryDir dir;
        const QString models = strata::test::fixtures_dir() + "/models/";
        const QString trace = dir.path() + "/tiny.trace";
        const Run t = cli({"trace", models + "moe-tiny-f32.gguf", "--prompts", models + "prompts.txt", "--out", trace,
                           "--greedy", "8", "--threads", "1"});
        QCOMPARE(t.code, 0);
        QVERIFY2(t.out.contains("32 decoded one at a time") && t.out.contains("4 MoE layers x 8 experts top-2"),
                 qPrintable(t.out));

        const Run s = cli({"simulate", trace, "--slots", "25%,50%", "--json"});
        QCOMPARE(s.code, 0);
        const QJsonObject o = QJsonDocument::fromJson(s.out.toUtf8()).object();
        QVERIFY2(!o.isEmpty(), qPrintable(s.out));
        QCOMPARE(o["trace"].toObject()["decode_tokens"].toInt(), 32);
        QCOMPARE(o["trace"].toObject()["moe_layers_with_lookahead"].toInt(), 3);
        const QJsonArray runs = o["runs"].toArray();
        QCOMPARE(runs.size(), 10);  // lru, lfu, arc, pinned, opt x 25%, 50%
        for (const QJsonValue v : runs) {
            const QJsonObject r = v.toObject();
            QVERIFY(r["hit_rate"].toDouble() >= 0.0 && r["hit_rate"].toDouble() <= 1.0);
            QCOMPARE(r["hits"].toInt() + r["misses"].toInt(), r["uses"].toInt());
            QCOMPARE(r["trace_slots"].toInt(), r["slots"].toInt());  // no profile model: the same experts
        }
        QCOMPARE(runs[0].toObject()["trace_slots"].toInt(), 8);
        QCOMPARE(runs[1].toObject()["trace_slots"].toInt(), 16);
        QCOMPARE(runs[6].toObject()["pinned"].toInt(), 4);  // pinned: half of the slots
        // A bigger cache never hurts LRU here.
        QVERIFY(runs[1].toObject()["hit_rate"].toDouble() >= runs[0].toObject()["hit_rate"].toDouble());
        // opt (Belady's MIN, last) bounds every policy at each size.
        QCOMPARE(runs[8].toObject()["policy"].toString(), QString("opt"));
        for (int i = 0; i < 8; ++i)
            QVERIFY(runs[8 + i % 2].toObject()["hit_rate"].toDouble() >= runs[i].toObject()["hit_rate"].toDouble());

        // The lookahead predictor is measured against the router and beats
        // uniform guessing (2 of 8).
        const Run p = cli({"simulate", trace, "--policy", "lru", "--slots", "50%", "--predictor", "none,lookahead", "--json"});
        QCOMPARE(p.code, 0);
        const QJsonArray pr = QJsonDocument::fromJson(p.out.toUtf8()).object()["runs"].toArray();
        QCOMPARE(pr.size(), 2);
        QVERIFY(pr[1].toObject()["precision"].toDouble() > 0.25);
        QVERIFY(pr[1].toObject()["prefetch_loads"].toInt() > 0);
        QVERIFY(pr[1].toObject()["hit_rate"].toDouble() > pr[0].toObject()["hit_rate"].toDouble());

        // seed-125b: DESIGN.md §1's figures, the budget's 260 of 1280 slots,
        // per-token loads scaled by (20 x 2) / (4 x 2).
        const Run seed = cli({"simulate", trace, "--profile", "seed-125b", "--policy", "lru", "--json"});
        QCOMPARE(seed.code, 0);
        const QJsonObject so = QJsonDocument::fromJson(seed.out.toUtf8()).object();
        QCOMPARE(so["scale"].toDouble(), 5.0);
        QCOMPARE(so["profile"].toObject()["budget_slots"].toInt(), 260);
        QVERIFY(qAbs(so["hit_rate_needed_overlap"].toDouble() - 0.935) < 1e-6);
        const QJsonObject sr = so["runs"].toArray()[0].toObject();
        QCOMPARE(sr["slots"].toInt(), 260);
        QCOMPARE(sr["trace_slots"].toInt(), 7);  // 260 / 1280 x 32 = 6.5, rounded
        QVERIFY(qAbs(sr["misses_per_token"].toDouble() / sr["trace_misses_per_token"].toDouble() - 5.0) < 1e-4);
        QVERIFY(sr["tok_s"].toDouble() > 0.0 && sr["tok_s"].toDouble() < so["max_tok_s"].toDouble());
        const Run table = cli({"simulate", trace, "--profile", "seed-125b", "--set", "link-gbs=32"});
        QCOMPARE(table.code, 0);
        QVERIFY2(table.out.contains("link: 32 GB/s") && table.out.contains("260/1280 -> 7/32"), qPrintable(table.out));
        const Run list = cli({"simulate", "--list-profiles"});
        QCOMPARE(list.code, 0);
        QVERIFY(list.out.contains("seed-125b") && list.out.contains("936 GB/s"));
    }

    // trace runs in the engine: under a quarter-size expert cache it writes
    // the same bytes as fully resident (routing is exact), and --trace on
    // eval records several prompts as separate sequences simulate accepts.
    void trace_in_the_engine() {
        STRATA_REQUIRE_FIXTURES();
        QTemporaryDir dir;
        const QString models = strata::test::fixtures_dir() + "/models/";
        const QString model = models + "moe-small-q4_k_m.gguf";
        const QString full = dir.path() + "/full.trace", quarter = dir.path() + "/quarter.trace";
        QCOMPARE(cli({"trace", model, "--prompts", models + "prompts.txt", "--out", full, "--greedy", "6", "--threads", "1"}).code, 0);
        QCOMPARE(cli({"trace", model, "--prompts", models + "prompts.txt", "--out", quarter, "--greedy", "6", "--threads", "1",
                      "--expert-cache-fraction", "0.25", "--policy", "lfu"}).code, 0);
        QFile a(full), b(quarter);
        QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
        const QByteArray ab = a.readAll();
        QVERIFY(ab.size() > 1000);
        QVERIFY2(ab == b.readAll(), "the trace under a 25% cache differs from the resident one");
        const Run s = cli({"simulate", full, "--policy", "lru", "--slots", "50%", "--json"});
        QCOMPARE(s.code, 0);
        const QJsonObject t = QJsonDocument::fromJson(s.out.toUtf8()).object()["trace"].toObject();
        QCOMPARE(t["sequences"].toInt(), 4);
        QCOMPARE(t["decode_tokens"].toInt(), 4 * 6);

        const QString ev = dir.path() + "/eval.trace";
        const Run e = cli({"eval", model, "--prompts", models + "prompts.txt", "--logits", dir.path() + "/l.f32", "--greedy", "3",
                           "--threads", "1", "--trace", ev});
        QCOMPARE(e.code, 0);
        const Run es = cli({"simulate", ev, "--policy", "lru", "--slots", "50%", "--json"});
        QVERIFY2(es.code == 0, qPrintable(es.err));
        QCOMPARE(QJsonDocument::fromJson(es.out.toUtf8()).object()["trace"].toObject()["sequences"].toInt(), 4);
        expect_one_line_error(cli({"trace", model, "--prompts", models + "prompts.txt", "--out", full, "--trace", ev}), 2,
                              "writes its trace to --out");
        // The serving benchmark traces one request after another, and refuses
        // to trace requests decoded side by side.
        const QString served = dir.path() + "/served.trace";
        const Run sb = cli({"bench", model, "--concurrency", "1", "--requests", "2", "--prompt-len", "8", "--gen-len", "4",
                           "--threads", "1", "--json", "--trace", served});
        QVERIFY2(sb.code == 0, qPrintable(sb.err));
        const Run bs = cli({"simulate", served, "--policy", "lru", "--slots", "50%", "--json"});
        QVERIFY2(bs.code == 0, qPrintable(bs.err));
        QVERIFY(QJsonDocument::fromJson(bs.out.toUtf8()).object()["trace"].toObject()["sequences"].toInt() >= 2);
        expect_one_line_error(cli({"bench", model, "--concurrency", "2", "--trace", served}), 2,
                              "--trace records one sequence at a time");
    }

    void trace_and_simulate_errors() {
        QTemporaryDir dir;
        QFile junk(dir.path() + "/junk.trace");
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write(QByteArray(100, 'x'));
        junk.close();
        expect_one_line_error(cli({"simulate"}), 2, "missing TRACE");
        expect_one_line_error(cli({"simulate", junk.fileName()}), 1, "not a routing trace");
        expect_one_line_error(cli({"simulate", dir.path() + "/none.trace"}), 1, "cannot open");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--policy", "mru"}), 2, "unknown policy 'mru'");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--predictor", "oracle"}), 2, "unknown predictor");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--slots", "150%"}), 2, "more than 100%");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--slots", "lots"}), 2, "is not a count");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--profile", "h100"}), 2, "unknown hardware profile");
        expect_one_line_error(cli({"simulate", junk.fileName(), "--set", "warp=9"}), 2, "unknown profile figure");
        expect_one_line_error(cli({"trace", "x.gguf", "--prompts", "p.txt"}), 2, "missing --out");
        const QString dense = dir.path() + "/dense.gguf";
        QCOMPARE(cli({"make-model", dense, "--layers", "1", "--dim", "64", "--heads", "4", "--kv-heads", "2",
                      "--experts", "0"})
                     .code,
                 0);
        QFile prompts(dir.path() + "/p.txt");
        QVERIFY(prompts.open(QIODevice::WriteOnly));
        prompts.write("hello\n");
        prompts.close();
        expect_one_line_error(cli({"trace", dense, "--prompts", prompts.fileName(), "--out", dir.path() + "/d.trace"}), 1,
                              "not a mixture-of-experts model");
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
