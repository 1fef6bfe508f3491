// ChatStore: conversations and their messages in one SQLite database (the
// user's chats; under the XDG data directory in the app).
//
// Durability: WAL journal; synchronous=FULL for every commit except the
// streaming updates of a partial answer (update_message with partial=true:
// NORMAL, which survives a process kill but not necessarily a power loss);
// every write in a transaction, a schema version (PRAGMA user_version) with
// forward migrations applied in order at open. An answer being generated is
// stored as a message with partial=1 and updated as it streams (throttled by
// the caller); if the app is killed mid-answer, everything committed survives
// and the partial answer is kept, marked partial, when the store is next opened.
//
// Errors: every failure throws StoreError with a message naming the database
// path, the operation and SQLite's reason (e.g. a database from a newer
// Strata, a corrupt file, a read-only directory). Nothing already saved is
// deleted by a failed operation. A file that is not a SQLite database, is
// damaged, belongs to another program (tables but no schema version) or was
// made by a newer Strata is refused at open and left byte-for-byte as it was.
// Unknown conversation or message ids and a role other than user, assistant
// or system throw StoreError; an empty (or blank) title is stored as
// "New conversation". Timestamps are stored as UTC milliseconds; `updated`
// is kept strictly increasing across conversations so "newest first" is exact.
//
// Threading: one ChatStore per thread (the GUI thread owns the app's).
#pragma once

#include <QDateTime>
#include <QList>
#include <QString>
#include <stdexcept>

struct sqlite3;

namespace strata::app {

class StoreError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Conversation {
    qint64 id = 0;
    QString title;
    QString system_prompt;
    QDateTime created;   // UTC
    QDateTime updated;   // UTC; last message or rename
    qint64 message_count = 0;
    QString model;       // the model file the conversation last used ("" before its first answer)
};

// Generation figures of one assistant answer (zero for user messages).
struct MessageStats {
    qint64 prompt_tokens = 0;
    qint64 tokens = 0;           // generated tokens
    double tok_s = 0.0;          // decode tokens/s
    double ttft_ms = 0.0;        // time to first token
    double seconds = 0.0;        // whole answer wall time
    QString finish;              // "end", "stop", "length", "cancelled", "error", "" while streaming
    QString model;               // model file name that produced it
    qint64 cached_tokens = 0;    // prompt tokens whose keys/values were reused from the cache
    double spec_acceptance = -1; // speculative decoding: share of draft tokens kept; -1: not used
    // The answer's tool rounds as JSON (desktop/chat_tools.h), "" for none:
    // kept with the figures since it, too, belongs to this answer (versions swap it with them).
    QString tool_turns;
};

struct Message {
    qint64 id = 0;
    qint64 conversation_id = 0;
    QString role;                // "user" | "assistant" | "system"
    QString content;
    bool partial = false;        // an answer that did not finish (still streaming, or interrupted)
    MessageStats stats;
    QDateTime created;           // UTC
};

class ChatStore {
public:
    static constexpr int kSchemaVersion = 4;

    // Opens (creating the file and its directory if needed) and migrates.
    explicit ChatStore(const QString& path);
    ~ChatStore();
    ChatStore(const ChatStore&) = delete;
    ChatStore& operator=(const ChatStore&) = delete;

    QString path() const { return path_; }

    // Newest first (by updated). `search` (case-insensitive substring) matches
    // titles and message contents; empty lists everything.
    QList<Conversation> conversations(const QString& search = {}) const;
    Conversation conversation(qint64 id) const;   // throws StoreError if absent
    qint64 create_conversation(const QString& title, const QString& system_prompt = {});
    void rename_conversation(qint64 id, const QString& title);
    void set_system_prompt(qint64 id, const QString& system_prompt);
    // The model file the conversation uses (the app offers to load it when the chat is opened).
    void set_conversation_model(qint64 id, const QString& model_path);
    void delete_conversation(qint64 id);          // and its messages

    // Oldest first.
    QList<Message> messages(qint64 conversation_id) const;
    qint64 append_message(qint64 conversation_id, const QString& role, const QString& content, bool partial = false);
    // Streaming updates and the final commit of an answer.
    void update_message(qint64 message_id, const QString& content, bool partial, const MessageStats& stats);
    // Regenerate / edit-and-resend: deletes this message and every later one of its conversation.
    void delete_messages_from(qint64 message_id);

    // Answer versions (regenerate keeps the answers it replaces). An answer
    // is the assistant message right after a user message, its question;
    // the other answers to that question are kept beside it, oldest first,
    // and go when the question goes.
    // Regenerate: moves the answer `message_id` (and deletes every later
    // message) out of the conversation into its question's versions.
    void archive_answer(qint64 message_id);
    // The kept versions of the answer to `question_id` (ids are the
    // versions', not messages'; the shown answer is not among them).
    QList<Message> answer_versions(qint64 question_id) const;
    // Shows version `version_id` as the answer `message_id` and keeps the
    // answer shown until now as that version (the two swap places).
    void swap_answer_version(qint64 message_id, qint64 version_id);

    // Exports (UTF-8). Markdown: a title, the system prompt, then "## User" /
    // "## Assistant" sections (an answer's tool calls quoted before it); JSON: {"title", "system_prompt",
    // "created", "messages":[{role, content, partial, stats, tool_rounds (answers that called tools)}]}.
    QByteArray export_markdown(qint64 conversation_id) const;
    QByteArray export_json(qint64 conversation_id) const;

private:
    void exec(const char* sql, const char* what);
    void migrate();
    void refuse_foreign();
    // synchronous=FULL (true) or NORMAL (false) for the next commits.
    void set_durability(bool full);
    QString path_;
    sqlite3* db_ = nullptr;
    bool sync_full_ = true;
};

}  // namespace strata::app
