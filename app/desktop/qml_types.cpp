#include "qml_types.h"

#include <QDesktopServices>
#include <QFile>
#include <QQmlEngine>
#include <QUrl>
#include <QtGlobal>

#include "app_paths.h"
#include "chat_controller.h"
#include "code_highlighter.h"
#include "markdown_styler.h"
#include "heat_map_item.h"
#include "line_chart_item.h"
#include "markdown_segments.h"
#include "settings_model.h"
#include "telemetry_model.h"
#include "text_util.h"

namespace strata::desktop {

void register_qml_types() {
    static bool done = false;
    if (done) return;
    done = true;
    const char* uri = "Strata";
    qmlRegisterType<HeatMapItem>(uri, 1, 0, "HeatMap");
    qmlRegisterType<LineChartItem>(uri, 1, 0, "LineChart");
    qmlRegisterType<SegmentListModel>(uri, 1, 0, "SegmentModel");
    qmlRegisterType<CodeHighlighter>(uri, 1, 0, "CodeHighlighter");
    qmlRegisterType<MarkdownStyler>(uri, 1, 0, "MarkdownStyler");
    qmlRegisterSingletonType<TextUtil>(uri, 1, 0, "TextUtil", [](QQmlEngine*, QJSEngine*) -> QObject* { return new TextUtil(); });
    const QString why = QStringLiteral("created by the application");
    qmlRegisterUncreatableType<TelemetryModel>(uri, 1, 0, "TelemetryModel", why);
    qmlRegisterUncreatableType<SettingsModel>(uri, 1, 0, "SettingsModel", why);
    qmlRegisterUncreatableType<ChatController>(uri, 1, 0, "ChatController", why);
    qmlRegisterUncreatableType<ConversationListModel>(uri, 1, 0, "ConversationListModel", why);
    qmlRegisterUncreatableType<MessageListModel>(uri, 1, 0, "MessageListModel", why);
    qmlRegisterUncreatableType<ModelLibrary>(uri, 1, 0, "ModelLibrary", why);
    qmlRegisterUncreatableType<AppInfo>(uri, 1, 0, "AppInfo", why);
}

AppInfo::AppInfo(QString log_file, QString data_dir, QObject* parent)
    : QObject(parent), log_file_(std::move(log_file)), data_dir_(std::move(data_dir)) {}

QString AppInfo::version() const { return QStringLiteral(STRATA_VERSION); }
QString AppInfo::qtVersion() const { return QString::fromLatin1(qVersion()); }
QString AppInfo::engineBuild() const { return engine_build_description(); }

bool AppInfo::openLog() const {
    if (!QFile::exists(log_file_)) return false;
    return QDesktopServices::openUrl(QUrl::fromLocalFile(log_file_));
}

bool AppInfo::openDataDir() const { return QDesktopServices::openUrl(QUrl::fromLocalFile(data_dir_)); }

}  // namespace strata::desktop
