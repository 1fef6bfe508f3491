// Qt Quick Test for the app's QML components (tests/app/qml/tst_*.qml),
// with the app's C++ QML types registered.
#include <QQmlEngine>
#include <QtQuickTest>

#include "qml_types.h"

class Setup : public QObject {
    Q_OBJECT
public Q_SLOTS:
    void qmlEngineAvailable(QQmlEngine*) { strata::desktop::register_qml_types(); }
};

QUICK_TEST_MAIN_WITH_SETUP(test_app_qml, Setup)
#include "test_app_qml.moc"
