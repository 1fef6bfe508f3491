// ChatStore on the SQLite C API. See chat_store.h for the contract; the
// decisions that are not in the header are explained where they are made:
//
//  * Opening never writes before the file is known to be a SQLite database of
//    a schema version this build understands (user_version is read first, the
//    journal mode is switched to WAL only afterwards), so a foreign, damaged or
//    newer file is left byte-for-byte as it was.
//  * Timestamps are UTC milliseconds since the epoch (INTEGER columns).
//  * Every write is one BEGIN IMMEDIATE ... COMMIT transaction. Commits that
//    create or finish something (a new message, the final update of an
//    answer, renames, deletions) are made with synchronous=FULL: the WAL is
//    fsync'ed before COMMIT returns, so they survive a power loss. The
//    throttled streaming updates of a partial answer (update_message with
//    partial=true) are committed with synchronous=NORMAL: in WAL mode the
//    frames are written to the WAL file (the kernel's page cache) before
//    COMMIT returns, so they survive the process being killed; only a power
//    loss can take back the last few of them, and the answer's row itself was
//    committed with FULL when it was appended.
//  * Search is a Unicode case-insensitive substring match done by a SQL
//    function registered on the connection (strata_contains), so '%' and '_'
//    in the search text are plain characters and "Ä" finds "ä".
#include "chat_store.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <sqlite3.h>

#include "chat/chat_template.h"

#include <algorithm>
#include <iterator>

namespace strata::app {
namespace {

// --- schema ----------------------------------------------------------------
//
// Each step takes the database from version `to - 1` to `to`. To change the
// schema, append a step {2, "..."} and raise ChatStore::kSchemaVersion; never
// edit a step that has shipped. All pending steps run in one transaction,
// together with the user_version update, so a migration is all or nothing.
struct Migration {
    int to;
    const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
        CREATE TABLE conversations(
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            title         TEXT    NOT NULL,
            system_prompt TEXT    NOT NULL DEFAULT '',
            created       INTEGER NOT NULL,   -- UTC ms since the epoch
            updated       INTEGER NOT NULL    -- UTC ms; strictly increasing across the table
        );
        CREATE INDEX conversations_by_updated ON conversations(updated);
        CREATE TABLE messages(
            id              INTEGER PRIMARY KEY AUTOINCREMENT,   -- never reused
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role            TEXT    NOT NULL CHECK(role IN ('user', 'assistant', 'system')),
            content         TEXT    NOT NULL DEFAULT '',
            partial         INTEGER NOT NULL DEFAULT 0 CHECK(partial IN (0, 1)),
            prompt_tokens   INTEGER NOT NULL DEFAULT 0,
            tokens          INTEGER NOT NULL DEFAULT 0,
            tok_s           REAL    NOT NULL DEFAULT 0,
            ttft_ms         REAL    NOT NULL DEFAULT 0,
            seconds         REAL    NOT NULL DEFAULT 0,
            finish          TEXT    NOT NULL DEFAULT '',
            model           TEXT    NOT NULL DEFAULT '',
            created         INTEGER NOT NULL  -- UTC ms since the epoch
        );
        CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    )sql"},
    {2, R"sql(
        ALTER TABLE messages ADD COLUMN cached_tokens   INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN spec_acceptance REAL    NOT NULL DEFAULT -1;
    )sql"},
    {3, R"sql(
        CREATE TABLE answer_versions(
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            question_id     INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            content         TEXT    NOT NULL DEFAULT '',
            partial         INTEGER NOT NULL DEFAULT 0 CHECK(partial IN (0, 1)),
            prompt_tokens   INTEGER NOT NULL DEFAULT 0,
            tokens          INTEGER NOT NULL DEFAULT 0,
            tok_s           REAL    NOT NULL DEFAULT 0,
            ttft_ms         REAL    NOT NULL DEFAULT 0,
            seconds         REAL    NOT NULL DEFAULT 0,
            finish          TEXT    NOT NULL DEFAULT '',
            model           TEXT    NOT NULL DEFAULT '',
            created         INTEGER NOT NULL,
            cached_tokens   INTEGER NOT NULL DEFAULT 0,
            spec_acceptance REAL    NOT NULL DEFAULT -1
        );
        CREATE INDEX answer_versions_by_question ON answer_versions(question_id, created);
        ALTER TABLE conversations ADD COLUMN model TEXT NOT NULL DEFAULT '';
    )sql"},
    {4, R"sql(
        -- An answer's tool rounds (the calls it made and their results), JSON; '' for none.
        ALTER TABLE messages        ADD COLUMN tool_turns TEXT NOT NULL DEFAULT '';
        ALTER TABLE answer_versions ADD COLUMN tool_turns TEXT NOT NULL DEFAULT '';
    )sql"},
};

static_assert(std::size(kMigrations) == ChatStore::kSchemaVersion, "one migration step per schema version");
static_assert(kMigrations[std::size(kMigrations) - 1].to == ChatStore::kSchemaVersion,
              "the last migration step must reach kSchemaVersion");

constexpr int kBusyTimeoutMs = 5000;
// quick_check reads every page: ~50 ms for 100 MB with a warm cache. Larger
// databases skip it at open (SQLite still reports corruption on any page it
// reads later, as a StoreError).
constexpr qint64 kQuickCheckMaxBytes = 128LL * 1024 * 1024;

const QString kDefaultTitle = QStringLiteral("New conversation");

// --- errors ------------------------------------------------------------------

QString hint_for(int rc) {
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return QStringLiteral(
            "the file is not a Strata chat database or is damaged, and has been left as it is: move it aside "
            "to start a new one, or restore it from a backup");
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
        return QStringLiteral("check that the file and its directory exist and are writable");
    case SQLITE_FULL:
        return QStringLiteral("the disk is full");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return QStringLiteral("another program is holding the database locked");
    default:
        return {};
    }
}

[[noreturn]] void throw_store(const QString& path, const QString& what, const QString& reason, const QString& hint = {}) {
    QString msg = QStringLiteral("chat database %1: %2: %3").arg(path, what, reason);
    if (!hint.isEmpty()) msg += QStringLiteral("; ") + hint;
    throw StoreError(msg.toStdString());
}

[[noreturn]] void throw_sqlite(sqlite3* db, const QString& path, const char* what, int rc) {
    QString reason = db ? QString::fromUtf8(sqlite3_errmsg(db)) : QString::fromUtf8(sqlite3_errstr(rc));
    // sqlite3_errmsg can lag behind (e.g. "not an error" after a failed
    // reset): fall back to the code's own text.
    if (reason.isEmpty() || reason == QLatin1String("not an error")) reason = QString::fromUtf8(sqlite3_errstr(rc));
    throw_store(path, QString::fromUtf8(what), reason, hint_for(rc));
}

// --- statements --------------------------------------------------------------

class Stmt {
public:
    Stmt(sqlite3* db, const QString& path, const char* sql, const char* what) : db_(db), path_(path), what_(what) {
        const int rc = sqlite3_prepare_v2(db_, sql, -1, &st_, nullptr);
        if (rc != SQLITE_OK) throw_sqlite(db_, path_, what_, rc);
    }
    ~Stmt() { sqlite3_finalize(st_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, qint64 v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, int v) { return check(sqlite3_bind_int64(st_, i, v)); }
    Stmt& bind(int i, bool v) { return check(sqlite3_bind_int64(st_, i, v ? 1 : 0)); }
    Stmt& bind(int i, double v) { return check(sqlite3_bind_double(st_, i, v)); }
    Stmt& bind(int i, const QString& v) {
        const QByteArray u = v.toUtf8();   // a null QString binds '' (the columns are NOT NULL)
        return check(sqlite3_bind_text64(st_, i, u.constData(), sqlite3_uint64(u.size()), SQLITE_TRANSIENT, SQLITE_UTF8));
    }

    // true: a row is ready; false: done. Throws on any error.
    bool step() {
        const int rc = sqlite3_step(st_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw_sqlite(db_, path_, what_, rc);
    }
    void run() {
        while (step()) {
        }
    }

    qint64 i64(int c) const { return sqlite3_column_int64(st_, c); }
    double f64(int c) const { return sqlite3_column_double(st_, c); }
    QString text(int c) const {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
        return p ? QString::fromUtf8(p, sqlite3_column_bytes(st_, c)) : QString();
    }

private:
    Stmt& check(int rc) {
        if (rc != SQLITE_OK) throw_sqlite(db_, path_, what_, rc);
        return *this;
    }
    sqlite3* db_;
    const QString& path_;
    const char* what_;
    sqlite3_stmt* st_ = nullptr;
};

// strata_contains(haystack, needle): 1 when needle occurs in haystack,
// ignoring case (Unicode case folding). The needle's QString is converted
// once per statement and kept as auxiliary data.
void sql_contains(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
    if (argc != 2 || sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
        sqlite3_result_int(ctx, 0);
        return;
    }
    const auto* h = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    const QString hay = QString::fromUtf8(h, sqlite3_value_bytes(argv[0]));
    if (const auto* cached = static_cast<const QString*>(sqlite3_get_auxdata(ctx, 1))) {
        sqlite3_result_int(ctx, hay.contains(*cached, Qt::CaseInsensitive) ? 1 : 0);
        return;
    }
    const auto* n = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
    auto* needle = new QString(QString::fromUtf8(n, sqlite3_value_bytes(argv[1])));
    sqlite3_result_int(ctx, hay.contains(*needle, Qt::CaseInsensitive) ? 1 : 0);
    // Hands the needle to SQLite (which may free it at once): not used after this.
    sqlite3_set_auxdata(ctx, 1, needle, [](void* p) { delete static_cast<QString*>(p); });
}

// --- helpers -------------------------------------------------------------------

QDateTime from_ms(qint64 ms) { return QDateTime::fromMSecsSinceEpoch(ms, Qt::UTC); }

QString iso(const QDateTime& t) { return t.toUTC().toString(Qt::ISODateWithMs); }

QString clean_title(const QString& title) {
    const QString t = title.trimmed();
    return t.isEmpty() ? kDefaultTitle : t;
}

void check_role(const QString& path, const QString& role) {
    if (role != QLatin1String("user") && role != QLatin1String("assistant") && role != QLatin1String("system"))
        throw_store(path, QStringLiteral("append message"),
                    QStringLiteral("invalid role '%1' (expected user, assistant or system)").arg(role));
}

[[noreturn]] void refuse_newer(const QString& path, int version) {
    throw_store(path, QStringLiteral("open"),
                QStringLiteral("it was made by a newer version of Strata (schema version %1; this build knows up "
                               "to %2)")
                    .arg(version)
                    .arg(ChatStore::kSchemaVersion),
                QStringLiteral("it has been left as it is: update Strata to open it"));
}

[[noreturn]] void no_conversation(const QString& path, const char* what, qint64 id) {
    throw_store(path, QString::fromUtf8(what), QStringLiteral("conversation %1 does not exist").arg(id));
}

[[noreturn]] void no_message(const QString& path, const char* what, qint64 id) {
    throw_store(path, QString::fromUtf8(what), QStringLiteral("message %1 does not exist").arg(id));
}

// One write transaction: BEGIN IMMEDIATE (takes the write lock up front, so
// the busy timeout applies and no read-to-write upgrade can deadlock),
// COMMIT in commit(), ROLLBACK if left by an exception.
class Transaction {
public:
    Transaction(sqlite3* db, const QString& path, const char* what) : db_(db), path_(path), what_(what) {
        const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) throw_sqlite(db_, path_, what_, rc);
    }
    ~Transaction() {
        if (!done_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit() {
        const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) throw_sqlite(db_, path_, what_, rc);   // the destructor rolls back
        done_ = true;
    }

private:
    sqlite3* db_;
    const QString& path_;
    const char* what_;
    bool done_ = false;
};

// A conversation's new `updated`: now, but strictly after every other
// conversation's, so "newest first" is exact even for several changes within
// one millisecond (or after the clock stepped back).
qint64 next_stamp(sqlite3* db, const QString& path, const char* what) {
    Stmt s(db, path, "SELECT max(updated) FROM conversations", what);
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    if (!s.step()) return now;
    return std::max(now, s.i64(0) + 1);
}

// The conversation a message belongs to; StoreError when there is no such message.
qint64 conversation_of(sqlite3* db, const QString& path, const char* what, qint64 message_id) {
    Stmt c(db, path, "SELECT conversation_id FROM messages WHERE id = ?1", what);
    c.bind(1, message_id);
    if (!c.step()) no_message(path, what, message_id);
    return c.i64(0);
}

void bump(sqlite3* db, const QString& path, const char* what, qint64 conversation_id) {
    const qint64 stamp = next_stamp(db, path, what);
    Stmt s(db, path, "UPDATE conversations SET updated = ?1 WHERE id = ?2", what);
    s.bind(1, stamp).bind(2, conversation_id).run();
    if (sqlite3_changes(db) == 0) no_conversation(path, what, conversation_id);
}

Conversation read_conversation(const Stmt& s) {
    Conversation c;
    c.id = s.i64(0);
    c.title = s.text(1);
    c.system_prompt = s.text(2);
    c.created = from_ms(s.i64(3));
    c.updated = from_ms(s.i64(4));
    c.message_count = s.i64(5);
    c.model = s.text(6);
    return c;
}

constexpr const char* kConversationColumns =
    "SELECT c.id, c.title, c.system_prompt, c.created, c.updated, "
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.model FROM conversations c ";

}  // namespace

// --- open / migrate ---------------------------------------------------------

ChatStore::ChatStore(const QString& path) : path_(path) {
    const QFileInfo info(path_);
    if (path_.isEmpty()) throw_store(path_, QStringLiteral("open"), QStringLiteral("no path given"));
    if (info.isDir())
        throw_store(path_, QStringLiteral("open"), QStringLiteral("the path is a directory, not a database file"));
    const QString dir = info.absolutePath();
    if (!QDir().mkpath(dir))
        throw_store(path_, QStringLiteral("open"), QStringLiteral("cannot create the directory %1").arg(dir),
                    hint_for(SQLITE_CANTOPEN));

    const QByteArray file = QFile::encodeName(path_);
    const int rc = sqlite3_open_v2(file.constData(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    try {
        if (rc != SQLITE_OK) throw_sqlite(db_, path_, "open", rc);
        sqlite3_extended_result_codes(db_, 1);
        sqlite3_busy_timeout(db_, kBusyTimeoutMs);
        if (sqlite3_db_readonly(db_, "main") == 1)
            throw_store(path_, QStringLiteral("open"), QStringLiteral("the file is read-only"),
                        hint_for(SQLITE_READONLY));

        // Read first, write nothing: this is where a file that is not a
        // SQLite database fails (SQLITE_NOTADB), and where a newer schema is
        // refused before the journal mode or anything else is changed.
        int version = 0;
        {
            Stmt s(db_, path_, "PRAGMA user_version", "read the schema version");
            if (s.step()) version = int(s.i64(0));
        }
        if (version > kSchemaVersion) refuse_newer(path_, version);

        if (version == 0) refuse_foreign();

        if (info.exists() && info.size() <= kQuickCheckMaxBytes) {
            Stmt s(db_, path_, "PRAGMA quick_check(5)", "check the database");
            QStringList problems;
            while (s.step()) problems << s.text(0);
            if (!(problems.size() == 1 && problems[0] == QLatin1String("ok")))
                throw_store(path_, QStringLiteral("check the database"),
                            QStringLiteral("damaged: %1").arg(problems.join(QStringLiteral("; "))),
                            hint_for(SQLITE_CORRUPT));
        }

        {
            Stmt s(db_, path_, "PRAGMA journal_mode = WAL", "switch to WAL journal mode");
            s.run();
        }
        exec("PRAGMA foreign_keys = ON", "enable foreign keys");
        exec("PRAGMA synchronous = FULL", "set synchronous");
        sync_full_ = true;

        const int frc = sqlite3_create_function_v2(db_, "strata_contains", 2,
                                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, nullptr,
                                                   sql_contains, nullptr, nullptr, nullptr);
        if (frc != SQLITE_OK) throw_sqlite(db_, path_, "register the search function", frc);

        migrate();
    } catch (...) {
        sqlite3_close_v2(db_);
        db_ = nullptr;
        throw;
    }
}

ChatStore::~ChatStore() {
    if (db_) {
        sqlite3_exec(db_, "PRAGMA optimize", nullptr, nullptr, nullptr);
        sqlite3_close_v2(db_);
    }
}

void ChatStore::exec(const char* sql, const char* what) {
    // Only for fixed SQL text; anything carrying user text goes through Stmt.
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) throw_sqlite(db_, path_, what, rc);
}

void ChatStore::set_durability(bool full) {
    if (full == sync_full_) return;
    exec(full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL", "set synchronous");
    sync_full_ = full;
}

// A version-0 file with tables in it is some other program's database:
// never add ours to it.
void ChatStore::refuse_foreign() {
    Stmt s(db_, path_, "SELECT count(*) FROM sqlite_master", "read the schema");
    if (s.step() && s.i64(0) > 0)
        throw_store(path_, QStringLiteral("open"),
                    QStringLiteral("the file is a SQLite database of another program (it has tables but no "
                                   "Strata schema version)"),
                    QStringLiteral("it has been left as it is: move it aside or choose another file"));
}

void ChatStore::migrate() {
    Transaction tx(db_, path_, "migrate the schema");
    // Read again under the write lock: another process may have migrated
    // (or created the file) since the check in the constructor.
    int version = 0;
    {
        Stmt s(db_, path_, "PRAGMA user_version", "read the schema version");
        if (s.step()) version = int(s.i64(0));
    }
    if (version > kSchemaVersion) refuse_newer(path_, version);
    if (version == kSchemaVersion) return;   // nothing to do; the transaction rolls back (it wrote nothing)

    if (version == 0) refuse_foreign();

    for (const Migration& m : kMigrations) {
        if (m.to <= version) continue;
        const int rc = sqlite3_exec(db_, m.sql, nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) {
            const QByteArray what = "migrate the schema to version " + QByteArray::number(m.to);
            throw_sqlite(db_, path_, what.constData(), rc);
        }
        // PRAGMA takes no bound parameters; the value is our own integer.
        const QByteArray set = "PRAGMA user_version = " + QByteArray::number(m.to);
        exec(set.constData(), "store the schema version");
    }
    tx.commit();
}

// --- conversations --------------------------------------------------------------

QList<Conversation> ChatStore::conversations(const QString& search) const {
    QList<Conversation> out;
    if (search.isEmpty()) {
        Stmt s(db_, path_, (QByteArray(kConversationColumns) + "ORDER BY c.updated DESC, c.id DESC").constData(),
               "list conversations");
        while (s.step()) out.append(read_conversation(s));
    } else {
        Stmt s(db_, path_,
               (QByteArray(kConversationColumns) +
                "WHERE strata_contains(c.title, ?1) OR EXISTS (SELECT 1 FROM messages m "
                "WHERE m.conversation_id = c.id AND strata_contains(m.content, ?1)) "
                "ORDER BY c.updated DESC, c.id DESC")
                   .constData(),
               "search conversations");
        s.bind(1, search);
        while (s.step()) out.append(read_conversation(s));
    }
    return out;
}

Conversation ChatStore::conversation(qint64 id) const {
    Stmt s(db_, path_, (QByteArray(kConversationColumns) + "WHERE c.id = ?1").constData(), "read conversation");
    s.bind(1, id);
    if (!s.step()) no_conversation(path_, "read conversation", id);
    return read_conversation(s);
}

qint64 ChatStore::create_conversation(const QString& title, const QString& system_prompt) {
    const char* what = "create conversation";
    set_durability(true);
    Transaction tx(db_, path_, what);
    const qint64 stamp = next_stamp(db_, path_, what);
    Stmt s(db_, path_,
           "INSERT INTO conversations(title, system_prompt, created, updated) VALUES (?1, ?2, ?3, ?3)", what);
    s.bind(1, clean_title(title)).bind(2, system_prompt).bind(3, stamp).run();
    const qint64 id = sqlite3_last_insert_rowid(db_);
    tx.commit();
    return id;
}

void ChatStore::rename_conversation(qint64 id, const QString& title) {
    const char* what = "rename conversation";
    set_durability(true);
    Transaction tx(db_, path_, what);
    const qint64 stamp = next_stamp(db_, path_, what);
    Stmt s(db_, path_, "UPDATE conversations SET title = ?1, updated = ?2 WHERE id = ?3", what);
    s.bind(1, clean_title(title)).bind(2, stamp).bind(3, id).run();
    if (sqlite3_changes(db_) == 0) no_conversation(path_, what, id);
    tx.commit();
}

void ChatStore::set_system_prompt(qint64 id, const QString& system_prompt) {
    const char* what = "set system prompt";
    set_durability(true);
    Transaction tx(db_, path_, what);
    Stmt s(db_, path_, "UPDATE conversations SET system_prompt = ?1 WHERE id = ?2", what);
    s.bind(1, system_prompt).bind(2, id).run();
    if (sqlite3_changes(db_) == 0) no_conversation(path_, what, id);
    tx.commit();
}

void ChatStore::set_conversation_model(qint64 id, const QString& model_path) {
    const char* what = "set the conversation's model";
    set_durability(false);  // a hint for later: NORMAL, like a streaming update
    Transaction tx(db_, path_, what);
    Stmt s(db_, path_, "UPDATE conversations SET model = ?1 WHERE id = ?2", what);
    s.bind(1, model_path).bind(2, id).run();
    if (sqlite3_changes(db_) == 0) no_conversation(path_, what, id);
    tx.commit();
}

void ChatStore::delete_conversation(qint64 id) {
    const char* what = "delete conversation";
    set_durability(true);
    Transaction tx(db_, path_, what);
    Stmt s(db_, path_, "DELETE FROM conversations WHERE id = ?1", what);   // messages: ON DELETE CASCADE
    s.bind(1, id).run();
    if (sqlite3_changes(db_) == 0) no_conversation(path_, what, id);
    tx.commit();
}

// --- messages ----------------------------------------------------------------------

QList<Message> ChatStore::messages(qint64 conversation_id) const {
    const char* what = "read messages";
    {
        Stmt c(db_, path_, "SELECT 1 FROM conversations WHERE id = ?1", what);
        c.bind(1, conversation_id);
        if (!c.step()) no_conversation(path_, what, conversation_id);
    }
    Stmt s(db_, path_,
           "SELECT id, conversation_id, role, content, partial, prompt_tokens, tokens, tok_s, ttft_ms, seconds, "
           "finish, model, created, cached_tokens, spec_acceptance, tool_turns FROM messages WHERE conversation_id = ?1 "
           "ORDER BY id",
           what);
    s.bind(1, conversation_id);
    QList<Message> out;
    while (s.step()) {
        Message m;
        m.id = s.i64(0);
        m.conversation_id = s.i64(1);
        m.role = s.text(2);
        m.content = s.text(3);
        m.partial = s.i64(4) != 0;
        m.stats.prompt_tokens = s.i64(5);
        m.stats.tokens = s.i64(6);
        m.stats.tok_s = s.f64(7);
        m.stats.ttft_ms = s.f64(8);
        m.stats.seconds = s.f64(9);
        m.stats.finish = s.text(10);
        m.stats.model = s.text(11);
        m.created = from_ms(s.i64(12));
        m.stats.cached_tokens = s.i64(13);
        m.stats.spec_acceptance = s.f64(14);
        m.stats.tool_turns = s.text(15);
        out.append(std::move(m));
    }
    return out;
}

qint64 ChatStore::append_message(qint64 conversation_id, const QString& role, const QString& content, bool partial) {
    const char* what = "append message";
    check_role(path_, role);
    set_durability(true);
    Transaction tx(db_, path_, what);
    bump(db_, path_, what, conversation_id);   // throws if the conversation does not exist
    Stmt s(db_, path_,
           "INSERT INTO messages(conversation_id, role, content, partial, created) VALUES (?1, ?2, ?3, ?4, ?5)",
           what);
    s.bind(1, conversation_id).bind(2, role).bind(3, content).bind(4, partial).bind(5,
                                                                                   QDateTime::currentMSecsSinceEpoch());
    s.run();
    const qint64 id = sqlite3_last_insert_rowid(db_);
    tx.commit();
    return id;
}

void ChatStore::update_message(qint64 message_id, const QString& content, bool partial, const MessageStats& stats) {
    const char* what = "update message";
    // Streaming updates: NORMAL (survives a process kill); the final one: FULL.
    set_durability(!partial);
    Transaction tx(db_, path_, what);
    const qint64 conversation_id = conversation_of(db_, path_, what, message_id);
    Stmt s(db_, path_,
           "UPDATE messages SET content = ?1, partial = ?2, prompt_tokens = ?3, tokens = ?4, tok_s = ?5, "
           "ttft_ms = ?6, seconds = ?7, finish = ?8, model = ?9, cached_tokens = ?11, spec_acceptance = ?12, "
           "tool_turns = ?13 WHERE id = ?10",
           what);
    s.bind(1, content)
        .bind(2, partial)
        .bind(3, stats.prompt_tokens)
        .bind(4, stats.tokens)
        .bind(5, stats.tok_s)
        .bind(6, stats.ttft_ms)
        .bind(7, stats.seconds)
        .bind(8, stats.finish)
        .bind(9, stats.model)
        .bind(10, message_id)
        .bind(11, stats.cached_tokens)
        .bind(12, stats.spec_acceptance)
        .bind(13, stats.tool_turns)
        .run();
    bump(db_, path_, what, conversation_id);
    tx.commit();
}

void ChatStore::delete_messages_from(qint64 message_id) {
    const char* what = "delete messages";
    set_durability(true);
    Transaction tx(db_, path_, what);
    const qint64 conversation_id = conversation_of(db_, path_, what, message_id);
    Stmt s(db_, path_, "DELETE FROM messages WHERE conversation_id = ?1 AND id >= ?2", what);
    s.bind(1, conversation_id).bind(2, message_id).run();
    bump(db_, path_, what, conversation_id);
    tx.commit();
}

// --- answer versions -------------------------------------------------------------

namespace {
// The columns a message and an answer version share, in this order.
constexpr const char* kAnswerColumns =
    "content, partial, prompt_tokens, tokens, tok_s, ttft_ms, seconds, finish, model, created, cached_tokens, spec_acceptance, "
    "tool_turns";

// Reads kAnswerColumns from column `first` on.
void read_answer(Stmt& s, int first, Message& m) {
    m.content = s.text(first);
    m.partial = s.i64(first + 1) != 0;
    m.stats.prompt_tokens = s.i64(first + 2);
    m.stats.tokens = s.i64(first + 3);
    m.stats.tok_s = s.f64(first + 4);
    m.stats.ttft_ms = s.f64(first + 5);
    m.stats.seconds = s.f64(first + 6);
    m.stats.finish = s.text(first + 7);
    m.stats.model = s.text(first + 8);
    m.created = from_ms(s.i64(first + 9));
    m.stats.cached_tokens = s.i64(first + 10);
    m.stats.spec_acceptance = s.f64(first + 11);
    m.stats.tool_turns = s.text(first + 12);
}

// Binds kAnswerColumns as ?1..?13.
void bind_answer(Stmt& s, const Message& m) {
    s.bind(1, m.content)
        .bind(2, m.partial)
        .bind(3, m.stats.prompt_tokens)
        .bind(4, m.stats.tokens)
        .bind(5, m.stats.tok_s)
        .bind(6, m.stats.ttft_ms)
        .bind(7, m.stats.seconds)
        .bind(8, m.stats.finish)
        .bind(9, m.stats.model)
        .bind(10, m.created.toMSecsSinceEpoch())
        .bind(11, m.stats.cached_tokens)
        .bind(12, m.stats.spec_acceptance)
        .bind(13, m.stats.tool_turns);
}
}  // namespace

void ChatStore::archive_answer(qint64 message_id) {
    const char* what = "keep the answer's version";
    set_durability(true);
    Transaction tx(db_, path_, what);
    const qint64 conversation_id = conversation_of(db_, path_, what, message_id);
    qint64 question = 0;
    {
        Stmt q(db_, path_,
               "SELECT q.id FROM messages q JOIN messages a ON a.id = ?1 WHERE q.conversation_id = a.conversation_id "
               "AND q.id < a.id AND a.role = 'assistant' ORDER BY q.id DESC LIMIT 1",
               what);
        q.bind(1, message_id);
        if (q.step()) question = q.i64(0);
    }
    if (question != 0) {
        Stmt role(db_, path_, "SELECT role FROM messages WHERE id = ?1", what);
        role.bind(1, question);
        if (!role.step() || role.text(0) != QLatin1String("user")) question = 0;  // not an answer to a question
    }
    if (question != 0) {
        const QByteArray sql = QByteArray("INSERT INTO answer_versions(question_id, ") + kAnswerColumns + ") SELECT ?2, " +
                               kAnswerColumns + " FROM messages WHERE id = ?1";
        Stmt ins(db_, path_, sql.constData(), what);
        ins.bind(1, message_id).bind(2, question).run();
    }
    Stmt del(db_, path_, "DELETE FROM messages WHERE conversation_id = ?1 AND id >= ?2", what);
    del.bind(1, conversation_id).bind(2, message_id).run();
    bump(db_, path_, what, conversation_id);
    tx.commit();
}

QList<Message> ChatStore::answer_versions(qint64 question_id) const {
    const QByteArray sql = QByteArray("SELECT id, ") + kAnswerColumns +
                           " FROM answer_versions WHERE question_id = ?1 ORDER BY created, id";
    Stmt s(db_, path_, sql.constData(), "read answer versions");
    s.bind(1, question_id);
    QList<Message> out;
    while (s.step()) {
        Message m;
        m.id = s.i64(0);
        m.role = QStringLiteral("assistant");
        read_answer(s, 1, m);
        out.append(std::move(m));
    }
    return out;
}

void ChatStore::swap_answer_version(qint64 message_id, qint64 version_id) {
    const char* what = "show another answer version";
    set_durability(true);
    Transaction tx(db_, path_, what);
    const qint64 conversation_id = conversation_of(db_, path_, what, message_id);
    Message shown, kept;
    {
        const QByteArray sql = QByteArray("SELECT ") + kAnswerColumns + " FROM messages WHERE id = ?1";
        Stmt s(db_, path_, sql.constData(), what);
        s.bind(1, message_id);
        if (!s.step()) throw StoreError((path_ + QStringLiteral(": %1: no message %2").arg(QLatin1String(what)).arg(message_id)).toStdString());
        read_answer(s, 0, shown);
    }
    {
        const QByteArray sql = QByteArray("SELECT ") + kAnswerColumns +
                               " FROM answer_versions WHERE id = ?1 AND question_id IN "
                               "(SELECT id FROM messages WHERE conversation_id = ?2)";
        Stmt s(db_, path_, sql.constData(), what);
        s.bind(1, version_id).bind(2, conversation_id);
        if (!s.step())
            throw StoreError((path_ + QStringLiteral(": %1: no version %2 of an answer in this conversation")
                                          .arg(QLatin1String(what))
                                          .arg(version_id))
                                 .toStdString());
        read_answer(s, 0, kept);
    }
    Stmt to_message(db_, path_,
                    "UPDATE messages SET content = ?1, partial = ?2, prompt_tokens = ?3, tokens = ?4, tok_s = ?5, "
                    "ttft_ms = ?6, seconds = ?7, finish = ?8, model = ?9, created = ?10, cached_tokens = ?11, "
                    "spec_acceptance = ?12, tool_turns = ?13 WHERE id = ?14",
                    what);
    bind_answer(to_message, kept);
    to_message.bind(14, message_id).run();
    Stmt to_version(db_, path_,
                    "UPDATE answer_versions SET content = ?1, partial = ?2, prompt_tokens = ?3, tokens = ?4, tok_s = ?5, "
                    "ttft_ms = ?6, seconds = ?7, finish = ?8, model = ?9, created = ?10, cached_tokens = ?11, "
                    "spec_acceptance = ?12, tool_turns = ?13 WHERE id = ?14",
                    what);
    bind_answer(to_version, shown);
    to_version.bind(14, version_id).run();
    bump(db_, path_, what, conversation_id);
    tx.commit();
}

// --- exports -------------------------------------------------------------------------

QByteArray ChatStore::export_markdown(qint64 conversation_id) const {
    const Conversation c = conversation(conversation_id);
    const QList<Message> ms = messages(conversation_id);

    QString title = c.title;
    title.replace(QLatin1Char('\r'), QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
    QString md = QStringLiteral("# %1\n\n").arg(title);
    md += QStringLiteral("_Strata conversation, started %1 UTC._\n\n")
              .arg(c.created.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm")));
    if (!c.system_prompt.isEmpty()) md += QStringLiteral("## System prompt\n\n%1\n\n").arg(c.system_prompt.trimmed());

    for (const Message& m : ms) {
        const QString heading = m.role == QLatin1String("user")        ? QStringLiteral("User")
                                : m.role == QLatin1String("assistant") ? QStringLiteral("Assistant")
                                                                       : QStringLiteral("System");
        md += QStringLiteral("## %1\n\n").arg(heading);
        if (m.role == QLatin1String("assistant")) {
            // The tools it called before answering, each with its result.
            for (const QJsonValue& round : QJsonDocument::fromJson(m.stats.tool_turns.toUtf8()).array())
                for (const QJsonValue& c : round[QStringLiteral("calls")].toArray())
                    md += QStringLiteral("> Tool `%1(%2)` → %3\n\n")
                              .arg(c[QStringLiteral("name")].toString(), c[QStringLiteral("arguments")].toString(),
                                   c[QStringLiteral("result")].toString().simplified());
            // A reasoning model's reply: the answer, its reasoning folded away (HTML details).
            const chat::ReplyParts p = chat::split_reply(m.content.toStdString());
            const QString answer = QString::fromStdString(p.answer).trimmed();
            const QString reasoning = QString::fromStdString(p.reasoning).trimmed();
            if (!answer.isEmpty()) md += answer + QStringLiteral("\n\n");
            if (!reasoning.isEmpty())
                md += QStringLiteral("<details><summary>Reasoning</summary>\n\n%1\n\n</details>\n\n").arg(reasoning);
        } else if (!m.content.isEmpty()) {
            md += m.content.trimmed() + QStringLiteral("\n\n");
        }
        if (m.role == QLatin1String("assistant")) {
            QStringList facts;
            if (!m.stats.model.isEmpty()) facts << m.stats.model;
            if (m.stats.tokens > 0) facts << QStringLiteral("%1 tokens").arg(m.stats.tokens);
            if (m.stats.tok_s > 0) facts << QStringLiteral("%1 tok/s").arg(m.stats.tok_s, 0, 'f', 1);
            if (m.stats.ttft_ms > 0) facts << QStringLiteral("first token %1 ms").arg(m.stats.ttft_ms, 0, 'f', 0);
            if (m.stats.seconds > 0) facts << QStringLiteral("%1 s").arg(m.stats.seconds, 0, 'f', 1);
            if (!m.stats.finish.isEmpty()) facts << QStringLiteral("finish: %1").arg(m.stats.finish);
            if (m.partial) facts << QStringLiteral("incomplete answer");
            if (!facts.isEmpty()) md += QStringLiteral("_%1_\n\n").arg(facts.join(QStringLiteral(" · ")));
        }
    }
    return md.toUtf8();
}

QByteArray ChatStore::export_json(qint64 conversation_id) const {
    const Conversation c = conversation(conversation_id);
    const QList<Message> ms = messages(conversation_id);

    QJsonArray arr;
    for (const Message& m : ms) {
        QJsonObject o{
            {QStringLiteral("role"), m.role},
            {QStringLiteral("content"), m.content},
            {QStringLiteral("partial"), m.partial},
            {QStringLiteral("created"), iso(m.created)},
        };
        if (m.role == QLatin1String("assistant")) {
            o.insert(QStringLiteral("stats"), QJsonObject{
                                                  {QStringLiteral("prompt_tokens"), m.stats.prompt_tokens},
                                                  {QStringLiteral("tokens"), m.stats.tokens},
                                                  {QStringLiteral("tok_s"), m.stats.tok_s},
                                                  {QStringLiteral("ttft_ms"), m.stats.ttft_ms},
                                                  {QStringLiteral("seconds"), m.stats.seconds},
                                                  {QStringLiteral("finish"), m.stats.finish},
                                                  {QStringLiteral("model"), m.stats.model},
                                              });
            if (!m.stats.tool_turns.isEmpty())
                o.insert(QStringLiteral("tool_rounds"), QJsonDocument::fromJson(m.stats.tool_turns.toUtf8()).array());
        }
        arr.append(o);
    }
    const QJsonObject root{
        {QStringLiteral("format"), QStringLiteral("strata-conversation")},
        {QStringLiteral("version"), 1},
        {QStringLiteral("title"), c.title},
        {QStringLiteral("system_prompt"), c.system_prompt},
        {QStringLiteral("created"), iso(c.created)},
        {QStringLiteral("updated"), iso(c.updated)},
        {QStringLiteral("messages"), arr},
    };
    return QJsonDocument(root).toJson(QJsonDocument::Indented);
}

}  // namespace strata::app
