// MarkdownStyler: borders for the tables and a quieter look for the block
// quotes of a Markdown TextEdit's document (Qt's Markdown import draws
// tables without borders and quotes only indented).
//
//   TextEdit { id: prose; textFormat: TextEdit.MarkdownText; ... }
//   MarkdownStyler { document: prose.textDocument }
//
// Whenever the document's content changes (a streaming answer is set again
// as it grows) the tables get a 1 px collapsed border, cell padding and a
// header row background, and quoted paragraphs a dimmer colour, a left
// indent and a tinted background. The restyle runs once per turn of the
// event loop however many changes came, touches only what is not styled yet
// and ignores the changes it makes itself.
#pragma once

#include <QObject>
#include <QPointer>
#include <QQuickTextDocument>
#include <QTextDocument>

namespace strata::desktop {

class MarkdownStyler : public QObject {
    Q_OBJECT
    Q_PROPERTY(QQuickTextDocument* document READ document WRITE setDocument NOTIFY documentChanged)
public:
    explicit MarkdownStyler(QObject* parent = nullptr);

    QQuickTextDocument* document() const { return quick_document_; }
    void setDocument(QQuickTextDocument* document);
    // For C++ users (and tests): style a plain QTextDocument.
    void set_text_document(QTextDocument* document);

    // Styles the document now; returns how many tables and quoted paragraphs it changed.
    Q_INVOKABLE int restyle();

    static const QColor& border_color();
    static const QColor& header_background();
    static const QColor& quote_color();
    static const QColor& quote_background();
    static constexpr double kCellPadding = 6;
    static constexpr double kQuoteIndent = 16;

Q_SIGNALS:
    void documentChanged();

private:
    void schedule();

    QPointer<QQuickTextDocument> quick_document_;
    QPointer<QTextDocument> doc_;
    QMetaObject::Connection changed_;
    bool busy_ = false;
    bool pending_ = false;
};

}  // namespace strata::desktop
