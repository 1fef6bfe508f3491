// Helpers shared by the test suites: where the fixtures are, and skipping
// cleanly (with the reason) when they are not there.
#pragma once

#include <QDir>
#include <QFileInfo>
#include <QString>
#include <QtTest>

#include <string>

namespace strata::test {

// ../shared/fixtures relative to the project root, or STRATA_FIXTURES if set.
inline QString fixtures_dir() {
    const QByteArray env = qgetenv("STRATA_FIXTURES");
    if (!env.isEmpty()) return QString::fromLocal8Bit(env);
    return QDir::cleanPath(QStringLiteral(STRATA_SOURCE_DIR "/../shared/fixtures"));
}

// The embedded demo model in the source tree (resources/models).
inline std::string demo_model_path() { return STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf"; }

inline bool have_fixtures() { return QFileInfo(fixtures_dir() + "/README.md").exists(); }

inline std::string fixture_path(const QString& rel) { return (fixtures_dir() + "/" + rel).toStdString(); }

}  // namespace strata::test

// Skips the current test function when ../shared/fixtures is absent (a user's clone).
#define STRATA_REQUIRE_FIXTURES()                                                                          \
    do {                                                                                                   \
        if (!strata::test::have_fixtures())                                                                \
            QSKIP(qPrintable("fixtures not found at " + strata::test::fixtures_dir() +                     \
                             " (they ship beside the project as ../shared/fixtures; set STRATA_FIXTURES)")); \
    } while (0)
