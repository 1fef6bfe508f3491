#include "markdown_styler.h"

#include <QTextBlock>
#include <QTextCursor>
#include <QTextFrame>
#include <QTextTable>

namespace strata::desktop {

namespace {

// Marks what is styled already (so a restyle leaves it, and emits nothing).
constexpr int kStyled = QTextFormat::UserProperty + 45;

void style_frames(QTextFrame* frame, int* changed) {
    for (QTextFrame* child : frame->childFrames()) {
        if (auto* table = qobject_cast<QTextTable*>(child)) {
            QTextTableFormat f = table->format();
            if (!f.boolProperty(kStyled)) {
                f.setBorder(1);
                f.setBorderBrush(MarkdownStyler::border_color());
                f.setBorderStyle(QTextFrameFormat::BorderStyle_Solid);
                f.setBorderCollapse(true);
                f.setCellSpacing(0);
                f.setCellPadding(MarkdownStyler::kCellPadding);
                f.setHeaderRowCount(1);
                f.setProperty(kStyled, true);
                table->setFormat(f);
                ++*changed;
            }
            // The header row: every cell of the first row (the Markdown header).
            for (int c = 0; c < table->columns(); ++c) {
                QTextTableCell cell = table->cellAt(0, c);
                QTextCharFormat cf = cell.format();
                if (cf.background().color() == MarkdownStyler::header_background()) continue;
                cf.setBackground(MarkdownStyler::header_background());
                cell.setFormat(cf);
            }
        }
        style_frames(child, changed);
    }
}

}  // namespace

MarkdownStyler::MarkdownStyler(QObject* parent) : QObject(parent) {}

const QColor& MarkdownStyler::border_color() {
    static const QColor c(0x3a, 0x43, 0x50);
    return c;
}
const QColor& MarkdownStyler::header_background() {
    static const QColor c(0x23, 0x2a, 0x35);  // Theme.raised
    return c;
}
const QColor& MarkdownStyler::quote_color() {
    static const QColor c(0xa3, 0xad, 0xba);  // Theme.textDim
    return c;
}
const QColor& MarkdownStyler::quote_background() {
    static const QColor c(0x1c, 0x22, 0x2b);  // Theme.surfaceAlt
    return c;
}

void MarkdownStyler::setDocument(QQuickTextDocument* document) {
    if (document == quick_document_) return;
    quick_document_ = document;
    set_text_document(document ? document->textDocument() : nullptr);
    Q_EMIT documentChanged();
}

void MarkdownStyler::set_text_document(QTextDocument* document) {
    if (document == doc_) return;
    disconnect(changed_);
    doc_ = document;
    if (!doc_) return;
    changed_ = connect(doc_, &QTextDocument::contentsChanged, this, &MarkdownStyler::schedule);
    schedule();
}

void MarkdownStyler::schedule() {
    if (busy_ || pending_) return;
    pending_ = true;
    QMetaObject::invokeMethod(this, [this] {
        pending_ = false;
        restyle();
    }, Qt::QueuedConnection);
}

int MarkdownStyler::restyle() {
    if (!doc_ || busy_) return 0;
    busy_ = true;
    int changed = 0;
    style_frames(doc_->rootFrame(), &changed);
    for (QTextBlock b = doc_->begin(); b.isValid(); b = b.next()) {
        const QTextBlockFormat bf = b.blockFormat();
        const int level = bf.intProperty(QTextFormat::BlockQuoteLevel);
        if (level <= 0 || bf.boolProperty(kStyled)) continue;
        QTextCursor cursor(b);
        QTextBlockFormat q = bf;
        q.setLeftMargin(kQuoteIndent * level);
        q.setBackground(quote_background());
        q.setProperty(kStyled, true);
        cursor.setBlockFormat(q);
        // Its text dimmer, links keeping their own colour.
        QList<std::pair<int, int>> runs;
        for (QTextBlock::iterator it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment frag = it.fragment();
            if (frag.isValid() && !frag.charFormat().isAnchor()) runs.append({frag.position(), frag.length()});
        }
        QTextCharFormat dim;
        dim.setForeground(quote_color());
        for (const auto& [at, length] : runs) {
            QTextCursor c(doc_);
            c.setPosition(at);
            c.setPosition(at + length, QTextCursor::KeepAnchor);
            c.mergeCharFormat(dim);
        }
        ++changed;
    }
    busy_ = false;
    return changed;
}

}  // namespace strata::desktop
