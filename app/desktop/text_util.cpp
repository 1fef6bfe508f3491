#include "text_util.h"

#include "markdown_segments.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QVariantMap>

namespace strata::desktop {

QVariantList TextUtil::segments(const QString& markdown) {
    MarkdownSegmenter segmenter;
    segmenter.append(markdown);
    QVariantList out;
    for (const Segment& s : segmenter.all()) {
        QVariantMap m;
        m[QStringLiteral("kind")] = s.kind;
        m[QStringLiteral("text")] = s.text;
        m[QStringLiteral("lang")] = s.lang;
        m[QStringLiteral("joined")] = s.joined;
        out.append(m);
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
