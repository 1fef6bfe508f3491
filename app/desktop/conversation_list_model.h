// The conversation list (left column): newest first, as ChatStore lists them.
#pragma once

#include <QAbstractListModel>
#include <QSet>

#include "chat_store.h"

namespace strata::desktop {

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(int count READ count NOTIFY countChanged)
public:
    enum Role { IdRole = Qt::UserRole + 1, TitleRole, SystemPromptRole, UpdatedRole, UpdatedTextRole, MessageCountRole, GeneratingRole };
    explicit ConversationListModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // Replaces the whole list (a reset only when the ids change; otherwise rows update in place).
    void set_conversations(const QList<app::Conversation>& list);
    int count() const { return int(items_.size()); }
    int row_of(qint64 id) const;
    const app::Conversation* at(int row) const;
    Q_INVOKABLE qint64 idAt(int row) const;
    // The conversations with an answer being generated (role "generating").
    void set_generating(const QSet<qint64>& ids);

    // "14:05", "Yesterday", "Mon", "12 Mar", "12 Mar 2023" in local time.
    static QString relative_time(const QDateTime& utc, const QDateTime& now);

Q_SIGNALS:
    void countChanged();

private:
    QList<app::Conversation> items_;
    QSet<qint64> generating_;
};

}  // namespace strata::desktop
