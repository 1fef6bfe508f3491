#include "text_util.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QRegularExpression>
#include <QStringList>
#include <QVariantMap>

namespace strata::desktop {

namespace {

void add(QVariantList& out, const QString& kind, QString text, const QString& lang) {
    if (kind == QLatin1String("text")) {
        // Trim blank lines around prose; skip prose that is only whitespace.
        while (text.startsWith(QLatin1Char('\n'))) text.remove(0, 1);
        while (text.endsWith(QLatin1Char('\n'))) text.chop(1);
        if (text.trimmed().isEmpty()) return;
        // Models write one line per sentence or verse: keep their line breaks
        // (Markdown would join them) by making each a hard break.
        QStringList lines = text.split(QLatin1Char('\n'));
        for (int i = 0; i + 1 < lines.size(); ++i)
            if (!lines[i].trimmed().isEmpty() && !lines[i + 1].trimmed().isEmpty() && !lines[i].endsWith(QLatin1String("  ")))
                lines[i] += QStringLiteral("  ");
        text = lines.join(QLatin1Char('\n'));
    }
    QVariantMap m;
    m[QStringLiteral("kind")] = kind;
    m[QStringLiteral("text")] = text;
    m[QStringLiteral("lang")] = lang;
    out.append(m);
}

}  // namespace

QVariantList TextUtil::segments(const QString& markdown) {
    QVariantList out;
    const QStringList lines = markdown.split(QLatin1Char('\n'));
    static const QRegularExpression open_re(QStringLiteral("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)[^`]*$"));
    QString prose, code, lang, fence;
    bool in_code = false;
    for (const QString& line : lines) {
        if (!in_code) {
            const QRegularExpressionMatch m = open_re.match(line);
            if (m.hasMatch()) {
                add(out, QStringLiteral("text"), prose, {});
                prose.clear();
                in_code = true;
                fence = m.captured(1);
                lang = m.captured(2);
                code.clear();
                continue;
            }
            prose += line;
            prose += QLatin1Char('\n');
        } else {
            const QString t = line.trimmed();
            if (t.startsWith(fence.at(0)) && t.size() >= fence.size() &&
                t == QString(t.size(), fence.at(0)) && line.indexOf(fence.at(0)) <= 3) {
                if (code.endsWith(QLatin1Char('\n'))) code.chop(1);
                add(out, QStringLiteral("code"), code, lang);
                in_code = false;
                continue;
            }
            code += line;
            code += QLatin1Char('\n');
        }
    }
    if (in_code) {
        if (code.endsWith(QLatin1Char('\n'))) code.chop(1);
        add(out, QStringLiteral("code"), code, lang);
    } else {
        if (prose.endsWith(QLatin1Char('\n'))) prose.chop(1);
        add(out, QStringLiteral("text"), prose, {});
    }
    return out;
}

QString TextUtil::formatBytes(double bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = bytes < 0 ? 0 : bytes;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    if (u == 0) return QStringLiteral("%1 B").arg(qRound64(v));
    return QStringLiteral("%1 %2").arg(v, 0, 'f', v >= 100 ? 0 : v >= 10 ? 1 : 2).arg(QLatin1String(units[u]));
}

QString TextUtil::formatCount(double n) {
    if (n >= 1e9) return QStringLiteral("%1 B").arg(n / 1e9, 0, 'f', 2);
    if (n >= 1e6) return QStringLiteral("%1 M").arg(n / 1e6, 0, 'f', 1);
    if (n >= 1e3) return QStringLiteral("%1 K").arg(n / 1e3, 0, 'f', 1);
    return QString::number(qRound64(n));
}

QString TextUtil::formatPercent(double fraction, int decimals) {
    return QStringLiteral("%1%").arg(fraction * 100.0, 0, 'f', decimals);
}

void TextUtil::copyToClipboard(const QString& text) {
    if (QClipboard* c = QGuiApplication::clipboard()) c->setText(text);
}

QString TextUtil::clipboardText() {
    const QClipboard* c = QGuiApplication::clipboard();
    return c ? c->text() : QString();
}

}  // namespace strata::desktop
