// The tools the app offers a model in its own chats (Settings > Generation >
// Tools): a calculator and the clock, both computed here, with no access to
// files or the network. Their definitions go to the model in OpenAI's form
// (through the model's own chat template, or the plain turns for a template
// without tools); a call the model makes is run by ChatController, its result
// goes back as a tool turn, and the model answers on (ToolRounds).
#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QJsonArray>
#include <QList>
#include <QString>

#include "engine_worker.h"  // ChatTurn

namespace strata::desktop {

// The tools' OpenAI definitions: [{type: "function", function: {...}}].
QByteArray chat_tool_definitions();

// Runs one call: `arguments` a JSON object as text. The result as the model
// reads it (a number, a date); a bad call is a result that says what was
// wrong ("error: ..."), so the model can try again.
QString run_chat_tool(const QString& name, const QString& arguments, const QDateTime& now = QDateTime::currentDateTime());

// An arithmetic expression's value: + - * / // % ^ (or **), parentheses,
// unary minus, pi, e, and sqrt abs exp ln log (natural) log10 log2 sin cos tan
// asin acos atan floor ceil round min max. Throws std::invalid_argument with
// what is wrong and where.
double evaluate_expression(const QString& expression);
// A result as a person writes it: integers without a decimal point, others
// to 12 significant digits.
QString format_number(double x);

// One call and what it returned.
struct ToolCallRecord {
    QString id, name, arguments, result;
};

// The tool rounds of one answer: what the model wrote before its calls (often
// nothing) and the calls with their results. Stored with the answer as JSON
// (ChatStore's tool_turns), shown above its text, and sent back with it.
struct ToolRound {
    QString content;
    QList<ToolCallRecord> calls;
};
QByteArray tool_rounds_json(const QList<ToolRound>& rounds);  // "" for none
QList<ToolRound> tool_rounds_from_json(const QByteArray& json);  // bad JSON: none
// For the message list: [{name, arguments, result, before}] of every round
// ("before": what the model wrote before the round's calls, on its first).
QJsonArray tool_calls_for_display(const QList<ToolRound>& rounds);

// The turns an answer with tool rounds is sent back as: per round an
// assistant turn with its calls and a tool turn per result, then the answer.
void append_answer_turns(QList<ChatTurn>& turns, const QList<ToolRound>& rounds, const QString& answer);

// An answer may call tools this many times in a row; then it must answer.
constexpr int kMaxToolRounds = 4;

}  // namespace strata::desktop
