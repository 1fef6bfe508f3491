// How answers' text is drawn: the code blocks' syntax colours
// (CodeHighlighter) and the prose's tables and quotes (MarkdownStyler), on
// plain QTextDocuments, as the QML TextEdits hold them.
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextFrame>
#include <QTextTable>
#include <QtTest>

#include "code_highlighter.h"
#include "markdown_styler.h"

using namespace strata::desktop;

namespace {

QString hex(CodeHighlighter::Kind k) { return CodeHighlighter::color(k).name(); }

// Counts the lines it highlights.
class CountingHighlighter : public CodeHighlighter {
public:
    int blocks = 0;

protected:
    void highlightBlock(const QString& text) override {
        ++blocks;
        CodeHighlighter::highlightBlock(text);
    }
};

// A document holding `code`, highlighted as `language`.
struct Highlighted {
    QTextDocument doc;
    CodeHighlighter h;
    Highlighted(const QString& language, const QString& code) {
        doc.setPlainText(code);
        h.setLanguage(language);
        h.set_text_document(&doc);
        h.rehighlight();
    }
    // The colour of the `nth` occurrence of `needle` ("" where the text keeps its own).
    QString at(const QString& needle, int nth = 0) const {
        const QString text = doc.toPlainText();
        qsizetype i = -1;
        for (int k = 0; k <= nth; ++k) {
            i = text.indexOf(needle, i + 1);
            if (i < 0) qFatal("'%s' is not in the document", qPrintable(needle));
        }
        return h.colorAt(int(i));
    }
};

}  // namespace

class TestAppText : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void highlighter_languages_by_fence_name() {
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("py")), QStringLiteral("python"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral(" C++ ")), QStringLiteral("cpp"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("c")), QStringLiteral("cpp"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("TSX")), QStringLiteral("javascript"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("typescript")), QStringLiteral("javascript"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("sh")), QStringLiteral("bash"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("yml")), QStringLiteral("yaml"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("xml")), QStringLiteral("html"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("language-rust")), QStringLiteral("rust"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("python title=\"a.py\"")), QStringLiteral("python"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("{.go}")), QStringLiteral("go"));
        QCOMPARE(CodeHighlighter::canonical_language(QStringLiteral("brainfuck")), QString());
        QCOMPARE(CodeHighlighter::canonical_language(QString()), QString());
        CodeHighlighter h;
        h.setLanguage(QStringLiteral("Python3"));
        QCOMPARE(h.resolvedLanguage(), QStringLiteral("python"));
    }

    void highlighter_colours_python() {
        const Highlighted p(QStringLiteral("python"), QStringLiteral(
            "@cache\n"
            "def greet(name):\n"
            "    # say hi\n"
            "    return f\"hi {name} # not a comment\" + 'x'  # done\n"
            "x = None if len(s) > 42 else True"));
        QCOMPARE(p.at(QStringLiteral("@cache")), hex(CodeHighlighter::Meta));
        QCOMPARE(p.at(QStringLiteral("def")), hex(CodeHighlighter::Keyword));
        QCOMPARE(p.at(QStringLiteral("greet")), hex(CodeHighlighter::Function));
        QCOMPARE(p.at(QStringLiteral("name")), QString());  // a plain identifier keeps the text colour
        QCOMPARE(p.at(QStringLiteral("# say")), hex(CodeHighlighter::Comment));
        QCOMPARE(p.at(QStringLiteral("return")), hex(CodeHighlighter::Keyword));
        QCOMPARE(p.at(QStringLiteral("f\"hi")), hex(CodeHighlighter::String));
        QCOMPARE(p.at(QStringLiteral("# not")), hex(CodeHighlighter::String));  // inside the string
        QCOMPARE(p.at(QStringLiteral("'x'")), hex(CodeHighlighter::String));
        QCOMPARE(p.at(QStringLiteral("# done")), hex(CodeHighlighter::Comment));
        QCOMPARE(p.at(QStringLiteral("None")), hex(CodeHighlighter::Literal));
        QCOMPARE(p.at(QStringLiteral("len")), hex(CodeHighlighter::Builtin));
        QCOMPARE(p.at(QStringLiteral("42")), hex(CodeHighlighter::Number));
        QCOMPARE(p.at(QStringLiteral("x =")), QString());
    }

    void highlighter_carries_comments_and_strings_across_lines() {
        const Highlighted c(QStringLiteral("cpp"), QStringLiteral(
            "int a; /* starts\n"
            "int inside;\n"
            "ends */ int b = 0x1F;\n"
            "const char* s = \"// no comment\"; // comment\n"
            "#include <vector>"));
        QCOMPARE(c.at(QStringLiteral("int")), hex(CodeHighlighter::Type));
        QCOMPARE(c.at(QStringLiteral("/* starts")), hex(CodeHighlighter::Comment));
        QCOMPARE(c.at(QStringLiteral("int inside")), hex(CodeHighlighter::Comment));
        QCOMPARE(c.at(QStringLiteral("ends")), hex(CodeHighlighter::Comment));
        QCOMPARE(c.at(QStringLiteral("int b")), hex(CodeHighlighter::Type));
        QCOMPARE(c.at(QStringLiteral("0x1F")), hex(CodeHighlighter::Number));
        QCOMPARE(c.at(QStringLiteral("const")), hex(CodeHighlighter::Keyword));
        QCOMPARE(c.at(QStringLiteral("\"// no")), hex(CodeHighlighter::String));
        QCOMPARE(c.at(QStringLiteral("// comment")), hex(CodeHighlighter::Comment));
        QCOMPARE(c.at(QStringLiteral("#include")), hex(CodeHighlighter::Meta));
        QCOMPARE(c.at(QStringLiteral("<vector>")), hex(CodeHighlighter::String));

        const Highlighted py(QStringLiteral("py"), QStringLiteral("s = \"\"\"doc\nif not code\n\"\"\"\nif x: pass"));
        QCOMPARE(py.at(QStringLiteral("if not")), hex(CodeHighlighter::String));
        QCOMPARE(py.at(QStringLiteral("if x")), hex(CodeHighlighter::Keyword));

        const Highlighted js(QStringLiteral("js"), QStringLiteral("const t = `a ${b}\nreturn`; return null;"));
        QCOMPARE(js.at(QStringLiteral("return")), hex(CodeHighlighter::String));
        QCOMPARE(js.at(QStringLiteral("return"), 1), hex(CodeHighlighter::Keyword));
        QCOMPARE(js.at(QStringLiteral("null")), hex(CodeHighlighter::Literal));

        const Highlighted html(QStringLiteral("html"), QStringLiteral(
            "<!-- a\n<b>not a tag</b> -->\n<a href=\"x\">link</a>"));
        QCOMPARE(html.at(QStringLiteral("<b>")), hex(CodeHighlighter::Comment));
        QCOMPARE(html.at(QStringLiteral("<a")), hex(CodeHighlighter::Tag));
        QCOMPARE(html.at(QStringLiteral("href")), hex(CodeHighlighter::Attribute));
        QCOMPARE(html.at(QStringLiteral("\"x\"")), hex(CodeHighlighter::String));
        QCOMPARE(html.at(QStringLiteral("link")), QString());
    }

    void highlighter_other_languages() {
        const Highlighted json(QStringLiteral("json"), QStringLiteral("{\"name\": \"strata\", \"n\": -1.5, \"ok\": true}"));
        QCOMPARE(json.at(QStringLiteral("\"name\"")), hex(CodeHighlighter::Attribute));
        QCOMPARE(json.at(QStringLiteral("\"strata\"")), hex(CodeHighlighter::String));
        QCOMPARE(json.at(QStringLiteral("-1.5")), hex(CodeHighlighter::Number));
        QCOMPARE(json.at(QStringLiteral("true")), hex(CodeHighlighter::Literal));

        const Highlighted sh(QStringLiteral("bash"), QStringLiteral(
            "# build\nif [ -n \"$HOME\" ]; then echo $# ${PATH} --force; fi"));
        QCOMPARE(sh.at(QStringLiteral("# build")), hex(CodeHighlighter::Comment));
        QCOMPARE(sh.at(QStringLiteral("if")), hex(CodeHighlighter::Keyword));
        QCOMPARE(sh.at(QStringLiteral("echo")), hex(CodeHighlighter::Builtin));
        QCOMPARE(sh.at(QStringLiteral("$#")), hex(CodeHighlighter::Variable));  // not a comment
        QCOMPARE(sh.at(QStringLiteral("${PATH}")), hex(CodeHighlighter::Variable));
        QCOMPARE(sh.at(QStringLiteral("--force")), hex(CodeHighlighter::Attribute));

        const Highlighted rs(QStringLiteral("rust"), QStringLiteral("fn main() { let v: Vec<u8> = vec![1]; println!(\"{}\", v); }"));
        QCOMPARE(rs.at(QStringLiteral("fn")), hex(CodeHighlighter::Keyword));
        QCOMPARE(rs.at(QStringLiteral("Vec")), hex(CodeHighlighter::Type));
        QCOMPARE(rs.at(QStringLiteral("println!")), hex(CodeHighlighter::Meta));

        const Highlighted go(QStringLiteral("golang"), QStringLiteral("func f() error { return nil } // ok"));
        QCOMPARE(go.at(QStringLiteral("func")), hex(CodeHighlighter::Keyword));
        QCOMPARE(go.at(QStringLiteral("error")), hex(CodeHighlighter::Type));
        QCOMPARE(go.at(QStringLiteral("nil")), hex(CodeHighlighter::Literal));
        QCOMPARE(go.at(QStringLiteral("// ok")), hex(CodeHighlighter::Comment));

        const Highlighted java(QStringLiteral("java"), QStringLiteral("@Override public String toString() { return \"x\"; }"));
        QCOMPARE(java.at(QStringLiteral("@Override")), hex(CodeHighlighter::Meta));
        QCOMPARE(java.at(QStringLiteral("public")), hex(CodeHighlighter::Keyword));
        QCOMPARE(java.at(QStringLiteral("String")), hex(CodeHighlighter::Type));

        const Highlighted sql(QStringLiteral("sql"), QStringLiteral("Select name FROM users where id = 'it' -- one"));
        QCOMPARE(sql.at(QStringLiteral("Select")), hex(CodeHighlighter::Keyword));  // any case
        QCOMPARE(sql.at(QStringLiteral("FROM")), hex(CodeHighlighter::Keyword));
        QCOMPARE(sql.at(QStringLiteral("users")), QString());
        QCOMPARE(sql.at(QStringLiteral("'it'")), hex(CodeHighlighter::String));
        QCOMPARE(sql.at(QStringLiteral("-- one")), hex(CodeHighlighter::Comment));

        const Highlighted yaml(QStringLiteral("yaml"), QStringLiteral("name: strata # the app\nlist:\n  - key: true\n  - 3"));
        QCOMPARE(yaml.at(QStringLiteral("name")), hex(CodeHighlighter::Attribute));
        QCOMPARE(yaml.at(QStringLiteral("strata")), QString());
        QCOMPARE(yaml.at(QStringLiteral("# the")), hex(CodeHighlighter::Comment));
        QCOMPARE(yaml.at(QStringLiteral("key")), hex(CodeHighlighter::Attribute));
        QCOMPARE(yaml.at(QStringLiteral("true")), hex(CodeHighlighter::Literal));
        QCOMPARE(yaml.at(QStringLiteral("3")), hex(CodeHighlighter::Number));

        const Highlighted css(QStringLiteral("css"), QStringLiteral(".box {\n  color: #fff; /* white */\n  margin: 4px;\n}"));
        QCOMPARE(css.at(QStringLiteral(".box")), hex(CodeHighlighter::Tag));
        QCOMPARE(css.at(QStringLiteral("color")), hex(CodeHighlighter::Attribute));
        QCOMPARE(css.at(QStringLiteral("#fff")), hex(CodeHighlighter::Number));
        QCOMPARE(css.at(QStringLiteral("/* white")), hex(CodeHighlighter::Comment));
        QCOMPARE(css.at(QStringLiteral("4px")), hex(CodeHighlighter::Number));
    }

    void highlighter_unknown_language_gets_strings_numbers_comments() {
        const Highlighted g(QStringLiteral("nim"), QStringLiteral("if x == \"a\" then 12 # note\nproc y // also"));
        QCOMPARE(g.h.resolvedLanguage(), QString());
        QCOMPARE(g.at(QStringLiteral("if")), QString());  // no keywords guessed
        QCOMPARE(g.at(QStringLiteral("\"a\"")), hex(CodeHighlighter::String));
        QCOMPARE(g.at(QStringLiteral("12")), hex(CodeHighlighter::Number));
        QCOMPARE(g.at(QStringLiteral("# note")), hex(CodeHighlighter::Comment));
        QCOMPARE(g.at(QStringLiteral("// also")), hex(CodeHighlighter::Comment));
    }

    void highlighter_is_per_line_and_compiles_rules_once() {
        // A code block streaming in: lines are appended. Only the new lines
        // are highlighted again, and no rule is compiled again.
        QTextDocument doc;
        (void)doc.documentLayout();  // as a TextEdit's: edits are announced (contentsChange) only with a layout
        QString code;
        for (int i = 0; i < 200; ++i) code += QStringLiteral("x%1 = compute(%1)  # line\n").arg(i);
        doc.setPlainText(code);
        CountingHighlighter h;
        h.setLanguage(QStringLiteral("python"));
        h.set_text_document(&doc);
        QCoreApplication::processEvents();  // the first highlighting is posted
        QVERIFY(h.blocks >= 200);
        const int compiled = CodeHighlighter::compiled_rule_sets();
        h.blocks = 0;
        QTextCursor end(&doc);
        end.movePosition(QTextCursor::End);
        end.insertText(QStringLiteral("return True"));
        QVERIFY2(h.blocks <= 2, qPrintable(QString::number(h.blocks)));
        const QString text = doc.toPlainText();
        QCOMPARE(h.colorAt(int(text.lastIndexOf(QStringLiteral("True")))), hex(CodeHighlighter::Literal));
        // Another highlighter of the same language (another code block) and
        // another name for it reuse the compiled rules.
        {
            QTextDocument doc2;
            doc2.setPlainText(code);
            CodeHighlighter other;
            other.setLanguage(QStringLiteral("py"));
            other.set_text_document(&doc2);
            other.rehighlight();
            QCOMPARE(other.colorAt(0), QString());
            QCOMPARE(other.colorAt(5), hex(CodeHighlighter::Function));
        }
        QCOMPARE(CodeHighlighter::compiled_rule_sets(), compiled);

        // Opening a multi-line string rehighlights the lines after it, and closing it again.
        h.blocks = 0;
        QTextCursor top(&doc);
        top.insertText(QStringLiteral("\"\"\"\n"));
        QCOMPARE(h.colorAt(int(doc.toPlainText().indexOf(QStringLiteral("x5 ")))), hex(CodeHighlighter::String));
        top.insertText(QStringLiteral("\"\"\"\n"));
        QCOMPARE(h.colorAt(int(doc.toPlainText().indexOf(QStringLiteral("compute(5)")))), hex(CodeHighlighter::Function));
    }

    void markdown_tables_and_quotes_are_styled() {
        QTextDocument doc;
        MarkdownStyler styler;
        styler.set_text_document(&doc);
        QSignalSpy changes(&doc, &QTextDocument::contentsChanged);
        const QString md = QStringLiteral(
            "Intro.\n\n| Model | Size |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n"
            "> quoted [link](https://example.com) text\n\nplain");
        doc.setMarkdown(md);
        QCoreApplication::processEvents();  // styled once the changes are in

        QTextTable* table = nullptr;
        for (QTextFrame* f : doc.rootFrame()->childFrames())
            if (auto* t = qobject_cast<QTextTable*>(f)) table = t;
        QVERIFY(table);
        QCOMPARE(table->rows(), 3);
        const QTextTableFormat tf = table->format();
        QCOMPARE(tf.border(), 1.0);
        QCOMPARE(tf.borderBrush().color(), MarkdownStyler::border_color());
        QCOMPARE(tf.borderStyle(), QTextFrameFormat::BorderStyle_Solid);
        QVERIFY(tf.borderCollapse());
        QCOMPARE(tf.cellPadding(), MarkdownStyler::kCellPadding);
        QCOMPARE(table->cellAt(0, 1).format().background().color(), MarkdownStyler::header_background());
        QCOMPARE(table->cellAt(1, 1).format().background().style(), Qt::NoBrush);

        const auto block_of = [&doc](const QString& text) {
            for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
                if (b.text().contains(text)) return b;
            return QTextBlock();
        };
        const QTextBlock quote = block_of(QStringLiteral("quoted"));
        QVERIFY(quote.isValid());
        QCOMPARE(quote.blockFormat().leftMargin(), MarkdownStyler::kQuoteIndent);
        QCOMPARE(quote.blockFormat().background().color(), MarkdownStyler::quote_background());
        QTextCursor c(quote);
        c.setPosition(quote.position() + 1);
        QCOMPARE(c.charFormat().foreground().color(), MarkdownStyler::quote_color());
        // The link keeps its own colour.
        c.setPosition(quote.position() + int(quote.text().indexOf(QStringLiteral("link"))) + 1);
        QVERIFY(c.charFormat().isAnchor());
        QVERIFY(c.charFormat().foreground().color() != MarkdownStyler::quote_color());
        // Plain paragraphs are left alone.
        const QTextBlock plain = block_of(QStringLiteral("plain"));
        QCOMPARE(plain.blockFormat().leftMargin(), 0.0);
        QTextCursor p(plain);
        p.setPosition(plain.position() + 1);
        QVERIFY(p.charFormat().foreground().style() == Qt::NoBrush);

        // Styled once: its own changes do not start it again, and a restyle finds nothing to do.
        const int after = int(changes.count());
        QCoreApplication::processEvents();
        QCOMPARE(int(changes.count()), after);
        QCOMPARE(styler.restyle(), 0);

        // A streaming answer is set again, longer: styled again.
        doc.setMarkdown(md + QStringLiteral("\n\n> another quote"));
        QCoreApplication::processEvents();
        QCOMPARE(block_of(QStringLiteral("another")).blockFormat().leftMargin(), MarkdownStyler::kQuoteIndent);
        for (QTextFrame* f : doc.rootFrame()->childFrames())
            if (auto* t = qobject_cast<QTextTable*>(f)) QCOMPARE(t->format().border(), 1.0);
    }
};

QTEST_MAIN(TestAppText)
#include "test_app_text.moc"
