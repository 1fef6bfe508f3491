#include "markdown_segments.h"

#include <QRegularExpression>
#include <algorithm>
#include <QStringList>
#include <QVariantMap>

namespace strata::desktop {

namespace {

void add(QList<Segment>& out, const QString& kind, QString text, const QString& lang, bool joined) {
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
    out.append(Segment{kind, text, lang, joined});
}

// A line that starts a paragraph of its own and ends none: not indented, not a
// list item, quote, table row, HTML or setext underline. Prose is cut only
// between such lines, so no Markdown construct is split across two pieces.
bool plain_line(const QString& line) {
    if (line.trimmed().isEmpty()) return false;
    const QChar c = line.at(0);
    if (c == QLatin1Char(' ') || c == QLatin1Char('\t') || c == QLatin1Char('>') || c == QLatin1Char('<') ||
        line.contains(QLatin1Char('|')))
        return false;
    static const QRegularExpression block(QStringLiteral("^(?:[-*+](?:\\s|$)|\\d{1,9}[.)](?:\\s|$)|=+\\s*$|-+\\s*$)"));
    return !block.match(line).hasMatch();
}

}  // namespace

void MarkdownSegmenter::feed(State& s, QList<Segment>& out, const QString& line) {
    if (s.in_code) {
        const QString t = line.trimmed();
        const QChar f = s.fence.at(0);
        if (t.startsWith(f) && t.size() >= s.fence.size() && t == QString(t.size(), f) && line.indexOf(f) <= 3) {
            if (s.raw.endsWith(QLatin1Char('\n'))) s.raw.chop(1);
            add(out, QStringLiteral("code"), s.raw, s.lang, false);
            s = State{};
            return;
        }
        s.raw += line;
        s.raw += QLatin1Char('\n');
        return;
    }
    static const QRegularExpression open_re(QStringLiteral("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)[^`]*$"));
    if (const QRegularExpressionMatch m = open_re.match(line); m.hasMatch()) {
        add(out, QStringLiteral("text"), s.raw, {}, s.joined);
        s = State{};
        s.in_code = true;
        s.fence = m.captured(1);
        s.lang = m.captured(2);
        return;
    }
    const bool blank = line.trimmed().isEmpty();
    const bool plain = plain_line(line);
    if (plain && s.has_text && (s.after_blank || (s.last_plain && s.raw.size() > kLongParagraph))) {
        // A new paragraph, or a long one cut at a line: the open piece is done.
        add(out, QStringLiteral("text"), s.raw, {}, s.joined);
        s.joined = !s.after_blank;
        s.raw.clear();
        s.has_text = false;
    }
    s.raw += line;
    s.raw += QLatin1Char('\n');
    s.after_blank = blank;
    s.last_plain = plain;
    s.has_text = s.has_text || !blank;
    if (!blank) s.text_plain = plain;
}

void MarkdownSegmenter::finish(const State& s, QList<Segment>& out) {
    QString raw = s.raw;
    if (raw.endsWith(QLatin1Char('\n'))) raw.chop(1);
    add(out, s.in_code ? QStringLiteral("code") : QStringLiteral("text"), raw, s.lang, s.joined);
}

void MarkdownSegmenter::append(const QString& more) {
    qsizetype from = 0;
    for (qsizetype nl = more.indexOf(QLatin1Char('\n')); nl >= 0; nl = more.indexOf(QLatin1Char('\n'), from)) {
        partial_ += QStringView(more).mid(from, nl - from);
        cut_long_line(true);
        feed(state_, done_, partial_);
        partial_.clear();
        scan_ = CutScan{};
        from = nl + 1;
    }
    partial_ += QStringView(more).mid(from);
    cut_long_line(false);
}

void MarkdownSegmenter::cut_long_line(bool whole_line) {
    // Decided by the line's own text around the cut, so text read in pieces is
    // cut where the whole text is.
    while (!state_.in_code && !scan_.barred && partial_.size() > kLongLine) {
        // A plain line may start with up to three spaces (a model's first token
        // often does), unless it may continue a list item or quote above it.
        qsizetype lead = 0;
        while (lead < partial_.size() && lead < 4 && partial_.at(lead) == QLatin1Char(' ')) ++lead;
        if (scan_.at == 0 && (lead > 3 || !plain_line(partial_.mid(lead, kLongLine)) ||
                              (lead > 0 && state_.has_text && !state_.text_plain))) {
            scan_.barred = true;
            return;
        }
        qsizetype cut = -1;
        for (; scan_.at < partial_.size(); ++scan_.at) {
            const QChar c = partial_.at(scan_.at);
            // Past kLongLine after a sentence, past 1.25x at any space, with no
            // span open; past 1.5x at any space (a span "open" that long is a
            // stray marker, not a span).
            const bool closed = scan_.ticks % 2 == 0 && scan_.stars % 2 == 0 && scan_.brackets == 0 && scan_.parens == 0;
            const QChar before = scan_.at > 0 ? partial_.at(scan_.at - 1) : QChar();
            const bool sentence = before == QLatin1Char('.') || before == QLatin1Char('!') || before == QLatin1Char('?');
            if (c == QLatin1Char(' ') && scan_.at >= kLongLine &&
                ((closed && (sentence || scan_.at >= kLongLine * 5 / 4)) || scan_.at >= kLongLine * 3 / 2)) {
                // The rest starts a piece of its own: it must read as a paragraph
                // ("1. ", "- ", "# " or spaces would make it a list, a heading or code).
                const QString next = partial_.mid(scan_.at + 1, kLeadLook);
                if (next.size() < kLeadLook && !whole_line) return;  // its start is still to come
                if (!next.isEmpty() && plain_line(next) && !next.startsWith(QLatin1Char('#'))) {
                    cut = scan_.at;
                    break;
                }
            }
            if (c == QLatin1Char('`')) ++scan_.ticks;
            else if (c == QLatin1Char('*')) ++scan_.stars;
            else if (c == QLatin1Char('[')) ++scan_.brackets;
            else if (c == QLatin1Char(']')) scan_.brackets = std::max(0, scan_.brackets - 1);
            else if (c == QLatin1Char('(')) ++scan_.parens;
            else if (c == QLatin1Char(')')) scan_.parens = std::max(0, scan_.parens - 1);
        }
        if (cut < 0) return;  // no place yet: look on when more comes
        feed(state_, done_, partial_.left(cut));
        add(done_, QStringLiteral("text"), state_.raw, {}, state_.joined);
        state_.raw.clear();
        state_.has_text = false;
        state_.joined = true;
        partial_.remove(0, cut + 1);
        scan_ = CutScan{};
    }
}

QList<Segment> MarkdownSegmenter::tail() const {
    // The unfinished last line is read as the text's last line, on a copy.
    State s = state_;
    QList<Segment> out;
    feed(s, out, partial_);
    finish(s, out);
    return out;
}

QVariant SegmentListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size()) return {};
    const Segment& s = rows_[index.row()];
    switch (role) {
        case KindRole: return s.kind;
        case TextRole: return s.text;
        case LangRole: return s.lang;
        case JoinedRole: return s.joined;
    }
    return {};
}

QHash<int, QByteArray> SegmentListModel::roleNames() const {
    return {{KindRole, "kind"}, {TextRole, "text"}, {LangRole, "lang"}, {JoinedRole, "joined"}};
}

QVariantMap SegmentListModel::get(int row) const {
    QVariantMap m;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it) m[QString::fromLatin1(it.value())] = data(index(row), it.key());
    return m;
}

void SegmentListModel::setMarkdown(const QString& text) {
    if (text == markdown_) return;
    // Text that extends the last is read on from where that ended.
    if (!markdown_.isEmpty() && text.startsWith(markdown_)) return append(text.mid(markdown_.size()));
    segmenter_.clear();
    segmenter_.append(text);
    markdown_ = text;
    sync(0);
    Q_EMIT markdownChanged();
}

void SegmentListModel::append(const QString& more) {
    if (more.isEmpty()) return;
    const int unchanged = int(segmenter_.stable().size());
    markdown_ += more;
    segmenter_.append(more);
    sync(unchanged);
    Q_EMIT markdownChanged();
}

void SegmentListModel::sync(int unchanged) {
    // Rows before `unchanged` were stable pieces already: only the rest is
    // built, compared and counted (a streamed update touches the last few).
    auto is_code = [](const Segment& x) { return x.kind == QLatin1String("code"); };
    const QList<Segment> want = segmenter_.stable().mid(unchanged) + segmenter_.tail();
    const int old_count = int(rows_.size()), new_count = unchanged + int(want.size());
    const int code = code_blocks_ - int(std::count_if(rows_.begin() + unchanged, rows_.end(), is_code)) +
                     int(std::count_if(want.begin(), want.end(), is_code));
    for (int i = unchanged; i < std::min(old_count, new_count); ++i) {
        if (rows_[i] == want[i - unchanged]) continue;
        rows_[i] = want[i - unchanged];
        Q_EMIT dataChanged(index(i), index(i));
    }
    if (new_count > old_count) {
        beginInsertRows({}, old_count, new_count - 1);
        rows_.append(want.mid(old_count - unchanged));
        endInsertRows();
    } else if (new_count < old_count) {
        beginRemoveRows({}, new_count, old_count - 1);
        rows_.resize(new_count);
        endRemoveRows();
    }
    if (new_count != old_count || code != code_blocks_) {
        code_blocks_ = code;
        Q_EMIT countChanged();
    }
}

}  // namespace strata::desktop
