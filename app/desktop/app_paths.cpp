#include "app_paths.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QtGlobal>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "backend/device.h"
#include "kernels/dispatch.h"

namespace strata::desktop {

AppPaths resolve_paths(const QString& data_dir_override) {
    AppPaths p;
    if (!data_dir_override.isEmpty()) {
        p.data_dir = QDir(data_dir_override).absolutePath();
        p.log_file = p.data_dir + QStringLiteral("/strata.log");
    } else {
        p.data_dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
        QString state = qEnvironmentVariable("XDG_STATE_HOME");
        if (state.isEmpty()) state = QDir::homePath() + QStringLiteral("/.local/state");
        p.log_file = state + QStringLiteral("/strata/strata.log");
    }
    QDir().mkpath(p.data_dir);
    QDir().mkpath(QFileInfo(p.log_file).absolutePath());
    return p;
}

QString setup_logging(const QString& log_file) {
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    spdlog::level::level_enum level = spdlog::level::info;
    if (const QByteArray env = qgetenv("STRATA_LOG"); !env.isEmpty())
        level = spdlog::level::from_str(env.toStdString());
    console->set_level(qgetenv("STRATA_LOG").isEmpty() ? spdlog::level::warn : level);
    std::vector<spdlog::sink_ptr> sinks{console};
    QString error;
    try {
        auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file.toStdString(), false);
        file->set_level(level);
        sinks.push_back(file);
    } catch (const spdlog::spdlog_ex& e) {
        error = QStringLiteral("cannot open the log file %1: %2").arg(log_file, QString::fromUtf8(e.what()));
    }
    auto def = std::make_shared<spdlog::logger>("strata", sinks.begin(), sinks.end());
    def->set_level(level);
    def->flush_on(spdlog::level::info);
    spdlog::set_default_logger(def);
    // Loggers made before this point keep their old sinks: give them the new ones.
    spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) {
        if (l == def) return;
        l->sinks() = sinks;
        l->set_level(level);
        l->flush_on(spdlog::level::info);
    });
    return error;
}

QString engine_build_description() {
    const char* level = kernels::kernel_level_name(kernels::kernel_level());
    // The GPU line says what was found and what computes, so a user with a GPU
    // is not left guessing why it sits idle.
    const backend::DeviceChoice choice =
        backend::choose_device({}, backend::probe_devices(), backend::cuda_forward_built());
    return QStringLiteral("CPU kernels: %1 · %2\n%3")
        .arg(QString::fromLatin1(level), QString::fromStdString(backend::describe_probe(backend::probe_devices())),
             QString::fromStdString(choice.reason));
}

}  // namespace strata::desktop
