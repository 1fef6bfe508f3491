// Qt Quick Test for the app's QML components (tests/app/qml/tst_*.qml),
// with the app's C++ QML types registered, and "messagesFixture": a real
// MessageListModel the tests fill and stream into (ChatPane's list).
#include <QQmlContext>
#include <QQmlEngine>
#include <QtQuickTest>

#include "message_list_model.h"
#include "qml_types.h"

using strata::desktop::MessageListModel;

class MessagesFixture : public QObject {
    Q_OBJECT
    Q_PROPERTY(strata::desktop::MessageListModel* model READ model CONSTANT)
public:
    MessageListModel* model() { return &model_; }
    // n exchanges (a question, a long answer each).
    Q_INVOKABLE void fill(int n) {
        QList<strata::app::Message> list;
        for (int i = 0; i < n; ++i) {
            strata::app::Message q, a;
            q.id = 2 * i + 1;
            q.role = QStringLiteral("user");
            q.content = QStringLiteral("Question %1?").arg(i);
            a.id = 2 * i + 2;
            a.role = QStringLiteral("assistant");
            a.content = QStringLiteral("Answer %1, a paragraph long enough to take several lines in a narrow chat. ").arg(i).repeated(4);
            a.stats.finish = QStringLiteral("end");
            list << q << a;
        }
        model_.set_messages(list);
    }
    // Starts an exchange as ChatController does: the question, then an empty
    // answer marked streaming.
    Q_INVOKABLE void startExchange(const QString& question) {
        const qint64 id = model_.count() + 1000;
        strata::app::Message q, a;
        q.id = id;
        q.role = QStringLiteral("user");
        q.content = question;
        a.id = id + 1;
        a.role = QStringLiteral("assistant");
        a.partial = true;
        model_.append(q);
        model_.append(a);
        model_.set_streaming(a.id);
    }
    Q_INVOKABLE void clear() { model_.set_messages({}); }
    // Streams text into the last message.
    Q_INVOKABLE void appendToLast(const QString& text) {
        if (model_.count() > 0) model_.append_text(model_.messages().last().id, text);
    }

private:
    MessageListModel model_;
};

class Setup : public QObject {
    Q_OBJECT
public Q_SLOTS:
    void qmlEngineAvailable(QQmlEngine* engine) {
        strata::desktop::register_qml_types();
        // tst_Shortcuts reads ui/Shortcuts.qml itself (what offscreen resolves differently).
        qputenv("QML_XHR_ALLOW_FILE_READ", "1");
        engine->rootContext()->setContextProperty(QStringLiteral("messagesFixture"), &fixture_);
    }

private:
    MessagesFixture fixture_;
};

QUICK_TEST_MAIN_WITH_SETUP(test_app_qml, Setup)
#include "test_app_qml.moc"
