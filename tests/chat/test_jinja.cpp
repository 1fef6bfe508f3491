// The Jinja engine (chat/jinja): the real chat templates llama.cpp 2026-09
// ships in models/templates/ ($STRATA_LLAMA_CPP) render every test
// conversation byte for byte as Hugging Face's jinja2 does (the renderings in
// templates/renderings.json, written by templates/make_renderings.py), and
// the engine's statements, expressions, whitespace control, errors and
// limits one by one.
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QtTest>

#include <string>

#include "chat/chat_template.h"
#include "chat/jinja/template.h"
#include "common/error.h"
#include "error_of.h"

using namespace strata;
using namespace strata::chat;
using strata::test::error_of;

namespace {

std::string render(const std::string& source, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   const jinja::Limits& limits = {}) {
    return jinja::Template(source).render(jinja::Value::from_json(ctx), limits);
}


// What jinja2 (Hugging Face's settings) renders for each: written by running
// it, one feature a row.
struct Case {
    const char* name;
    const char* source;
    const char* context;  // JSON
    const char* expected;
};
const Case kCases[] = {
        {"ws_control", R"J(a  {%- if true -%}  b  {%- endif -%}  c)J", R"J({})J", R"J(abc)J"},
        {"trim_lstrip", R"J(x
  {% if true %}
  y
  {% endif %}
z)J", R"J({})J", R"J(x
  y
z)J"},
        {"plus_keeps", R"J(x
  {%+ if true %}y{% endif %})J", R"J({})J", R"J(x
  y)J"},
        {"loop_vars", R"J({% for m in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.cycle('x','y') }}|{% endfor %})J", R"J({})J", R"J(10TrueFalse33x|21FalseFalse32y|32FalseTrue31x|)J"},
        {"loop_else_filter", R"J({% for i in range(5) if i is odd %}{{ i }}{% else %}none{% endfor %}/{% for i in [] %}x{% else %}empty{% endfor %})J", R"J({})J", R"J(13/empty)J"},
        {"break_continue", R"J({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %})J", R"J({})J", R"J(0134)J"},
        {"namespace", R"J({% set ns = namespace(n=0, s='') %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }})J", R"J({})J", R"J(3 012)J"},
        {"scoping", R"J({% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}{% if true %}{% set y = 3 %}{% endif %}{{ y }})J", R"J({})J", R"J(13)J"},
        {"set_block", R"J({% set t %}hello {{ 'world' | upper }}{% endset %}[{{ t }}])J", R"J({})J", R"J([hello WORLD])J"},
        {"macro_call", R"J({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }})J", R"J({})J", R"J(Hi Ann! Hi Bo?)J"},
        {"call_block", R"J({% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('t') %}inside{% endcall %})J", R"J({})J", R"J([t: inside])J"},
        {"filter_block", R"J({% filter upper %}shout {{ 'this' }}{% endfilter %})J", R"J({})J", R"J(SHOUT THIS)J"},
        {"raw", R"J({% raw %}{{ not rendered }}{% endraw %})J", R"J({})J", R"J({{ not rendered }})J"},
        {"strings", R"J({{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'Hello'.startswith('He') }}|{{ 'x y z'.split() }}|{{ 'abc'.upper() }}|{{ 'hello world'.title() }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-1] }}|{{ 'abc'[-1] }})J", R"J({})J", R"J(a b|['a', 'b', '', 'c']|True|['x', 'y', 'z']|ABC|Hello World|a-b-|bcd|fedcba|c)J"},
        {"filters", R"J({{ [3,1,2] | sort | join(',') }}|{{ ['a','b'] | length }}|{{ 'x' | default('d') }}|{{ undefined_thing | default('d') }}|{{ '' | default('e', true) }}|{{ [1,2,3] | first }}{{ [1,2,3] | last }}|{{ ' t ' | trim }}|{{ 'a' ~ 1 ~ none }}|{{ '5' | int + 1 }}|{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }})J", R"J({})J", R"J(1,2,3|2|x|d|e|13|t|a1None|6|3 -4 1 2 3.5 1024)J"},
        {"select_map", R"J({{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('+') }}|{{ msgs | rejectattr('role', 'eq', 'user') | list | length }}|{{ [1,2,3,4] | select('even') | list }}|{{ msgs | map(attribute='role') | unique | list }})J", R"J({"msgs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})J", R"J(a+c|1|[2, 4]|['user', 'assistant'])J"},
        {"tests", R"J({{ x is defined }}{{ y is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [1] is iterable }}{{ 3 is number }}{{ 3 is divisibleby 3 }}{{ x is not none }}{{ 'b' in 'abc' }}{{ 2 in [1,2] }}{{ 'k' in {'k': 1} }}{{ 'z' not in 'abc' }})J", R"J({"x": 1})J", R"J(TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue)J"},
        {"tojson", R"J({{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é"\n' | tojson }}|{{ 1.5 | tojson }}|{{ [true, none] | tojson }})J", R"J({"d": {"b": 1, "a": [1, 2.0, "x"]}})J", R"J({"b": 1, "a": [1, 2.0, "x"]}|{
  "b": 1,
  "a": [
    1,
    2.0,
    "x"
  ]
}|"é\"\n"|1.5|[true, null])J"},
        {"python_str", R"J({{ [1, 'a', none, true, 2.5] }}|{{ {'k': 'v', 'n': 1} }}|{{ none }}|{{ true }}|{{ 3.0 }}|{{ 1e20 }}|{{ 0.0001 }})J", R"J({})J", R"J([1, 'a', None, True, 2.5]|{'k': 'v', 'n': 1}|None|True|3.0|1e+20|0.0001)J"},
        {"dict_methods", R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{{ d.get('a') }}{{ d.get('zz', 'dflt') }}|{{ d.keys() | list }}|{% for k, v in d | dictsort %}{{ k }}{% endfor %})J", R"J({"d": {"b": 2, "a": 1}})J", R"J(b=2;a=1;|1dflt|['b', 'a']|ab)J"},
        {"cond_expr", R"J({{ 'yes' if x else 'no' }}{{ 'a' if not x }}|{{ x and 'and' }}|{{ none or 'or' }})J", R"J({"x": true})J", R"J(yes|and|or)J"},
        {"markup", R"J({{ '<a>' | safe + '"' }}|{{ 'x' ~ ('<' | safe) }})J", R"J({})J", R"J(<a>&#34;|x<)J"},
        {"comment_lstrip", R"J(a
  {# note #}
b)J", R"J({})J", R"J(a
b)J"},
        {"indent", R"J({{ 'a
b

c' | indent(2) }}|{{ 'a
b' | indent(2, true) }})J", R"J({})J", R"J(a
  b

  c|  a
  b)J"},
        {"unicode_strings", R"J({{ 'héllo✓'[1] }}|{{ 'héllo✓'[-1] }}|{{ 'héllo✓'[1:3] }}|{{ 'héllo✓'[::-1] }}|{{ 'héllo✓'|reverse }}|{{ 'héllo✓'.find('l') }}|{{ 'héllo✓'.rfind('✓') }}|{{ 'héllo✓'|length }}|{{ 'héllo✓'|list|length }}|{{ 'é✓'|first }}{{ 'é✓'|last }}|{{ 'é✓'.count('') }})J", R"J({})J", R"J(é|✓|él|✓olléh|✓olléh|2|5|6|6|é✓|3)J"},
        {"raw_lstrip", R"J({% raw %}a
    {% endraw %}b|{% raw %}  {% endraw %}|{% raw %}x
  {%+ endraw %}y|{% raw %}p
  {%- endraw %}q)J", R"J({})J", R"J(a
b|  |x
  y|pq)J"},
        {"format", R"J({{ '{}-{}'.format(1, 'x') }}|{{ '{b}{a}'.format(a=1, b=2) }})J", R"J({})J", R"J(1-x|21)J"},
};

QByteArray read_file(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

}  // namespace

class TestJinja : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void features_render_as_jinja2_data() {
        QTest::addColumn<int>("i");
        for (int i = 0; i < static_cast<int>(std::size(kCases)); ++i) QTest::newRow(kCases[i].name) << i;
    }
    void features_render_as_jinja2() {
        QFETCH(int, i);
        const Case& c = kCases[i];
        QCOMPARE(QString::fromStdString(render(c.source, nlohmann::ordered_json::parse(c.context))),
                 QString::fromUtf8(c.expected));
    }

    // Errors name the line and column of what is wrong, parsing and rendering.
    void errors_name_the_line_and_column() {
        const auto msg = [](const std::string& src) { return error_of([&] { render(src); }); };
        QVERIFY2(msg("ok\n{% if x %}\nno end").contains("template line 3"), qPrintable(msg("ok\n{% if x %}\nno end")));
        QVERIFY2(msg("{{ 1 + }}").contains("line 1, column 8: expected an expression"), qPrintable(msg("{{ 1 + }}")));
        QVERIFY2(msg("a\n  {% frobnicate %}").contains("line 2, column 6: unknown statement 'frobnicate'"),
                 qPrintable(msg("a\n  {% frobnicate %}")));
        QVERIFY2(msg("{{ 'x\n").contains("never closed"), qPrintable(msg("{{ 'x\n")));
        QVERIFY2(msg("\n\n   {{ raise_exception('roles must alternate') }}").contains("line 3, column 7") &&
                     msg("\n\n   {{ raise_exception('roles must alternate') }}").contains("roles must alternate"),
                 qPrintable(msg("\n\n   {{ raise_exception('roles must alternate') }}")));
        QVERIFY2(msg("{{ x.y }}").contains("undefined"), qPrintable(msg("{{ x.y }}")));
        QVERIFY2(msg("{{ [1] | frob }}").contains("unknown filter 'frob'"), qPrintable(msg("{{ [1] | frob }}")));
        QVERIFY2(msg("{{ 1 / 0 }}").contains("division by zero"), qPrintable(msg("{{ 1 / 0 }}")));
        QVERIFY2(msg("{{ x | tojson }}").isEmpty(), "undefined is null in JSON");
        QVERIFY2(msg("{{ [1] | map('string') | tojson }}").contains("generator"), "jinja2 cannot dump a generator");
    }

    // An untrusted template cannot run forever, build a huge string or recurse without end.
    void limits_stop_runaway_templates() {
        jinja::Limits small;
        small.max_steps = 100000;
        small.max_output = 1 << 20;
        small.max_depth = 16;
        const auto msg = [&](const std::string& src) {
            return error_of([&] { render(src, nlohmann::ordered_json::object(), small); });
        };
        QVERIFY2(msg("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}").contains("steps"),
                 "nested loops past the step limit");
        QVERIFY2(msg("{{ 'x' * 10000000 }}").contains("bytes"), "a huge string");
        QVERIFY2(msg("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                     .contains("bytes"),
                 "doubling a string");
        QVERIFY2(msg("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").contains("nested deeper"), "endless recursion");
        QVERIFY2(msg("{{ range(100000000000) | length }}").contains("items"), "a huge range");
        QVERIFY2(msg("{{ ([1] * 100000000) | length }}").contains("items"), "a huge list");
        // What a review found could crash or run away: each a clean error (or Python's answer) now.
        QVERIFY2(msg("{{ (-9223372036854775807 - 1) // -1 }}").isEmpty(), "INT64_MIN // -1 wraps, no trap");
        QCOMPARE(render("{{ (-9223372036854775807 - 1) % -1 }}{{ 5 is divisibleby(-1) }}"), std::string("0True"));
        QVERIFY2(msg("{{ 'a' | __slice__ }}").contains("unknown filter"), "the slice is not a filter");
        QVERIFY2(msg("{{ 'a b'.split(1) }}").contains("string separator"), "split by a number");
        QVERIFY2(msg("{{ 'abc'.split('') }}").contains("empty separator"), "split by nothing");
        QCOMPARE(render("{{ 'a.b.c'.rsplit('.', 1) }}"), std::string("['a.b', 'c']"));
        QCOMPARE(render("{{ 'abc'[1::9223372036854775807] }}{{ 'abcdef'[::-2] }}{{ [1,2,3][-9:9:4] }}"),
                 std::string("bfdb[1]"));
        QVERIFY2(msg("{{ 'abcd' * 4611686018427387904 }}").contains("bytes"), "a repetition whose size wraps");
        QVERIFY2(msg("{{ 'x' | indent(-1) }}").isEmpty() && msg("{{ 'x' | indent(99999999) }}").isEmpty(), "indent width bounded");
        QVERIFY2(msg("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}")
                     .contains("nested deeper"),
                 "a value nested 1000 deep");
        QVERIFY2(msg("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me }}").contains("cannot hold a namespace"),
                 "a namespace inside itself");
        QVERIFY2(msg("{% macro m() %}{% set ns.c = caller %}{% endmacro %}{% set ns = namespace() %}"
                     "{% call m() %}x{% endcall %}{{ ns.c() }}")
                     .contains("after its {% call %} block ended"),
                 "caller kept past its block");
        QVERIFY2(msg("{{ 1" + [] { std::string t; for (int i = 0; i < 20000; ++i) t += "+1"; return t; }() + " }}")
                     .contains("nested deeper"),
                 "a 20000-term sum");
        QVERIFY2(msg("{{ x" + std::string(20000, '.').replace(0, 20000, [] { std::string t; for (int i = 0; i < 10000; ++i) t += ".a"; return t; }()) + " }}")
                     .contains("nested deeper"),
                 "a 10000-link attribute chain");
        QCOMPARE(render("{{ {'a':{'b':1}} }}"), std::string("{'a': {'b': 1}}"));  // the inner }} does not close the tag
        QCOMPARE(render("x{% raw %}\n  y\n{% endraw %}\nz"), std::string("x\n  y\nz"));  // no trim after {% raw %}
        QCOMPARE(render("{% raw -%}\n  y  {%- endraw %}|"), std::string("y|"));
        const nlohmann::ordered_json odd_key = {{"\x01i", 1}, {"\x01i5", 2}};
        QCOMPARE(render("{{ d | tojson }}{% for k in d %}{{ k | length }}{% endfor %}", {{"d", odd_key}}),
                 std::string("{\"\\u0001i\": 1, \"\\u0001i5\": 2}23"));  // control characters escaped, as json.dumps
        // JSON too deep to convert (a request's messages): refused, not a crash.
        std::string deep = std::string(100000, '[') + std::string(100000, ']');
        const QString err = error_of([&] { jinja::Value::from_json(nlohmann::ordered_json::parse(deep)); });
        QVERIFY2(err.contains("nested deeper"), qPrintable(err));
        QCOMPARE(render("{% for i in range(3) %}{{ i }}{% endfor %}", nlohmann::ordered_json::object(), small),
                 std::string("012"));
        // Nesting that would exhaust the parser's stack: refused while parsing.
        QVERIFY2(msg("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").contains("nested deeper"),
                 "100000 brackets");
        QVERIFY2(msg("{{ " + std::string(100000, '-') + "1 }}").contains("nested deeper"), "100000 minus signs");
        std::string ifs;
        for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
        QVERIFY2(msg(ifs).contains("nested deeper"), "10000 open ifs");
    }

    // The model's own template where it renders; else the markers, saying why.
    void chat_template_uses_the_jinja_or_falls_back() {
        const std::string chatml =
            "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        const ChatTemplate t = ChatTemplate::load("{{ bos_token }}" + chatml, "<s>", "</s>");
        QVERIFY(t.uses_jinja());
        QCOMPARE(t.family(), Family::ChatMl);
        QCOMPARE(t.render({{"user", "Hi"}}), std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
        QCOMPARE(t.stop_strings(), std::vector<std::string>{"<|im_end|>"});
        // Raised while rendering a conversation: the template's message, with its line.
        const ChatTemplate strict = ChatTemplate::load(
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" + chatml);
        QVERIFY(strict.uses_jinja());
        const QString err = error_of([&] { strict.render({{"system", "S"}, {"user", "U"}}); });
        QVERIFY2(err.contains("System role not supported") && err.contains("line 1"), qPrintable(err));
        // Does not parse: the markers, and why.
        const ChatTemplate broken = ChatTemplate::load(chatml + "{% if %}");
        QVERIFY(!broken.uses_jinja());
        QCOMPARE(broken.family(), Family::ChatMl);
        QVERIFY2(broken.jinja_error().find("template line 1") != std::string::npos, broken.jinja_error().c_str());
        QVERIFY2(broken.describe().find("chatml markers") != std::string::npos, broken.describe().c_str());
        QCOMPARE(broken.render({{"user", "Hi"}}), std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    }

    // Tools and tool turns reach a Jinja template (in the client's key order);
    // the marker families refuse them.
    void tools_reach_the_template() {
        const ChatTemplate t = ChatTemplate::load(
            "{%- if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>{% endif %}"
            "{%- for m in messages %}<|{{ m.role }}|>{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>"
            "{{ c.function | tojson }}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}");
        QVERIFY(t.uses_jinja());
        QVERIFY(t.tool_syntax() == ChatTemplate::ToolSyntax::Hermes);
        const auto tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f","z":1,"a":2}}])");
        Message call{"assistant", ""};
        call.extra["tool_calls"] = nlohmann::ordered_json::parse(R"([{"function":{"name":"f","arguments":{"x":1}}}])");
        call.extra["content"] = nullptr;
        const std::string out = t.render({{"user", "U"}, call, {"tool", "21"}}, true, &tools);
        QCOMPARE(QString::fromStdString(out),
                 QStringLiteral(R"(<tools>{"type": "function", "function": {"name": "f", "z": 1, "a": 2}}</tools>)"
                                R"(<|user|>U<|assistant|><tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call><|tool|>21)"));
        const ChatTemplate markers = ChatTemplate::of(Family::ChatMl);
        // Templates without a place for tools get them as plain turns (chat/tool_prompt.h).
        QVERIFY(t.renders_tools());
        QVERIFY(!markers.renders_tools());
        QCOMPARE(QString::fromStdString(markers.render({{"user", "U"}, call, {"tool", "21"}, {"tool", "22"}, {"user", "V"}}, true, &tools)),
                 QStringLiteral("<|im_start|>system\nYou may call functions to answer. The functions, as JSON schemas:\n<tools>\n"
                                R"({"type":"function","function":{"name":"f","z":1,"a":2}})"
                                "\n</tools>\nTo call a function, reply with only this, once per call:\n<tool_call>\n"
                                R"({"name": <function name>, "arguments": <the arguments as a JSON object>})"
                                "\n</tool_call><|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
                                R"({"name": "f", "arguments": {"x":1}})"
                                "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n21\n</tool_response>\n"
                                "<tool_response>\n22\n</tool_response>\n\nV<|im_end|>\n<|im_start|>assistant\n"));
        // A Jinja template that ignores tools is treated the same way.
        const ChatTemplate plain = ChatTemplate::load("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}");
        QVERIFY(plain.uses_jinja() && !plain.renders_tools());
        QVERIFY(plain.render({{"user", "U"}}, true, &tools).find("<tools>") != std::string::npos);
    }

    void real_templates_render_as_jinja2() {
        const QString root = qEnvironmentVariable("STRATA_LLAMA_CPP");
        if (root.isEmpty())
            QSKIP("STRATA_LLAMA_CPP is not set (a llama.cpp 2026-09 checkout, whose models/templates/ holds the chat templates)");
        const QString here = QStringLiteral(STRATA_SOURCE_DIR "/tests/chat/templates/");
        const auto spec = nlohmann::ordered_json::parse(read_file(here + "conversations.json").toStdString());
        const auto want = nlohmann::json::parse(read_file(here + "renderings.json").toStdString());
        int renders = 0, raised = 0, skipped = 0;
        QStringList failures;
        for (const auto& [file, entry] : want["templates"].items()) {
            const QByteArray source = read_file(root + "/models/templates/" + QString::fromStdString(file));
            if (source.isEmpty() ||
                QCryptographicHash::hash(source, QCryptographicHash::Sha256).toHex().toStdString() != entry["sha256"]) {
                ++skipped;  // another llama.cpp version's template: not what the renderings are of
                continue;
            }
            std::unique_ptr<jinja::Template> t;
            try {
                t = std::make_unique<jinja::Template>(source.toStdString());
            } catch (const Error& e) {
                failures << QString::fromStdString(file + ": does not parse: " + e.what());
                continue;
            }
            for (const auto& [name, expect] : entry["cases"].items()) {
                const auto& c = spec["cases"][name];
                nlohmann::ordered_json ctx = {{"messages", c["messages"]},
                                              {"add_generation_prompt", c.value("add_generation_prompt", true)},
                                              {"bos_token", "<s>"},
                                              {"eos_token", "</s>"}};
                if (c.value("tools", false)) ctx["tools"] = spec["tools"];
                jinja::Value v = jinja::Value::from_json(ctx);
                // strftime_now as the renderings fixed it: 2 Jan 2026, 10:30.
                v.as_object().set("strftime_now", jinja::Value::function("strftime_now", [](jinja::Interpreter&,
                                                                                             const jinja::Args& a) {
                    std::tm tm{};
                    tm.tm_year = 126;
                    tm.tm_mon = 0;
                    tm.tm_mday = 2;
                    tm.tm_hour = 10;
                    tm.tm_min = 30;
                    tm.tm_wday = 5;
                    char buf[128];
                    const size_t n = std::strftime(buf, sizeof buf, a.pos.at(0).as_string().c_str(), &tm);
                    return jinja::Value(std::string(buf, n));
                }));
                std::string got, err;
                try {
                    got = t->render(v);
                } catch (const Error& e) {
                    err = e.what();
                }
                if (expect.contains("error")) {
                    ++raised;
                    if (err.empty()) failures << QString::fromStdString(file + " / " + name + ": renders, jinja2 raised " +
                                                                        expect["error"].get<std::string>());
                    continue;
                }
                ++renders;
                if (!err.empty()) failures << QString::fromStdString(file + " / " + name + ": " + err);
                else if (got != expect["text"].get<std::string>())
                    failures << QString::fromStdString(file + " / " + name + ": differs");
            }
        }
        qInfo("%d renderings byte-identical to jinja2's and %d raised by both, of %d; %d templates of another version skipped",
              renders - static_cast<int>(failures.size()), raised, renders + raised, skipped);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
        QVERIFY(renders > 300);
    }
};

QTEST_GUILESS_MAIN(TestJinja)
#include "test_jinja.moc"
