// Text helpers for QML (singleton "TextUtil" in module Strata): message
// segmentation for code blocks, byte and number formatting, the clipboard.
#pragma once

#include <QObject>
#include <QVariantList>

namespace strata::desktop {

class TextUtil : public QObject {
    Q_OBJECT
public:
    explicit TextUtil(QObject* parent = nullptr) : QObject(parent) {}

    // Splits Markdown into prose and fenced code blocks (``` or ~~~, with an
    // optional language), prose into paragraphs: [{kind: "text"|"code", text,
    // lang, joined}], in order (MarkdownSegmenter read at once). A fence not
    // yet closed (an answer still streaming) runs to the end. Empty prose
    // between blocks is left out.
    Q_INVOKABLE static QVariantList segments(const QString& markdown);

    // "12.3 MiB" (binary units).
    Q_INVOKABLE static QString formatBytes(double bytes);
    // "1.23 B", "45.6 M", "7.1 K".
    Q_INVOKABLE static QString formatCount(double n);
    Q_INVOKABLE static QString formatPercent(double fraction, int decimals = 1);

    Q_INVOKABLE static void copyToClipboard(const QString& text);
    // What the clipboard holds as text (tests, and pasting into the composer).
    Q_INVOKABLE static QString clipboardText();
};

}  // namespace strata::desktop
