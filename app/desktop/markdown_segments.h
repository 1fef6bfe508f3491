// An answer's Markdown in the pieces the chat view renders one item each:
// prose and fenced code blocks (``` or ~~~, with a language), prose further
// cut into paragraphs, so the piece an answer is still writing stays short.
//
// MarkdownSegmenter reads text as it streams: append() reads the new text
// once; the segments before stable() never change again, and tail() is what
// the still-open piece (and the unfinished last line) make so far. Together
// they equal what the whole text gives read at once (TextUtil::segments).
//
// SegmentListModel is that list as a model for a Repeater: set its markdown
// to the answer as it grows and only the last rows change (rows are inserted
// and updated, never reset), so the view rebuilds nothing it already shows.
#pragma once

#include <QAbstractListModel>
#include <QList>
#include <QString>

namespace strata::desktop {

struct Segment {
    QString kind;         // "text" | "code"
    QString text;         // prose as Markdown (hard line breaks kept), or the code
    QString lang;         // a code block's language ("" if none)
    bool joined = false;  // prose that continues the previous piece's paragraph (a long one, cut at a line)
    bool operator==(const Segment&) const = default;
};

class MarkdownSegmenter {
public:
    // The piece an answer is still writing is parsed and laid out again at
    // every update, so it is kept short where a cut does not show:
    // A paragraph longer than this is cut at a line break between two plain
    // lines (each line ends in a hard break anyway, so the cut is invisible).
    static constexpr int kLongParagraph = 400;
    // A plain line longer than this is cut after a sentence (". ", "! ", "? ")
    // where no inline span (`code`, *emphasis*, [link](...)) is open; past
    // 1.25x this length at any such space, past 1.5x at any space; never
    // where the rest would begin a list, heading, quote or code. The rest is
    // joined.
    static constexpr int kLongLine = 800;

    void append(const QString& more);
    void clear() { *this = MarkdownSegmenter(); }

    const QList<Segment>& stable() const { return done_; }
    QList<Segment> tail() const;
    QList<Segment> all() const { return done_ + tail(); }

private:
    struct State {
        bool in_code = false;
        QString fence, lang;
        QString raw;               // the open piece's lines, each ending in '\n'
        bool after_blank = false;  // the last line of the open prose was blank
        bool last_plain = false;   // ... or plain (may be cut before the next plain line)
        bool joined = false;       // the open prose continues the previous piece
        bool has_text = false;     // the open prose has a line that is not blank
        bool text_plain = false;   // its last line that is not blank is plain
    };
    static void feed(State& s, QList<Segment>& out, const QString& line);
    static void finish(const State& s, QList<Segment>& out);
    // Cuts the line being read where kLongLine allows, as often as it does;
    // `whole_line`: its end has come (else a cut waits for kLeadLook
    // characters after it, to see how the rest begins).
    void cut_long_line(bool whole_line);
    static constexpr int kLeadLook = 16;

    // How far the line being read was searched for a cut, and what was open there.
    struct CutScan {
        qsizetype at = 0;
        int ticks = 0, stars = 0, brackets = 0, parens = 0;
        bool barred = false;  // not a plain line (a list item, a table row, ...): never cut
    };

    State state_;
    QList<Segment> done_;
    QString partial_;  // the last line, not yet ended by '\n'
    CutScan scan_;
};

class SegmentListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(QString markdown READ markdown WRITE setMarkdown NOTIFY markdownChanged)
    Q_PROPERTY(int count READ count NOTIFY countChanged)
    Q_PROPERTY(int codeBlockCount READ codeBlockCount NOTIFY countChanged)
public:
    enum Role { KindRole = Qt::UserRole + 1, TextRole, LangRole, JoinedRole };
    explicit SegmentListModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}

    int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : int(rows_.size()); }
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    QString markdown() const { return markdown_; }
    // Text that extends the last is read from where it left off.
    void setMarkdown(const QString& text);
    // The same as setMarkdown(markdown() + more), without comparing the two.
    void append(const QString& more);
    int count() const { return int(rows_.size()); }
    int codeBlockCount() const { return code_blocks_; }
    Q_INVOKABLE QVariantMap get(int row) const;

Q_SIGNALS:
    void markdownChanged();
    void countChanged();

private:
    void sync(int unchanged);

    QString markdown_;
    MarkdownSegmenter segmenter_;
    QList<Segment> rows_;
    int code_blocks_ = 0;
};

}  // namespace strata::desktop
