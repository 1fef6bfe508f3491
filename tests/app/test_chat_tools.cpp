// The app's own tools (chat_tools.h): the calculator against known values
// and its errors, the clock at a fixed time, the definitions the model gets,
// and the tool rounds as they are stored and sent back.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimeZone>
#include <QtTest>

#include <cmath>
#include <stdexcept>

#include "chat_tools.h"

using namespace strata::desktop;

class TestChatTools : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void the_calculator_computes_data() {
        QTest::addColumn<QString>("expression");
        QTest::addColumn<QString>("value");
        const char* const rows[][2] = {
            {"6*7", "42"},           {"1 + 2 * 3", "7"},          {"(1 + 2) * 3", "9"},     {"2^10", "1024"},
            {"2**3**2", "512"},      {"-2^2", "-4"},              {"2^-1", "0.5"},          {"7 // 2", "3"},
            {"-7 // 2", "-4"},       {"-7 % 3", "2"},             {"7 % -3", "-2"},         {"10 / 4", "2.5"},
            {"sqrt(2)", "1.41421356237"}, {"abs(-3.5)", "3.5"},   {"round(2.5)", "3"},      {"floor(-1.5)", "-2"},
            {"max(1, 9, 4)", "9"},   {"min(3, -1)", "-1"},        {"pow(2, 0.5)", "1.41421356237"},
            {"ln(e)", "1"},          {"log10(1000)", "3"},         {"log2(8)", "3"},         {"sin(pi/2)", "1"},
            {"1e3 + 1_000", "2000"}, {"3 × 4 ÷ 6", "2"},         {".5 + .25", "0.75"},      {"  --3 ", "3"},
            {"1e16", "1e+16"},       {"0.1 + 0.2", "0.3"},         {"17.5 * 3 / 4", "13.125"}, {"SQRT(16)", "4"},
            {"5 − 2", "3"},          {"−2^2", "-4"},
        };
        for (const auto& r : rows) QTest::newRow(r[0]) << QString::fromUtf8(r[0]) << QString::fromUtf8(r[1]);
    }
    void the_calculator_computes() {
        QFETCH(QString, expression);
        QFETCH(QString, value);
        QCOMPARE(format_number(evaluate_expression(expression)), value);
    }

    void bad_expressions_say_what_and_where_data() {
        QTest::addColumn<QString>("expression");
        QTest::addColumn<QString>("message");
        const char* const rows[][2] = {
            {"1 / 0", "division by zero"},          {"5 % 0", "division by zero"},
            {"2 +", "ends early"},                  {"(1 + 2", "expected ')'"},
            {"1 + 2)", "unexpected ')' at character 6"}, {"foo(1)", "unknown function 'foo'"},
            {"x + 1", "unknown name 'x'"},          {"sqrt(1, 2)", "sqrt() takes 1 argument(s), got 2"},
            {"sqrt(-1)", "sqrt(-1) is not defined"}, {"10^400", "not a finite number"},
            {"1..2", "'1..2' is not a number"},     {"", "ends early"},
            {"2 $ 3", "unexpected '$'"},
        };
        for (const auto& r : rows) QTest::newRow(r[0]) << QString::fromUtf8(r[0]) << QString::fromUtf8(r[1]);
    }
    void bad_expressions_say_what_and_where() {
        QFETCH(QString, expression);
        QFETCH(QString, message);
        try {
            evaluate_expression(expression);
            QFAIL("accepted");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    // No input exhausts the stack or runs long.
    void limits_hold() {
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, evaluate_expression(QString(5000, QLatin1Char('1'))));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, evaluate_expression(QString(400, QLatin1Char('(')) + "1" + QString(400, QLatin1Char(')'))));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, evaluate_expression(QString(600, QLatin1Char('-')) + "1"));
        QCOMPARE(evaluate_expression(QString(50, QLatin1Char('(')) + "1" + QString(50, QLatin1Char(')'))), 1.0);
    }

    void tools_run_from_their_json_arguments() {
        QCOMPARE(run_chat_tool("calculate", R"({"expression": "6*7"})"), QStringLiteral("42"));
        QVERIFY(run_chat_tool("calculate", R"({"expression": "1/0"})").startsWith("error: division by zero"));
        QVERIFY(run_chat_tool("calculate", R"({"expr": "1"})").contains("'expression'"));
        QVERIFY(run_chat_tool("calculate", "not json").contains("not a JSON object"));
        QVERIFY(run_chat_tool("search", "{}").contains("no tool named 'search'"));
        const QDateTime at(QDate(2026, 12, 7), QTime(9, 30, 5), QTimeZone("Europe/Berlin"));
        QCOMPARE(run_chat_tool("current_time", "{}", at),
                 QStringLiteral("2026-12-07T09:30:05+01:00 (Monday, 7 December 2026), time zone Europe/Berlin"));
        QVERIFY(run_chat_tool("current_time", "", at).startsWith("2026-12-07T09:30:05+01:00"));  // no arguments at all
        const QDateTime india(QDate(2026, 1, 2), QTime(23, 0), QTimeZone("Asia/Kolkata"));
        QVERIFY(run_chat_tool("current_time", "{}", india).startsWith("2026-01-02T23:00:00+05:30 (Friday"));
    }

    void definitions_are_openai_functions() {
        const QJsonArray defs = QJsonDocument::fromJson(chat_tool_definitions()).array();
        QCOMPARE(defs.size(), 2);
        QStringList names;
        for (const QJsonValue& d : defs) {
            QCOMPARE(d[QStringLiteral("type")].toString(), QStringLiteral("function"));
            QVERIFY(!d[QStringLiteral("function")][QStringLiteral("description")].toString().isEmpty());
            QCOMPARE(d[QStringLiteral("function")][QStringLiteral("parameters")][QStringLiteral("type")].toString(),
                     QStringLiteral("object"));
            names << d[QStringLiteral("function")][QStringLiteral("name")].toString();
        }
        QCOMPARE(names, QStringList({"calculate", "current_time"}));
    }

    // Stored as JSON and read back; sent back as the assistant's calls, one
    // tool turn per result, then the answer.
    void rounds_round_trip_and_become_turns() {
        const QList<ToolRound> rounds = {
            {"Let me compute.", {{"c1", "calculate", R"({"expression":"6*7"})", "42"}, {"c2", "current_time", "{}", "noon"}}},
            {"", {{"c3", "calculate", R"({"expression":"42+1"})", "43"}}}};
        const QByteArray json = tool_rounds_json(rounds);
        const QList<ToolRound> back = tool_rounds_from_json(json);
        QCOMPARE(back.size(), 2);
        QCOMPARE(back[0].content, QStringLiteral("Let me compute."));
        QCOMPARE(back[0].calls[1].result, QStringLiteral("noon"));
        QCOMPARE(back[1].calls[0].arguments, QStringLiteral(R"({"expression":"42+1"})"));
        QVERIFY(tool_rounds_json({}).isEmpty());
        QVERIFY(tool_rounds_from_json("{broken").isEmpty());
        QCOMPARE(tool_calls_for_display(rounds).size(), 3);
        QCOMPARE(tool_calls_for_display(rounds)[2].toObject()[QStringLiteral("result")].toString(), QStringLiteral("43"));
        QCOMPARE(tool_calls_for_display(rounds)[0].toObject()[QStringLiteral("before")].toString(), QStringLiteral("Let me compute."));
        QCOMPARE(tool_calls_for_display(rounds)[1].toObject()[QStringLiteral("before")].toString(), QString());

        QList<ChatTurn> turns;
        append_answer_turns(turns, rounds, QStringLiteral("It is 43."));
        QCOMPARE(turns.size(), 6);  // assistant, tool, tool, assistant, tool, assistant
        QCOMPARE(turns[0].role, QStringLiteral("assistant"));
        QCOMPARE(turns[0].content, QStringLiteral("Let me compute."));
        const QJsonArray calls = QJsonDocument::fromJson(turns[0].tool_calls).array();
        QCOMPARE(calls.size(), 2);
        QCOMPARE(calls[0][QStringLiteral("id")].toString(), QStringLiteral("c1"));
        QCOMPARE(calls[0][QStringLiteral("function")][QStringLiteral("arguments")].toString(), QStringLiteral(R"({"expression":"6*7"})"));
        QCOMPARE(turns[1].role, QStringLiteral("tool"));
        QCOMPARE(turns[1].content, QStringLiteral("42"));
        QCOMPARE(turns[1].tool_call_id, QStringLiteral("c1"));
        QCOMPARE(turns[2].name, QStringLiteral("current_time"));
        QCOMPARE(turns[5].role, QStringLiteral("assistant"));
        QCOMPARE(turns[5].content, QStringLiteral("It is 43."));
        QVERIFY(turns[5].tool_calls.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestChatTools)
#include "test_chat_tools.moc"
