// ChatController with the demo model, offscreen: an exchange streamed into
// the message model and committed to the store, stop mid-answer, regenerate,
// edit and resend, KV cache reuse across turns, live settings, and clear
// failures for a missing or corrupt model file.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include "chat_controller.h"
#include "engine_worker.h"
#include "grammar/grammar.h"
#include "settings_model.h"
#include "telemetry_model.h"

using namespace strata::desktop;

namespace {

const QString kDemo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");

}  // namespace

class TestAppController : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::unique_ptr<QSettings> qs_;
    std::unique_ptr<SettingsModel> settings_;
    std::unique_ptr<TelemetryModel> telemetry_;
    std::unique_ptr<ChatController> chat_;

    bool load(const QString& path) {
        QSignalSpy ok(chat_.get(), &ChatController::modelLoaded);
        QSignalSpy bad(chat_.get(), &ChatController::modelLoadFailed);
        chat_->loadModel(QUrl::fromLocalFile(path));
        QDeadlineTimer deadline(60000);
        while (ok.count() + bad.count() == 0 && !deadline.hasExpired()) QTest::qWait(20);
        return ok.count() == 1;
    }

    // Runs strata-cli make-model; returns the path or "" on failure.
    QString make_model(const QString& name, const QStringList& extra) {
        const QString out = dir_.filePath(name);
        QProcess p;
        p.start(QStringLiteral(STRATA_CLI_BINARY),
                QStringList{QStringLiteral("make-model"), out, QStringLiteral("--layers"), QStringLiteral("1"),
                            QStringLiteral("--dim"), QStringLiteral("64"), QStringLiteral("--heads"), QStringLiteral("4"),
                            QStringLiteral("--kv-heads"), QStringLiteral("2"), QStringLiteral("--experts"), QStringLiteral("4"),
                            QStringLiteral("--expert-ff"), QStringLiteral("64"), QStringLiteral("--ctx"), QStringLiteral("512")} +
                    extra);
        if (!p.waitForFinished(60000) || p.exitCode() != 0) {
            qWarning() << p.readAllStandardError();
            return {};
        }
        return out;
    }

    // Waits until no conversation is generating.
    bool drain(int ms = 60000) {
        QDeadlineTimer deadline(ms);
        while (chat_->anyGenerating() && !deadline.hasExpired()) QTest::qWait(10);
        return !chat_->anyGenerating();
    }

    // Sends and waits for the answer; returns its finish reason.
    QString exchange(const QString& text) {
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QSignalSpy failed(chat_.get(), &ChatController::answerFailed);
        if (!chat_->send(text)) return QStringLiteral("not sent: ") + chat_->lastError();
        QDeadlineTimer deadline(60000);
        while (done.isEmpty() && failed.isEmpty() && !deadline.hasExpired()) QTest::qWait(10);
        if (!failed.isEmpty()) return QStringLiteral("failed: ") + failed.takeFirst().at(1).toString();
        if (done.isEmpty()) return QStringLiteral("timeout");
        return done.takeFirst().at(1).toString();
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        if (!QFile::exists(kDemo)) QSKIP("the demo model is not in resources/models");
        qs_ = std::make_unique<QSettings>(dir_.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
        settings_ = std::make_unique<SettingsModel>(qs_.get());
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 0.0), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("repeat_penalty"), 1.0), QString());
        // Room in the shared KV cache for several conversations at once.
        QCOMPARE(settings_->setValue(QStringLiteral("kv_tokens"), 1024), QString());
        telemetry_ = std::make_unique<TelemetryModel>();
        chat_ = std::make_unique<ChatController>(dir_.filePath(QStringLiteral("chats.sqlite")), settings_.get(), telemetry_.get());
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QVERIFY(!chat_->send(QStringLiteral("too early")));
        QVERIFY(chat_->lastError().contains(QStringLiteral("No model")));
        QVERIFY(load(kDemo));
        QCOMPARE(chat_->modelState(), QStringLiteral("ready"));
        QCOMPARE(chat_->modelInfo()[QStringLiteral("experts")].toLongLong(), 32);
        // The demo model has no chat template: the app says so.
        QCOMPARE(chat_->modelInfo()[QStringLiteral("templateFallback")].toBool(), true);
        QVERIFY(chat_->modelInfo()[QStringLiteral("templateNote")].toString().contains(QStringLiteral("plain transcript")));
        QVERIFY(chat_->recentModels().contains(kDemo));
        QTRY_VERIFY(telemetry_->hasData());
    }

    // A long prompt says how far it has been read before the first token
    // (the answer's promptDone/promptTotal), and nothing once the answer begins.
    void a_long_prompt_reports_its_reading() {
        const qint64 conversation = chat_->newConversation();
        QString prompt;
        while (prompt.size() < 2400) prompt += QStringLiteral("And the LORD spake unto Moses, saying, Speak unto the children of Israel. ");
        QList<QPair<qint64, qint64>> seen;
        MessageListModel* m = chat_->messages();
        QMetaObject::Connection c = connect(m, &QAbstractItemModel::dataChanged, this,
                                            [&](const QModelIndex& from, const QModelIndex&, const QList<int>& roles) {
                                                if (!roles.contains(MessageListModel::PromptTotalRole)) return;
                                                const QVariantMap row = m->get(from.row());
                                                seen << qMakePair(row[QStringLiteral("promptDone")].toLongLong(),
                                                                  row[QStringLiteral("promptTotal")].toLongLong());
                                            });
        QCOMPARE(exchange(prompt), QStringLiteral("length"));
        disconnect(c);
        QVERIFY2(seen.size() >= 2, qPrintable(QString::number(seen.size())));
        QVERIFY(seen.first().second > 2 * 64);                       // the prompt's tokens: more than two steps
        QVERIFY(seen.first().first < seen.first().second);           // part of it read
        QCOMPARE(seen.last(), qMakePair(qint64(0), qint64(0)));      // cleared when the answer began
        QCOMPARE(m->get(m->rowCount() - 1)[QStringLiteral("promptTotal")].toLongLong(), qint64(0));
        chat_->deleteConversation(conversation);  // the next tests start with none
    }

    void send_streams_and_stores_the_answer() {
        QSignalSpy streamed(chat_.get(), &ChatController::streamed);
        QCOMPARE(exchange(QStringLiteral("And God said")), QStringLiteral("length"));
        QVERIFY(streamed.count() > 0);
        QVERIFY(!chat_->generating());
        const qint64 conv = chat_->currentConversationId();
        QVERIFY(conv != 0);
        QCOMPARE(chat_->currentTitle(), QStringLiteral("And God said"));

        MessageListModel* m = chat_->messages();
        QCOMPARE(m->rowCount(), 2);
        QCOMPARE(m->get(0)[QStringLiteral("role")].toString(), QStringLiteral("user"));
        const QVariantMap a = m->get(1);
        QCOMPARE(a[QStringLiteral("role")].toString(), QStringLiteral("assistant"));
        QVERIFY(!a[QStringLiteral("content")].toString().isEmpty());
        QCOMPARE(a[QStringLiteral("partial")].toBool(), false);
        QCOMPARE(a[QStringLiteral("tokens")].toLongLong(), 24);
        QVERIFY(a[QStringLiteral("statsText")].toString().contains(QStringLiteral("tok/s")));

        const QList<strata::app::Message> stored = chat_->store().messages(conv);
        QCOMPARE(stored.size(), 2);
        QCOMPARE(stored[1].content, a[QStringLiteral("content")].toString());
        QCOMPARE(stored[1].partial, false);
        QCOMPARE(stored[1].stats.tokens, 24);
        QCOMPARE(stored[1].stats.finish, QStringLiteral("length"));
        QVERIFY(stored[1].stats.tok_s > 0);
        QVERIFY(stored[1].stats.ttft_ms > 0);
        QCOMPARE(stored[1].stats.model, QStringLiteral("strata-demo-moe.gguf"));

        // The panels got the engine's figures.
        QVERIFY(telemetry_->tokensProcessed() > 0);
        QVERIFY(!telemetry_->tokensPerSecondHistory().isEmpty());
        QCOMPARE(chat_->conversations()->rowCount(), 1);
    }

    void second_turn_reuses_the_cache_and_is_deterministic() {
        QVariantMap stats;
        QObject scope;  // the connection ends with this test, passed or not
        // A first turn longer than one KV block (16 tokens): its blocks stay
        // cached after it finishes and the scheduler's prefix sharing attaches them.
        QVERIFY(chat_->newConversation() != 0);
        QCOMPARE(exchange(QStringLiteral("And it came to pass in those days, that there went out a decree from Caesar Augustus")),
                 QStringLiteral("length"));
        connect(chat_->worker(), &EngineWorker::finished, &scope, [&](quint64, const QVariantMap& s) { stats = s; });
        QCOMPARE(exchange(QStringLiteral("And the earth")), QStringLiteral("length"));
        QCOMPARE(chat_->messages()->rowCount(), 4);
        // The first turn's tokens stayed in the KV cache.
        QTRY_VERIFY(!stats.isEmpty());
        // ... and the answer's stats say so ("N cached").
        QVERIFY2(chat_->messages()->get(3)[QStringLiteral("statsText")].toString().contains(QStringLiteral("cached")),
                 qPrintable(chat_->messages()->get(3)[QStringLiteral("statsText")].toString()));
        QVERIFY2(stats[QStringLiteral("reusedTokens")].toLongLong() > 0, qPrintable(QString::number(stats[QStringLiteral("reusedTokens")].toLongLong())));
        QVERIFY(stats[QStringLiteral("reusedTokens")].toLongLong() < stats[QStringLiteral("promptTokens")].toLongLong());
        const QString first = chat_->messages()->get(3)[QStringLiteral("content")].toString();
        // Regenerate: greedy decoding gives the same answer again, in place of the old one.
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QVERIFY(chat_->regenerate());
        QVERIFY(chat_->generating());
        QVERIFY(!chat_->regenerate());  // not while generating
        QVERIFY(done.wait(60000));
        QCOMPARE(chat_->messages()->rowCount(), 4);
        QCOMPARE(chat_->messages()->get(3)[QStringLiteral("content")].toString(), first);
        QCOMPARE(chat_->store().messages(chat_->currentConversationId()).size(), 4);
    }

    void edit_and_resend_replaces_later_messages() {
        const qint64 user = chat_->messages()->get(2)[QStringLiteral("messageId")].toLongLong();
        const qint64 answer = chat_->messages()->get(1)[QStringLiteral("messageId")].toLongLong();
        QVERIFY(!chat_->editAndResend(answer, QStringLiteral("x")));  // not a user message
        QVERIFY(!chat_->editAndResend(user, QStringLiteral("   ")));
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        QVERIFY(chat_->editAndResend(user, QStringLiteral("And the waters")));
        QVERIFY(done.wait(60000));
        QCOMPARE(chat_->messages()->rowCount(), 4);
        QCOMPARE(chat_->messages()->get(2)[QStringLiteral("content")].toString(), QStringLiteral("And the waters"));
        const auto stored = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(stored.size(), 4);
        QCOMPARE(stored[2].content, QStringLiteral("And the waters"));
        QVERIFY(!stored[3].content.isEmpty());
    }

    void stop_keeps_the_partial_answer() {
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 200), QString());
        QVERIFY(chat_->newConversation() != 0);
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        // Stop as soon as the first text arrives.
        {
            QObject scope;
            connect(chat_.get(), &ChatController::streamed, &scope, [this] { chat_->stop(); });
            QVERIFY(chat_->send(QStringLiteral("In the beginning")));
            QVERIFY(done.wait(60000));
        }
        QCOMPARE(done.first().at(1).toString(), QStringLiteral("cancelled"));
        const QVariantMap a = chat_->messages()->get(1);
        QVERIFY(!a[QStringLiteral("content")].toString().isEmpty());
        QCOMPARE(a[QStringLiteral("partial")].toBool(), true);
        QCOMPARE(a[QStringLiteral("finish")].toString(), QStringLiteral("cancelled"));
        QVERIFY(a[QStringLiteral("tokens")].toLongLong() < 200);
        const auto stored = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(stored.size(), 2);
        QCOMPARE(stored[1].partial, true);
        QCOMPARE(stored[1].stats.finish, QStringLiteral("cancelled"));
        QCOMPARE(stored[1].content, a[QStringLiteral("content")].toString());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void two_conversations_generate_at_once() {
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 40), QString());
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        const qint64 a = chat_->newConversation();
        QVERIFY(chat_->send(QStringLiteral("And Moses said unto the people")));
        QVERIFY(chat_->generating());
        QVERIFY(!chat_->send(QStringLiteral("twice")));  // one answer per conversation
        const qint64 b = chat_->newConversation();
        QVERIFY(b != a);
        QVERIFY(!chat_->generating());  // this conversation is free
        QVERIFY(chat_->send(QStringLiteral("Blessed is the man")));
        QVERIFY(chat_->anyGenerating());
        QCOMPARE(chat_->generatingConversations().size(), 2);
        QVERIFY(chat_->isGenerating(a) && chat_->isGenerating(b));
        // The conversation list marks both.
        ConversationListModel* list = chat_->conversations();
        int marked = 0;
        for (int r = 0; r < list->rowCount(); ++r)
            marked += list->data(list->index(r), ConversationListModel::GeneratingRole).toBool() ? 1 : 0;
        QCOMPARE(marked, 2);
        QVERIFY(drain());
        QCOMPARE(done.count(), 2);
        for (qint64 id : {a, b}) {
            const auto stored = chat_->store().messages(id);
            QCOMPARE(stored.size(), 2);
            QCOMPARE(stored[1].partial, false);
            QCOMPARE(stored[1].stats.tokens, 40);
            QVERIFY(!stored[1].content.isEmpty());
        }
        // Each answer is the one it gets alone (greedy): regenerate A by itself.
        const QString together = chat_->store().messages(a)[1].content;
        chat_->selectConversation(a);
        QVERIFY(chat_->regenerate());
        QVERIFY(drain());
        QCOMPARE(chat_->store().messages(a)[1].content, together);
    }

    void stop_one_while_the_other_continues() {
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 60), QString());
        QSignalSpy done(chat_.get(), &ChatController::answerFinished);
        const qint64 a = chat_->newConversation();
        QVERIFY(chat_->send(QStringLiteral("And Jacob went on his way")));
        const qint64 b = chat_->newConversation();
        QVERIFY(chat_->send(QStringLiteral("The LORD is my shepherd")));
        chat_->stopConversation(a);
        QVERIFY(drain());
        QCOMPARE(done.count(), 2);
        const auto sa = chat_->store().messages(a);
        const auto sb = chat_->store().messages(b);
        QCOMPARE(sa[1].stats.finish, QStringLiteral("cancelled"));
        QCOMPARE(sa[1].partial, true);
        QVERIFY(sa[1].stats.tokens < 60);
        QCOMPARE(sb[1].stats.finish, QStringLiteral("length"));
        QCOMPARE(sb[1].stats.tokens, 60);
        QCOMPARE(sb[1].partial, false);
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void max_batch_applies() {
        // Long enough that the second request arrives while the first still streams, even on a busy host.
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 160), QString());
        // Order of events per request id, seen from the worker's signals.
        auto run_two = [&](QList<QString>* events) {
            QObject scope;
            connect(chat_->worker(), &EngineWorker::token, &scope, [events](quint64 id, const QString&) {
                const QString e = QStringLiteral("t%1").arg(id);
                if (!events->contains(e)) events->append(e);
            });
            connect(chat_->worker(), &EngineWorker::finished, &scope,
                    [events](quint64 id, const QVariantMap&) { events->append(QStringLiteral("f%1").arg(id)); });
            chat_->newConversation();
            chat_->send(QStringLiteral("In the beginning God created"));
            chat_->newConversation();
            chat_->send(QStringLiteral("Now the serpent was more subtil"));
            return drain();
        };
        QCOMPARE(settings_->setValue(QStringLiteral("max_batch"), 1), QString());
        QList<QString> one;
        QVERIFY(run_two(&one));
        // One at a time: the second starts after the first has finished.
        QCOMPARE(one.size(), 4);
        QVERIFY2(one[1].startsWith(QLatin1Char('f')), qPrintable(one.join(QLatin1Char(' '))));
        QCOMPARE(settings_->setValue(QStringLiteral("max_batch"), 4), QString());
        QList<QString> four;
        QVERIFY(run_two(&four));
        // Together: both stream before either finishes.
        QVERIFY2(four[0].startsWith(QLatin1Char('t')) && four[1].startsWith(QLatin1Char('t')), qPrintable(four.join(QLatin1Char(' '))));
        QVERIFY(!settings_->setValue(QStringLiteral("max_batch"), 0).isEmpty());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void kv_and_speculative_settings_are_validated() {
        QVERIFY(settings_->setValue(QStringLiteral("kv_type"), QStringLiteral("q4")).contains(QStringLiteral("not one of")));
        QVERIFY(!settings_->setValue(QStringLiteral("kv_tokens"), -16).isEmpty());
        QVERIFY(!settings_->setValue(QStringLiteral("spec_k"), 0).isEmpty());
        // A draft file mode needs the file.
        const QString why = settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("draft file"));
        QVERIFY2(why.contains(QStringLiteral("Draft model file")), qPrintable(why));
        QCOMPARE(settings_->value(QStringLiteral("spec_draft")).toString(), QStringLiteral("off"));
        QVERIFY(settings_->setValue(QStringLiteral("spec_draft_file"), dir_.filePath(QStringLiteral("none.gguf")))
                    .contains(QStringLiteral("no such file")));
        // Not a GGUF.
        const QString junk = dir_.filePath(QStringLiteral("draft-junk.gguf"));
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a model");
        f.close();
        QVERIFY(settings_->setValue(QStringLiteral("spec_draft_file"), junk).contains(QStringLiteral("GGUF")));
        // Another vocabulary: refused, saying so.
        const QString other = make_model(QStringLiteral("other-vocab.gguf"), {QStringLiteral("--vocab"), QStringLiteral("512")});
        QVERIFY(!other.isEmpty());
        const QString mismatch = settings_->setValue(QStringLiteral("spec_draft_file"), other);
        QVERIFY2(mismatch.contains(QStringLiteral("vocabulary")), qPrintable(mismatch));
        QCOMPARE(settings_->error(QStringLiteral("spec_draft_file")), mismatch);
        QVERIFY(settings_->value(QStringLiteral("spec_draft_file")).toString().isEmpty());
        // The same vocabulary: accepted.
        const QString same = make_model(QStringLiteral("same-vocab.gguf"), {QStringLiteral("--vocab-from"), kDemo});
        QVERIFY(!same.isEmpty());
        QCOMPARE(settings_->setValue(QStringLiteral("spec_draft_file"), same), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("draft file")), QString());
        QVERIFY(chat_->speculative());
        // Emptying the file under "draft file" is refused.
        QVERIFY(!settings_->setValue(QStringLiteral("spec_draft_file"), QString()).isEmpty());
        QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("off")), QString());
        QVERIFY(!chat_->speculative());
    }

    void speculative_answer_equals_the_plain_answer() {
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 32), QString());
        QVERIFY(chat_->newConversation() != 0);
        QCOMPARE(exchange(QStringLiteral("And the LORD spake unto Moses, saying")), QStringLiteral("length"));
        const QString plain = chat_->messages()->get(1)[QStringLiteral("content")].toString();
        for (const QString& mode : {QStringLiteral("self: fewer experts"), QStringLiteral("self: fewer layers"), QStringLiteral("draft file")}) {
            QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), mode), QString());
            QSignalSpy done(chat_.get(), &ChatController::answerFinished);
            QVERIFY(chat_->regenerate());
            QVERIFY(done.wait(60000));
            QCOMPARE(done.first().at(1).toString(), QStringLiteral("length"));
            const QVariantMap a = chat_->messages()->get(1);
            QCOMPARE(a[QStringLiteral("content")].toString(), plain);
            QVERIFY2(a[QStringLiteral("statsText")].toString().contains(QStringLiteral("accepted")),
                     qPrintable(a[QStringLiteral("statsText")].toString()));
            const auto stored = chat_->store().messages(chat_->currentConversationId());
            QVERIFY(stored[1].stats.spec_acceptance >= 0 && stored[1].stats.spec_acceptance <= 1);
            // The regenerated prompt's full KV blocks were cached by the run before.
            QVERIFY2(stored[1].stats.cached_tokens >= 16 && stored[1].stats.cached_tokens < stored[1].stats.prompt_tokens,
                     qPrintable(QString("%1 of %2").arg(stored[1].stats.cached_tokens).arg(stored[1].stats.prompt_tokens)));
        }
        // The MTP draft on a file without an MTP block: the answer fails saying so.
        {
            QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("self: MTP block")), QString());
            QSignalSpy failed(chat_.get(), &ChatController::answerFailed);
            QVERIFY(chat_->regenerate());
            QVERIFY(failed.wait(60000));
            QVERIFY2(failed.first().at(1).toString().contains(QStringLiteral("no NextN/MTP block")),
                     qPrintable(failed.first().at(1).toString()));
            QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("self: fewer layers")), QString());
            QSignalSpy done(chat_.get(), &ChatController::answerFinished);
            QVERIFY(chat_->regenerate());
            QVERIFY(done.wait(60000));
            QCOMPARE(chat_->messages()->get(1)[QStringLiteral("content")].toString(), plain);
        }
        // One at a time: a second conversation waits for the first, and both complete.
        const qint64 a = chat_->currentConversationId();
        QVERIFY(chat_->regenerate());
        chat_->newConversation();
        QVERIFY(chat_->send(QStringLiteral("Blessed is the man")));
        QVERIFY(drain());
        QCOMPARE(chat_->store().messages(a)[1].content, plain);
        QCOMPARE(chat_->store().messages(chat_->currentConversationId())[1].stats.finish, QStringLiteral("length"));
        QCOMPARE(settings_->setValue(QStringLiteral("spec_draft"), QStringLiteral("off")), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void calibration_writes_a_pin_file_and_can_be_cancelled() {
        QVERIFY(QFileInfo::exists(chat_->defaultPromptsFile()));
        // Cancelled at once: the pin file is unchanged.
        const QVariant before = settings_->value(QStringLiteral("pin_file"));
        {
            QSignalSpy fin(chat_.get(), &ChatController::calibrationFinished);
            QVERIFY(chat_->calibrate());
            QCOMPARE(chat_->calibrationState(), QStringLiteral("running"));
            chat_->cancelCalibration();
            QVERIFY(fin.wait(60000));
            QCOMPARE(fin.first().at(0).toBool(), false);
            QCOMPARE(chat_->calibrationState(), QStringLiteral("cancelled"));
            QCOMPARE(settings_->value(QStringLiteral("pin_file")), before);
        }
        // A missing prompts file is refused up front.
        QVERIFY(!chat_->calibrate(QUrl::fromLocalFile(dir_.filePath(QStringLiteral("no-prompts.txt")))));
        QVERIFY(chat_->lastError().contains(QStringLiteral("no such file")));
        // A whole run: written under the data dir and made the pin file, which the engine takes.
        QSignalSpy fin(chat_.get(), &ChatController::calibrationFinished);
        QVERIFY(chat_->calibrate());
        QVERIFY(fin.wait(120000));
        QVERIFY2(fin.first().at(0).toBool(), qPrintable(chat_->calibrationMessage()));
        const QString pin = settings_->value(QStringLiteral("pin_file")).toString();
        QVERIFY(pin.startsWith(dir_.path()));
        QVERIFY(QFile::exists(pin));
        QTRY_VERIFY(telemetry_->pinnedExperts() > 0);
        QVERIFY(settings_->error(QStringLiteral("pin_file")).isEmpty());
        // Still answers, with the pins in force.
        QVERIFY(chat_->newConversation() != 0);
        QCOMPARE(exchange(QStringLiteral("Blessed are")), QStringLiteral("length"));
        QCOMPARE(settings_->setValue(QStringLiteral("pin_file"), QString()), QString());
    }

    // The demo model's 2048-token context holds a real conversation.
    void four_exchanges_fit_the_context() {
        QVERIFY(chat_->newConversation() != 0);
        chat_->clearNotice();
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 96), QString());
        const char* turns[] = {"Who was Moses?", "And what did the LORD say unto him?", "Where did the children of Israel go?",
                               "And what happened in the wilderness?"};
        for (const char* t : turns) QVERIFY(exchange(QString::fromLatin1(t)) != QStringLiteral("context"));
        QVERIFY2(!chat_->notice().contains(QStringLiteral("did not fit")), qPrintable(chat_->notice()));
        QCOMPARE(chat_->messages()->rowCount(), 8);
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
    }

    void long_conversations_drop_the_oldest_turns() {
        // With a 256-token context (the setting), keep talking past it.
        QCOMPARE(settings_->setValue(QStringLiteral("n_ctx"), 256), QString());
        QVERIFY(load(kDemo));
        QCOMPARE(chat_->modelInfo()[QStringLiteral("context")].toLongLong(), 256);
        QVERIFY(chat_->newConversation() != 0);
        for (int i = 0; i < 8; ++i) QCOMPARE(exchange(QStringLiteral("And it came to pass after these things, that God did tempt Abraham")), QStringLiteral("length"));
        QVERIFY2(chat_->notice().contains(QStringLiteral("did not fit")), qPrintable(chat_->notice()));
        QCOMPARE(chat_->messages()->rowCount(), 16);
    }

    void live_settings_reach_the_engine() {
        QSignalSpy updated(telemetry_.get(), &TelemetryModel::updated);
        QCOMPARE(settings_->setValue(QStringLiteral("expert_cache_fraction"), 0.25), QString());
        QTRY_COMPARE(telemetry_->expertSlots(), 6 * 32 / 4);
        QCOMPARE(settings_->setValue(QStringLiteral("policy"), QStringLiteral("lfu")), QString());
        QTRY_COMPARE(telemetry_->policy(), QStringLiteral("lfu"));
        QVERIFY(!chat_->settingsNeedReload());
        QCOMPARE(settings_->setValue(QStringLiteral("n_ctx"), 128), QString());
        QVERIFY(chat_->settingsNeedReload());
        QVERIFY(load(kDemo));
        QCOMPARE(chat_->modelInfo()[QStringLiteral("context")].toLongLong(), 128);
        QVERIFY(!chat_->settingsNeedReload());
    }

    // However fast the engine streams, the view is updated at most every
    // ChatController::kFlushMs (the worker batches its tokens too: either
    // alone keeps this bound), and the answer shown is the whole answer.
    void streamed_text_reaches_the_view_at_most_20_times_a_second() {
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 96), QString());
        chat_->newConversation();
        QSignalSpy streamed(chat_.get(), &ChatController::streamed);
        QSignalSpy tokens(chat_->worker(), &EngineWorker::token);
        QElapsedTimer t;
        t.start();
        const QString finish = exchange(QStringLiteral("In the beginning"));
        const qint64 ms = t.elapsed();
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
        QCOMPARE(finish, QStringLiteral("length"));
        QVERIFY2(streamed.count() <= 2 + ms / ChatController::kFlushMs,
                 qPrintable(QStringLiteral("%1 view updates in %2 ms").arg(streamed.count()).arg(ms)));
        QString all;
        for (const QList<QVariant>& tok : tokens) all += tok.at(1).toString();
        const MessageListModel* m = chat_->messages();
        QCOMPARE(m->get(m->rowCount() - 1)[QStringLiteral("content")].toString(), all);
        chat_->newConversation();  // the next tests start afresh
    }

    void plan_before_loading() {
        chat_->planModel(QUrl::fromLocalFile(kDemo));
        QTRY_VERIFY_WITH_TIMEOUT(chat_->planState() != QLatin1String("planning"), 30000);
        QCOMPARE(chat_->planState(), QStringLiteral("ready"));
        const QVariantMap p = chat_->plan();
        QCOMPARE(p[QStringLiteral("fits")].toBool(), true);
        QVERIFY(p[QStringLiteral("rows")].toList().size() >= 5);
        QCOMPARE(p[QStringLiteral("expertsTotal")].toLongLong(), 6 * 32);  // 6 MoE layers x 32 experts

        // A budget below the resident minimum: does not fit, and says why.
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QStringLiteral("8M")), QString());
        chat_->planModel(QUrl::fromLocalFile(kDemo));
        QTRY_VERIFY_WITH_TIMEOUT(chat_->planState() != QLatin1String("planning"), 30000);
        QCOMPARE(chat_->plan()[QStringLiteral("fits")].toBool(), false);
        QVERIFY(chat_->plan()[QStringLiteral("reason")].toString().contains(QStringLiteral("does not fit")));
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QString()), QString());
    }

    // The plan for a reload or a switch counts the RAM the loaded model gives
    // back when it unloads (issue 45: the plan promised a 33% cache, the
    // reload got 63%).
    void plan_counts_the_memory_the_loaded_model_gives_back() {
        QVERIFY(load(kDemo));
        QTRY_VERIFY(chat_->worker()->ram_held() > 0);
        const double held = double(chat_->worker()->ram_held());
        chat_->planModel(QUrl::fromLocalFile(kDemo));
        QTRY_VERIFY_WITH_TIMEOUT(chat_->planState() != QLatin1String("planning"), 30000);
        const QVariantMap p = chat_->plan();
        QCOMPARE(p[QStringLiteral("fastReturned")].toDouble(), held);
        QVERIFY(p[QStringLiteral("fastAvailable")].toDouble() >= held);
        QVERIFY2(p[QStringLiteral("reason")].toString().contains(QStringLiteral("held by the loaded model")),
                 qPrintable(p[QStringLiteral("reason")].toString()));
        // Nothing loaded: nothing to give back.
        chat_->unloadModel();
        QTRY_COMPARE(chat_->worker()->ram_held(), uint64_t{0});
        chat_->planModel(QUrl::fromLocalFile(kDemo));
        QTRY_VERIFY_WITH_TIMEOUT(chat_->planState() != QLatin1String("planning"), 30000);
        QCOMPARE(chat_->plan()[QStringLiteral("fastReturned")].toDouble(), 0.0);
        QVERIFY(load(kDemo));
    }

    // A context above what the model was trained on is refused when typed
    // (issue 45: 1,000,000 was accepted until the next plan).
    void context_above_the_training_context_is_refused() {
        QVERIFY(load(kDemo));
        const qlonglong trained = chat_->modelInfo()[QStringLiteral("contextTrain")].toLongLong();
        QVERIFY(trained > 0);
        const QString before = settings_->value(QStringLiteral("n_ctx")).toString();
        const QString err = settings_->setValue(QStringLiteral("n_ctx"), 1000000);
        QVERIFY2(err.contains(QStringLiteral("trained on (%1 tokens)").arg(trained)) &&
                     err.contains(QStringLiteral("use at most %1").arg(trained)),
                 qPrintable(err));
        QCOMPARE(settings_->value(QStringLiteral("n_ctx")).toString(), before);
        QCOMPARE(settings_->setValue(QStringLiteral("n_ctx"), trained), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("n_ctx"), before), QString());
    }

    // At launch the last model is planned first and loads by itself only when
    // it fits comfortably (issue 45: a 33 GB model took 20.6 of 23.5 GiB under
    // a green "Fits"); otherwise the start screen says why.
    void launch_loads_the_last_model_only_when_it_fits_comfortably() {
        const double GiB = 1073741824.0;
        QVariantMap p{{QStringLiteral("path"), QStringLiteral("/m/big.gguf")},
                      {QStringLiteral("fits"), true},
                      {QStringLiteral("fastTotal"), 20.6 * GiB},
                      {QStringLiteral("expertSlots"), 2000},
                      {QStringLiteral("expertsTotal"), 6144}};
        const QString why = ChatController::launch_verdict(p, uint64_t(23.5 * GiB));
        QVERIFY2(why.contains(QStringLiteral("big.gguf was not loaded at launch")) && why.contains(QStringLiteral("(88%)")) &&
                     why.contains(QStringLiteral("stream from disk")) && why.contains(QStringLiteral("Load it anyway")),
                 qPrintable(why));
        p[QStringLiteral("fastTotal")] = 4 * GiB;
        QCOMPARE(ChatController::launch_verdict(p, uint64_t(23.5 * GiB)), QString());
        QCOMPARE(ChatController::launch_verdict(p, 0), QString());  // what is free unknown: the plan's word
        p[QStringLiteral("fits")] = false;
        p[QStringLiteral("reason")] = QStringLiteral("does not fit: too big");
        QVERIFY(ChatController::launch_verdict(p, uint64_t(23.5 * GiB)).contains(QStringLiteral("does not fit: too big")));

        // The demo model is small: it loads by itself.
        chat_->unloadModel();
        QSignalSpy ok(chat_.get(), &ChatController::modelLoaded);
        chat_->loadAtLaunch(QUrl::fromLocalFile(kDemo));
        QTRY_VERIFY_WITH_TIMEOUT(ok.count() == 1, 60000);
        QVERIFY(chat_->launch().isEmpty());
        // One whose plan does not fit stays unloaded, and the start screen says why.
        chat_->unloadModel();
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QStringLiteral("8M")), QString());
        chat_->loadAtLaunch(QUrl::fromLocalFile(kDemo));
        QTRY_COMPARE_WITH_TIMEOUT(chat_->launch()[QStringLiteral("state")].toString(), QStringLiteral("held"), 30000);
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QVERIFY2(chat_->launch()[QStringLiteral("message")].toString().contains(QStringLiteral("does not fit")),
                 qPrintable(chat_->launch()[QStringLiteral("message")].toString()));
        QCOMPARE(chat_->launch()[QStringLiteral("canLoad")].toBool(), false);
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QString()), QString());
        // "Load anyway" loads it, and the notice goes.
        chat_->loadLaunchModel();
        QVERIFY(chat_->launch().isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(chat_->modelState() == QLatin1String("ready"), 60000);
    }

    void bad_files_fail_clearly() {
        QVERIFY(!load(dir_.filePath(QStringLiteral("missing.gguf"))));
        QCOMPARE(chat_->modelState(), QStringLiteral("failed"));
        QVERIFY2(chat_->modelError().contains(QStringLiteral("no such file")), qPrintable(chat_->modelError()));

        const QString junk = dir_.filePath(QStringLiteral("junk.gguf"));
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a GGUF file at all, just text");
        f.close();
        QVERIFY(!load(junk));
        QVERIFY2(chat_->modelError().contains(QStringLiteral("junk.gguf")), qPrintable(chat_->modelError()));
        QVERIFY(!chat_->send(QStringLiteral("anyone?")));

        chat_->planModel(QUrl::fromLocalFile(junk));
        QTRY_VERIFY_WITH_TIMEOUT(chat_->planState() != QLatin1String("planning"), 30000);
        QCOMPARE(chat_->planState(), QStringLiteral("failed"));
        QVERIFY(chat_->planError().contains(QStringLiteral("junk.gguf")));

        // And the app recovers with a good model.
        QVERIFY(load(kDemo));
        QCOMPARE(exchange(QStringLiteral("Blessed are")), QStringLiteral("length"));
    }

    void cancel_loading() {
        QSignalSpy bad(chat_.get(), &ChatController::modelLoadFailed);
        QSignalSpy ok(chat_.get(), &ChatController::modelLoaded);
        chat_->loadModel(QUrl::fromLocalFile(kDemo));
        chat_->cancelModelLoad();
        QTRY_VERIFY_WITH_TIMEOUT(chat_->modelState() != QLatin1String("loading"), 30000);
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QCOMPARE(ok.count(), 0);
        QCOMPARE(bad.count(), 0);  // cancelling is not a failure
        QVERIFY(load(kDemo));
    }

    // Unload frees the model: no answers until the next load, the
    // conversations kept, the panels cleared; the chip names the file and
    // its quantization, not the name stored inside.
    void unload_frees_the_model_and_keeps_the_chats() {
        QVERIFY(load(kDemo));
        QCOMPARE(chat_->modelInfo()[QStringLiteral("name")].toString(), QStringLiteral("strata-demo-moe"));
        QCOMPARE(chat_->modelInfo()[QStringLiteral("quant")].toString(), QStringLiteral("Q8_0"));
        const int conversations = chat_->conversations()->rowCount();
        QCOMPARE(exchange(QStringLiteral("In the beginning")), QStringLiteral("length"));
        QCOMPARE(chat_->conversationModel(), QString());  // its model is the one loaded
        chat_->unloadModel();
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QVERIFY(chat_->notice().contains(QStringLiteral("unloaded")));
        // The conversation remembers its model and offers it while another (or none) is loaded.
        QCOMPARE(chat_->conversationModel(), kDemo);
        QVERIFY(!telemetry_->hasData());
        QVERIFY(!chat_->send(QStringLiteral("anyone?")));
        QVERIFY(chat_->lastError().contains(QStringLiteral("No model")));
        QVERIFY(chat_->conversations()->rowCount() >= conversations);
        chat_->unloadModel();  // twice: nothing to do
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QVERIFY(load(kDemo));
        QCOMPARE(chat_->conversationModel(), QString());
        QCOMPARE(exchange(QStringLiteral("And God said")), QStringLiteral("length"));
    }

    void conversations_rename_search_delete_export() {
        const qint64 id = chat_->newConversation();
        QCOMPARE(exchange(QStringLiteral("Thou shalt")), QStringLiteral("length"));
        chat_->renameConversation(id, QStringLiteral("Commandments"));
        QCOMPARE(chat_->currentTitle(), QStringLiteral("Commandments"));
        chat_->renameConversation(id, QStringLiteral("   "));
        QVERIFY(!chat_->lastError().isEmpty());
        chat_->clearError();
        chat_->setSystemPrompt(QStringLiteral("Speak plainly."));
        QCOMPARE(chat_->systemPrompt(), QStringLiteral("Speak plainly."));
        QCOMPARE(exchange(QStringLiteral("Honour thy")), QStringLiteral("length"));

        chat_->search(QStringLiteral("commandm"));
        QCOMPARE(chat_->conversations()->rowCount(), 1);
        chat_->search(QStringLiteral("no conversation says this"));
        QCOMPARE(chat_->conversations()->rowCount(), 0);
        chat_->search(QString());
        QVERIFY(chat_->conversations()->rowCount() >= 4);

        const QString md = dir_.filePath(QStringLiteral("out.md"));
        QVERIFY(chat_->exportMarkdown(QUrl::fromLocalFile(md)));
        QFile m(md);
        QVERIFY(m.open(QIODevice::ReadOnly));
        const QByteArray text = m.readAll();
        QVERIFY(text.contains("Commandments"));
        QVERIFY(text.contains("Honour thy"));
        QVERIFY(chat_->exportJson(QUrl::fromLocalFile(dir_.filePath(QStringLiteral("out.json")))));
        QVERIFY(!chat_->exportJson(QUrl::fromLocalFile(QStringLiteral("/proc/no/such/dir/out.json"))));
        QVERIFY(chat_->lastError().contains(QStringLiteral("Export")));
        QCOMPARE(chat_->suggestedFileName(QStringLiteral("md")), QStringLiteral("Commandments.md"));
        // The export writes exactly the path given ('#' and spaces included),
        // and the next one starts in that folder, never the app's data folder.
        QVERIFY(QDir(dir_.path()).mkpath(QStringLiteral("my exports")));
        const QString exact = dir_.filePath(QStringLiteral("my exports/notes #1.json"));
        QVERIFY2(chat_->exportToPath(QStringLiteral("json"), exact), qPrintable(chat_->lastError()));
        QVERIFY(QFileInfo(exact).isFile());
        QCOMPARE(QDir(dir_.filePath(QStringLiteral("my exports"))).entryList(QDir::Files), QStringList{QStringLiteral("notes #1.json")});
        QCOMPARE(chat_->exportFolder(), dir_.filePath(QStringLiteral("my exports")));
        QVERIFY(!chat_->exportToPath(QStringLiteral("markdown"), dir_.filePath(QStringLiteral("missing/notes.md"))));
        QVERIFY2(chat_->lastError().contains(QStringLiteral("does not exist")), qPrintable(chat_->lastError()));
        QVERIFY(!chat_->exportToPath(QStringLiteral("markdown"), QStringLiteral("notes.md")));
        QVERIFY2(chat_->lastError().contains(QStringLiteral("not a full path")), qPrintable(chat_->lastError()));
        QVERIFY(!chat_->exportToPath(QStringLiteral("markdown"), dir_.path()));
        QVERIFY2(chat_->lastError().contains(QStringLiteral("is a folder")), qPrintable(chat_->lastError()));

        const int before = chat_->conversations()->rowCount();
        chat_->deleteConversation(id);
        QCOMPARE(chat_->conversations()->rowCount(), before - 1);
        QCOMPARE(chat_->currentConversationId(), 0);
        QCOMPARE(chat_->messages()->rowCount(), 0);
    }

    // Regenerate at T > 0 draws a new seed each time (seed -1, the default), so
    // the answer changes; with a fixed seed it is the same again.
    void regenerate_samples_anew_unless_the_seed_is_fixed() {
        QCOMPARE(settings_->value(QStringLiteral("seed")).toLongLong(), qlonglong(-1));
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 1.0), QString());
        QVERIFY(chat_->newConversation() != 0);
        // Sampled: the answer ends at the token limit or at the end of text, whichever comes first.
        const QString finish = exchange(QStringLiteral("And the LORD said"));
        QVERIFY2(finish == QLatin1String("length") || finish == QLatin1String("end"), qPrintable(finish));
        const auto answer = [&] { return chat_->messages()->get(chat_->messages()->rowCount() - 1)[QStringLiteral("content")].toString(); };
        const auto regenerate = [&] {
            QSignalSpy done(chat_.get(), &ChatController::answerFinished);
            if (!chat_->regenerate()) return QStringLiteral("not regenerated");
            return done.wait(60000) ? answer() : QStringLiteral("timeout");
        };
        QStringList seen = {answer()};
        for (int i = 0; i < 3; ++i) seen << regenerate();
        seen.removeDuplicates();
        QVERIFY2(seen.size() >= 2, "four answers at temperature 1 without a seed were identical");
        QCOMPARE(settings_->setValue(QStringLiteral("seed"), 7), QString());
        const QString a = regenerate(), b = regenerate();
        QCOMPARE(a, b);
        QCOMPARE(settings_->setValue(QStringLiteral("seed"), -1), QString());
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 0.0), QString());
    }

    // Regenerate keeps the answers it replaces: ‹ 1/3 › steps through them,
    // in order, and what is shown is what the conversation continues from.
    void regenerated_answers_are_kept_as_versions() {
        QVERIFY(chat_->newConversation() != 0);
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 1.0), QString());
        exchange(QStringLiteral("In the beginning"));
        const auto last = [&] { return chat_->messages()->get(chat_->messages()->rowCount() - 1); };
        const auto regenerate = [&] {
            QSignalSpy done(chat_.get(), &ChatController::answerFinished);
            return chat_->regenerate() && done.wait(60000);
        };
        QCOMPARE(last()[QStringLiteral("versionCount")].toInt(), 1);  // one answer: nothing to step through
        const QString first = last()[QStringLiteral("content")].toString();
        QVERIFY(regenerate());
        const QString second = last()[QStringLiteral("content")].toString();
        QVERIFY(regenerate());
        const QString third = last()[QStringLiteral("content")].toString();
        QCOMPARE(last()[QStringLiteral("versionCount")].toInt(), 3);
        QCOMPARE(last()[QStringLiteral("version")].toInt(), 3);
        QCOMPARE(chat_->messages()->rowCount(), 2);  // the question and one answer shown
        QVERIFY(chat_->showAnswerVersion(-1));
        QCOMPARE(last()[QStringLiteral("version")].toInt(), 2);
        QCOMPARE(last()[QStringLiteral("content")].toString(), second);
        QVERIFY(chat_->showAnswerVersion(-1));
        QCOMPARE(last()[QStringLiteral("content")].toString(), first);
        QVERIFY(!chat_->showAnswerVersion(-1));  // no version before the first
        QVERIFY(chat_->showAnswerVersion(2));
        QCOMPARE(last()[QStringLiteral("content")].toString(), third);
        QCOMPARE(last()[QStringLiteral("version")].toInt(), 3);
        // Reopening the conversation shows the same.
        const qint64 id = chat_->currentConversationId();
        QVERIFY(chat_->newConversation() != 0);
        chat_->selectConversation(id);
        QCOMPARE(last()[QStringLiteral("versionCount")].toInt(), 3);
        QCOMPARE(last()[QStringLiteral("content")].toString(), third);
        QCOMPARE(settings_->setValue(QStringLiteral("temperature"), 0.0), QString());
    }

    // The next launch opens the conversation that was open (if it still exists).
    void the_last_open_conversation_is_restored() {
        const qint64 id = chat_->newConversation();
        QCOMPARE(exchange(QStringLiteral("And God said")), QStringLiteral("length"));
        TelemetryModel t;
        {
            ChatController next(dir_.filePath(QStringLiteral("chats.sqlite")), settings_.get(), &t);
            QCOMPARE(next.currentConversationId(), id);
            QCOMPARE(next.messages()->rowCount(), 2);
        }
        chat_->deleteConversation(id);
        ChatController after_delete(dir_.filePath(QStringLiteral("chats.sqlite")), settings_.get(), &t);
        QCOMPARE(after_delete.currentConversationId(), 0);
    }

    // Closing the app while an answer streams (the worker's tick timer
    // running): the worker is deleted without Qt's "Timers cannot be stopped
    // from another thread" (it was, at quit).
    void closing_while_generating_is_clean() {
        static QStringList warnings;
        warnings.clear();
        const QtMessageHandler previous = qInstallMessageHandler([](QtMsgType, const QMessageLogContext&, const QString& m) {
            warnings << m;
        });
        {
            QTemporaryDir d;
            TelemetryModel t;
            auto c = std::make_unique<ChatController>(d.filePath(QStringLiteral("c.sqlite")), settings_.get(), &t);
            QSignalSpy loaded(c.get(), &ChatController::modelLoaded);
            c->loadModel(QUrl::fromLocalFile(kDemo));
            QVERIFY(loaded.wait(60000));
            QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 2000), QString());
            QSignalSpy streamed(c.get(), &ChatController::streamed);
            QVERIFY(c->send(QStringLiteral("In the beginning")));
            QVERIFY(streamed.wait(30000));
            c.reset();  // as at quit: mid-answer
        }
        qInstallMessageHandler(previous);
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 24), QString());
        QVERIFY2(!warnings.join(QLatin1Char('\n')).contains(QStringLiteral("Timers cannot be stopped")),
                 qPrintable(warnings.join(QLatin1Char('\n'))));
    }

    // Reload with a budget the model cannot fit: refused with the plan's
    // reason, and the working model stays loaded (it was unloaded first).
    void reload_with_settings_that_do_not_fit_keeps_the_model() {
        QVERIFY(load(kDemo));
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QStringLiteral("8 MiB")), QString());
        QVERIFY(!chat_->reloadModel());
        QCOMPARE(chat_->modelState(), QStringLiteral("ready"));
        QVERIFY2(chat_->lastError().contains(QStringLiteral("does not fit")), qPrintable(chat_->lastError()));
        QCOMPARE(exchange(QStringLiteral("And God said")), QStringLiteral("length"));
        QCOMPARE(settings_->setValue(QStringLiteral("fast_budget"), QString()), QString());
        QVERIFY(chat_->reloadModel());
        QTRY_VERIFY_WITH_TIMEOUT(chat_->modelState() == QLatin1String("ready"), 60000);
    }

    // New chat (even the empty one reused) and a switch open a conversation:
    // the message box takes the focus on conversationOpened.
    void new_chat_and_a_switch_open_a_conversation() {
        QSignalSpy opened(chat_.get(), &ChatController::conversationOpened);
        const qint64 a = chat_->newConversation();
        QCOMPARE(opened.count(), 1);
        QCOMPARE(chat_->newConversation(), a);  // the untouched new chat is reused, and opened again
        QCOMPARE(opened.count(), 2);
        QCOMPARE(exchange(QStringLiteral("In the beginning")), QStringLiteral("length"));
        const qint64 b = chat_->newConversation();
        QVERIFY(b != a);
        QCOMPARE(opened.count(), 3);
        chat_->selectConversation(a);
        QCOMPARE(opened.count(), 4);
    }

    // Connecting to a server unloads the local model (its memory freed, no
    // longer served to other apps) and says so; disconnecting loads it again
    // (it left "No model"). Without a local model before, disconnecting
    // leaves none.
    void a_server_replaces_the_local_model_until_disconnected() {
        QVERIFY(load(kDemo));
        int unloaded = 0;
        const auto c = connect(chat_->worker(), &EngineWorker::unloaded, this, [&unloaded] { ++unloaded; });
        // Port 9 (discard): nothing is sent until a message is.
        QCOMPARE(chat_->useRemote(QStringLiteral("http://127.0.0.1:9/v1"), QString(), QStringLiteral("m")), QString());
        QVERIFY(chat_->remote());
        QTRY_COMPARE(unloaded, 1);
        QVERIFY2(chat_->notice().contains(QStringLiteral("strata-demo-moe.gguf was unloaded")), qPrintable(chat_->notice()));
        // Another server meanwhile: still the same local model to come back to.
        QCOMPARE(chat_->useRemote(QStringLiteral("http://127.0.0.1:7/v1"), QString(), QStringLiteral("m")), QString());
        QSignalSpy ok(chat_.get(), &ChatController::modelLoaded);
        chat_->unloadModel();  // "Disconnect from the server"
        QVERIFY(!chat_->remote());
        QCOMPARE(chat_->modelState(), QStringLiteral("loading"));
        QVERIFY(chat_->notice().contains(QStringLiteral("loading strata-demo-moe.gguf again")));
        QTRY_VERIFY_WITH_TIMEOUT(ok.count() == 1, 60000);
        QCOMPARE(chat_->modelState(), QStringLiteral("ready"));
        QCOMPARE(chat_->modelPath(), kDemo);
        QCOMPARE(exchange(QStringLiteral("In the beginning")), QStringLiteral("length"));
        disconnect(c);

        chat_->unloadModel();
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QCOMPARE(chat_->useRemote(QStringLiteral("http://127.0.0.1:9/v1"), QString(), QStringLiteral("m")), QString());
        chat_->unloadModel();
        QCOMPARE(chat_->modelState(), QStringLiteral("none"));
        QVERIFY(chat_->notice().contains(QStringLiteral("Disconnected")));
        QVERIFY(load(kDemo));
    }

    // Per-model defaults: saved for the loaded model's file, put in force
    // whenever it is loaded, and new conversations start with its system prompt.
    void model_defaults_apply_on_load_and_to_new_chats() {
        QVERIFY(load(kDemo));
        QCOMPARE(settings_->presetModel(), QFileInfo(kDemo).fileName());
        QVERIFY(!settings_->presetActive());
        const qint64 first = chat_->newConversation();
        QVERIFY(first != 0);
        chat_->renameConversation(first, QStringLiteral("Verse"));
        chat_->setSystemPrompt(QStringLiteral("Answer in verse."));
        const qlonglong global_max = settings_->value(QStringLiteral("max_tokens")).toLongLong();
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), 12), QString());
        QCOMPARE(settings_->savePreset(chat_->systemPrompt()), QString());
        QVERIFY(settings_->presetActive());
        QCOMPARE(settings_->setValue(QStringLiteral("max_tokens"), global_max), QString());

        const qint64 next = chat_->newConversation();
        QVERIFY(next != first);
        QCOMPARE(chat_->systemPrompt(), QStringLiteral("Answer in verse."));

        // Unloaded: the global settings; loaded again: its defaults.
        chat_->unloadModel();
        QCOMPARE(settings_->presetModel(), QString());
        QVERIFY(load(kDemo));
        QVERIFY(settings_->presetActive());
        QCOMPARE(settings_->sampling_params().max_tokens, 12);
        QCOMPARE(exchange(QStringLiteral("In the beginning")), QStringLiteral("length"));
        const qint64 tokens = chat_->store().messages(chat_->currentConversationId()).last().stats.tokens;
        QVERIFY2(tokens > 0 && tokens <= 12, qPrintable(QString::number(tokens)));

        settings_->forgetPreset();
        QCOMPARE(settings_->value(QStringLiteral("max_tokens")).toLongLong(), global_max);
        chat_->renameConversation(chat_->currentConversationId(), QStringLiteral("Used"));
        QVERIFY(chat_->newConversation() != 0);
        QCOMPARE(chat_->systemPrompt(), QString());
    }

    // Tools (Settings > Tools): a call the model makes is run and its result
    // sent back, and the model answers on; the call is shown and stored with
    // the answer and goes back with it on the next turn. The demo model never
    // calls a tool of its own accord, so its first round is held to a call by
    // a grammar (as the server's tool_choice "required" does).
    void tools_are_called_and_answered() {
        // The demo model with its whole context (the tools' instructions take 500 tokens).
        QCOMPARE(settings_->setValue(QStringLiteral("n_ctx"), 0), QString());
        QVERIFY(load(kDemo));
        QCOMPARE(settings_->setValue(QStringLiteral("tools"), true), QString());
        const auto forced = std::make_shared<const strata::grammar::Grammar>(strata::grammar::Grammar::parse(
            "root ::= \"<tool_call>\\n{\\\"name\\\": \\\"calculate\\\", \\\"arguments\\\": "
            "{\\\"expression\\\": \\\"6*7\\\"}}\\n</tool_call>\""));
        int rounds_seen = 0;
        chat_->set_sampling_hook([&](strata::sched::SamplingParams& sp, int round) {
            rounds_seen = std::max(rounds_seen, round + 1);
            if (round > 0) return;
            sp.grammar = forced;
            sp.max_tokens = 200;  // room for the whole call
        });
        const qint64 conversation = chat_->newConversation();
        QCOMPARE(exchange(QStringLiteral("What is six times seven?")), QStringLiteral("length"));
        QCOMPARE(rounds_seen, 2);
        MessageListModel* m = chat_->messages();
        QCOMPARE(m->rowCount(), 2);
        const QVariantMap a = m->get(1);
        const QVariantList calls = a[QStringLiteral("toolCalls")].toList();
        QCOMPARE(calls.size(), 1);
        QCOMPARE(calls[0].toMap()[QStringLiteral("name")].toString(), QStringLiteral("calculate"));
        QCOMPARE(calls[0].toMap()[QStringLiteral("arguments")].toString(), QStringLiteral("{\"expression\":\"6*7\"}"));
        QCOMPARE(calls[0].toMap()[QStringLiteral("result")].toString(), QStringLiteral("42"));
        // The answer is the second round's text; the call's markup was never shown.
        const QString answer = a[QStringLiteral("content")].toString();
        QVERIFY(!answer.isEmpty());
        QVERIFY(!answer.contains(QStringLiteral("tool_call")));
        const QList<strata::app::Message> stored = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(stored[1].content, answer);
        QVERIFY(stored[1].stats.tool_turns.contains(QStringLiteral("\"result\":\"42\"")));
        QVERIFY(stored[1].stats.tokens > 24);  // both rounds' tokens (the second alone is cut at 24)
        const qint64 first_prompt = stored[1].stats.prompt_tokens;

        // The next turn sends the call and its result back: the prompt holds them.
        chat_->set_sampling_hook({});
        QCOMPARE(exchange(QStringLiteral("And times two?")), QStringLiteral("length"));
        const QList<strata::app::Message> later = chat_->store().messages(chat_->currentConversationId());
        QCOMPARE(later.size(), 4);
        QVERIFY(later[3].stats.tool_turns.isEmpty());  // no call this time
        QVERIFY(later[3].stats.prompt_tokens > first_prompt + 24);

        // A model that calls again and again is stopped after kMaxToolRounds.
        chat_->set_sampling_hook([&](strata::sched::SamplingParams& sp, int) {
            sp.grammar = forced;
            sp.max_tokens = 100;
        });
        chat_->newConversation();  // (a fresh one: the rounds must fit the demo model's context)
        exchange(QStringLiteral("Again"));
        QVERIFY2(chat_->notice().contains(QStringLiteral("4 times")), qPrintable(chat_->notice()));
        QCOMPARE(m->get(m->rowCount() - 1)[QStringLiteral("toolCalls")].toList().size(), kMaxToolRounds);
        // Stop while the calls go on: no further round starts.
        chat_->newConversation();
        QSignalSpy finished(chat_.get(), &ChatController::answerFinished);
        QVERIFY(chat_->send(QStringLiteral("Once more")));
        QTRY_VERIFY_WITH_TIMEOUT(!m->get(m->rowCount() - 1)[QStringLiteral("toolCalls")].toList().isEmpty(), 30000);
        chat_->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 30000);
        QVERIFY2(finished.first().at(1).toString() == QLatin1String("cancelled") ||
                     m->get(m->rowCount() - 1)[QStringLiteral("toolCalls")].toList().size() < kMaxToolRounds,
                 qPrintable(finished.first().at(1).toString()));
        QVERIFY(drain());
        chat_->deleteConversation(chat_->currentConversationId());

        // Deleting a conversation while its calls go on ends them; nothing runs on.
        chat_->newConversation();
        QVERIFY(chat_->send(QStringLiteral("And again")));
        QTRY_VERIFY_WITH_TIMEOUT(!m->get(m->rowCount() - 1)[QStringLiteral("toolCalls")].toList().isEmpty(), 30000);
        chat_->deleteConversation(chat_->currentConversationId());
        QVERIFY(drain(30000));

        chat_->set_sampling_hook({});
        QCOMPARE(settings_->setValue(QStringLiteral("tools"), false), QString());
        chat_->deleteConversation(chat_->currentConversationId());
        chat_->deleteConversation(conversation);
    }

    void cleanupTestCase() { chat_.reset(); }
};

QTEST_MAIN(TestAppController)
#include "test_app_controller.moc"
