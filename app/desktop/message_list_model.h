// The messages of the open conversation (centre column), oldest first. The
// answer being generated is the last row; chunks are appended to it in place.
//
// An assistant's text is kept split into reasoning and answer
// (chat::ReplyStream): a chunk is read once, the answer and reasoning grow by
// what it added, and the answer's pieces (SegmentsRole, a SegmentListModel
// per answer) grow by it too. While an answer streams only its pieces and
// reasoning are signalled, not its whole text, so a streamed token costs the
// same at the end of a long answer as at its start.
#pragma once

#include <QAbstractListModel>
#include <memory>
#include <vector>

#include "chat_store.h"
#include "markdown_segments.h"

namespace strata::chat {
class ReplyStream;
}

namespace strata::desktop {

class MessageListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
public:
    enum Role {
        IdRole = Qt::UserRole + 1,
        RoleRole,        // "user" | "assistant"
        ContentRole,     // an assistant's answer without its reasoning (chat::split_reply); not signalled while it streams
        SegmentsRole,    // an assistant's answer in prose and code pieces (SegmentListModel); null for the user's
        PartialRole,
        StreamingRole,   // the answer being generated now
        TokensRole,
        TokSRole,
        TtftRole,
        SecondsRole,
        FinishRole,
        ModelRole,
        StatsTextRole,   // "42 tokens · 37.1 tok/s · first token 120 ms"
        IsLastRole,
        VersionRole,       // which version of its answer this is (1-based; 0: no other versions)
        VersionCountRole,  // how many versions its answer has (the last answer only; 0 elsewhere)
        ReasoningRole,     // the reasoning before an assistant's answer (harmony's analysis, <think>); "" if none
        ReasoningOpenRole, // the reasoning is still being written
        ReasoningWordsRole, // how many words the reasoning has
        PromptDoneRole,     // a long prompt being read for this answer: tokens read so far (0: none)
        PromptTotalRole,    // ... of this many (0: not reading one)
        ToolCallsRole,      // the tools an answer called: [{name, arguments, result}] (empty: none)
    };
    explicit MessageListModel(QObject* parent = nullptr);
    ~MessageListModel() override;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void set_messages(const QList<app::Message>& list);
    void append(const app::Message& m);
    void append_text(qint64 id, const QString& text);
    void update(const app::Message& m);             // by id
    void set_streaming(qint64 id);                  // 0: none
    // How far the prompt of answer `id` has been read; total 0: done (or none).
    void set_prompt_progress(qint64 id, qint64 done, qint64 total);
    // The answer `id` is version `version` of `count` (regenerated answers kept).
    void set_versions(qint64 id, int version, int count);
    void remove_from(qint64 id);                    // this message and every later one
    int row_of(qint64 id) const;
    const app::Message* find(qint64 id) const;
    const QList<app::Message>& messages() const { return items_; }
    int count() const { return int(items_.size()); }
    Q_INVOKABLE QVariantMap get(int row) const;

    static QString stats_text(const app::Message& m);

Q_SIGNALS:
    void countChanged();

private:
    // An assistant message's text, split as it streams.
    struct DeleteLater {
        void operator()(QObject* o) const { o->deleteLater(); }  // a view may still hold it this turn
    };
    struct Reply {
        std::unique_ptr<chat::ReplyStream> stream;
        QString answer, reasoning;
        int reasoning_words = 0;
        std::unique_ptr<SegmentListModel, DeleteLater> segments;
        qint64 prompt_done = 0, prompt_total = 0;
    };
    // `reuse`: the row's old reply, whose pieces model is kept (the view keeps its items).
    static Reply reply_of(const app::Message& m, Reply* reuse = nullptr);
    QList<app::Message> items_;
    std::vector<Reply> replies_;  // one per item (empty for the user's)
    qint64 streaming_ = 0;
    qint64 versions_of_ = 0;
    int version_ = 0, version_count_ = 0;
};

}  // namespace strata::desktop
