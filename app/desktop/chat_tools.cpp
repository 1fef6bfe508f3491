#include "chat_tools.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QTimeZone>

#include <cmath>
#include <stdexcept>

namespace strata::desktop {

namespace {

// Recursive descent over the expression's characters; depth and length are
// bounded, so no input can exhaust the stack.
class Calculator {
public:
    explicit Calculator(const QString& text) : s_(text) {
        if (s_.size() > 1000) throw std::invalid_argument("the expression is longer than 1000 characters");
    }

    double run() {
        const double v = sum();
        skip();
        if (at_ < s_.size()) fail(QStringLiteral("unexpected '%1'").arg(s_[at_]));
        if (!std::isfinite(v)) throw std::invalid_argument("the result is not a finite number");
        return v;
    }

private:
    [[noreturn]] void fail(const QString& what) const {
        throw std::invalid_argument(
            QStringLiteral("%1 at character %2 of '%3'").arg(what).arg(at_ + 1).arg(s_).toStdString());
    }
    void skip() {
        while (at_ < s_.size() && s_[at_].isSpace()) ++at_;
    }
    bool eat(QStringView op) {
        skip();
        if (QStringView(s_).mid(at_).startsWith(op)) {
            at_ += op.size();
            return true;
        }
        return false;
    }

    double sum() {
        double v = product();
        for (;;) {
            if (eat(u"+")) v += product();
            else if (eat(u"-") || eat(u"−")) v -= product();
            else return v;
        }
    }
    double product() {
        double v = unary();
        for (;;) {
            if (eat(u"*") || eat(u"×")) {  // (power() has taken any "**" already)
                v *= unary();
            } else if (eat(u"//")) {
                v = std::floor(v / nonzero(unary()));
            } else if (eat(u"/") || eat(u"÷")) {
                v /= nonzero(unary());
            } else if (eat(u"%")) {
                const double d = nonzero(unary());
                v = v - d * std::floor(v / d);  // Python's sign convention
            } else {
                return v;
            }
        }
    }
    double nonzero(double d) const {
        if (d == 0) throw std::invalid_argument("division by zero");
        return d;
    }
    // A sign binds looser than a power, as in Python: -2^2 is -4.
    double unary() {
        if (eat(u"-") || eat(u"−")) return -nested([this] { return unary(); });
        if (eat(u"+")) return nested([this] { return unary(); });
        return power();
    }
    // Powers bind to the right and their exponent may have a sign: 2^3^2, 2^-1.
    double power() {
        const double base = primary();
        if (eat(u"**") || eat(u"^")) return std::pow(base, nested([this] { return unary(); }));
        return base;
    }
    template <class F>
    double nested(F f) {
        if (++depth_ > 100) fail(QStringLiteral("nesting deeper than 100"));
        const double v = f();
        --depth_;
        return v;
    }

    double primary() {
        skip();
        if (at_ >= s_.size()) fail(QStringLiteral("the expression ends early"));
        if (eat(u"(")) {
            const double v = nested([this] { return sum(); });
            if (!eat(u")")) fail(QStringLiteral("expected ')'"));
            return v;
        }
        const QChar c = s_[at_];
        if (c.isDigit() || c == QLatin1Char('.')) return number();
        if (c.isLetter()) return name();
        fail(QStringLiteral("unexpected '%1'").arg(c));
    }
    double number() {
        const qsizetype start = at_;
        while (at_ < s_.size() && (s_[at_].isDigit() || s_[at_] == QLatin1Char('.') || s_[at_] == QLatin1Char('_'))) ++at_;
        if (at_ < s_.size() && (s_[at_] == QLatin1Char('e') || s_[at_] == QLatin1Char('E'))) {
            qsizetype p = at_ + 1;
            if (p < s_.size() && (s_[p] == QLatin1Char('+') || s_[p] == QLatin1Char('-'))) ++p;
            if (p < s_.size() && s_[p].isDigit()) {
                at_ = p;
                while (at_ < s_.size() && s_[at_].isDigit()) ++at_;
            }
        }
        QString text = s_.mid(start, at_ - start);
        text.remove(QLatin1Char('_'));
        bool ok = false;
        const double v = text.toDouble(&ok);
        if (!ok) {
            at_ = start;
            fail(QStringLiteral("'%1' is not a number").arg(text));
        }
        return v;
    }
    double name() {
        const qsizetype start = at_;
        while (at_ < s_.size() && (s_[at_].isLetterOrNumber() || s_[at_] == QLatin1Char('_'))) ++at_;
        const QString n = s_.mid(start, at_ - start).toLower();
        if (n == QLatin1String("pi")) return M_PI;
        if (n == QLatin1String("e")) return M_E;
        if (!eat(u"(")) {
            at_ = start;
            fail(QStringLiteral("unknown name '%1'").arg(n));
        }
        QList<double> args;
        if (!eat(u")")) {
            do args.append(nested([this] { return sum(); }));
            while (eat(u","));
            if (!eat(u")")) fail(QStringLiteral("expected ')' after the arguments of %1").arg(n));
        }
        return apply(n, args, start);
    }
    double apply(const QString& n, const QList<double>& a, qsizetype where) {
        const auto want = [&](int count) {
            if (a.size() != count) {
                at_ = where;
                fail(QStringLiteral("%1() takes %2 argument(s), got %3").arg(n).arg(count).arg(a.size()));
            }
        };
        static const QHash<QString, double (*)(double)> one = {
            {QStringLiteral("sqrt"), [](double x) { return std::sqrt(x); }},
            {QStringLiteral("abs"), [](double x) { return std::fabs(x); }},
            {QStringLiteral("exp"), [](double x) { return std::exp(x); }},
            {QStringLiteral("ln"), [](double x) { return std::log(x); }},
            {QStringLiteral("log"), [](double x) { return std::log(x); }},
            {QStringLiteral("log10"), [](double x) { return std::log10(x); }},
            {QStringLiteral("log2"), [](double x) { return std::log2(x); }},
            {QStringLiteral("sin"), [](double x) { return std::sin(x); }},
            {QStringLiteral("cos"), [](double x) { return std::cos(x); }},
            {QStringLiteral("tan"), [](double x) { return std::tan(x); }},
            {QStringLiteral("asin"), [](double x) { return std::asin(x); }},
            {QStringLiteral("acos"), [](double x) { return std::acos(x); }},
            {QStringLiteral("atan"), [](double x) { return std::atan(x); }},
            {QStringLiteral("floor"), [](double x) { return std::floor(x); }},
            {QStringLiteral("ceil"), [](double x) { return std::ceil(x); }},
            {QStringLiteral("round"), [](double x) { return std::round(x); }},
        };
        if (const auto f = one.find(n); f != one.end()) {
            want(1);
            const double v = (*f)(a[0]);
            if (std::isnan(v)) {
                at_ = where;
                fail(QStringLiteral("%1(%2) is not defined").arg(n, format_number(a[0])));
            }
            return v;
        }
        if (n == QLatin1String("min") || n == QLatin1String("max")) {
            if (a.isEmpty()) want(1);
            double v = a[0];
            for (double x : a) v = n == QLatin1String("min") ? std::min(v, x) : std::max(v, x);
            return v;
        }
        if (n == QLatin1String("pow")) {
            want(2);
            return std::pow(a[0], a[1]);
        }
        at_ = where;
        fail(QStringLiteral("unknown function '%1'").arg(n));
    }

    QString s_;
    qsizetype at_ = 0;
    int depth_ = 0;
};

QString current_time(const QDateTime& now) {
    const int off = now.offsetFromUtc() / 60;  // minutes
    const QString offset = QStringLiteral("%1%2:%3")
                               .arg(off < 0 ? QLatin1Char('-') : QLatin1Char('+'))
                               .arg(std::abs(off) / 60, 2, 10, QLatin1Char('0'))
                               .arg(std::abs(off) % 60, 2, 10, QLatin1Char('0'));
    QString zone = QString::fromUtf8(now.timeZone().id());
    if (zone.isEmpty()) zone = now.timeZoneAbbreviation();
    const QLocale en(QLocale::English);
    return now.toString(QStringLiteral("yyyy-MM-ddTHH:mm:ss")) + offset + QStringLiteral(" (") +
           en.toString(now.date(), QStringLiteral("dddd, d MMMM yyyy")) + QStringLiteral("), time zone ") + zone;
}

}  // namespace

QByteArray chat_tool_definitions() {
    static const char* const kDefinitions =
        R"J([{"type":"function","function":{"name":"calculate","description":"Evaluates an arithmetic expression and )J"
        R"J(returns its value. Use it for any arithmetic rather than working it out yourself. Operators + - * / // % ^, )J"
        R"J(parentheses, pi, e, and sqrt abs exp ln log10 log2 sin cos tan asin acos atan floor ceil round min max.",)J"
        R"J("parameters":{"type":"object","properties":{"expression":{"type":"string","description":)J"
        R"J("The expression, e.g. (17.5 * 3) / 4 or sqrt(2)"}},"required":["expression"]}}},)J"
        R"J({"type":"function","function":{"name":"current_time","description":"The user's current local date, time, )J"
        R"J(weekday and time zone.","parameters":{"type":"object","properties":{}}}}])J";
    return QByteArray(kDefinitions);
}

double evaluate_expression(const QString& expression) { return Calculator(expression).run(); }

QString format_number(double x) {
    if (x == 0) return QStringLiteral("0");
    if (std::fabs(x) < 1e15 && x == std::round(x)) return QString::number(static_cast<qint64>(x));
    return QString::number(x, 'g', 12);
}

QString run_chat_tool(const QString& name, const QString& arguments, const QDateTime& now) {
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(arguments.toUtf8(), &err);
    if (!arguments.trimmed().isEmpty() && !doc.isObject())
        return QStringLiteral("error: the arguments are not a JSON object");
    const QJsonObject args = doc.object();
    if (name == QLatin1String("calculate")) {
        const QJsonValue e = args.value(QStringLiteral("expression"));
        if (!e.isString()) return QStringLiteral("error: calculate needs a string argument 'expression'");
        try {
            return format_number(evaluate_expression(e.toString()));
        } catch (const std::invalid_argument& ex) {
            return QStringLiteral("error: ") + QString::fromStdString(ex.what());
        }
    }
    if (name == QLatin1String("current_time")) return current_time(now);
    return QStringLiteral("error: there is no tool named '%1'; the tools are calculate and current_time").arg(name);
}

QByteArray tool_rounds_json(const QList<ToolRound>& rounds) {
    if (rounds.isEmpty()) return {};
    QJsonArray a;
    for (const ToolRound& r : rounds) {
        QJsonArray calls;
        for (const ToolCallRecord& c : r.calls)
            calls.append(QJsonObject{{QStringLiteral("id"), c.id},
                                     {QStringLiteral("name"), c.name},
                                     {QStringLiteral("arguments"), c.arguments},
                                     {QStringLiteral("result"), c.result}});
        a.append(QJsonObject{{QStringLiteral("content"), r.content}, {QStringLiteral("calls"), calls}});
    }
    return QJsonDocument(a).toJson(QJsonDocument::Compact);
}

QList<ToolRound> tool_rounds_from_json(const QByteArray& json) {
    QList<ToolRound> out;
    for (const QJsonValue& v : QJsonDocument::fromJson(json).array()) {
        ToolRound r;
        r.content = v[QStringLiteral("content")].toString();
        for (const QJsonValue& c : v[QStringLiteral("calls")].toArray())
            r.calls.append({c[QStringLiteral("id")].toString(), c[QStringLiteral("name")].toString(),
                            c[QStringLiteral("arguments")].toString(), c[QStringLiteral("result")].toString()});
        out.append(r);
    }
    return out;
}

QJsonArray tool_calls_for_display(const QList<ToolRound>& rounds) {
    QJsonArray out;
    for (const ToolRound& r : rounds)
        for (qsizetype i = 0; i < r.calls.size(); ++i) {
            const ToolCallRecord& c = r.calls[i];
            out.append(QJsonObject{{QStringLiteral("name"), c.name},
                                   {QStringLiteral("arguments"), c.arguments},
                                   {QStringLiteral("result"), c.result},
                                   // what the model said before this round's calls, with its first call
                                   {QStringLiteral("before"), i == 0 ? r.content : QString()}});
        }
    return out;
}

void append_answer_turns(QList<ChatTurn>& turns, const QList<ToolRound>& rounds, const QString& answer) {
    for (const ToolRound& r : rounds) {
        QJsonArray calls;
        for (const ToolCallRecord& c : r.calls)
            calls.append(QJsonObject{{QStringLiteral("id"), c.id},
                                     {QStringLiteral("type"), QStringLiteral("function")},
                                     {QStringLiteral("function"),
                                      QJsonObject{{QStringLiteral("name"), c.name}, {QStringLiteral("arguments"), c.arguments}}}});
        turns.append({QStringLiteral("assistant"), r.content, QJsonDocument(calls).toJson(QJsonDocument::Compact)});
        for (const ToolCallRecord& c : r.calls) turns.append({QStringLiteral("tool"), c.result, {}, c.id, c.name});
    }
    if (!answer.isEmpty() || rounds.isEmpty()) turns.append({QStringLiteral("assistant"), answer});
}

}  // namespace strata::desktop
