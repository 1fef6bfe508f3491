// QML registration (module "Strata" 1.0) and the AppInfo object ("appInfo"
// in QML): version, build, paths, and actions on them.
#pragma once

#include <QObject>
#include <QString>

namespace strata::desktop {

// HeatMap, LineChart, the TextUtil singleton (Theme is ui/qmldir's singleton),
// and the C++ model types QML refers to.
void register_qml_types();

class AppInfo : public QObject {
    Q_OBJECT
    Q_PROPERTY(QString version READ version CONSTANT)
    Q_PROPERTY(QString qtVersion READ qtVersion CONSTANT)
    Q_PROPERTY(QString engineBuild READ engineBuild CONSTANT)
    Q_PROPERTY(QString logFile READ logFile CONSTANT)
    Q_PROPERTY(QString dataDir READ dataDir CONSTANT)
public:
    AppInfo(QString log_file, QString data_dir, QObject* parent = nullptr);
    QString version() const;
    QString qtVersion() const;
    QString engineBuild() const;
    QString logFile() const { return log_file_; }
    QString dataDir() const { return data_dir_; }
    // Opens the log with the desktop's viewer; false when nothing could open it.
    Q_INVOKABLE bool openLog() const;
    Q_INVOKABLE bool openDataDir() const;

private:
    QString log_file_, data_dir_;
};

}  // namespace strata::desktop
