#include "message_list_model.h"

#include "chat/chat_template.h"
#include "chat/reply_stream.h"
#include "chat_tools.h"

#include <QQmlEngine>

namespace strata::desktop {

namespace {

// Words in s[from..]: runs of non-space, one started before `from` not counted again.
int count_words(const QString& s, qsizetype from = 0) {
    int n = 0;
    bool in_word = from > 0 && !s.at(from - 1).isSpace();
    for (qsizetype i = from; i < s.size(); ++i) {
        const bool space = s.at(i).isSpace();
        if (!space && !in_word) ++n;
        in_word = !space;
    }
    return n;
}

// `dst` (the UTF-8 `old_bytes` it was made from) becomes `now`, of which the first `kept` bytes are unchanged.
bool follow(QString& dst, qsizetype old_bytes, const std::string& now, size_t kept) {
    if (kept == size_t(old_bytes)) {
        if (now.size() == kept) return false;
        dst += QString::fromUtf8(now.data() + kept, qsizetype(now.size() - kept));
    } else {
        dst = QString::fromStdString(now);
    }
    return true;
}

}  // namespace

MessageListModel::MessageListModel(QObject* parent) : QAbstractListModel(parent) {}
MessageListModel::~MessageListModel() = default;

MessageListModel::Reply MessageListModel::reply_of(const app::Message& m, Reply* reuse) {
    Reply r;
    if (m.role != QLatin1String("assistant")) return r;
    r.stream = std::make_unique<chat::ReplyStream>();
    r.stream->append(m.content.toStdString());
    r.answer = QString::fromStdString(r.stream->parts().answer);
    r.reasoning = QString::fromStdString(r.stream->parts().reasoning);
    r.reasoning_words = count_words(r.reasoning);
    if (reuse && reuse->segments) r.segments = std::move(reuse->segments);
    else {
        r.segments.reset(new SegmentListModel());
        QQmlEngine::setObjectOwnership(r.segments.get(), QQmlEngine::CppOwnership);  // QML only borrows it
    }
    r.segments->setMarkdown(r.answer);
    return r;
}

int MessageListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(items_.size()); }

QString MessageListModel::stats_text(const app::Message& m) {
    if (m.role != QLatin1String("assistant") || m.stats.tokens <= 0) return {};
    QStringList parts;
    parts << QStringLiteral("%1 tokens").arg(m.stats.tokens);
    if (m.stats.tok_s > 0) parts << QStringLiteral("%1 tok/s").arg(m.stats.tok_s, 0, 'f', 1);
    if (m.stats.cached_tokens > 0) parts << QStringLiteral("%1 cached").arg(m.stats.cached_tokens);
    if (m.stats.spec_acceptance >= 0)
        parts << QStringLiteral("draft %1% accepted").arg(qRound(m.stats.spec_acceptance * 100.0));
    if (m.stats.ttft_ms > 0) {
        parts << (m.stats.ttft_ms < 1000 ? QStringLiteral("first token %1 ms").arg(qRound(m.stats.ttft_ms))
                                          : QStringLiteral("first token %1 s").arg(m.stats.ttft_ms / 1000.0, 0, 'f', 2));
    }
    return parts.join(QStringLiteral(" · "));
}

QVariant MessageListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= items_.size()) return {};
    const app::Message& m = items_[index.row()];
    const Reply& r = replies_[size_t(index.row())];
    switch (role) {
        case IdRole: return m.id;
        case RoleRole: return m.role;
        case Qt::DisplayRole:
        case ContentRole: return r.stream ? r.answer : m.content;
        case SegmentsRole: return QVariant::fromValue(static_cast<QObject*>(r.segments.get()));
        case ReasoningRole: return r.reasoning;
        case ReasoningOpenRole: return r.stream && r.stream->parts().reasoning_open;
        case ReasoningWordsRole: return r.reasoning_words;
        case PromptDoneRole: return r.prompt_done;
        case PromptTotalRole: return r.prompt_total;
        case ToolCallsRole:
            return m.stats.tool_turns.isEmpty() ? QVariantList()
                                                : tool_calls_for_display(tool_rounds_from_json(m.stats.tool_turns.toUtf8())).toVariantList();
        case PartialRole: return m.partial;
        case StreamingRole: return streaming_ != 0 && m.id == streaming_;
        case TokensRole: return m.stats.tokens;
        case TokSRole: return m.stats.tok_s;
        case TtftRole: return m.stats.ttft_ms;
        case SecondsRole: return m.stats.seconds;
        case FinishRole: return m.stats.finish;
        case ModelRole: return m.stats.model;
        case StatsTextRole: return stats_text(m);
        case IsLastRole: return index.row() == items_.size() - 1;
        case VersionRole: return m.id == versions_of_ ? version_ : 0;
        case VersionCountRole: return m.id == versions_of_ ? version_count_ : 0;
    }
    return {};
}

QHash<int, QByteArray> MessageListModel::roleNames() const {
    return {{IdRole, "messageId"},   {RoleRole, "role"},         {ContentRole, "content"},   {SegmentsRole, "segments"},
            {PartialRole, "partial"}, {StreamingRole, "streaming"}, {TokensRole, "tokens"},   {TokSRole, "tokS"},
            {TtftRole, "ttftMs"},     {SecondsRole, "seconds"},    {FinishRole, "finish"},     {ModelRole, "modelFile"},
            {StatsTextRole, "statsText"}, {IsLastRole, "isLast"}, {VersionRole, "version"}, {ReasoningRole, "reasoning"}, {ReasoningOpenRole, "reasoningOpen"}, {ReasoningWordsRole, "reasoningWords"}, {PromptDoneRole, "promptDone"}, {PromptTotalRole, "promptTotal"}, {ToolCallsRole, "toolCalls"},
            {VersionCountRole, "versionCount"}};
}

void MessageListModel::set_messages(const QList<app::Message>& list) {
    beginResetModel();
    items_ = list;
    replies_.clear();
    for (const app::Message& m : items_) replies_.push_back(reply_of(m));
    endResetModel();
    Q_EMIT countChanged();
}

void MessageListModel::append(const app::Message& m) {
    const int row = int(items_.size());
    beginInsertRows({}, row, row);
    items_.append(m);
    replies_.push_back(reply_of(m));
    endInsertRows();
    if (row > 0) Q_EMIT dataChanged(index(row - 1), index(row - 1), {IsLastRole});
    Q_EMIT countChanged();
}

void MessageListModel::append_text(qint64 id, const QString& text) {
    const int row = row_of(id);
    if (row < 0) return;
    items_[row].content += text;
    Reply& r = replies_[size_t(row)];
    if (!r.stream) {
        Q_EMIT dataChanged(index(row), index(row), {ContentRole, Qt::DisplayRole});
        return;
    }
    const qsizetype answer_bytes = qsizetype(r.stream->parts().answer.size());
    const qsizetype reasoning_bytes = qsizetype(r.stream->parts().reasoning.size());
    const bool was_open = r.stream->parts().reasoning_open;
    r.stream->append(text.toStdString());
    const chat::ReplyParts& p = r.stream->parts();
    QList<int> roles;
    const qsizetype shown = r.answer.size();
    if (follow(r.answer, answer_bytes, p.answer, r.stream->answer_kept())) {
        // The pieces grow by what the answer gained (or are read afresh); the
        // whole text is not signalled: the view shows the pieces.
        if (r.stream->answer_kept() == size_t(answer_bytes)) r.segments->append(r.answer.mid(shown));
        else r.segments->setMarkdown(r.answer);
    }
    const qsizetype words_from = r.stream->reasoning_kept() == size_t(reasoning_bytes) ? r.reasoning.size() : 0;
    if (follow(r.reasoning, reasoning_bytes, p.reasoning, r.stream->reasoning_kept())) {
        r.reasoning_words = (words_from > 0 ? r.reasoning_words : 0) + count_words(r.reasoning, words_from);
        roles << ReasoningRole << ReasoningWordsRole;
    }
    if (p.reasoning_open != was_open) roles << ReasoningOpenRole;
    if (!roles.isEmpty()) Q_EMIT dataChanged(index(row), index(row), roles);
}

void MessageListModel::update(const app::Message& m) {
    const int row = row_of(m.id);
    if (row < 0) return;
    const bool same_text = items_[row].content == m.content && items_[row].role == m.role;
    items_[row] = m;
    if (!same_text) replies_[size_t(row)] = reply_of(m, &replies_[size_t(row)]);
    Q_EMIT dataChanged(index(row), index(row));
}

void MessageListModel::set_versions(qint64 id, int version, int count) {
    const qint64 old = versions_of_;
    versions_of_ = id;
    version_ = version;
    version_count_ = count;
    for (qint64 x : {old, id}) {
        const int row = row_of(x);
        if (row >= 0) Q_EMIT dataChanged(index(row), index(row), {VersionRole, VersionCountRole});
    }
}

void MessageListModel::set_streaming(qint64 id) {
    const qint64 old = streaming_;
    streaming_ = id;
    for (qint64 x : {old, id}) {
        const int row = row_of(x);
        if (row >= 0) Q_EMIT dataChanged(index(row), index(row), {StreamingRole});
    }
}

void MessageListModel::set_prompt_progress(qint64 id, qint64 done, qint64 total) {
    const int row = row_of(id);
    if (row < 0) return;
    Reply& r = replies_[size_t(row)];
    if (r.prompt_done == done && r.prompt_total == total) return;
    r.prompt_done = done;
    r.prompt_total = total;
    Q_EMIT dataChanged(index(row), index(row), {PromptDoneRole, PromptTotalRole});
}

void MessageListModel::remove_from(qint64 id) {
    const int row = row_of(id);
    if (row < 0) return;
    beginRemoveRows({}, row, int(items_.size()) - 1);
    items_.erase(items_.begin() + row, items_.end());
    replies_.resize(size_t(row));
    endRemoveRows();
    if (!items_.isEmpty()) Q_EMIT dataChanged(index(int(items_.size()) - 1), index(int(items_.size()) - 1), {IsLastRole});
    Q_EMIT countChanged();
}

int MessageListModel::row_of(qint64 id) const {
    if (id == 0) return -1;
    for (int i = int(items_.size()) - 1; i >= 0; --i)
        if (items_[i].id == id) return i;
    return -1;
}

const app::Message* MessageListModel::find(qint64 id) const {
    const int row = row_of(id);
    return row >= 0 ? &items_[row] : nullptr;
}

QVariantMap MessageListModel::get(int row) const {
    QVariantMap m;
    if (row < 0 || row >= items_.size()) return m;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it) m[QString::fromLatin1(it.value())] = data(index(row), it.key());
    return m;
}

}  // namespace strata::desktop
