// The models folder (what LM Studio and GPT4All users expect instead of a
// bare file dialog): the GGUF files under one folder, each with its size,
// quantization, architecture, experts, and whether it fits this machine under
// the current settings (the memory plan a load would make), planned in the
// background so the list shows at once. No downloading: there is no hub.
#pragma once

#include <QAbstractListModel>
#include <QString>
#include <QThreadPool>
#include <QVariantMap>
#include <QVector>
#include <functional>

#include "strata/settings.h"

namespace strata::desktop {

class SettingsModel;

class ModelLibrary : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(QString folder READ folder NOTIFY folderChanged)
    Q_PROPERTY(bool scanning READ scanning NOTIFY stateChanged)
    Q_PROPERTY(QString message READ message NOTIFY stateChanged)
    Q_PROPERTY(int count READ count NOTIFY stateChanged)
public:
    enum Role {
        PathRole = Qt::UserRole + 1,
        FileNameRole,
        SubfolderRole,  // the file's folder relative to the library's ("" at the top)
        SizeBytesRole,
        SizeTextRole,
        PlannedRole,    // false while its plan is being made
        QuantRole,
        ArchRole,
        ParamsRole,
        ExpertsRole,    // "32 experts, top-4" or "dense"
        FitsRole,
        FitRole,        // "resident" | "cache" | "no" | "unsupported" | "error" | ""
        FitNoteRole,    // one line: what the plan says, or why the file cannot be read or run
    };

    // engine_settings: the settings a load would use now (the plan depends on them).
    // `ram_returned`: the RAM a load would first free (the loaded model's), counted as available.
    ModelLibrary(SettingsModel* settings, std::function<EngineSettings()> engine_settings,
                 std::function<uint64_t()> ram_returned = {}, QObject* parent = nullptr);
    ~ModelLibrary() override;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    QString folder() const { return folder_; }
    bool scanning() const { return pending_ > 0; }
    QString message() const { return message_; }
    int count() const { return int(rows_.size()); }

    // The folder to list when the dialog first opens (nothing is scanned yet).
    void set_initial_folder(const QString& folder) { folder_ = folder; }
    // Lists `folder` (a path or file URL; remembered) and plans its files.
    Q_INVOKABLE void setFolder(const QString& folder);
    // Lists the folder again (files added or removed, settings changed).
    Q_INVOKABLE void rescan();
    Q_INVOKABLE QVariantMap get(int row) const;

    // The first folder: the one chosen before, else the folder of the last
    // model used, else ~/models.
    static QString default_folder(const QString& remembered, const QStringList& recent_models);

    // At most this many files are listed (a folder of thousands is not a models folder).
    static constexpr int kMaxFiles = 500;

Q_SIGNALS:
    void folderChanged();
    void stateChanged();

private:
    struct Row {
        QString path, file_name, subfolder;
        qint64 size = 0;
        bool planned = false;
        QVariantMap plan;  // plan_model's map (info, fits, reason, cacheFraction)
        QString error;
        QString unsupported_arch;  // a good GGUF of an architecture the engine does not run
    };
    void planned(quint64 generation, int row, const QVariantMap& plan, const QString& error, const QString& unsupported_arch);

    SettingsModel* settings_;
    std::function<EngineSettings()> engine_settings_;
    std::function<uint64_t()> ram_returned_;
    QString folder_, message_;
    QVector<Row> rows_;
    quint64 generation_ = 0;
    int pending_ = 0;
    QThreadPool pool_;
};

}  // namespace strata::desktop
