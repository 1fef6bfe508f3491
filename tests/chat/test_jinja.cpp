// The Jinja engine (chat/jinja): the real chat templates llama.cpp 2026-09
// ships in models/templates/ ($STRATA_LLAMA_CPP) render every test
// conversation byte for byte as Hugging Face's jinja2 does (the renderings in
// templates/renderings.json, written by templates/make_renderings.py), and
// the engine's statements, expressions, whitespace control, errors and
// limits one by one.
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QtTest>

#include <string>

#include "chat/chat_template.h"
#include "chat/jinja/template.h"
#include "common/error.h"

using namespace strata;
using namespace strata::chat;

namespace {

std::string render(const std::string& source, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   const jinja::Limits& limits = {}) {
    return jinja::Template(source).render(jinja::Value::from_json(ctx), limits);
}

// The message of what `f` throws ("" when it does not).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

QByteArray read_file(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

}  // namespace

class TestJinja : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void real_templates_render_as_jinja2() {
        const QString root = qEnvironmentVariable("STRATA_LLAMA_CPP");
        if (root.isEmpty())
            QSKIP("STRATA_LLAMA_CPP is not set (a llama.cpp 2026-09 checkout, whose models/templates/ holds the chat templates)");
        const QString here = QStringLiteral(STRATA_SOURCE_DIR "/tests/chat/templates/");
        const auto spec = nlohmann::ordered_json::parse(read_file(here + "conversations.json").toStdString());
        const auto want = nlohmann::json::parse(read_file(here + "renderings.json").toStdString());
        int renders = 0, raised = 0, skipped = 0;
        QStringList failures;
        for (const auto& [file, entry] : want["templates"].items()) {
            const QByteArray source = read_file(root + "/models/templates/" + QString::fromStdString(file));
            if (source.isEmpty() ||
                QCryptographicHash::hash(source, QCryptographicHash::Sha256).toHex().toStdString() != entry["sha256"]) {
                ++skipped;  // another llama.cpp version's template: not what the renderings are of
                continue;
            }
            std::unique_ptr<jinja::Template> t;
            try {
                t = std::make_unique<jinja::Template>(source.toStdString());
            } catch (const Error& e) {
                failures << QString::fromStdString(file + ": does not parse: " + e.what());
                continue;
            }
            for (const auto& [name, expect] : entry["cases"].items()) {
                const auto& c = spec["cases"][name];
                nlohmann::ordered_json ctx = {{"messages", c["messages"]},
                                              {"add_generation_prompt", c.value("add_generation_prompt", true)},
                                              {"bos_token", "<s>"},
                                              {"eos_token", "</s>"}};
                if (c.value("tools", false)) ctx["tools"] = spec["tools"];
                jinja::Value v = jinja::Value::from_json(ctx);
                // strftime_now as the renderings fixed it: 2 Jan 2026, 10:30.
                v.as_object().set("strftime_now", jinja::Value::function("strftime_now", [](jinja::Interpreter&,
                                                                                             const jinja::Args& a) {
                    std::tm tm{};
                    tm.tm_year = 126;
                    tm.tm_mon = 0;
                    tm.tm_mday = 2;
                    tm.tm_hour = 10;
                    tm.tm_min = 30;
                    tm.tm_wday = 5;
                    char buf[128];
                    const size_t n = std::strftime(buf, sizeof buf, a.pos.at(0).as_string().c_str(), &tm);
                    return jinja::Value(std::string(buf, n));
                }));
                std::string got, err;
                try {
                    got = t->render(v);
                } catch (const Error& e) {
                    err = e.what();
                }
                if (expect.contains("error")) {
                    ++raised;
                    if (err.empty()) failures << QString::fromStdString(file + " / " + name + ": renders, jinja2 raised " +
                                                                        expect["error"].get<std::string>());
                    continue;
                }
                ++renders;
                if (!err.empty()) failures << QString::fromStdString(file + " / " + name + ": " + err);
                else if (got != expect["text"].get<std::string>())
                    failures << QString::fromStdString(file + " / " + name + ": differs");
            }
        }
        qInfo("%d renderings byte-identical to jinja2's and %d raised by both, of %d; %d templates of another version skipped",
              renders - static_cast<int>(failures.size()), raised, renders + raised, skipped);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
        QVERIFY(renders > 300);
    }
};

QTEST_GUILESS_MAIN(TestJinja)
#include "test_jinja.moc"
