// The desktop app's models without an engine: message segmentation, the
// message and conversation list models, settings validation and the
// telemetry model's histories.
#include <QDir>
#include <QRegularExpression>
#include <QFontMetricsF>
#include <QImage>
#include <QPainter>
#include <QFile>
#include <QFileInfo>
#include <QSettings>
#include <QSignalSpy>
#include <QUrl>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <thread>

#include "conversation_list_model.h"
#include "gguf/gguf.h"
#include "heat_map_item.h"
#include "line_chart_item.h"
#include "markdown_segments.h"
#include "message_list_model.h"
#include "model_library.h"
#include "settings_model.h"
#include "telemetry_model.h"
#include "text_util.h"

using namespace strata::desktop;

class TestAppModels : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void segments_split_code_blocks() {
        const QVariantList s = TextUtil::segments(
            QStringLiteral("Here is code:\n\n```cpp\nint main() {}\n```\nand after\n~~~\nplain\n~~~"));
        QCOMPARE(s.size(), 4);
        QCOMPARE(s[0].toMap()[QStringLiteral("kind")].toString(), QStringLiteral("text"));
        QCOMPARE(s[1].toMap()[QStringLiteral("kind")].toString(), QStringLiteral("code"));
        QCOMPARE(s[1].toMap()[QStringLiteral("lang")].toString(), QStringLiteral("cpp"));
        QCOMPARE(s[1].toMap()[QStringLiteral("text")].toString(), QStringLiteral("int main() {}"));
        QCOMPARE(s[2].toMap()[QStringLiteral("text")].toString(), QStringLiteral("and after"));
        QCOMPARE(s[3].toMap()[QStringLiteral("text")].toString(), QStringLiteral("plain"));
        QCOMPARE(s[3].toMap()[QStringLiteral("lang")].toString(), QString());
    }

    void segments_unclosed_fence_runs_to_end() {
        // An answer still streaming: the open block is code up to the end.
        const QVariantList s = TextUtil::segments(QStringLiteral("x\n```python\nprint(1)\nprint(2"));
        QCOMPARE(s.size(), 2);
        QCOMPARE(s[1].toMap()[QStringLiteral("text")].toString(), QStringLiteral("print(1)\nprint(2"));
        QVERIFY(TextUtil::segments(QString()).isEmpty());
        // A longer fence is not closed by a shorter one.
        const QVariantList t = TextUtil::segments(QStringLiteral("````\n```\ninner\n```\n````"));
        QCOMPARE(t.size(), 1);
        QCOMPARE(t[0].toMap()[QStringLiteral("text")].toString(), QStringLiteral("```\ninner\n```"));
    }

    void segments_keep_line_breaks() {
        const QVariantList s = TextUtil::segments(QStringLiteral("line one\nline two\n\npara"));
        QCOMPARE(s.size(), 2);
        QCOMPARE(s[0].toMap()[QStringLiteral("text")].toString(), QStringLiteral("line one  \nline two"));
        QCOMPARE(s[1].toMap()[QStringLiteral("text")].toString(), QStringLiteral("para"));
        QVERIFY(!s[1].toMap()[QStringLiteral("joined")].toBool());
    }

    // Prose is cut into paragraphs before a plain line, so no Markdown
    // construct spans the cut (lists, quotes, tables, indented lines and what
    // follows them up to a plain paragraph stay whole), and a paragraph
    // longer than kLongParagraph at a line break between plain lines (joined).
    void segments_cut_prose_where_markdown_allows() {
        const QVariantList s = TextUtil::segments(QStringLiteral(
            "Intro.\n\n- one\n\n- two\n  more\n\n> quoted\n\n| a | b |\n|---|---|\n\n| c | d |\n\nOutro\n===\n\nLast."));
        QStringList texts;
        for (const QVariant& v : s) texts << v.toMap()[QStringLiteral("text")].toString();
        QCOMPARE(texts, QStringList({QStringLiteral("Intro.\n\n- one\n\n- two  \n  more\n\n> quoted\n\n| a | b |  \n|---|---|\n\n| c | d |"),
                                     QStringLiteral("Outro  \n==="), QStringLiteral("Last.")}));
        QString verses;
        for (int i = 0; i < 60; ++i) verses += QStringLiteral("%1 And it came to pass in those days, that the word went out.\n").arg(i);
        const QVariantList v = TextUtil::segments(verses);
        QVERIFY2(v.size() >= 3, qPrintable(QString::number(v.size())));
        QString joined;
        for (int i = 0; i < v.size(); ++i) {
            const QVariantMap m = v[i].toMap();
            QCOMPARE(m[QStringLiteral("joined")].toBool(), i > 0);
            QVERIFY(m[QStringLiteral("text")].toString().size() < MarkdownSegmenter::kLongParagraph + 200);
            joined += (i ? QStringLiteral("  \n") : QString()) + m[QStringLiteral("text")].toString();
        }
        // Put back together, the pieces are the paragraph as one piece would show it.
        QCOMPARE(joined, verses.trimmed().split(QLatin1Char('\n')).join(QStringLiteral("  \n")));
    }

    // Read in pieces, the segmenter gives what the whole text gives, after
    // every piece (stable pieces then never change), and the model shows it
    // by inserting and updating rows, never by a reset.
    void segments_streamed_equal_segments_whole() {
        QString text = QStringLiteral("Here is code:\n\n```cpp\nint main() {\n  return 0;\n}\n```\nand after\n\n~~~\nplain\n~~~\n\n"
                                      "1. first\n2. second\n\nA table:\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n````\n```\ninner\n```\n````\nEnd");
        for (int i = 0; i < 40; ++i) text += QStringLiteral("\nVerse %1: and the evening and the morning were the day.").arg(i);
        // One line of 4,000 characters (a model that writes no line breaks),
        // with a `code span` across the first place it may be cut.
        text += QStringLiteral("\n\n");
        for (int i = 0; text.size() < 8000; ++i) text += i == 135 ? QStringLiteral("`a b c d e f g h i j k l m n o p q r s t` ") : QStringLiteral("word%1 ").arg(i);
        // ... one of sentences: cut after the first one that ends past kLongLine ...
        text += QStringLiteral("\n\n");
        for (int i = 0; i < 120; ++i) text += QStringLiteral("Sentence number %1 is here. ").arg(i);
        // ... one of steps written inline ("... 2. Mix ..."): a piece never starts
        // with what would make it a list, a heading or a quote ...
        text += QStringLiteral("\n\nThe recipe goes as follows:");
        for (int i = 1; i < 60; ++i) text += QStringLiteral(" %1. Mix the flour - then # wait > a while.").arg(i);
        // ... and one with a stray '(' early on, after a leading space (a model's
        // first token): cut all the same, past 1.5 kLongLine.
        text += QStringLiteral("\n\n (stray ");
        for (int i = 0; i < 700; ++i) text += QStringLiteral("more%1 ").arg(i);
        text += QStringLiteral("\n\n```python\nprint(1)");
        for (int step : {1, 2, 7, 31, 1000}) {
            MarkdownSegmenter seg;
            SegmentListModel model;
            QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
            QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
            QList<Segment> stable_before;
            for (int at = 0; at < text.size(); at += step) {
                const QString upto = text.left(at + step);
                seg.append(text.mid(at, step));
                QVERIFY2(seg.stable().mid(0, stable_before.size()) == stable_before, qPrintable(QStringLiteral("at %1").arg(at)));
                stable_before = seg.stable();
                const QList<Segment> streamed = seg.all();
                const QVariantList whole = TextUtil::segments(upto);
                QCOMPARE(streamed.size(), whole.size());
                model.setMarkdown(upto);
                QCOMPARE(model.count(), int(whole.size()));
                for (int i = 0; i < whole.size(); ++i) {
                    const QVariantMap w = whole[i].toMap();
                    const Segment& g = streamed[i];
                    QVERIFY2(g.kind == w[QStringLiteral("kind")].toString() && g.text == w[QStringLiteral("text")].toString() &&
                                 g.lang == w[QStringLiteral("lang")].toString() && g.joined == w[QStringLiteral("joined")].toBool(),
                             qPrintable(QStringLiteral("piece %1 at %2 (step %3): streamed '%4', whole '%5'")
                                            .arg(i).arg(at).arg(step).arg(g.text, w[QStringLiteral("text")].toString())));
                    QCOMPARE(model.get(i)[QStringLiteral("text")].toString(), w[QStringLiteral("text")].toString());
                }
            }
            QCOMPARE(resets.count(), 0);
            // The long line was cut, at a space past kLongLine, not inside the code span.
            const QList<Segment> all = seg.all();
            const auto long_piece = std::find_if(all.begin(), all.end(), [](const Segment& x) { return x.text.startsWith(QLatin1String("word0 ")); });
            QVERIFY(long_piece != all.end() && long_piece + 1 != all.end());
            // No sentence ends in it: cut at the first space past 1.25 kLongLine outside the code span.
            QVERIFY2(long_piece->text.size() >= MarkdownSegmenter::kLongLine * 5 / 4 &&
                         long_piece->text.size() < MarkdownSegmenter::kLongLine * 3 / 2,
                     qPrintable(QString::number(long_piece->text.size())));
            QVERIFY((long_piece + 1)->joined);
            QCOMPARE(long_piece->text.count(QLatin1Char('`')) % 2, 0);
            const auto sentences = std::find_if(all.begin(), all.end(), [](const Segment& x) { return x.text.startsWith(QLatin1String("Sentence number 0 ")); });
            QVERIFY(sentences != all.end() && sentences + 1 != all.end() && (sentences + 1)->joined);
            QVERIFY(sentences->text.endsWith(QLatin1Char('.')) && sentences->text.size() >= MarkdownSegmenter::kLongLine &&
                    sentences->text.size() < MarkdownSegmenter::kLongLine + 30);
            const auto stray = std::find_if(all.begin(), all.end(), [](const Segment& x) { return x.text.contains(QLatin1String(" (stray")); });
            QVERIFY(stray != all.end() && stray + 1 != all.end() && (stray + 1)->joined);
            const qsizetype line = stray->text.size() - stray->text.indexOf(QLatin1String(" (stray"));
            QVERIFY2(line >= MarkdownSegmenter::kLongLine * 3 / 2 && line < MarkdownSegmenter::kLongLine * 3 / 2 + 40,
                     qPrintable(QString::number(line)));
            static const QRegularExpression block(QStringLiteral("^(\\d+[.)] |[-*+] |#|>| )"));
            int recipe_pieces = 0;
            for (const Segment& x : all) {
                if (x.joined) QVERIFY2(!block.match(x.text).hasMatch(), qPrintable(x.text.left(40)));
                if (x.joined && x.text.contains(QLatin1String("Mix the flour"))) ++recipe_pieces;
            }
            QVERIFY(recipe_pieces >= 2);  // the steps' line was cut, twice or more
            QCOMPARE(model.codeBlockCount(), 4);  // cpp, ~~~, the four-backtick block (with ``` inside), the open python
            Q_UNUSED(removed);
        }
        // Text that does not extend the last is read afresh.
        SegmentListModel model;
        model.setMarkdown(QStringLiteral("```\ncode\n```"));
        QCOMPARE(model.codeBlockCount(), 1);
        model.setMarkdown(QStringLiteral("just prose"));
        QCOMPARE(model.count(), 1);
        QCOMPARE(model.codeBlockCount(), 0);
        QCOMPARE(model.get(0)[QStringLiteral("kind")].toString(), QStringLiteral("text"));
    }

    // A streamed chunk signals only what it changed, and only the last piece of
    // a long answer changes: the rows before it get no dataChanged.
    void streaming_touches_only_the_end() {
        SegmentListModel model;
        QString text;
        for (int i = 0; i < 30; ++i) text += QStringLiteral("Paragraph %1 of the answer.\n\n").arg(i);
        model.setMarkdown(text);
        QCOMPARE(model.count(), 30);
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
        model.setMarkdown(text + QStringLiteral("The next one"));
        model.setMarkdown(text + QStringLiteral("The next one grows"));
        QCOMPARE(inserted.count(), 1);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(changed[0][0].toModelIndex().row(), 30);

        MessageListModel m;
        strata::app::Message a;
        a.id = 7;
        a.role = QStringLiteral("assistant");
        m.append(a);
        QSignalSpy roles(&m, &QAbstractItemModel::dataChanged);
        auto* pieces = qobject_cast<SegmentListModel*>(m.get(0)[QStringLiteral("segments")].value<QObject*>());
        QVERIFY(pieces);
        QSignalSpy inserted_piece(pieces, &QAbstractItemModel::rowsInserted);
        m.append_text(7, QStringLiteral("Plain answer"));
        m.append_text(7, QStringLiteral(" goes on"));
        // The answer's text is not signalled (the view would copy it whole every
        // time): its pieces grow instead, the first one inserted, then updated.
        QCOMPARE(roles.count(), 0);
        QCOMPARE(inserted_piece.count(), 1);
        QCOMPARE(pieces->get(0)[QStringLiteral("text")].toString(), QStringLiteral("Plain answer goes on"));
        QCOMPARE(m.get(0)[QStringLiteral("content")].toString(), QStringLiteral("Plain answer goes on"));
        // The finished answer keeps its pieces' model (the view keeps its items).
        strata::app::Message done = a;
        done.content = QStringLiteral("Plain answer goes on");
        m.update(done);
        QCOMPARE(m.get(0)[QStringLiteral("segments")].value<QObject*>(), pieces);
        roles.clear();
        m.append_text(99, QStringLiteral("unknown id"));
        QCOMPARE(roles.count(), 0);
        // <think> found at the start turns what was shown as answer into reasoning.
        strata::app::Message t;
        t.id = 8;
        t.role = QStringLiteral("assistant");
        m.append(t);
        m.append_text(8, QStringLiteral("<thi"));
        QCOMPARE(m.get(1)[QStringLiteral("content")].toString(), QStringLiteral("<thi"));
        m.append_text(8, QStringLiteral("nk>two words"));
        QCOMPARE(m.get(1)[QStringLiteral("content")].toString(), QString());
        QCOMPARE(m.get(1)[QStringLiteral("reasoning")].toString(), QStringLiteral("two words"));
        QCOMPARE(m.get(1)[QStringLiteral("reasoningWords")].toInt(), 2);
        m.append_text(8, QStringLiteral(" and three</think>\n\nDone."));
        QCOMPARE(m.get(1)[QStringLiteral("reasoningWords")].toInt(), 4);
        QCOMPARE(m.get(1)[QStringLiteral("content")].toString(), QStringLiteral("Done."));
        QVERIFY(!m.get(1)[QStringLiteral("reasoningOpen")].toBool());
    }

    // An idle bytes chart (nothing loaded per token) reads "1.00 KiB / 512 B /
    // 0 B", not "1 B / 1 B / 0 B"; a busy one scales to its data.
    void chart_axis_labels_are_distinct() {
        LineChartItem chart;
        chart.setProperty("format", QStringLiteral("bytes"));
        chart.setValues({0, 0, 0});
        QCOMPARE(chart.axisLabels(), QStringList({QStringLiteral("1.00 KiB"), QStringLiteral("512 B"), QStringLiteral("0 B")}));
        chart.setValues({0, 3.0 * 1024 * 1024});
        QCOMPARE(chart.axisLabels().first(), QStringLiteral("4.77 MiB"));  // 5e6: round in decimal
        chart.setProperty("format", QStringLiteral("number"));
        chart.setValues({0, 140});
        QCOMPARE(chart.axisLabels(), QStringList({QStringLiteral("200"), QStringLiteral("100"), QStringLiteral("0.0")}));
    }

    // 48 layers x 128 experts in the panel's space: labels never overlap (the
    // step covers the widest label) and resident experts stay marked though
    // their cells are too small to outline.
    void heat_map_of_many_layers_keeps_labels_and_marks() {
        TelemetryModel t;
        strata::TelemetrySnapshot s;
        s.n_layer = 48;
        s.n_expert = 128;
        s.heat.assign(size_t(48 * 128), 0.0f);
        s.residency.assign(size_t(48 * 128), 0);
        s.residency[size_t(10 * 128 + 64)] = 2;  // layer 10, expert 64 resident
        s.heat[0] = 1.0f;
        t.push(s);
        HeatMapItem map;
        map.setTelemetry(&t);
        map.setSize(QSizeF(330, 16 + 48 * 7));
        const QVariantMap steps = map.labelSteps();
        QFont f;
        f.setPixelSize(10);
        const QFontMetricsF fm(f);
        const qreal cw = (330.0 - map.labelWidth()) / 128, ch = 48 * 7.0 / 48;
        QVERIFY(steps[QStringLiteral("column")].toInt() * cw >= fm.horizontalAdvance(QStringLiteral("127")) + 4);
        QVERIFY(steps[QStringLiteral("row")].toInt() * ch >= fm.height());
        QImage img(330, 16 + 48 * 7, QImage::Format_ARGB32);
        img.fill(Qt::black);
        QPainter p(&img);
        map.paint(&p);
        p.end();
        const int x = int(map.labelWidth() + (64 + 0.5) * cw), y = int(16 + 10 * ch + 0.5);
        const int x_absent = int(map.labelWidth() + (66 + 0.5) * cw);
        QVERIFY2(img.pixelColor(x, y).lightness() > img.pixelColor(x_absent, y).lightness() + 40,
                 qPrintable(QStringLiteral("resident %1, absent %2").arg(img.pixelColor(x, y).name(), img.pixelColor(x_absent, y).name())));
    }

    void formats() {
        QCOMPARE(TextUtil::formatBytes(512), QStringLiteral("512 B"));
        QCOMPARE(TextUtil::formatBytes(1536), QStringLiteral("1.50 KiB"));
        QCOMPARE(TextUtil::formatBytes(3.0 * 1024 * 1024 * 1024), QStringLiteral("3.00 GiB"));
        QCOMPARE(TextUtil::formatPercent(0.875), QStringLiteral("87.5%"));
        QCOMPARE(TextUtil::formatCount(16.86e6), QStringLiteral("16.9 M"));
    }

    void message_model_roles_and_streaming() {
        MessageListModel m;
        QSignalSpy count(&m, &MessageListModel::countChanged);
        strata::app::Message u;
        u.id = 1;
        u.role = QStringLiteral("user");
        u.content = QStringLiteral("hi");
        m.append(u);
        strata::app::Message a;
        a.id = 2;
        a.role = QStringLiteral("assistant");
        a.partial = true;
        m.append(a);
        QCOMPARE(m.rowCount(), 2);
        QCOMPARE(count.count(), 2);
        const QHash<int, QByteArray> roles = m.roleNames();
        for (const char* r : {"messageId", "role", "content", "reasoningWords", "partial", "streaming", "statsText", "isLast", "finish"})
            QVERIFY2(roles.values().contains(QByteArray(r)), r);
        QCOMPARE(m.get(0)[QStringLiteral("isLast")].toBool(), false);
        QCOMPARE(m.get(1)[QStringLiteral("isLast")].toBool(), true);

        QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
        m.set_streaming(2);
        QVERIFY(m.get(1)[QStringLiteral("streaming")].toBool());
        m.append_text(2, QStringLiteral("Hel"));
        m.append_text(2, QStringLiteral("lo"));
        QCOMPARE(m.get(1)[QStringLiteral("content")].toString(), QStringLiteral("Hello"));
        QCOMPARE(changed.count(), 1);  // streaming; the text reaches the view through its pieces
        m.append_text(99, QStringLiteral("ignored"));  // unknown id: nothing happens
        QCOMPARE(m.get(1)[QStringLiteral("reasoning")].toString(), QString());

        // A reasoning model's reply streams its reasoning first, then the answer.
        strata::app::Message r;
        r.id = 3;
        r.role = QStringLiteral("assistant");
        m.append(r);
        m.append_text(3, QStringLiteral("<|channel|>analysis<|message|>Capital of France"));
        QCOMPARE(m.get(2)[QStringLiteral("reasoning")].toString(), QStringLiteral("Capital of France"));
        QVERIFY(m.get(2)[QStringLiteral("reasoningOpen")].toBool());
        QCOMPARE(m.get(2)[QStringLiteral("content")].toString(), QString());
        m.append_text(3, QStringLiteral(".<|end|><|start|>assistant<|channel|>final<|message|>Paris."));
        QVERIFY(!m.get(2)[QStringLiteral("reasoningOpen")].toBool());
        QCOMPARE(m.get(2)[QStringLiteral("content")].toString(), QStringLiteral("Paris."));
        m.remove_from(3);

        a.content = QStringLiteral("Hello");
        a.partial = false;
        a.stats.tokens = 42;
        a.stats.tok_s = 37.14;
        a.stats.ttft_ms = 120;
        a.stats.finish = QStringLiteral("end");
        m.update(a);
        m.set_streaming(0);
        QCOMPARE(m.get(1)[QStringLiteral("statsText")].toString(), QStringLiteral("42 tokens · 37.1 tok/s · first token 120 ms"));
        QVERIFY(!m.get(1)[QStringLiteral("streaming")].toBool());

        m.remove_from(2);
        QCOMPARE(m.rowCount(), 1);
        QCOMPARE(m.get(0)[QStringLiteral("isLast")].toBool(), true);
    }

    void conversation_model_updates_in_place() {
        ConversationListModel m;
        strata::app::Conversation a, b;
        a.id = 1;
        a.title = QStringLiteral("A");
        a.updated = QDateTime::currentDateTimeUtc();
        b.id = 2;
        b.title = QStringLiteral("B");
        b.message_count = 3;
        m.set_conversations({b, a});
        QCOMPARE(m.rowCount(), 2);
        QCOMPARE(m.idAt(0), 2);
        QCOMPARE(m.data(m.index(0), ConversationListModel::MessageCountRole).toLongLong(), 3);
        QSignalSpy reset(&m, &QAbstractItemModel::modelReset);
        QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
        b.title = QStringLiteral("B renamed");
        m.set_conversations({b, a});
        QCOMPARE(reset.count(), 0);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(m.data(m.index(0), ConversationListModel::TitleRole).toString(), QStringLiteral("B renamed"));
        m.set_conversations({a});
        QCOMPARE(reset.count(), 1);
        QCOMPARE(m.row_of(2), -1);
        const QDateTime now = QDateTime::currentDateTimeUtc();
        QCOMPARE(ConversationListModel::relative_time(now.addDays(-1), now), QStringLiteral("Yesterday"));
    }

    void settings_refuse_invalid_values_with_reasons() {
        QTemporaryDir dir;
        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        SettingsModel s(&qs);
        QSignalSpy changed(&s, &SettingsModel::changed);

        QString err = s.setValue(QStringLiteral("top_p"), QStringLiteral("1.5"));
        QVERIFY2(err.contains(QStringLiteral("'Top-p'")) && !err.contains(QStringLiteral("top_p")), qPrintable(err));  // the label, not the key
        QCOMPARE(s.error(QStringLiteral("top_p")), err);
        QCOMPARE(s.value(QStringLiteral("top_p")).toDouble(), 0.95);  // the previous value stays

        // Out of range, and negative (-1 was once taken silently as automatic): refused in the user's words.
        err = s.setValue(QStringLiteral("expert_cache_fraction"), QStringLiteral("2"));
        QVERIFY2(err.contains(QStringLiteral("out of range (0 to 1)")) && !err.contains(QStringLiteral("expert_cache_fraction")),
                 qPrintable(err));
        err = s.setValue(QStringLiteral("expert_cache_fraction"), QStringLiteral("-1"));
        QVERIFY2(err.contains(QStringLiteral("leave it empty for automatic")), qPrintable(err));
        QCOMPARE(s.value(QStringLiteral("expert_cache_fraction")).toDouble(), -1.0);  // still automatic, as shown
        err = s.setValue(QStringLiteral("fast_budget"), QStringLiteral("12 parsecs"));
        QVERIFY2(err.contains(QStringLiteral("unknown unit")), qPrintable(err));
        // A bare number is refused with the units (1024 once meant 1 KiB); with a unit it is taken.
        err = s.setValue(QStringLiteral("fast_budget"), QStringLiteral("1024"));
        QVERIFY2(err.contains(QStringLiteral("has no unit")) && err.contains(QStringLiteral("1024M")), qPrintable(err));
        err = s.setValue(QStringLiteral("fast_budget"), QStringLiteral("0"));
        QVERIFY2(err.contains(QStringLiteral("zero budget")), qPrintable(err));
        err = s.setValue(QStringLiteral("slow_budget"), QStringLiteral("-3G"));
        QVERIFY2(!err.isEmpty(), "a negative slow budget accepted");
        err = s.setValue(QStringLiteral("max_tokens"), QStringLiteral("0"));
        QVERIFY2(!err.isEmpty(), "max_tokens 0 accepted");
        err = s.setValue(QStringLiteral("threads"), QStringLiteral("three"));
        QVERIFY2(err.contains(QStringLiteral("whole number")), qPrintable(err));
        err = s.setValue(QStringLiteral("policy"), QStringLiteral("pinned"));
        QVERIFY2(err.contains(QStringLiteral("pin file")), qPrintable(err));
        err = s.setValue(QStringLiteral("pin_file"), QStringLiteral("/no/such/hot.json"));
        QVERIFY2(err.contains(QStringLiteral("no such file")), qPrintable(err));
        err = s.setValue(QStringLiteral("predictor"), QStringLiteral("oracle"));
        QVERIFY2(!err.isEmpty(), "unknown predictor accepted");
        QCOMPARE(changed.count(), 0);

        // The error role carries the reason for the view.
        int row = -1;
        for (int i = 0; i < s.rowCount(); ++i)
            if (s.data(s.index(i), SettingsModel::KeyRole).toString() == QLatin1String("top_p")) row = i;
        QVERIFY(row >= 0);
        QVERIFY(s.data(s.index(row), SettingsModel::ErrorRole).toString().contains(QStringLiteral("Top-p")));

        // A valid value clears the error, is saved, and says when it applies.
        QCOMPARE(s.setValue(QStringLiteral("top_p"), QStringLiteral("0.9")), QString());
        QCOMPARE(s.error(QStringLiteral("top_p")), QString());
        QCOMPARE(changed.count(), 1);
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("next message"));
        QCOMPARE(s.setValue(QStringLiteral("fast_budget"), QStringLiteral("512M")), QString());
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("next load"));
        QCOMPARE(s.setValue(QStringLiteral("slow_budget"), QStringLiteral("2G")), QString());
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("next load"));
        QCOMPARE(s.setValue(QStringLiteral("policy"), QStringLiteral("lfu")), QString());
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("live"));
        QCOMPARE(s.setValue(QStringLiteral("expert_cache_fraction"), QStringLiteral("")), QString());  // automatic
        QCOMPARE(s.setValue(QStringLiteral("prefetch"), false), QString());
        qs.sync();

        QCOMPARE(s.applies(QStringLiteral("expert_cache_fraction")), QStringLiteral("live"));
        QCOMPARE(s.applies(QStringLiteral("pin_file")), QStringLiteral("live"));
        QCOMPARE(s.applies(QStringLiteral("prefetch_width")), QStringLiteral("live"));
        QCOMPARE(s.applies(QStringLiteral("n_ctx")), QStringLiteral("next load"));
        QCOMPARE(s.applies(QStringLiteral("threads")), QStringLiteral("next load"));
        QCOMPARE(s.applies(QStringLiteral("temperature")), QStringLiteral("next message"));
        // The serving settings the engine now implements, each with when it applies.
        QCOMPARE(s.applies(QStringLiteral("kv_tokens")), QStringLiteral("next load"));
        QCOMPARE(s.applies(QStringLiteral("kv_type")), QStringLiteral("next load"));
        QCOMPARE(s.applies(QStringLiteral("max_batch")), QStringLiteral("live"));
        QCOMPARE(s.applies(QStringLiteral("spec_draft")), QStringLiteral("next message"));
        QCOMPARE(s.applies(QStringLiteral("spec_k")), QStringLiteral("next message"));

        // Saved: a second model over the same file sees the values.
        SettingsModel again(&qs);
        const strata::EngineSettings e = again.engine_settings();
        QCOMPARE(e.fast_budget, uint64_t(512) << 20);
        QCOMPARE(e.slow_budget, uint64_t(2) << 30);
        QCOMPARE(e.policy, std::string("lfu"));
        QCOMPARE(e.expert_cache_fraction, -1.0);
        QCOMPARE(e.prefetch, false);
        QVERIFY(e.validate().empty());
        QCOMPARE(again.sampling_params().top_p, 0.9f);
        QVERIFY(again.sampling_params().validate().empty());

        again.resetToDefaults();
        QCOMPARE(again.engine_settings().policy, std::string("lru"));
        // The defaults come from the machine: an automatic fast budget (0) and
        // an expert cache of every expert that fits (-1), not a fixed share.
        QCOMPARE(again.engine_settings().fast_budget, uint64_t(0));
        QCOMPARE(again.engine_settings().expert_cache_fraction, -1.0);
        QCOMPARE(again.value(QStringLiteral("expert_cache_fraction")).toDouble(), -1.0);
        QCOMPARE(again.setValue(QStringLiteral("fast_budget"), QStringLiteral("None")), QString());
        QCOMPARE(again.engine_settings().fast_budget, strata::kNoBudget);
        QCOMPARE(again.setValue(QStringLiteral("slow_budget"), QStringLiteral("none")), QString());
        QCOMPARE(again.engine_settings().slow_budget, uint64_t(0));
    }

    // More compute threads than the machine's hardware threads are refused
    // when typed, with what to use (issue 45: 64 threads on 2 cores were
    // accepted until the next plan); a stored value like that falls back.
    void settings_refuse_more_threads_than_the_machine_has() {
        QTemporaryDir dir;
        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        const qlonglong hw = std::max(1u, std::thread::hardware_concurrency());
        qs.setValue(QStringLiteral("settings/threads"), hw + 62);
        SettingsModel s(&qs);
        QCOMPARE(s.value(QStringLiteral("threads")).toLongLong(), 0LL);  // the stored 64-ish: back to "all"
        const QString err = s.setValue(QStringLiteral("threads"), hw + 1);
        QVERIFY2(err.contains(QStringLiteral("hardware threads")) && err.contains(QStringLiteral("use at most %1").arg(hw)),
                 qPrintable(err));
        QCOMPARE(s.value(QStringLiteral("threads")).toLongLong(), 0LL);
        QCOMPARE(s.setValue(QStringLiteral("threads"), hw), QString());
        QVERIFY(!s.setValue(QStringLiteral("threads"), -1).isEmpty());
    }

    void settings_presets_per_model() {
        QTemporaryDir dir;
        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        SettingsModel s(&qs);
        QSignalSpy preset(&s, &SettingsModel::presetChanged);
        // Nothing loaded: nothing to save for.
        QVERIFY(!s.savePreset(QStringLiteral("x")).isEmpty());
        QVERIFY(!s.presetActive());

        s.set_preset_model(QStringLiteral("qwen.gguf"));
        QCOMPARE(s.presetModel(), QStringLiteral("qwen.gguf"));
        QVERIFY(!s.presetActive());
        QCOMPARE(s.setValue(QStringLiteral("temperature"), QStringLiteral("0.2")), QString());
        QCOMPARE(s.setValue(QStringLiteral("top_k"), QStringLiteral("20")), QString());
        QCOMPARE(s.setValue(QStringLiteral("max_tokens"), QStringLiteral("1000")), QString());
        QCOMPARE(s.savePreset(QStringLiteral("  You are terse.  ")), QString());
        QVERIFY(s.presetActive());
        QCOMPARE(s.preset_system_prompt(), QStringLiteral("You are terse."));
        QVERIFY(preset.count() >= 2);

        // Another model without defaults: the global settings (what was last typed, else the defaults).
        QCOMPARE(s.setValue(QStringLiteral("temperature"), QStringLiteral("0.9")), QString());
        QSignalSpy changed(&s, &SettingsModel::changed);
        s.set_preset_model(QStringLiteral("llama.gguf"));
        QVERIFY(!s.presetActive());
        QCOMPARE(s.preset_system_prompt(), QString());
        QCOMPARE(s.value(QStringLiteral("temperature")).toDouble(), 0.9);
        QCOMPARE(s.value(QStringLiteral("top_k")).toLongLong(), 20);

        // Loading the first model again puts its defaults in force, and says so (the "changed" signals).
        s.set_preset_model(QStringLiteral("qwen.gguf"));
        QVERIFY(s.presetActive());
        QCOMPARE(s.value(QStringLiteral("temperature")).toDouble(), 0.2);
        QCOMPARE(s.sampling_params().temperature, 0.2f);
        QCOMPARE(s.sampling_params().max_tokens, 1000);
        QVERIFY(changed.count() >= 1);
        QCOMPARE(changed.last().at(0).toString(), QStringLiteral("temperature"));
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("next message"));
        // Putting them in force does not overwrite the global settings.
        QCOMPARE(qs.value(QStringLiteral("settings/temperature")).toDouble(), 0.9);

        // They last across launches (a new model over the same store).
        {
            SettingsModel again(&qs);
            QCOMPARE(again.value(QStringLiteral("temperature")).toDouble(), 0.9);
            again.set_preset_model(QStringLiteral("qwen.gguf"));
            QCOMPARE(again.value(QStringLiteral("temperature")).toDouble(), 0.2);
            QCOMPARE(again.preset_system_prompt(), QStringLiteral("You are terse."));
        }

        // Saved values that no longer validate (edited by hand) are not put in force: the global ones are.
        qs.setValue(QStringLiteral("presets/bad.gguf/saved"), true);
        qs.setValue(QStringLiteral("presets/bad.gguf/top_p"), QStringLiteral("7"));
        qs.setValue(QStringLiteral("presets/bad.gguf/min_p"), QStringLiteral("0.1"));
        s.set_preset_model(QStringLiteral("bad.gguf"));
        QCOMPARE(s.value(QStringLiteral("top_p")).toDouble(), 0.95);
        QCOMPARE(s.value(QStringLiteral("min_p")).toDouble(), 0.05);
        QCOMPARE(s.value(QStringLiteral("temperature")).toDouble(), 0.9);

        // Forget: the global settings again, and nothing left in the store.
        s.set_preset_model(QStringLiteral("qwen.gguf"));
        s.forgetPreset();
        QVERIFY(!s.presetActive());
        QCOMPARE(s.presetModel(), QStringLiteral("qwen.gguf"));
        QCOMPARE(s.value(QStringLiteral("temperature")).toDouble(), 0.9);
        QCOMPARE(s.preset_system_prompt(), QString());
        QVERIFY(!qs.contains(QStringLiteral("presets/qwen.gguf/temperature")));
        QVERIFY(qs.contains(QStringLiteral("presets/bad.gguf/saved")));

        // Unloaded: no model to save for.
        s.set_preset_model(QString());
        QVERIFY(!s.savePreset(QString()).isEmpty());
    }

    void settings_recent_models() {
        QTemporaryDir dir;
        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        SettingsModel s(&qs);
        for (int i = 0; i < 10; ++i) s.add_recent_model(QStringLiteral("/m/%1.gguf").arg(i));
        s.add_recent_model(QStringLiteral("/m/3.gguf"));
        const QStringList r = s.recent_models();
        QCOMPARE(r.size(), 8);
        QCOMPARE(r.first(), QStringLiteral("/m/3.gguf"));
        QCOMPARE(r.count(QStringLiteral("/m/3.gguf")), 1);
        s.remove_recent_model(QStringLiteral("/m/3.gguf"));
        QVERIFY(!s.recent_models().contains(QStringLiteral("/m/3.gguf")));
    }

    void telemetry_histories_from_snapshots() {
        TelemetryModel t;
        QSignalSpy updated(&t, &TelemetryModel::updated);
        strata::TelemetrySnapshot s;
        s.n_layer = 2;
        s.n_expert = 4;
        s.heat = {0.f, 0.f, 0.f, 0.f, 0.5f, 0.25f, 0.f, 0.1f};
        s.residency = {0, 0, 0, 0, 2, 3, 1, 0};
        s.ledger = {{"weights.shared", "fast", 1000, 1000}, {"experts.cache", "fast", 500, 250}, {"experts.home", "slow", 800, 800}};
        s.fast_budget = 4000;
        s.kernels = "avx512";
        s.repacked_bytes = 2048;
        t.push(s);  // right after load: no tokens yet
        QCOMPARE(t.kernels(), QStringLiteral("avx512"));
        QCOMPARE(t.repackedBytes(), 2048.0);
        QCOMPARE(t.figures()[QStringLiteral("kernels")].toString(), QStringLiteral("avx512"));
        QVERIFY(t.hasData());
        QVERIFY(t.tokensPerSecondHistory().isEmpty());
        QCOMPARE(t.residentExperts(), 1);
        QCOMPARE(t.pinnedExperts(), 1);
        QCOMPARE(t.loadingExperts(), 1);
        QCOMPARE(t.maxHeat(), 0.5);
        const QVariantList ledger = t.ledger();
        QCOMPARE(ledger.size(), 2);
        QCOMPARE(ledger[0].toMap()[QStringLiteral("reserved")].toDouble(), 1500.0);
        QCOMPARE(ledger[0].toMap()[QStringLiteral("used")].toDouble(), 1250.0);
        QCOMPARE(ledger[0].toMap()[QStringLiteral("budget")].toDouble(), 4000.0);
        QCOMPARE(ledger[0].toMap()[QStringLiteral("accounts")].toList().size(), 2);

        s.tokens_processed = 10;
        s.compute_seconds = 0.5;
        s.hit_rate_recent = 0.75;
        s.bytes_loaded_per_token = 1024;
        t.push(s);
        QCOMPARE(t.tokensPerSecond(), 20.0);
        s.tokens_processed = 40;
        s.compute_seconds = 1.0;
        t.push(s);
        QCOMPARE(t.tokensPerSecond(), 60.0);
        QCOMPARE(t.tokensPerSecondHistory().size(), 2);
        QCOMPARE(t.hitRateHistory().last(), 0.75);
        t.push(s);  // an idle snapshot (a setting changed): no new point
        QCOMPARE(t.tokensPerSecondHistory().size(), 2);
        for (int i = 0; i < 300; ++i) {
            s.tokens_processed += 1;
            s.compute_seconds += 0.01;
            t.push(s);
        }
        QCOMPARE(t.tokensPerSecondHistory().size(), TelemetryModel::kHistory);
        QCOMPARE(updated.count(), 304);
        QCOMPARE(t.missPaths(), QString());  // no GPU misses: nothing to say
        QCOMPARE(t.cpuExperts(), 0);
        // A GPU engine's hybrid placement: experts computed on the CPU and the paths of its misses.
        s.residency = {4, 4, 0, 0, 2, 4, 1, 0};
        s.miss_cpu = 62;
        s.miss_link = 30;
        s.miss_both = 8;
        t.push(s);
        QCOMPARE(t.cpuExperts(), 3);
        QCOMPARE(t.missPaths(), QStringLiteral("62% computed on the CPU, 30% copied, 8% both"));
        t.clear();
        QVERIFY(!t.hasData());
        QVERIFY(t.hitRateHistory().isEmpty());
    }

    void size_parser() {
        uint64_t b = 0;
        QString err;
        QVERIFY(parse_size(QStringLiteral("1.5GiB"), &b, &err));
        QCOMPARE(b, uint64_t(1536) << 20);
        QVERIFY(parse_size(QStringLiteral("1024 MiB"), &b, &err));
        QCOMPARE(b, uint64_t(1024) << 20);
        QVERIFY(parse_size(QStringLiteral("8 GiB"), &b, &err));
        QCOMPARE(b, uint64_t(8) << 30);
        QVERIFY(parse_size(QStringLiteral("300B"), &b, &err));
        QCOMPARE(b, uint64_t(300));
        QVERIFY(!parse_size(QStringLiteral("300"), &b, &err));  // a bare number: which unit?
        QVERIFY(err.contains(QStringLiteral("has no unit")));
        QVERIFY(!parse_size(QStringLiteral("lots"), &b, &err));
        QVERIFY(err.contains(QStringLiteral("not a size")));
    }

    // The models folder lists every GGUF under it with its size (over 4 GiB
    // too: a sparse 5 GiB file), plans each in the background (the demo
    // model fits; a file that is not GGUF says why), and says plainly when
    // the folder is missing or empty.
    void model_library_lists_and_plans_the_folder() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        if (!QFile::exists(demo)) QSKIP("the demo model is not in resources/models");
        QTemporaryDir dir;
        QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("moe/small")));
        QVERIFY(QFile::link(demo, dir.filePath(QStringLiteral("moe/small/demo.gguf"))));
        QFile big(dir.filePath(QStringLiteral("big.gguf")));
        QVERIFY(big.open(QIODevice::WriteOnly));
        QVERIFY(big.resize(qint64(5) << 30));  // sparse: no disk used
        big.close();
        QFile notes(dir.filePath(QStringLiteral("notes.txt")));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.close();

        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        SettingsModel settings(&qs);
        ModelLibrary lib(&settings, [&settings] { return settings.engine_settings(); });
        QSignalSpy state(&lib, &ModelLibrary::stateChanged);
        lib.setFolder(QUrl::fromLocalFile(dir.path()).toString());
        QCOMPARE(lib.folder(), QDir::cleanPath(dir.path()));
        QCOMPARE(settings.uiString(QStringLiteral("modelsFolder")), lib.folder());
        QCOMPARE(lib.count(), 2);
        QTRY_VERIFY_WITH_TIMEOUT(!lib.scanning(), 30000);
        const QVariantMap b = lib.get(0), d = lib.get(1);
        QCOMPARE(b[QStringLiteral("fileName")].toString(), QStringLiteral("big.gguf"));
        QCOMPARE(b[QStringLiteral("sizeBytes")].toDouble(), double(qint64(5) << 30));
        QCOMPARE(b[QStringLiteral("sizeText")].toString(), QStringLiteral("5.00 GiB"));
        QCOMPARE(b[QStringLiteral("fit")].toString(), QStringLiteral("error"));
        QVERIFY2(b[QStringLiteral("fitNote")].toString().contains(QStringLiteral("GGUF")), qPrintable(b[QStringLiteral("fitNote")].toString()));
        QCOMPARE(d[QStringLiteral("fileName")].toString(), QStringLiteral("demo.gguf"));
        QCOMPARE(d[QStringLiteral("subfolder")].toString(), QStringLiteral("moe/small"));
        QCOMPARE(d[QStringLiteral("quant")].toString(), QStringLiteral("Q8_0"));
        QCOMPARE(d[QStringLiteral("experts")].toString(), QStringLiteral("32 experts, top-4"));
        QCOMPARE(d[QStringLiteral("fits")].toBool(), true);
        QVERIFY(d[QStringLiteral("fit")].toString() == QLatin1String("resident") || d[QStringLiteral("fit")].toString() == QLatin1String("cache"));
        QVERIFY(lib.message().isEmpty());

        lib.setFolder(dir.filePath(QStringLiteral("nowhere")));
        QCOMPARE(lib.count(), 0);
        QVERIFY(lib.message().contains(QStringLiteral("does not exist")));
        lib.setFolder(dir.filePath(QStringLiteral("moe/small/demo.gguf")));
        QVERIFY(lib.message().contains(QStringLiteral("not a folder")));
        QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("empty")));
        lib.setFolder(dir.filePath(QStringLiteral("empty")));
        QVERIFY(lib.message().contains(QStringLiteral("No GGUF files")));

        // The first folder: the one chosen before, else the last model's, else ~/models.
        QCOMPARE(ModelLibrary::default_folder(QStringLiteral("/x"), {demo}), QStringLiteral("/x"));
        QCOMPARE(ModelLibrary::default_folder(QString(), {QStringLiteral("/gone.gguf"), demo}), QFileInfo(demo).absolutePath());
        QCOMPARE(ModelLibrary::default_folder(QString(), {}), QDir::homePath() + QStringLiteral("/models"));
    }

    // A good GGUF of an architecture the engine does not run is not
    // "unreadable": the list names the architecture and what runs.
    void model_library_names_an_unsupported_architecture() {
        const QString demo = QStringLiteral(STRATA_SOURCE_DIR "/resources/models/strata-demo-moe.gguf");
        if (!QFile::exists(demo)) QSKIP("the demo model is not in resources/models");
        QTemporaryDir dir;
        {
            const auto f = strata::gguf::File::open(demo.toStdString());
            strata::gguf::Writer w;
            w.copy_from(*f);
            w.set("general.architecture", strata::gguf::Value::make_string("mamba"));
            w.write(dir.filePath(QStringLiteral("mamba.gguf")).toStdString());
        }
        QFile bad(dir.filePath(QStringLiteral("notgguf.gguf")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("not a model");
        bad.close();
        QSettings qs(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
        SettingsModel settings(&qs);
        ModelLibrary lib(&settings, [&settings] { return settings.engine_settings(); });
        lib.setFolder(dir.path());
        QCOMPARE(lib.count(), 2);
        QTRY_VERIFY_WITH_TIMEOUT(!lib.scanning(), 30000);
        const QVariantMap m = lib.get(0), b = lib.get(1);
        QCOMPARE(m[QStringLiteral("fileName")].toString(), QStringLiteral("mamba.gguf"));
        QCOMPARE(m[QStringLiteral("fit")].toString(), QStringLiteral("unsupported"));
        const QString note = m[QStringLiteral("fitNote")].toString();
        QVERIFY2(note.startsWith(QStringLiteral("unsupported architecture 'mamba': Strata runs ")) && note.contains(QStringLiteral("llama")),
                 qPrintable(note));
        // A file that is not GGUF stays an error of the file.
        QCOMPARE(b[QStringLiteral("fit")].toString(), QStringLiteral("error"));
        QVERIFY(!b[QStringLiteral("fitNote")].toString().contains(QStringLiteral("architecture")));
    }
};

QTEST_MAIN(TestAppModels)  // a QGuiApplication: the heat map test paints
#include "test_app_models.moc"
