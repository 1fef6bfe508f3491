#include "code_highlighter.h"

#include <QHash>
#include <QMutex>
#include <QRegularExpression>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <atomic>
#include <climits>
#include <memory>

namespace strata::desktop {

using Kind = CodeHighlighter::Kind;

namespace {

// A token coloured wherever it matches (capture `group` of `re`).
struct TokenRule {
    QRegularExpression re;
    Kind kind;
    int group = 0;
};

// A comment or string: from a match of `start` to `end` (the end of the line
// when `end` is empty). `multiline`: it may continue on the next lines (block
// state); `escapes`: a backslash escapes the next character.
struct Span {
    QRegularExpression start;
    QString end;
    Kind kind;
    bool multiline = false;
    bool escapes = false;
};

std::atomic<int> g_compiled{0};

}  // namespace

struct HighlightLanguage {
    QString name;
    QList<TokenRule> rules;  // applied in order (a later one wins), then the spans over them
    QList<Span> spans;
    bool string_keys = false;  // a string followed by ':' is a key (JSON)
};

namespace {

QRegularExpression rx(const QString& pattern, bool case_insensitive = false) {
    QRegularExpression r(pattern, case_insensitive ? QRegularExpression::CaseInsensitiveOption
                                                   : QRegularExpression::NoPatternOption);
    Q_ASSERT_X(r.isValid(), "CodeHighlighter", qPrintable(r.errorString() + QStringLiteral(": ") + pattern));
    r.optimize();
    return r;
}

QRegularExpression words(const QString& space_separated, bool case_insensitive = false) {
    QStringList w = space_separated.split(QLatin1Char(' '), Qt::SkipEmptyParts);
    for (QString& x : w) x = QRegularExpression::escape(x);
    return rx(QStringLiteral("\\b(?:%1)\\b").arg(w.join(QLatin1Char('|'))), case_insensitive);
}

const QString kNumber = QStringLiteral(
    "\\b(?:0[xX][0-9a-fA-F_']+|0[bB][01_']+|\\d[\\d_']*(?:\\.\\d[\\d_']*)?(?:[eE][+-]?\\d+)?)(?:[uUlLfFiz]\\w*)?\\b");
const QString kCall = QStringLiteral("\\b([A-Za-z_]\\w*)(?=\\s*\\()");
const QString kCapitalised = QStringLiteral("\\b[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*\\b");

Span span(const QString& start, const QString& end, Kind kind, bool multiline, bool escapes) {
    return Span{rx(start), end, kind, multiline, escapes};
}
Span line_comment(const QString& start) { return Span{rx(start), QString(), CodeHighlighter::Comment, false, false}; }
Span block_comment(const QString& start, const QString& end) {
    return Span{rx(QRegularExpression::escape(start)), end, CodeHighlighter::Comment, true, false};
}
Span string(const QString& quote, bool multiline = false, bool escapes = true) {
    return Span{rx(QRegularExpression::escape(quote)), quote, CodeHighlighter::String, multiline, escapes};
}

std::unique_ptr<HighlightLanguage> make_language(const QString& name) {
    using H = CodeHighlighter;
    auto l = std::make_unique<HighlightLanguage>();
    l->name = name;
    auto& r = l->rules;
    auto& s = l->spans;
    const QString slash_comment = QStringLiteral("//");
    if (name == QLatin1String("cpp")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{rx(kCapitalised), H::Type}
          << TokenRule{words(QStringLiteral(
                 "bool char char8_t char16_t char32_t double float int long short signed unsigned void wchar_t "
                 "size_t ssize_t ptrdiff_t intptr_t uintptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t "
                 "uint32_t uint64_t FILE std string vector map unordered_map set array optional unique_ptr "
                 "shared_ptr string_view span")),
                       H::Type}
          << TokenRule{words(QStringLiteral("true false nullptr NULL")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "alignas alignof asm auto break case catch class co_await co_return co_yield concept const "
                 "consteval constexpr constinit const_cast continue decltype default delete do dynamic_cast else "
                 "enum explicit export extern final for friend goto if inline mutable namespace new noexcept "
                 "operator override private protected public register reinterpret_cast requires return sizeof "
                 "static static_assert static_cast struct switch template this thread_local throw try typedef "
                 "typeid typename union using virtual volatile while")),
                       H::Keyword}
          << TokenRule{rx(QStringLiteral("^\\s*#\\s*[a-z_]+")), H::Meta}
          << TokenRule{rx(QStringLiteral("^\\s*#\\s*include\\s*(<[^>]*>)")), H::String, 1};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << span(QStringLiteral("\\bR\"\\("), QStringLiteral(")\""), H::String, true, false) << string(QStringLiteral("\""))
          << string(QStringLiteral("'"));
    } else if (name == QLatin1String("python")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{words(QStringLiteral(
                 "self cls print len range int str float list dict set tuple bool object type isinstance super "
                 "open enumerate zip map filter sorted reversed min max sum abs any all repr iter next bytes "
                 "input format hasattr getattr setattr Exception ValueError TypeError KeyError IndexError "
                 "RuntimeError StopIteration")),
                       H::Builtin}
          << TokenRule{words(QStringLiteral("True False None")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "and as assert async await break class continue def del elif else except finally for from "
                 "global if import in is lambda nonlocal not or pass raise return try while with yield match case")),
                       H::Keyword}
          << TokenRule{rx(QStringLiteral("\\bdef\\s+(\\w+)")), H::Function, 1}
          << TokenRule{rx(QStringLiteral("\\bclass\\s+(\\w+)")), H::Type, 1}
          << TokenRule{rx(QStringLiteral("^\\s*@[\\w.]+")), H::Meta};
        s << line_comment(QStringLiteral("#"))
          << span(QStringLiteral("\\b[rRbBuUfF]{1,2}\"\"\"|\"\"\""), QStringLiteral("\"\"\""), H::String, true, true)
          << span(QStringLiteral("\\b[rRbBuUfF]{1,2}'''|'''"), QStringLiteral("'''"), H::String, true, true)
          << span(QStringLiteral("\\b[rRbBuUfF]{1,2}\"|\""), QStringLiteral("\""), H::String, false, true)
          << span(QStringLiteral("\\b[rRbBuUfF]{1,2}'|'"), QStringLiteral("'"), H::String, false, true);
    } else if (name == QLatin1String("javascript")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{rx(kCapitalised), H::Type}
          << TokenRule{words(QStringLiteral("string number boolean any unknown never void object bigint symbol")), H::Type}
          << TokenRule{words(QStringLiteral(
                 "console window document globalThis Math JSON Promise Array Object String Number Boolean Map Set "
                 "Date Error RegExp Symbol require module exports process")),
                       H::Builtin}
          << TokenRule{words(QStringLiteral("true false null undefined NaN Infinity")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "async await break case catch class const continue debugger default delete do else export extends "
                 "finally for from function if import in instanceof let new of return static super switch this "
                 "throw try typeof var void while with yield as implements interface type enum namespace declare "
                 "readonly private protected public abstract keyof satisfies get set")),
                       H::Keyword};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\"")) << string(QStringLiteral("'")) << string(QStringLiteral("`"), true);
    } else if (name == QLatin1String("json")) {
        r << TokenRule{rx(QStringLiteral("-?\\b\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b")), H::Number}
          << TokenRule{words(QStringLiteral("true false null")), H::Literal};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\""));
        l->string_keys = true;
    } else if (name == QLatin1String("bash")) {
        r << TokenRule{rx(QStringLiteral("(?<![\\w.-])\\d+\\b")), H::Number}
          << TokenRule{rx(QStringLiteral("(?<=\\s)--?[A-Za-z][\\w-]*")), H::Attribute}
          << TokenRule{words(QStringLiteral(
                 "echo printf cd ls cat grep sed awk find mkdir rm cp mv chmod chown sudo apt apt-get pip pip3 npm "
                 "npx git curl wget tar make cmake docker python python3 node test read eval exec kill source "
                 "alias set export unset")),
                       H::Builtin}
          << TokenRule{words(QStringLiteral(
                 "if then else elif fi for while until do done case esac in function select return local readonly "
                 "declare shift break continue exit")),
                       H::Keyword}
          << TokenRule{rx(QStringLiteral("\\$\\{[^}]*\\}|\\$[A-Za-z_]\\w*|\\$[0-9#?@*$!-]")), H::Variable};
        s << line_comment(QStringLiteral("(?:^|(?<=\\s))#")) << string(QStringLiteral("\""))
          << string(QStringLiteral("'"), false, false);
    } else if (name == QLatin1String("rust")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{rx(kCapitalised), H::Type}
          << TokenRule{words(QStringLiteral(
                 "i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str String Vec Option "
                 "Result Box Rc Arc HashMap")),
                       H::Type}
          << TokenRule{words(QStringLiteral("true false None Some Ok Err")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "as async await break const continue crate dyn else enum extern fn for if impl in let loop match "
                 "mod move mut pub ref return self Self static struct super trait type unsafe use where while")),
                       H::Keyword}
          << TokenRule{rx(QStringLiteral("\\b\\w+!")), H::Meta}
          << TokenRule{rx(QStringLiteral("#!?\\[[^\\]]*\\]")), H::Meta}
          << TokenRule{rx(QStringLiteral("'(?:\\\\.|[^\\\\'])'")), H::String};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\""), true);
    } else if (name == QLatin1String("go")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{words(QStringLiteral(
                 "bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string "
                 "uint uint8 uint16 uint32 uint64 uintptr any")),
                       H::Type}
          << TokenRule{words(QStringLiteral("append cap close copy delete len make new panic print println recover")),
                       H::Builtin}
          << TokenRule{words(QStringLiteral("true false nil iota")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "break case chan const continue default defer else fallthrough for func go goto if import "
                 "interface map package range return select struct switch type var")),
                       H::Keyword};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\"")) << string(QStringLiteral("'")) << string(QStringLiteral("`"), true, false);
    } else if (name == QLatin1String("java")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{rx(kCapitalised), H::Type}
          << TokenRule{words(QStringLiteral("boolean byte char double float int long short void var")), H::Type}
          << TokenRule{words(QStringLiteral("true false null")), H::Literal}
          << TokenRule{words(QStringLiteral(
                 "abstract assert break case catch class const continue default do else enum extends final "
                 "finally for goto if implements import instanceof interface native new package private "
                 "protected public return static strictfp super switch synchronized this throw throws transient "
                 "try volatile while record yield sealed permits")),
                       H::Keyword}
          << TokenRule{rx(QStringLiteral("@\\w+")), H::Meta};
        s << line_comment(slash_comment) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\"\"\""), true) << string(QStringLiteral("\"")) << string(QStringLiteral("'"));
    } else if (name == QLatin1String("sql")) {
        r << TokenRule{rx(kNumber), H::Number} << TokenRule{rx(kCall), H::Function, 1}
          << TokenRule{words(QStringLiteral(
                           "int integer bigint smallint text varchar char boolean real double float numeric decimal "
                           "date time timestamp blob serial"),
                       true),
                       H::Type}
          << TokenRule{words(QStringLiteral("true false null"), true), H::Literal}
          << TokenRule{words(QStringLiteral(
                           "select from where insert into values update set delete create table drop alter add column "
                           "index view primary key foreign references not unique default and or in is like between "
                           "join inner left right outer full cross on group by order having limit offset as distinct "
                           "union all exists case when then else end begin commit rollback transaction if with "
                           "returning asc desc replace trigger database schema"),
                       true),
                       H::Keyword};
        s << line_comment(QStringLiteral("--")) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("'"), false, false);
    } else if (name == QLatin1String("yaml")) {
        r << TokenRule{rx(QStringLiteral("(?<![\\w.-])-?\\d+(?:\\.\\d+)?\\b(?![\\w.-])")), H::Number}
          << TokenRule{rx(QStringLiteral("(?<=[:\\-\\[,]\\s)(?:true|false|null|yes|no|on|off|True|False|Null|~)(?=\\s*$|\\s*[,\\]#])")),
                       H::Literal}
          << TokenRule{rx(QStringLiteral("^\\s*(?:-\\s+)?([\\w.\\-/]+)\\s*:(?=\\s|$)")), H::Attribute, 1}
          << TokenRule{rx(QStringLiteral("(?<![\\w])[&*][\\w-]+")), H::Variable}
          << TokenRule{rx(QStringLiteral("^(?:---|\\.\\.\\.)\\s*$|(?<!\\S)![\\w!]+")), H::Meta};
        s << line_comment(QStringLiteral("(?:^|(?<=\\s))#")) << string(QStringLiteral("\""))
          << string(QStringLiteral("'"), false, false);
    } else if (name == QLatin1String("html")) {
        r << TokenRule{rx(QStringLiteral("</?[\\w:.-]+|/?>")), H::Tag}
          << TokenRule{rx(QStringLiteral("\\s([\\w:.-]+)(?=\\s*=)")), H::Attribute, 1}
          << TokenRule{rx(QStringLiteral("=\\s*(\"[^\"]*\"|'[^']*')")), H::String, 1}
          << TokenRule{rx(QStringLiteral("&#?\\w+;")), H::Literal}
          << TokenRule{rx(QStringLiteral("<!DOCTYPE[^>]*>|<\\?xml[^>]*\\?>"), true), H::Meta};
        s << block_comment(QStringLiteral("<!--"), QStringLiteral("-->"));
    } else if (name == QLatin1String("css")) {
        r << TokenRule{rx(QStringLiteral("(?<![\\w#-])-?\\d*\\.?\\d+(?:px|em|rem|%|vh|vw|vmin|vmax|s|ms|deg|fr|pt|ch)?\\b")),
                       H::Number}
          << TokenRule{rx(QStringLiteral("#[0-9a-fA-F]{3,8}\\b")), H::Number}
          << TokenRule{rx(QStringLiteral("[.#][A-Za-z_][\\w-]*(?=[^;{}]*\\{)")), H::Tag}
          << TokenRule{rx(QStringLiteral("[\\w-]+(?=\\()")), H::Function}
          << TokenRule{rx(QStringLiteral("^\\s*([a-z-]+)\\s*:(?![^;]*\\{)")), H::Attribute, 1}
          << TokenRule{rx(QStringLiteral("@[\\w-]+|!important")), H::Keyword};
        s << block_comment(QStringLiteral("/*"), QStringLiteral("*/")) << string(QStringLiteral("\""))
          << string(QStringLiteral("'"));
    } else {
        // Any other language: numbers, double-quoted strings and the usual comments.
        r << TokenRule{rx(kNumber), H::Number};
        s << line_comment(QStringLiteral("(?:^|(?<=\\s))(?://|#)")) << block_comment(QStringLiteral("/*"), QStringLiteral("*/"))
          << string(QStringLiteral("\""));
    }
    ++g_compiled;
    return l;
}

// The rules of a canonical language name, compiled on first use.
const HighlightLanguage* language_for(const QString& canonical) {
    static QMutex mutex;
    static QHash<QString, std::shared_ptr<HighlightLanguage>> cache;
    QMutexLocker lock(&mutex);
    auto it = cache.find(canonical);
    if (it == cache.end()) it = cache.insert(canonical, std::shared_ptr<HighlightLanguage>(make_language(canonical)));
    return it->get();
}

// Where a span whose content starts at `from` ends (just past its end
// delimiter), or -1 when it does not end on this line.
int span_end(const QString& text, int from, const Span& s) {
    if (s.end.isEmpty()) return int(text.size());
    if (!s.escapes) {
        const qsizetype i = text.indexOf(s.end, from);
        return i < 0 ? -1 : int(i + s.end.size());
    }
    for (qsizetype i = from; i < text.size(); ++i) {
        if (text[i] == QLatin1Char('\\')) {
            ++i;
            continue;
        }
        if (QStringView(text).mid(i).startsWith(s.end)) return int(i + s.end.size());
    }
    return -1;
}

}  // namespace

CodeHighlighter::CodeHighlighter(QObject* parent) : QSyntaxHighlighter(parent), lang_(language_for(QString())) {
    for (int k = 0; k < KindCount; ++k) formats_[k].setForeground(color(Kind(k)));
    formats_[Comment].setFontItalic(true);
}

QColor CodeHighlighter::color(Kind kind) {
    // Night Owl's palette (its text colour, #d6deeb, is the code blocks' own),
    // the comments lighter than its #637777 for contrast on #0c0f14.
    switch (kind) {
        case Keyword: return QColor(0xc7, 0x92, 0xea);
        case Type: return QColor(0xff, 0xcb, 0x8b);
        case Literal: return QColor(0xff, 0x58, 0x74);
        case Builtin: return QColor(0x82, 0xaa, 0xff);
        case String: return QColor(0xec, 0xc4, 0x8d);
        case Number: return QColor(0xf7, 0x8c, 0x6c);
        case Comment: return QColor(0x80, 0x90, 0x9a);
        case Function: return QColor(0x82, 0xaa, 0xff);
        case Meta: return QColor(0xad, 0xdb, 0x67);
        case Tag: return QColor(0x7f, 0xdb, 0xca);
        case Attribute: return QColor(0xad, 0xdb, 0x67);
        case Variable: return QColor(0x7f, 0xdb, 0xca);
        case KindCount: break;
    }
    return QColor(0xd6, 0xde, 0xeb);
}

void CodeHighlighter::setDocument(QQuickTextDocument* document) {
    if (document == quick_document_) return;
    quick_document_ = document;
    QSyntaxHighlighter::setDocument(document ? document->textDocument() : nullptr);
    Q_EMIT documentChanged();
}

void CodeHighlighter::set_text_document(QTextDocument* document) { QSyntaxHighlighter::setDocument(document); }

void CodeHighlighter::setLanguage(const QString& language) {
    if (language == language_) return;
    language_ = language;
    const HighlightLanguage* next = language_for(canonical_language(language));
    const bool changed = next != lang_;
    lang_ = next;
    if (changed && QSyntaxHighlighter::document()) rehighlight();
    Q_EMIT languageChanged();
}

QString CodeHighlighter::resolvedLanguage() const { return lang_->name; }

int CodeHighlighter::compiled_rule_sets() { return g_compiled.load(); }

QString CodeHighlighter::canonical_language(const QString& name_in) {
    QString name = name_in.trimmed().toLower();
    // "```python title=x", "{.python}", "language-python"
    if (name.startsWith(QLatin1Char('{'))) name.remove(0, 1);
    if (name.startsWith(QLatin1Char('.'))) name.remove(0, 1);
    if (name.startsWith(QLatin1String("language-"))) name.remove(0, 9);
    const qsizetype cut = name.indexOf(QRegularExpression(QStringLiteral("[\\s,{}]")));
    if (cut >= 0) name.truncate(cut);
    static const QHash<QString, QString> aliases = [] {
        QHash<QString, QString> a;
        auto add = [&a](const char* canonical, const char* names) {
            for (const QString& n : QString::fromLatin1(names).split(QLatin1Char(' ')))
                a.insert(n, QString::fromLatin1(canonical));
        };
        add("cpp", "c cpp c++ cc cxx h hpp hxx hh cuda cu objc objective-c");
        add("python", "python py python3 py3 pyi ipython");
        add("javascript", "javascript js jsx mjs cjs node typescript ts tsx");
        add("json", "json jsonc json5 jsonl");
        add("bash", "bash sh shell zsh ksh console shellsession terminal");
        add("rust", "rust rs");
        add("go", "go golang");
        add("java", "java");
        add("sql", "sql mysql postgresql postgres psql sqlite plsql");
        add("yaml", "yaml yml");
        add("html", "html htm xhtml xml svg xaml plist");
        add("css", "css scss less");
        return a;
    }();
    return aliases.value(name);
}

void CodeHighlighter::highlightBlock(const QString& text) {
    for (const TokenRule& rule : lang_->rules) {
        QRegularExpressionMatchIterator it = rule.re.globalMatch(text);
        while (it.hasNext()) {
            const QRegularExpressionMatch m = it.next();
            if (m.capturedLength(rule.group) > 0)
                setFormat(int(m.capturedStart(rule.group)), int(m.capturedLength(rule.group)), formats_[rule.kind]);
        }
    }
    const QList<Span>& spans = lang_->spans;
    int pos = 0;
    setCurrentBlockState(0);
    const int open = previousBlockState();
    if (open > 0 && open <= spans.size()) {
        const Span& s = spans[open - 1];
        const int end = span_end(text, 0, s);
        if (end < 0) {
            setFormat(0, int(text.size()), formats_[s.kind]);
            setCurrentBlockState(open);
            return;
        }
        setFormat(0, end, formats_[s.kind]);
        pos = end;
    }
    while (pos < text.size()) {
        int best = -1, best_start = INT_MAX, best_len = 0;
        for (int i = 0; i < spans.size(); ++i) {
            const QRegularExpressionMatch m = spans[i].start.match(text, pos);
            if (!m.hasMatch()) continue;
            const int st = int(m.capturedStart()), len = int(m.capturedLength());
            if (st < best_start || (st == best_start && len > best_len)) {
                best = i;
                best_start = st;
                best_len = len;
            }
        }
        if (best < 0) break;
        const Span& s = spans[best];
        const int end = span_end(text, best_start + best_len, s);
        if (end < 0) {
            setFormat(best_start, int(text.size()) - best_start, formats_[s.kind]);
            if (s.multiline) setCurrentBlockState(best + 1);
            break;
        }
        Kind kind = s.kind;
        if (lang_->string_keys && kind == String) {
            int j = end;
            while (j < text.size() && text[j].isSpace()) ++j;
            if (j < text.size() && text[j] == QLatin1Char(':')) kind = Attribute;
        }
        setFormat(best_start, end - best_start, formats_[kind]);
        pos = std::max(end, best_start + 1);
    }
}

QString CodeHighlighter::colorAt(int position) const {
    const QTextDocument* doc = QSyntaxHighlighter::document();
    if (!doc) return {};
    const QTextBlock block = doc->findBlock(position);
    if (!block.isValid() || !block.layout()) return {};
    const int at = position - block.position();
    for (const QTextLayout::FormatRange& r : block.layout()->formats())
        if (at >= r.start && at < r.start + r.length && r.format.hasProperty(QTextFormat::ForegroundBrush))
            return r.format.foreground().color().name();
    return {};
}

}  // namespace strata::desktop
