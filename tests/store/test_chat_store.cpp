// ChatStore: conversations and messages on disk, searching, exports, the
// schema version, refusing files it must not touch (and leaving them
// byte-for-byte as they were), and losing nothing committed when the writing
// process is killed (the test executable re-executes itself as the writer:
// `test_chat_store --writer DB ROUND THRESHOLD`).
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRandomGenerator>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "chat_store.h"

using strata::app::ChatStore;
using strata::app::Conversation;
using strata::app::Message;
using strata::app::MessageStats;
using strata::app::StoreError;

namespace {

// The message of the StoreError f throws ("" if none).
QString store_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const StoreError& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

QByteArray file_bytes(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

void write_file(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(bytes), bytes.size());
}

// A plain SQLite connection, for looking under the store and for preparing
// files the store must refuse.
class Raw {
public:
    explicit Raw(const QString& path) {
        if (sqlite3_open_v2(QFile::encodeName(path).constData(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                            nullptr) != SQLITE_OK)
            qFatal("cannot open %s", qPrintable(path));
        sqlite3_busy_timeout(db_, 5000);
    }
    ~Raw() { sqlite3_close_v2(db_); }
    Raw(const Raw&) = delete;
    Raw& operator=(const Raw&) = delete;

    // Every row's first column, joined by '\n'; "ERROR: ..." on failure.
    QString query(const QString& sql) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db_, sql.toUtf8().constData(), -1, &st, nullptr) != SQLITE_OK)
            return QStringLiteral("ERROR: ") + QString::fromUtf8(sqlite3_errmsg(db_));
        QStringList rows;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
            rows << (t ? QString::fromUtf8(t) : QString());
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) return QStringLiteral("ERROR: ") + QString::fromUtf8(sqlite3_errmsg(db_));
        return rows.join(QLatin1Char('\n'));
    }

private:
    sqlite3* db_ = nullptr;
};

// --- the writer the crash test kills ---------------------------------------

QString user_text(int round, int i) {
    return QStringLiteral("round %1, question %2: ünïcødé ✓ 漢字 'quoted' \"double\" 100%_").arg(round).arg(i);
}

// The streamed answer after `step` updates: a prefix of one fixed text
// (7 characters a step), so the parent can recognise any committed state.
QString answer_text(qint64 step) {
    static const QString pattern = QStringLiteral("Λόγος 甲乙 and so on. ");
    QString s;
    const qint64 n = step * 7;
    s.reserve(n);
    while (s.size() < n) s += pattern;
    s.truncate(n);
    return s;
}

constexpr int kStepsPerAnswer = 8;

void say(const QByteArray& line) {
    std::fputs(line.constData(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

// Appends questions and streams answers, printing every commit after it
// returns: "C conv", "U id i", "A id" ("A id E" for the answer that never
// finishes), "P id step", "F id". Once `threshold` commits are done the next
// answer streams forever, until the parent kills the process.
int writer_main(int argc, char** argv) {
    if (argc < 5) {
        std::fputs("usage: --writer DB ROUND THRESHOLD\n", stderr);
        return 2;
    }
    const QString db = QString::fromLocal8Bit(argv[2]);
    const int round = std::atoi(argv[3]);
    const int threshold = std::atoi(argv[4]);
    try {
        ChatStore store(db);
        const qint64 conv = store.create_conversation(QStringLiteral("crash round %1").arg(round));
        say("C " + QByteArray::number(conv));
        int commits = 1;
        for (int i = 0;; ++i) {
            const qint64 uid = store.append_message(conv, QStringLiteral("user"), user_text(round, i));
            say("U " + QByteArray::number(uid) + ' ' + QByteArray::number(i));
            ++commits;
            const bool endless = commits >= threshold;
            const qint64 aid = store.append_message(conv, QStringLiteral("assistant"), QString(), true);
            say("A " + QByteArray::number(aid) + (endless ? " E" : ""));
            ++commits;
            for (int step = 1; endless || step <= kStepsPerAnswer; ++step) {
                if (step > 50000) return 3;   // the parent is gone
                MessageStats st;
                st.tokens = step;
                st.prompt_tokens = 12;
                st.model = QStringLiteral("demo.gguf");
                store.update_message(aid, answer_text(step), true, st);
                say("P " + QByteArray::number(aid) + ' ' + QByteArray::number(step));
                ++commits;
            }
            MessageStats st;
            st.tokens = kStepsPerAnswer;
            st.prompt_tokens = 12;
            st.tok_s = 42.5;
            st.seconds = 0.25;
            st.finish = QStringLiteral("end");
            st.model = QStringLiteral("demo.gguf");
            store.update_message(aid, answer_text(kStepsPerAnswer), false, st);
            say("F " + QByteArray::number(aid));
            ++commits;
        }
    } catch (const StoreError& e) {
        std::fprintf(stderr, "writer: %s\n", e.what());
        return 1;
    }
}

// What the parent learned from the writer's lines.
struct Reported {
    qint64 conv = 0;
    QList<qint64> order;             // every message id, in append order
    QMap<qint64, int> user;          // id -> question index
    QSet<qint64> assistant;
    QMap<qint64, int> last_step;     // answer id -> last reported streaming step
    QSet<qint64> finished;
    qint64 endless = 0;              // the answer that never finishes
    int endless_steps = 0;
    int lines = 0;
};

bool parse_line(const QByteArray& raw, Reported& r) {
    const QList<QByteArray> f = raw.trimmed().split(' ');
    if (f.isEmpty() || f[0].isEmpty()) return true;
    ++r.lines;
    const qint64 id = f.size() > 1 ? f[1].toLongLong() : 0;
    const char k = f[0][0];
    if (k == 'C') {
        r.conv = id;
    } else if (k == 'U' && f.size() == 3) {
        r.user[id] = f[2].toInt();
        r.order << id;
    } else if (k == 'A') {
        r.assistant << id;
        r.order << id;
        if (f.size() == 3 && f[2] == "E") r.endless = id;
    } else if (k == 'P' && f.size() == 3) {
        r.last_step[id] = f[2].toInt();
        if (id == r.endless) ++r.endless_steps;
    } else if (k == 'F') {
        r.finished << id;
    } else {
        return false;
    }
    return true;
}

}  // namespace

class TestChatStore : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    int n_ = 0;
    QString fresh_path() { return tmp_.filePath(QStringLiteral("db%1/chats.db").arg(++n_)); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(tmp_.isValid()); }

    void create_list_rename_prompt_delete() {
        const QString path = fresh_path();
        ChatStore s(path);   // creates the directory and the file
        QVERIFY(QFileInfo::exists(path));
        QCOMPARE(s.path(), path);
        QVERIFY(s.conversations().isEmpty());

        const QDateTime before = QDateTime::currentDateTimeUtc().addSecs(-1);
        const qint64 a = s.create_conversation(QStringLiteral("First"), QStringLiteral("Be brief."));
        const qint64 b = s.create_conversation(QStringLiteral("   "));
        QVERIFY(a > 0 && b > a);

        Conversation ca = s.conversation(a);
        QCOMPARE(ca.id, a);
        QCOMPARE(ca.title, QStringLiteral("First"));
        QCOMPARE(ca.system_prompt, QStringLiteral("Be brief."));
        QCOMPARE(ca.message_count, 0);
        QCOMPARE(ca.created.timeSpec(), Qt::UTC);
        QVERIFY(ca.created >= before && ca.created <= QDateTime::currentDateTimeUtc().addSecs(1));
        QCOMPARE(ca.updated, ca.created);
        QCOMPARE(s.conversation(b).title, QStringLiteral("New conversation"));
        QCOMPARE(s.conversation(b).system_prompt, QString());

        s.rename_conversation(a, QStringLiteral("  Renamed  "));
        QCOMPARE(s.conversation(a).title, QStringLiteral("Renamed"));
        QVERIFY(s.conversation(a).updated > ca.updated);   // a rename counts as activity
        s.rename_conversation(a, QString());
        QCOMPARE(s.conversation(a).title, QStringLiteral("New conversation"));
        s.rename_conversation(a, QStringLiteral("Renamed"));

        s.set_system_prompt(a, QStringLiteral("You are a pirate."));
        QCOMPARE(s.conversation(a).system_prompt, QStringLiteral("You are a pirate."));
        s.set_system_prompt(a, QString());
        QCOMPARE(s.conversation(a).system_prompt, QString());

        s.append_message(a, QStringLiteral("user"), QStringLiteral("hi"));
        s.append_message(a, QStringLiteral("assistant"), QStringLiteral("hello"));
        s.append_message(b, QStringLiteral("user"), QStringLiteral("other"));
        QCOMPARE(s.conversation(a).message_count, 2);

        s.delete_conversation(a);
        QVERIFY(store_error([&] { s.conversation(a); }).contains(QStringLiteral("does not exist")));
        QCOMPARE(s.conversations().size(), 1);
        QCOMPARE(s.conversations().first().id, b);
        Raw raw(path);
        QCOMPARE(raw.query(QStringLiteral("SELECT count(*) FROM messages WHERE conversation_id = %1").arg(a)),
                 QStringLiteral("0"));   // cascaded
        QCOMPARE(raw.query(QStringLiteral("SELECT count(*) FROM messages")), QStringLiteral("1"));
    }

    void invalid_arguments() {
        const QString path = fresh_path();
        ChatStore s(path);
        const qint64 c = s.create_conversation(QStringLiteral("c"));
        const qint64 m = s.append_message(c, QStringLiteral("user"), QStringLiteral("x"));
        const qint64 nope = 987654;
        const auto expect = [&](const std::function<void()>& f, const QString& needle) {
            const QString e = store_error(f);
            QVERIFY2(e.contains(needle), qPrintable("'" + e + "' lacks '" + needle + "'"));
            QVERIFY2(e.contains(path), qPrintable("'" + e + "' lacks the path"));
        };
        expect([&] { s.conversation(nope); }, QStringLiteral("conversation 987654 does not exist"));
        expect([&] { s.messages(nope); }, QStringLiteral("conversation 987654 does not exist"));
        expect([&] { s.rename_conversation(nope, QStringLiteral("t")); }, QStringLiteral("987654"));
        expect([&] { s.set_system_prompt(nope, QStringLiteral("t")); }, QStringLiteral("987654"));
        expect([&] { s.delete_conversation(nope); }, QStringLiteral("987654"));
        expect([&] { s.append_message(nope, QStringLiteral("user"), QStringLiteral("t")); }, QStringLiteral("987654"));
        expect([&] { s.append_message(c, QStringLiteral("robot"), QStringLiteral("t")); },
               QStringLiteral("invalid role 'robot'"));
        expect([&] { s.append_message(c, QStringLiteral("User"), QStringLiteral("t")); },
               QStringLiteral("invalid role"));
        expect([&] { s.update_message(nope, QStringLiteral("t"), false, {}); },
               QStringLiteral("message 987654 does not exist"));
        expect([&] { s.delete_messages_from(nope); }, QStringLiteral("message 987654 does not exist"));
        expect([&] { s.export_json(nope); }, QStringLiteral("987654"));
        expect([&] { s.export_markdown(nope); }, QStringLiteral("987654"));
        // Nothing changed by the failures, and the store still works.
        QCOMPARE(s.messages(c).size(), 1);
        QCOMPARE(s.messages(c).first().id, m);
        QCOMPARE(s.conversations().size(), 1);
        s.append_message(c, QStringLiteral("system"), QStringLiteral("note"));
        QCOMPARE(s.messages(c).size(), 2);
    }

    void newest_first_with_counts() {
        ChatStore s(fresh_path());
        const qint64 a = s.create_conversation(QStringLiteral("a"));
        const qint64 b = s.create_conversation(QStringLiteral("b"));
        const qint64 c = s.create_conversation(QStringLiteral("c"));
        const auto ids = [&] {
            QList<qint64> out;
            for (const Conversation& x : s.conversations()) out << x.id;
            return out;
        };
        QCOMPARE(ids(), (QList<qint64>{c, b, a}));
        const QDateTime a0 = s.conversation(a).updated;
        const qint64 m = s.append_message(a, QStringLiteral("user"), QStringLiteral("q"));
        QVERIFY(s.conversation(a).updated > a0);   // append bumps
        QCOMPARE(ids(), (QList<qint64>{a, c, b}));
        s.rename_conversation(b, QStringLiteral("bb"));
        QCOMPARE(ids(), (QList<qint64>{b, a, c}));
        const QDateTime a1 = s.conversation(a).updated;
        s.update_message(m, QStringLiteral("q2"), false, {});
        QVERIFY(s.conversation(a).updated > a1);   // update bumps
        QCOMPARE(ids(), (QList<qint64>{a, b, c}));
        s.append_message(a, QStringLiteral("assistant"), QStringLiteral("r"));
        const QList<Conversation> all = s.conversations();
        QCOMPARE(all[0].message_count, 2);
        QCOMPARE(all[1].message_count, 0);
        for (int i = 1; i < all.size(); ++i) QVERIFY(all[i - 1].updated > all[i].updated);
    }

    void search() {
        ChatStore s(fresh_path());
        const qint64 hello = s.create_conversation(QStringLiteral("Hello World"));
        const qint64 recipe = s.create_conversation(QStringLiteral("Dinner"));
        s.append_message(recipe, QStringLiteral("user"), QStringLiteral("How do I make a RISOTTO?"));
        s.append_message(recipe, QStringLiteral("assistant"), QStringLiteral("Start with ärger-free rice."));
        const qint64 pct = s.create_conversation(QStringLiteral("percent"));
        s.append_message(pct, QStringLiteral("user"), QStringLiteral("I am 100% sure about snake_case"));
        const qint64 nopct = s.create_conversation(QStringLiteral("no percent"));
        s.append_message(nopct, QStringLiteral("user"), QStringLiteral("I am 1000 sure about snakeXcase"));

        const auto found = [&](const QString& q) {
            QList<qint64> out;
            for (const Conversation& c : s.conversations(q)) out << c.id;
            return out;
        };
        QCOMPARE(found(QString()).size(), 4);
        QCOMPARE(found(QStringLiteral("hello")), (QList<qint64>{hello}));        // title, case-insensitive
        QCOMPARE(found(QStringLiteral("O WOR")), (QList<qint64>{hello}));
        QCOMPARE(found(QStringLiteral("risotto")), (QList<qint64>{recipe}));     // content
        QCOMPARE(found(QStringLiteral("ÄRGER")), (QList<qint64>{recipe}));       // Unicode case folding
        QCOMPARE(found(QStringLiteral("0%")), (QList<qint64>{pct}));             // % is literal
        QCOMPARE(found(QStringLiteral("%")), (QList<qint64>{pct}));
        QCOMPARE(found(QStringLiteral("e_c")), (QList<qint64>{pct}));            // _ is literal
        QCOMPARE(found(QStringLiteral("_")), (QList<qint64>{pct}));
        QCOMPARE(found(QStringLiteral("sure")), (QList<qint64>{nopct, pct}));    // newest first
        QCOMPARE(found(QStringLiteral("percent")), (QList<qint64>{nopct, pct}));
        QVERIFY(found(QStringLiteral("zebra")).isEmpty());
        QVERIFY(found(QStringLiteral("'; DROP TABLE messages; --")).isEmpty());
        const QList<Conversation> r = s.conversations(QStringLiteral("rice"));   // one row per conversation
        QCOMPARE(r.size(), 1);
        QCOMPARE(r.first().message_count, 2);
        QCOMPARE(r.first().title, QStringLiteral("Dinner"));
    }

    void messages_order_and_streaming() {
        ChatStore s(fresh_path());
        const qint64 c = s.create_conversation(QStringLiteral("chat"));
        const qint64 other = s.create_conversation(QStringLiteral("other"));
        const qint64 u = s.append_message(c, QStringLiteral("user"), QStringLiteral("Tell me a story"));
        s.append_message(other, QStringLiteral("user"), QStringLiteral("elsewhere"));
        const qint64 a = s.append_message(c, QStringLiteral("assistant"), QString(), true);
        QVERIFY(a > u);

        QString streamed;
        for (int i = 0; i < 5; ++i) {
            streamed += QStringLiteral("word%1 ").arg(i);
            MessageStats st;
            st.tokens = i + 1;
            s.update_message(a, streamed, true, st);
            const Message m = s.messages(c).last();
            QCOMPARE(m.id, a);
            QCOMPARE(m.content, streamed);
            QVERIFY(m.partial);
            QCOMPARE(m.stats.tokens, i + 1);
            QCOMPARE(m.stats.finish, QString());
        }
        MessageStats fin;
        fin.prompt_tokens = 17;
        fin.tokens = 5;
        fin.tok_s = 31.25;
        fin.ttft_ms = 120.5;
        fin.seconds = 0.75;
        fin.finish = QStringLiteral("end");
        fin.model = QStringLiteral("strata-demo-moe.gguf");
        s.update_message(a, streamed.trimmed(), false, fin);

        const QList<Message> ms = s.messages(c);
        QCOMPARE(ms.size(), 2);
        QCOMPARE(ms[0].id, u);
        QCOMPARE(ms[0].role, QStringLiteral("user"));
        QCOMPARE(ms[0].content, QStringLiteral("Tell me a story"));
        QCOMPARE(ms[0].conversation_id, c);
        QVERIFY(!ms[0].partial);
        QCOMPARE(ms[0].stats.tokens, 0);
        QCOMPARE(ms[0].created.timeSpec(), Qt::UTC);
        const Message& m = ms[1];
        QCOMPARE(m.role, QStringLiteral("assistant"));
        QCOMPARE(m.content, streamed.trimmed());
        QVERIFY(!m.partial);
        QCOMPARE(m.stats.prompt_tokens, 17);
        QCOMPARE(m.stats.tokens, 5);
        QCOMPARE(m.stats.tok_s, 31.25);
        QCOMPARE(m.stats.ttft_ms, 120.5);
        QCOMPARE(m.stats.seconds, 0.75);
        QCOMPARE(m.stats.finish, QStringLiteral("end"));
        QCOMPARE(m.stats.model, QStringLiteral("strata-demo-moe.gguf"));
        QVERIFY(m.created >= ms[0].created);

        // Many messages keep their order.
        QList<qint64> ids{u, a};
        for (int i = 0; i < 50; ++i)
            ids << s.append_message(c, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                                    QString::number(i));
        const QList<Message> all = s.messages(c);
        QCOMPARE(all.size(), ids.size());
        for (int i = 0; i < all.size(); ++i) QCOMPARE(all[i].id, ids[i]);
        QCOMPARE(all.last().content, QStringLiteral("49"));
    }

    void delete_messages_from() {
        ChatStore s(fresh_path());
        const qint64 c = s.create_conversation(QStringLiteral("edit"));
        const qint64 other = s.create_conversation(QStringLiteral("other"));
        QList<qint64> ids;
        for (int i = 0; i < 5; ++i)
            ids << s.append_message(c, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                                    QStringLiteral("m%1").arg(i));
        const qint64 keep = s.append_message(other, QStringLiteral("user"), QStringLiteral("keep me"));
        const QDateTime before = s.conversation(c).updated;
        s.delete_messages_from(ids[2]);
        QList<Message> ms = s.messages(c);
        QCOMPARE(ms.size(), 2);
        QCOMPARE(ms[0].id, ids[0]);
        QCOMPARE(ms[1].id, ids[1]);
        QVERIFY(s.conversation(c).updated > before);
        QCOMPARE(s.messages(other).size(), 1);   // other conversations untouched
        QCOMPARE(s.messages(other).first().id, keep);
        // Ids are never reused: a stale id can never name a new message.
        const qint64 fresh = s.append_message(c, QStringLiteral("user"), QStringLiteral("again"));
        QVERIFY(fresh > ids.last() && fresh > keep);
        s.delete_messages_from(ids[0]);
        QVERIFY(s.messages(c).isEmpty());
        QVERIFY(!store_error([&] { s.delete_messages_from(ids[0]); }).isEmpty());
    }

    void exports() {
        ChatStore s(fresh_path());
        const qint64 c = s.create_conversation(QStringLiteral("Trip to Zürich"), QStringLiteral("Answer in English."));
        s.append_message(c, QStringLiteral("user"), QStringLiteral("What should I see?"));
        const qint64 a = s.append_message(c, QStringLiteral("assistant"), QString(), true);
        MessageStats st;
        st.prompt_tokens = 9;
        st.tokens = 3;
        st.tok_s = 12.5;
        st.ttft_ms = 80;
        st.seconds = 0.5;
        st.finish = QStringLiteral("end");
        st.model = QStringLiteral("m.gguf");
        s.update_message(a, QStringLiteral("The **old town**."), false, st);
        s.append_message(c, QStringLiteral("user"), QStringLiteral("And then?"));
        const qint64 p = s.append_message(c, QStringLiteral("assistant"), QStringLiteral("The la"), true);
        Q_UNUSED(p);

        QJsonParseError err;
        const QJsonDocument doc = QJsonDocument::fromJson(s.export_json(c), &err);
        QCOMPARE(err.error, QJsonParseError::NoError);
        const QJsonObject root = doc.object();
        QCOMPARE(root.value("title").toString(), QStringLiteral("Trip to Zürich"));
        QCOMPARE(root.value("system_prompt").toString(), QStringLiteral("Answer in English."));
        const QDateTime created = QDateTime::fromString(root.value("created").toString(), Qt::ISODateWithMs);
        QVERIFY(created.isValid());
        QCOMPARE(created.toMSecsSinceEpoch(), s.conversation(c).created.toMSecsSinceEpoch());
        const QJsonArray ms = root.value("messages").toArray();
        QCOMPARE(ms.size(), 4);
        QCOMPARE(ms[0].toObject().value("role").toString(), QStringLiteral("user"));
        QCOMPARE(ms[0].toObject().value("content").toString(), QStringLiteral("What should I see?"));
        QCOMPARE(ms[0].toObject().value("partial").toBool(true), false);
        QVERIFY(!ms[0].toObject().contains("stats"));   // stats only for answers
        const QJsonObject ans = ms[1].toObject();
        QCOMPARE(ans.value("role").toString(), QStringLiteral("assistant"));
        QCOMPARE(ans.value("content").toString(), QStringLiteral("The **old town**."));
        QCOMPARE(ans.value("partial").toBool(true), false);
        const QJsonObject js = ans.value("stats").toObject();
        QCOMPARE(js.value("prompt_tokens").toInt(), 9);
        QCOMPARE(js.value("tokens").toInt(), 3);
        QCOMPARE(js.value("tok_s").toDouble(), 12.5);
        QCOMPARE(js.value("ttft_ms").toDouble(), 80.0);
        QCOMPARE(js.value("seconds").toDouble(), 0.5);
        QCOMPARE(js.value("finish").toString(), QStringLiteral("end"));
        QCOMPARE(js.value("model").toString(), QStringLiteral("m.gguf"));
        QCOMPARE(ms[3].toObject().value("partial").toBool(false), true);
        QCOMPARE(ms[3].toObject().value("content").toString(), QStringLiteral("The la"));

        const QString md = QString::fromUtf8(s.export_markdown(c));
        QVERIFY2(md.startsWith(QStringLiteral("# Trip to Zürich\n")), qPrintable(md));
        const qsizetype sys = md.indexOf(QStringLiteral("## System prompt\n\nAnswer in English."));
        const qsizetype u1 = md.indexOf(QStringLiteral("## User\n\nWhat should I see?"));
        const qsizetype a1 = md.indexOf(QStringLiteral("## Assistant\n\nThe **old town**."));
        const qsizetype u2 = md.indexOf(QStringLiteral("## User\n\nAnd then?"));
        const qsizetype a2 = md.indexOf(QStringLiteral("## Assistant\n\nThe la"));
        QVERIFY2(sys > 0 && sys < u1 && u1 < a1 && a1 < u2 && u2 < a2, qPrintable(md));
        QCOMPARE(md.count(QStringLiteral("## User")), 2);
        QCOMPARE(md.count(QStringLiteral("## Assistant")), 2);
        QVERIFY(md.indexOf(QStringLiteral("m.gguf"), a1) < u2);   // the answer's figures follow it
        QVERIFY(md.indexOf(QStringLiteral("incomplete"), a2) > a2);   // the partial answer is marked
        QVERIFY(!md.left(a2).contains(QStringLiteral("incomplete")));

        // A reasoning model's answer: the answer, its reasoning folded away; JSON keeps the reply as written.
        const qint64 r = s.create_conversation(QStringLiteral("reasoned"));
        s.append_message(r, QStringLiteral("user"), QStringLiteral("Capital of France?"));
        const QString raw = QStringLiteral("<|channel|>analysis<|message|>It is Paris.<|end|><|start|>assistant"
                                           "<|channel|>final<|message|>Paris.<|return|>");
        s.append_message(r, QStringLiteral("assistant"), raw);
        const QString rmd = QString::fromUtf8(s.export_markdown(r));
        QVERIFY2(rmd.contains(QStringLiteral("## Assistant\n\nParis.\n\n<details><summary>Reasoning</summary>\n\nIt is Paris.")),
                 qPrintable(rmd));
        QVERIFY(!rmd.contains(QStringLiteral("<|channel|>")));
        QCOMPARE(QJsonDocument::fromJson(s.export_json(r)).object().value("messages").toArray()[1].toObject()
                     .value("content").toString(), raw);

        // Without a system prompt there is no such section.
        const qint64 bare = s.create_conversation(QStringLiteral("bare"));
        QVERIFY(!QString::fromUtf8(s.export_markdown(bare)).contains(QStringLiteral("System")));
        QCOMPARE(QJsonDocument::fromJson(s.export_json(bare)).object().value("messages").toArray().size(), 0);
    }

    void reopen_persists() {
        const QString path = fresh_path();
        qint64 c = 0, m = 0;
        Conversation before;
        QList<Message> msgs;
        {
            ChatStore s(path);
            c = s.create_conversation(QStringLiteral("kept"), QStringLiteral("sys"));
            s.append_message(c, QStringLiteral("user"), QStringLiteral("q"));
            m = s.append_message(c, QStringLiteral("assistant"), QStringLiteral("half an ans"), true);
            before = s.conversation(c);
            msgs = s.messages(c);
        }
        QVERIFY(!QFileInfo::exists(path + "-wal") || QFileInfo(path + "-wal").size() == 0);   // checkpointed at close
        ChatStore s(path);
        const Conversation after = s.conversation(c);
        QCOMPARE(after.title, before.title);
        QCOMPARE(after.system_prompt, before.system_prompt);
        QCOMPARE(after.created, before.created);
        QCOMPARE(after.updated, before.updated);
        QCOMPARE(after.message_count, 2);
        const QList<Message> again = s.messages(c);
        QCOMPARE(again.size(), msgs.size());
        for (int i = 0; i < again.size(); ++i) {
            QCOMPARE(again[i].id, msgs[i].id);
            QCOMPARE(again[i].content, msgs[i].content);
            QCOMPARE(again[i].partial, msgs[i].partial);
            QCOMPARE(again[i].created, msgs[i].created);
        }
        QVERIFY(again.last().partial);
        QCOMPARE(again.last().id, m);
        // Writes keep working after a reopen.
        s.update_message(m, QStringLiteral("half an answer."), false, {});
        QVERIFY(!s.messages(c).last().partial);
    }

    void schema_version_stored() {
        const QString path = fresh_path();
        { ChatStore s(path); }
        Raw raw(path);
        QCOMPARE(raw.query(QStringLiteral("PRAGMA user_version")), QString::number(ChatStore::kSchemaVersion));
        QCOMPARE(raw.query(QStringLiteral("PRAGMA journal_mode")), QStringLiteral("wal"));
        QCOMPARE(raw.query(QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                          "'sqlite_%' ORDER BY name")),
                 QStringLiteral("answer_versions\nconversations\nmessages"));
        QVERIFY(raw.query(QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'index'"))
                    .contains(QStringLiteral("messages_by_conversation")));
        QCOMPARE(raw.query(QStringLiteral("PRAGMA integrity_check")), QStringLiteral("ok"));
        // The constraints are in the schema itself.
        QCOMPARE(raw.query(QStringLiteral("INSERT INTO conversations(title, created, updated) VALUES ('t', 0, 0)")),
                 QString());
        QVERIFY(raw.query(QStringLiteral("INSERT INTO messages(conversation_id, role, content, created) "
                                         "VALUES (1, 'robot', 'x', 0)"))
                    .startsWith(QStringLiteral("ERROR")));
        // Reopening a current database keeps its version and data.
        { ChatStore s(path); QCOMPARE(s.conversations().size(), 1); }
        QCOMPARE(raw.query(QStringLiteral("PRAGMA user_version")), QString::number(ChatStore::kSchemaVersion));
    }

    // Regenerate keeps the answer it replaces: the versions of an answer
    // list oldest first, swap places with the answer shown, survive a
    // reopen, and go with their question.
    void answer_versions_are_kept_and_swapped() {
        const QString path = fresh_path();
        qint64 c = 0, q = 0, a2 = 0;
        {
            ChatStore s(path);
            c = s.create_conversation(QStringLiteral("versions"));
            q = s.append_message(c, QStringLiteral("user"), QStringLiteral("Tell a story"));
            const qint64 a1 = s.append_message(c, QStringLiteral("assistant"), QStringLiteral("first"));
            MessageStats st;
            st.tokens = 7;
            st.finish = QStringLiteral("end");
            s.update_message(a1, QStringLiteral("first answer"), false, st);
            s.archive_answer(a1);
            QCOMPARE(s.messages(c).size(), 1);
            a2 = s.append_message(c, QStringLiteral("assistant"), QStringLiteral("second answer"));
            const QList<Message> v = s.answer_versions(q);
            QCOMPARE(v.size(), 1);
            QCOMPARE(v[0].content, QStringLiteral("first answer"));
            QCOMPARE(v[0].stats.tokens, qint64(7));
            QCOMPARE(v[0].stats.finish, QStringLiteral("end"));
            s.swap_answer_version(a2, v[0].id);
            QCOMPARE(s.messages(c).last().content, QStringLiteral("first answer"));
            QCOMPARE(s.messages(c).last().id, a2);
            QCOMPARE(s.answer_versions(q)[0].content, QStringLiteral("second answer"));
            QVERIFY_THROWS_EXCEPTION(StoreError, s.swap_answer_version(a2, 999999));
        }
        {
            ChatStore s(path);
            QCOMPARE(s.answer_versions(q).size(), 1);
            QCOMPARE(s.messages(c).last().content, QStringLiteral("first answer"));
            // Editing the question deletes it, and its versions with it.
            s.delete_messages_from(q);
            QCOMPARE(s.answer_versions(q).size(), 0);
            Raw raw(path);
            QCOMPARE(raw.query(QStringLiteral("SELECT count(*) FROM answer_versions")), QStringLiteral("0"));
        }
    }

    // An answer's tool rounds are kept with it: read back, carried into its
    // versions and back when they swap, and exported.
    void tool_rounds_are_kept_with_the_answer() {
        ChatStore s(fresh_path());
        const qint64 c = s.create_conversation(QStringLiteral("tools"));
        const qint64 q = s.append_message(c, QStringLiteral("user"), QStringLiteral("6*7?"));
        const qint64 a = s.append_message(c, QStringLiteral("assistant"), QString(), true);
        MessageStats st;
        st.tokens = 5;
        st.finish = QStringLiteral("end");
        const QJsonObject call{{"id", "c1"}, {"name", "calculate"}, {"arguments", "{\"expression\":\"6*7\"}"}, {"result", "42"}};
        st.tool_turns = QString::fromUtf8(
            QJsonDocument(QJsonArray{QJsonObject{{"content", ""}, {"calls", QJsonArray{call}}}}).toJson(QJsonDocument::Compact));
        s.update_message(a, QStringLiteral("It is 42."), false, st);
        QCOMPARE(s.messages(c)[1].stats.tool_turns, st.tool_turns);

        const QJsonArray ms = QJsonDocument::fromJson(s.export_json(c)).object().value("messages").toArray();
        QCOMPARE(ms[1].toObject().value("tool_rounds").toArray()[0].toObject().value("calls").toArray()[0].toObject()
                     .value("result").toString(), QStringLiteral("42"));
        QVERIFY(!ms[0].toObject().contains("tool_rounds"));
        const QString md = QString::fromUtf8(s.export_markdown(c));
        QVERIFY2(md.contains(QStringLiteral("> Tool `calculate({\"expression\":\"6*7\"})` → 42")), qPrintable(md));

        // Regenerate keeps it with its version; a plain answer takes the place; swapping brings it back.
        s.archive_answer(a);
        const qint64 b = s.append_message(c, QStringLiteral("assistant"), QStringLiteral("Forty-two."));
        QCOMPARE(s.answer_versions(q).size(), 1);
        QCOMPARE(s.answer_versions(q)[0].stats.tool_turns, st.tool_turns);
        s.swap_answer_version(b, s.answer_versions(q)[0].id);
        QCOMPARE(s.messages(c)[1].content, QStringLiteral("It is 42."));
        QCOMPARE(s.messages(c)[1].stats.tool_turns, st.tool_turns);
        QVERIFY(s.answer_versions(q)[0].stats.tool_turns.isEmpty());
    }

    // A database of schema 2 (before answer versions) opens, migrates to the
    // current schema, and keeps every conversation and message.
    void version_2_database_migrates() {
        const QString path = fresh_path();
        QVERIFY(QDir().mkpath(QFileInfo(path).absolutePath()));
        {
            Raw raw(path);
            const char* v2[] = {
                "CREATE TABLE conversations(id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, "
                "system_prompt TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL, updated INTEGER NOT NULL)",
                "CREATE INDEX conversations_by_updated ON conversations(updated)",
                "CREATE TABLE messages(id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL "
                "REFERENCES conversations(id) ON DELETE CASCADE, role TEXT NOT NULL CHECK(role IN ('user', 'assistant', "
                "'system')), content TEXT NOT NULL DEFAULT '', partial INTEGER NOT NULL DEFAULT 0 CHECK(partial IN (0, 1)), "
                "prompt_tokens INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0, tok_s REAL NOT NULL DEFAULT 0, "
                "ttft_ms REAL NOT NULL DEFAULT 0, seconds REAL NOT NULL DEFAULT 0, finish TEXT NOT NULL DEFAULT '', model "
                "TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL)",
                "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)",
                "ALTER TABLE messages ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE messages ADD COLUMN spec_acceptance REAL NOT NULL DEFAULT -1",
                "INSERT INTO conversations(title, created, updated) VALUES ('old chat', 1000, 1000)",
                "INSERT INTO messages(conversation_id, role, content, created) VALUES (1, 'user', 'hello', 1000)",
                "INSERT INTO messages(conversation_id, role, content, tokens, finish, created) VALUES (1, 'assistant', 'hi there', 3, 'end', 1001)",
                "PRAGMA user_version = 2",
            };
            for (const char* sql : v2) QCOMPARE(raw.query(QString::fromLatin1(sql)), QString());
        }
        ChatStore s(path);
        const QList<Message> m = s.messages(1);
        QCOMPARE(m.size(), 2);
        QCOMPARE(m[1].content, QStringLiteral("hi there"));
        QCOMPARE(m[1].stats.tokens, qint64(3));
        QVERIFY(m[1].stats.tool_turns.isEmpty());
        s.archive_answer(m[1].id);
        QCOMPARE(s.answer_versions(m[0].id).size(), 1);
        Raw raw(path);
        QCOMPARE(raw.query(QStringLiteral("PRAGMA user_version")), QString::number(ChatStore::kSchemaVersion));
    }

    void newer_version_refused_untouched() {
        const QString path = fresh_path();
        {
            ChatStore s(path);
            const qint64 c = s.create_conversation(QStringLiteral("from the future"));
            s.append_message(c, QStringLiteral("user"), QStringLiteral("precious"));
        }
        {
            Raw raw(path);
            QCOMPARE(raw.query(QStringLiteral("PRAGMA user_version = %1").arg(ChatStore::kSchemaVersion + 1)),
                     QString());
        }
        QVERIFY(!QFileInfo::exists(path + "-wal"));
        const QByteArray bytes = file_bytes(path);
        QVERIFY(!bytes.isEmpty());
        const QString e = store_error([&] { ChatStore s(path); });
        QVERIFY2(e.contains(path), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("newer version of Strata")), qPrintable(e));
        QCOMPARE(file_bytes(path), bytes);
        QVERIFY(!QFileInfo::exists(path + "-wal") || QFileInfo(path + "-wal").size() == 0);
        Raw raw(path);
        QCOMPARE(raw.query(QStringLiteral("SELECT content FROM messages")), QStringLiteral("precious"));
    }

    void garbage_file_refused_untouched() {
        const QString path = fresh_path();
        QVERIFY(QDir().mkpath(QFileInfo(path).absolutePath()));
        QByteArray garbage = "These are my notes, not a database.\n";
        QRandomGenerator rng(7);
        while (garbage.size() < 16384) garbage.append(char(rng.bounded(256)));
        write_file(path, garbage);
        const QString e = store_error([&] { ChatStore s(path); });
        QVERIFY2(e.contains(path), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("not a Strata chat database or is damaged")), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("move it aside")), qPrintable(e));
        QCOMPARE(file_bytes(path), garbage);
        QVERIFY(!QFileInfo::exists(path + "-wal"));
        QVERIFY(!QFileInfo::exists(path + "-journal"));
        // A short text file too.
        write_file(path, "hello\n");
        QVERIFY(!store_error([&] { ChatStore s(path); }).isEmpty());
        QCOMPARE(file_bytes(path), QByteArray("hello\n"));
    }

    void damaged_database_refused_untouched() {
        const QString path = fresh_path();
        {
            ChatStore s(path);
            const qint64 c = s.create_conversation(QStringLiteral("big"));
            for (int i = 0; i < 300; ++i)
                s.append_message(c, QStringLiteral("user"), QString(600, QLatin1Char('a' + i % 26)));
        }
        QByteArray bytes = file_bytes(path);
        QVERIFY(bytes.size() > 16 * 4096);
        const qsizetype page = 4096 * (bytes.size() / 4096 / 2);   // a page in the middle
        for (qsizetype i = page; i < page + 4096; ++i) bytes[i] = char(0xA5);
        write_file(path, bytes);
        const QString e = store_error([&] { ChatStore s(path); });
        QVERIFY2(e.contains(path), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("damaged")), qPrintable(e));
        QCOMPARE(file_bytes(path), bytes);
    }

    void foreign_database_refused_untouched() {
        const QString path = fresh_path();
        QVERIFY(QDir().mkpath(QFileInfo(path).absolutePath()));
        {
            Raw raw(path);
            QCOMPARE(raw.query(QStringLiteral("CREATE TABLE recipes(name TEXT)")), QString());
            QCOMPARE(raw.query(QStringLiteral("INSERT INTO recipes VALUES ('soup')")), QString());
        }
        const QByteArray bytes = file_bytes(path);
        const QString e = store_error([&] { ChatStore s(path); });
        QVERIFY2(e.contains(path) && e.contains(QStringLiteral("another program")), qPrintable(e));
        QCOMPARE(file_bytes(path), bytes);
    }

    void unopenable_paths() {
        // The parent "directory" is a file.
        const QString file = tmp_.filePath(QStringLiteral("plain-file"));
        write_file(file, "x");
        const QString under_file = file + QStringLiteral("/chats.db");
        QString e = store_error([&] { ChatStore s(under_file); });
        QVERIFY2(e.contains(under_file), qPrintable(e));
        QCOMPARE(file_bytes(file), QByteArray("x"));
        // The path is a directory.
        const QString dir = tmp_.filePath(QStringLiteral("a-directory"));
        QVERIFY(QDir().mkpath(dir));
        e = store_error([&] { ChatStore s(dir); });
        QVERIFY2(e.contains(dir), qPrintable(e));
        // No path.
        QVERIFY(!store_error([&] { ChatStore s{QString()}; }).isEmpty());
    }

    void read_only_directory() {
        if (::geteuid() == 0) QSKIP("running as root: file permissions do not stop root");
        const QString dir = tmp_.filePath(QStringLiteral("read-only"));
        QVERIFY(QDir().mkpath(dir));
        QVERIFY(QFile::setPermissions(dir, QFile::ReadOwner | QFile::ExeOwner));
        const QString path = dir + QStringLiteral("/chats.db");
        const QString e = store_error([&] { ChatStore s(path); });
        QFile::setPermissions(dir, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        QVERIFY2(e.contains(path), qPrintable(e));
        QVERIFY2(e.contains(QStringLiteral("writable")), qPrintable(e));
        QVERIFY(!QFileInfo::exists(path));

        // A read-only database file.
        const QString ro = fresh_path();
        { ChatStore s(ro); }
        QVERIFY(QFile::setPermissions(ro, QFile::ReadOwner));
        const QString e2 = store_error([&] { ChatStore s(ro); });
        QFile::setPermissions(ro, QFile::ReadOwner | QFile::WriteOwner);
        QVERIFY2(e2.contains(ro) && e2.contains(QStringLiteral("read-only")), qPrintable(e2));
    }

    void unicode_round_trip() {
        const QString path = fresh_path();
        const QString title = QStringLiteral("Ünïcødé 🚀 标题 עברית");
        const QString prompt = QStringLiteral("Réponds en français. 😀\n\tTabs and\r\nCRLF");
        const QString content = QStringLiteral(
            "Emoji 👩‍👩‍👧‍👦 🇨🇭, combining e\u0301, CJK 漢字かなカナ, Arabic مرحبا, Hebrew שלום, math ∑∫√, "
            "zero-width\u200Bspace, BOM \uFEFF, quotes ' \" ` and '); DROP TABLE messages; --\n"
            "second line\n\n```cpp\nint main() {}\n```\n");
        qint64 c = 0;
        {
            ChatStore s(path);
            c = s.create_conversation(title, prompt);
            s.append_message(c, QStringLiteral("user"), content);
            MessageStats st;
            st.model = QStringLiteral("modèle-🚀.gguf");
            const qint64 a = s.append_message(c, QStringLiteral("assistant"), QString(), true);
            s.update_message(a, content + content, false, st);
        }
        ChatStore s(path);
        QCOMPARE(s.conversation(c).title, title);
        QCOMPARE(s.conversation(c).system_prompt, prompt);
        const QList<Message> ms = s.messages(c);
        QCOMPARE(ms.size(), 2);
        QCOMPARE(ms[0].content, content);
        QCOMPARE(ms[1].content, content + content);
        QCOMPARE(ms[1].stats.model, QStringLiteral("modèle-🚀.gguf"));
        QCOMPARE(s.conversations(QStringLiteral("漢字")).size(), 1);
        QCOMPARE(s.conversations(QStringLiteral("🚀")).size(), 1);
        const QJsonObject root = QJsonDocument::fromJson(s.export_json(c)).object();
        QCOMPARE(root.value("title").toString(), title);
        QCOMPARE(root.value("messages").toArray()[0].toObject().value("content").toString(), content);
        QVERIFY(QString::fromUtf8(s.export_markdown(c)).contains(content.trimmed()));
    }

    // The requirement: a writer killed (SIGKILL) in the middle of its
    // writes loses nothing it had committed, and its unfinished answer is
    // kept, marked partial. Five kills on the same database.
    void killed_writer_loses_nothing_committed() {
        const QString path = fresh_path();
        QVERIFY(QDir().mkpath(QFileInfo(path).absolutePath()));
        QList<Reported> rounds;
        QElapsedTimer total;
        total.start();
        for (int round = 0; round < 5; ++round) {
            const int threshold = 150 + 37 * round;   // commits before the endless answer
            const int kill_after = 3 + 5 * round;     // streamed updates of it before the kill
            QProcess p;
            p.setProgram(QCoreApplication::applicationFilePath());
            p.setArguments({QStringLiteral("--writer"), path, QString::number(round), QString::number(threshold)});
            p.start();
            QVERIFY2(p.waitForStarted(10000), qPrintable(p.errorString()));
            Reported r;
            bool killed = false;
            QElapsedTimer t;
            t.start();
            while (!killed && t.elapsed() < 30000) {
                if (!p.canReadLine()) {
                    if (!p.waitForReadyRead(1000) && p.state() == QProcess::NotRunning) break;
                    continue;
                }
                const QByteArray line = p.readLine();
                QVERIFY2(parse_line(line, r), line.constData());
                if (r.endless && r.endless_steps >= kill_after) {
                    p.kill();   // SIGKILL, while it keeps writing
                    killed = true;
                }
            }
            if (!killed) p.kill();
            QVERIFY(p.waitForFinished(10000));
            // Lines already in the pipe were committed too.
            for (const QByteArray& line : p.readAllStandardOutput().split('\n')) QVERIFY(parse_line(line, r));
            QVERIFY2(killed, qPrintable("the writer stopped on its own: " + QString::fromUtf8(p.readAllStandardError())));
            QCOMPARE(p.exitStatus(), QProcess::CrashExit);
            QVERIFY(r.conv > 0 && r.endless > 0);
            QVERIFY2(r.lines >= threshold, qPrintable(QString::number(r.lines)));
            rounds << r;

            {
                Raw raw(path);
                QCOMPARE(raw.query(QStringLiteral("PRAGMA integrity_check")), QStringLiteral("ok"));
            }
            ChatStore s(path);
            {
                Raw raw(path);
                QCOMPARE(raw.query(QStringLiteral("PRAGMA integrity_check")), QStringLiteral("ok"));
                QCOMPARE(raw.query(QStringLiteral("PRAGMA foreign_key_check")), QString());
            }
            QCOMPARE(s.conversations().size(), round + 1);
            // Every round so far, including the earlier ones.
            for (int k = 0; k <= round; ++k) {
                const Reported& e = rounds[k];
                const QList<Message> ms = s.messages(e.conv);
                QCOMPARE(ms.size(), e.order.size());   // nothing lost, nothing unreported appended
                for (int i = 0; i < ms.size(); ++i) {
                    const Message& m = ms[i];
                    QCOMPARE(m.id, e.order[i]);
                    if (e.user.contains(m.id)) {
                        QCOMPARE(m.role, QStringLiteral("user"));
                        QCOMPARE(m.content, user_text(k, e.user[m.id]));
                        QVERIFY(!m.partial);
                    } else if (e.finished.contains(m.id)) {
                        QCOMPARE(m.role, QStringLiteral("assistant"));
                        QCOMPARE(m.content, answer_text(kStepsPerAnswer));
                        QVERIFY(!m.partial);
                        QCOMPARE(m.stats.finish, QStringLiteral("end"));
                        QCOMPARE(m.stats.tok_s, 42.5);
                    } else {
                        // The answer being streamed at the kill: kept, partial,
                        // at least as far as the last update reported.
                        QCOMPARE(m.id, e.endless);
                        QCOMPARE(m.role, QStringLiteral("assistant"));
                        QVERIFY(m.partial);
                        const int reported = e.last_step.value(m.id);
                        QVERIFY(reported >= 3 + 5 * k);   // that round's kill_after
                        QCOMPARE(m.content.size() % 7, 0);
                        const int stored = int(m.content.size() / 7);
                        QVERIFY2(stored >= reported, qPrintable(QStringLiteral("%1 < %2").arg(stored).arg(reported)));
                        QCOMPARE(m.content, answer_text(stored));
                        QCOMPARE(m.stats.tokens, stored);
                        QCOMPARE(m.stats.finish, QString());
                    }
                }
            }
        }
        qInfo("5 kills in %lld ms", total.elapsed());
    }
};

int main(int argc, char** argv) {
    if (argc >= 2 && std::strcmp(argv[1], "--writer") == 0) return writer_main(argc, argv);
    QCoreApplication app(argc, argv);
    TestChatStore tc;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&tc, argc, argv);
}

#include "test_chat_store.moc"
