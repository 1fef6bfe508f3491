#include "conversation_list_model.h"

namespace strata::desktop {

ConversationListModel::ConversationListModel(QObject* parent) : QAbstractListModel(parent) {}

int ConversationListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(items_.size()); }

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= items_.size()) return {};
    const app::Conversation& c = items_[index.row()];
    switch (role) {
        case Qt::DisplayRole:
        case TitleRole: return c.title;
        case IdRole: return c.id;
        case SystemPromptRole: return c.system_prompt;
        case UpdatedRole: return c.updated;
        case UpdatedTextRole: return relative_time(c.updated, QDateTime::currentDateTimeUtc());
        case MessageCountRole: return c.message_count;
        case GeneratingRole: return generating_.contains(c.id);
    }
    return {};
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
    return {{IdRole, "conversationId"},     {TitleRole, "title"},         {SystemPromptRole, "systemPrompt"},
            {UpdatedRole, "updated"},        {UpdatedTextRole, "updatedText"}, {MessageCountRole, "messageCount"},
            {GeneratingRole, "generating"}};
}

void ConversationListModel::set_conversations(const QList<app::Conversation>& list) {
    bool same_ids = list.size() == items_.size();
    for (int i = 0; same_ids && i < list.size(); ++i) same_ids = list[i].id == items_[i].id;
    if (same_ids) {
        items_ = list;
        if (!items_.isEmpty()) Q_EMIT dataChanged(index(0), index(int(items_.size()) - 1));
        return;
    }
    beginResetModel();
    items_ = list;
    endResetModel();
    Q_EMIT countChanged();
}

void ConversationListModel::set_generating(const QSet<qint64>& ids) {
    if (ids == generating_) return;
    const QSet<qint64> changed = (ids - generating_) + (generating_ - ids);
    generating_ = ids;
    for (qint64 id : changed)
        if (const int row = row_of(id); row >= 0) Q_EMIT dataChanged(index(row), index(row), {GeneratingRole});
}

int ConversationListModel::row_of(qint64 id) const {
    for (int i = 0; i < items_.size(); ++i)
        if (items_[i].id == id) return i;
    return -1;
}

const app::Conversation* ConversationListModel::at(int row) const {
    return row >= 0 && row < items_.size() ? &items_[row] : nullptr;
}

qint64 ConversationListModel::idAt(int row) const {
    const app::Conversation* c = at(row);
    return c ? c->id : 0;
}

QString ConversationListModel::relative_time(const QDateTime& utc, const QDateTime& now) {
    if (!utc.isValid()) return {};
    const QDateTime t = utc.toLocalTime();
    const QDate today = now.toLocalTime().date();
    const qint64 days = t.date().daysTo(today);
    if (days <= 0) return t.toString(QStringLiteral("HH:mm"));
    if (days == 1) return QStringLiteral("Yesterday");
    if (days < 7) return t.toString(QStringLiteral("ddd"));
    if (t.date().year() == today.year()) return t.toString(QStringLiteral("d MMM"));
    return t.toString(QStringLiteral("d MMM yyyy"));
}

}  // namespace strata::desktop
