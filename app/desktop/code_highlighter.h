// CodeHighlighter: syntax colours for a code block (a QML TextEdit's
// document), as a QSyntaxHighlighter, so only the blocks (lines) that change
// are highlighted again: a code block that grows while an answer streams costs
// its new lines, not the whole block each time.
//
//   TextEdit { id: codeText; textFormat: TextEdit.PlainText; ... }
//   CodeHighlighter { document: codeText.textDocument; language: "python" }
//
// Languages (by their fence names and usual aliases): C, C++, Python,
// JavaScript/TypeScript, JSON, Bash/sh, Rust, Go, Java, SQL, YAML, HTML/XML,
// CSS. Any other name (or none) gets a generic fallback: strings, numbers and
// comments. Each language's rules are regular expressions compiled once per
// process (a static cache), not per block or per change. Comments and strings
// that span lines (/* */, """, `...`, <!-- -->) carry over by block state.
// The colours suit the dark code background (Theme.codeBg, text #d6deeb).
#pragma once

#include <QColor>
#include <QPointer>
#include <QQuickTextDocument>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace strata::desktop {

struct HighlightLanguage;

class CodeHighlighter : public QSyntaxHighlighter {
    Q_OBJECT
    Q_PROPERTY(QQuickTextDocument* document READ document WRITE setDocument NOTIFY documentChanged)
    Q_PROPERTY(QString language READ language WRITE setLanguage NOTIFY languageChanged)
    // The language the rules are for ("cpp", "python", ..., or "" for the generic fallback).
    Q_PROPERTY(QString resolvedLanguage READ resolvedLanguage NOTIFY languageChanged)
public:
    explicit CodeHighlighter(QObject* parent = nullptr);

    QQuickTextDocument* document() const { return quick_document_; }
    void setDocument(QQuickTextDocument* document);
    // For C++ users (and tests): highlight a plain QTextDocument.
    void set_text_document(QTextDocument* document);

    QString language() const { return language_; }
    void setLanguage(const QString& language);
    QString resolvedLanguage() const;

    // The foreground colour ("#rrggbb") the highlighter gives the character
    // at `position` of the document, or "" where it leaves the text's own.
    Q_INVOKABLE QString colorAt(int position) const;

    // The language a fence name stands for ("py" -> "python", "c++" -> "cpp",
    // "TSX" -> "javascript"); "" when it is none of the known ones.
    static QString canonical_language(const QString& name);
    // How many times a language's rules were compiled in this process (once each).
    static int compiled_rule_sets();

    // The colours, by kind of token.
    enum Kind { Keyword, Type, Literal, Builtin, String, Number, Comment, Function, Meta, Tag, Attribute, Variable,
                KindCount };
    static QColor color(Kind kind);

Q_SIGNALS:
    void documentChanged();
    void languageChanged();

protected:
    void highlightBlock(const QString& text) override;

private:
    QPointer<QQuickTextDocument> quick_document_;
    QString language_;
    const HighlightLanguage* lang_;
    QTextCharFormat formats_[KindCount];
};

}  // namespace strata::desktop
