// Where the app keeps its files, and its log.
//
//   chats.sqlite   <data dir>/chats.sqlite; the data dir is --data-dir when
//                  given, else QStandardPaths::AppDataLocation (honours
//                  XDG_DATA_HOME): ~/.local/share/Strata/strata
//   strata.log     <state dir>/strata.log: $XDG_STATE_HOME/strata, else
//                  ~/.local/state/strata; under --data-dir when one is given
//                  (so a test's scratch run leaves nothing behind)
#pragma once

#include <QString>

namespace strata::desktop {

struct AppPaths {
    QString data_dir;
    QString log_file;
    QString database() const { return data_dir + QStringLiteral("/chats.sqlite"); }
};

// Resolves the paths (creating the directories). `data_dir_override` may be empty.
AppPaths resolve_paths(const QString& data_dir_override);

// Sends every engine logger (and the app's own "app" logger) to `log_file`
// as well as stderr (stderr only at warning and above unless STRATA_LOG says
// otherwise). Returns an empty string, or why the file could not be opened
// (the app then logs to stderr only).
QString setup_logging(const QString& log_file);

// One-line build description for the About dialog: CPU kernel level, CUDA.
QString engine_build_description();

}  // namespace strata::desktop
