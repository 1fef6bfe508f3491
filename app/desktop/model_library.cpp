#include "model_library.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QUrl>
#include <algorithm>
#include <exception>

#include "engine_worker.h"
#include "model/unsupported_architecture.h"
#include "settings_model.h"
#include "text_util.h"

namespace strata::desktop {

ModelLibrary::ModelLibrary(SettingsModel* settings, std::function<EngineSettings()> engine_settings,
                           std::function<uint64_t()> ram_returned, QObject* parent)
    : QAbstractListModel(parent), settings_(settings), engine_settings_(std::move(engine_settings)),
      ram_returned_(std::move(ram_returned)) {
    pool_.setMaxThreadCount(1);  // plans read headers one file at a time: the disk, not the CPU, is the limit
}

ModelLibrary::~ModelLibrary() {
    ++generation_;
    pool_.clear();
    pool_.waitForDone();
}

QString ModelLibrary::default_folder(const QString& remembered, const QStringList& recent_models) {
    if (!remembered.isEmpty()) return remembered;
    for (const QString& m : recent_models) {
        const QFileInfo f(m);
        if (f.isFile()) return f.absolutePath();
    }
    return QDir::homePath() + QStringLiteral("/models");
}

int ModelLibrary::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

QHash<int, QByteArray> ModelLibrary::roleNames() const {
    return {{PathRole, "path"},         {FileNameRole, "fileName"}, {SubfolderRole, "subfolder"},
            {SizeBytesRole, "sizeBytes"}, {SizeTextRole, "sizeText"}, {PlannedRole, "planned"},
            {QuantRole, "quant"},       {ArchRole, "arch"},         {ParamsRole, "params"},
            {ExpertsRole, "experts"},   {FitsRole, "fits"},         {FitRole, "fit"},
            {FitNoteRole, "fitNote"}};
}

QVariant ModelLibrary::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= rows_.size()) return {};
    const Row& r = rows_[index.row()];
    const QVariantMap info = r.plan.value(QStringLiteral("info")).toMap();
    switch (role) {
        case PathRole: return r.path;
        case FileNameRole: return r.file_name;
        case SubfolderRole: return r.subfolder;
        case SizeBytesRole: return double(r.size);  // qint64: files over 4 GiB too
        case SizeTextRole: return TextUtil::formatBytes(double(r.size));
        case PlannedRole: return r.planned;
        case QuantRole: return info.value(QStringLiteral("quant"));
        case ArchRole: return info.value(QStringLiteral("arch"));
        case ParamsRole: return info.isEmpty() ? QString() : TextUtil::formatCount(info.value(QStringLiteral("paramsTotal")).toDouble());
        case ExpertsRole: {
            if (info.isEmpty()) return QString();
            const qlonglong e = info.value(QStringLiteral("experts")).toLongLong();
            return e > 0 ? QStringLiteral("%1 experts, top-%2").arg(e).arg(info.value(QStringLiteral("expertsUsed")).toLongLong())
                         : QStringLiteral("dense");
        }
        case FitsRole: return r.planned && r.error.isEmpty() && r.plan.value(QStringLiteral("fits")).toBool();
        case FitRole: {
            if (!r.planned) return QString();
            if (!r.unsupported_arch.isEmpty()) return QStringLiteral("unsupported");
            if (!r.error.isEmpty()) return QStringLiteral("error");
            if (!r.plan.value(QStringLiteral("fits")).toBool()) return QStringLiteral("no");
            return r.plan.value(QStringLiteral("cacheFraction")).toDouble() >= 1.0 ? QStringLiteral("resident") : QStringLiteral("cache");
        }
        case FitNoteRole: {
            if (!r.planned) return QStringLiteral("planning…");
            if (!r.error.isEmpty()) return r.error;  // unsupported architectures too: it says which
            if (!r.plan.value(QStringLiteral("fits")).toBool()) return r.plan.value(QStringLiteral("reason"));
            const double f = r.plan.value(QStringLiteral("cacheFraction")).toDouble();
            return f >= 1.0 ? QStringLiteral("fits: every weight in RAM")
                            : QStringLiteral("fits with an expert cache of %1 of the experts").arg(TextUtil::formatPercent(f, 0));
        }
        default: return {};
    }
}

QVariantMap ModelLibrary::get(int row) const {
    QVariantMap m;
    if (row < 0 || row >= rows_.size()) return m;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it) m[QString::fromUtf8(it.value())] = data(index(row), it.key());
    return m;
}

void ModelLibrary::setFolder(const QString& folder) {
    const QUrl url(folder);
    QString path = url.isLocalFile() ? url.toLocalFile() : folder.trimmed();
    if (path == QLatin1String("~") || path.startsWith(QLatin1String("~/"))) path = QDir::homePath() + path.mid(1);
    path = QDir::cleanPath(path);
    if (path != folder_) {
        folder_ = path;
        if (settings_) settings_->setUiString(QStringLiteral("modelsFolder"), folder_);
        Q_EMIT folderChanged();
    }
    rescan();
}

void ModelLibrary::rescan() {
    const quint64 gen = ++generation_;
    pool_.clear();
    beginResetModel();
    rows_.clear();
    message_.clear();
    const QFileInfo dir(folder_);
    if (folder_.isEmpty() || !dir.exists()) {
        message_ = QStringLiteral("%1 does not exist: choose the folder your GGUF models are in.").arg(folder_);
    } else if (!dir.isDir()) {
        message_ = QStringLiteral("%1 is a file, not a folder: choose the folder your GGUF models are in.").arg(folder_);
    } else {
        QDirIterator it(folder_, {QStringLiteral("*.gguf"), QStringLiteral("*.GGUF")}, QDir::Files | QDir::Readable,
                        QDirIterator::Subdirectories | QDirIterator::FollowSymlinks);
        const QDir base(folder_);
        while (it.hasNext() && rows_.size() < kMaxFiles) {
            const QFileInfo f(it.nextFileInfo());
            Row r;
            r.path = f.absoluteFilePath();
            r.file_name = f.fileName();
            r.subfolder = base.relativeFilePath(f.absolutePath());
            if (r.subfolder == QLatin1String(".")) r.subfolder.clear();
            r.size = f.size();
            rows_.append(r);
        }
        std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) {
            return a.subfolder != b.subfolder ? a.subfolder < b.subfolder : a.file_name.compare(b.file_name, Qt::CaseInsensitive) < 0;
        });
        if (rows_.isEmpty()) message_ = QStringLiteral("No GGUF files in %1 or its subfolders.").arg(folder_);
        else if (rows_.size() >= kMaxFiles) message_ = QStringLiteral("Only the first %1 GGUF files are listed.").arg(kMaxFiles);
    }
    endResetModel();
    pending_ = int(rows_.size());
    const EngineSettings s = engine_settings_ ? engine_settings_() : EngineSettings{};
    const uint64_t returned = ram_returned_ ? ram_returned_() : 0;  // as the plan dialog counts it
    for (int i = 0; i < rows_.size(); ++i) {
        const QString path = rows_[i].path;
        pool_.start([this, gen, i, path, s, returned] {
            QVariantMap plan;
            QString error, unsupported;
            try {
                plan = plan_model(path, s, returned);
            } catch (const model::UnsupportedArchitecture& e) {
                // A good file the engine cannot run: not "unreadable".
                unsupported = QString::fromStdString(e.arch());
                error = QStringLiteral("unsupported architecture '%1': Strata runs %2")
                            .arg(unsupported, QString::fromStdString(e.supported()));
            } catch (const std::exception& e) {
                error = QString::fromUtf8(e.what());
                // The file name is in the row already: the reason alone reads better.
                if (error.startsWith(path + QStringLiteral(": "))) error = error.mid(path.size() + 2);
            }
            QMetaObject::invokeMethod(this, [this, gen, i, plan, error, unsupported] { planned(gen, i, plan, error, unsupported); },
                                      Qt::QueuedConnection);
        });
    }
    Q_EMIT stateChanged();
}

void ModelLibrary::planned(quint64 generation, int row, const QVariantMap& plan, const QString& error,
                           const QString& unsupported_arch) {
    if (generation != generation_ || row >= rows_.size()) return;
    Row& r = rows_[row];
    r.planned = true;
    r.plan = plan;
    r.error = error;
    r.unsupported_arch = unsupported_arch;
    --pending_;
    Q_EMIT dataChanged(index(row), index(row));
    Q_EMIT stateChanged();
}

}  // namespace strata::desktop
