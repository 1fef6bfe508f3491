// ChatController's exports of the open conversation (Markdown, JSON): to
// exactly the path chosen, remembering its folder for the next one.
#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStandardPaths>
#include <QUrl>

#include "chat_controller.h"
#include "settings_model.h"

namespace strata::desktop {

QString ChatController::suggestedFileName(const QString& extension) const {
    QString t = currentTitle();
    if (t.isEmpty()) t = QStringLiteral("conversation");
    static const QRegularExpression bad(QStringLiteral("[\\\\/:*?\"<>|\\x00-\\x1f]"));
    t.replace(bad, QStringLiteral("_"));
    return t.left(80) + QLatin1Char('.') + extension;
}

QString ChatController::exportFolder() const {
    const QString last = settings_->uiString(QStringLiteral("exportFolder"));
    if (!last.isEmpty() && QFileInfo(last).isDir()) return last;
    const QString docs = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    if (!docs.isEmpty() && QFileInfo(docs).isDir()) return docs;
    return QDir::homePath();
}

bool ChatController::write_export(const QString& chosen, const QByteArray& data) {
    QString path = chosen.trimmed();
    if (path.isEmpty()) {
        set_error(QStringLiteral("Export: no file chosen."));
        return false;
    }
    if (path == QLatin1String("~") || path.startsWith(QLatin1String("~/"))) path = QDir::homePath() + path.mid(1);
    const QFileInfo info(path);
    if (info.isRelative()) {
        set_error(QStringLiteral("Export: '%1' is not a full path: start it with / (or ~/ for your home folder).").arg(path));
        return false;
    }
    if (info.isDir()) {
        set_error(QStringLiteral("Export: %1 is a folder: add a file name to the path.").arg(path));
        return false;
    }
    if (!info.absoluteDir().exists()) {
        set_error(QStringLiteral("Export: the folder %1 does not exist.").arg(info.absolutePath()));
        return false;
    }
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(data) != data.size() || !f.commit()) {
        set_error(QStringLiteral("Export to %1 failed: %2").arg(path, f.errorString()));
        return false;
    }
    settings_->setUiString(QStringLiteral("exportFolder"), info.absolutePath());
    set_notice(QStringLiteral("Exported to %1").arg(QDir::toNativeSeparators(path)));
    return true;
}

bool ChatController::exportMarkdown(const QUrl& url) { return export_conversation(localPath(url), &app::ChatStore::export_markdown); }

bool ChatController::exportJson(const QUrl& url) { return export_conversation(localPath(url), &app::ChatStore::export_json); }

bool ChatController::exportToPath(const QString& kind, const QString& path) {
    return export_conversation(path, kind == QLatin1String("json") ? &app::ChatStore::export_json : &app::ChatStore::export_markdown);
}

bool ChatController::export_conversation(const QString& path, QByteArray (app::ChatStore::*render)(qint64) const) {
    if (current_ == 0) {
        set_error(QStringLiteral("Open a conversation to export it."));
        return false;
    }
    try {
        return write_export(path, (store_.get()->*render)(current_));
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return false;
    }
}

}  // namespace strata::desktop
