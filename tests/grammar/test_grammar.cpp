// Grammars (grammar/grammar.h), the matcher (grammar/matcher.h) and JSON
// Schema to grammar (grammar/json_schema.h): what is accepted and refused,
// the token mask against a token-by-token check, and random texts drawn
// under each schema's grammar validated against the schema.
#include <QtTest/QtTest>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "test_grammar_data.h"

using namespace strata::grammar;
using ojson = nlohmann::ordered_json;

namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) { return std::make_shared<const Grammar>(Grammar::parse(text)); }

bool matches(const std::string& gbnf, const std::string& text) {
    Matcher m(compile(gbnf));
    return m.accept(text) && m.complete();
}

std::string error_of(const std::string& gbnf) {
    try {
        Grammar::parse(gbnf);
    } catch (const GrammarError& e) {
        return e.what();
    }
    return "";
}

std::string schema_error(const std::string& schema) {
    try {
        Grammar::parse(json_schema_gbnf(ojson::parse(schema)));
    } catch (const SchemaError& e) {
        return e.what();
    }
    return "";
}

// The subset of JSON Schema the converter supports, checked directly.
bool valid(const nlohmann::json& v, const nlohmann::json& s, const nlohmann::json& root) {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) return valid(v, root.at(nlohmann::json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
    if (s.contains("const") && v != s["const"]) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
    if (s.contains("anyOf")) {
        bool any = false;
        for (const auto& a : s["anyOf"]) any = any || valid(v, a, root);
        if (!any) return false;
    }
    if (s.contains("allOf"))
        for (const auto& a : s["allOf"])
            if (!valid(v, a, root)) return false;
    if (s.contains("type")) {
        std::vector<std::string> types;
        if (s["type"].is_string()) types.push_back(s["type"]);
        else for (const auto& t : s["type"]) types.push_back(t);
        bool ok = false;
        for (const auto& t : types) {
            ok = ok || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
                 (t == "string" && v.is_string()) || (t == "integer" && v.is_number_integer()) ||
                 (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
        }
        if (!ok) return false;
    }
    if (v.is_object()) {
        if (s.contains("required"))
            for (const auto& r : s["required"])
                if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            if (s.contains("properties") && s["properties"].contains(k)) {
                if (!valid(x, s["properties"][k], root)) return false;
            } else if (s.contains("additionalProperties")) {
                if (!valid(x, s["additionalProperties"], root)) return false;
            }
        }
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
        if (s.contains("items") && !s.contains("prefixItems"))  // items after the prefix: none here
            for (const auto& x : v)
                if (!valid(x, s["items"], root)) return false;
        if (s.contains("prefixItems")) {
            if (v.size() != s["prefixItems"].size()) return false;
            for (size_t i = 0; i < v.size(); ++i)
                if (!valid(v[i], s["prefixItems"][i], root)) return false;
        }
    }
    if (v.is_string()) {
        const std::string str = v.get<std::string>();
        size_t cps = 0;
        for (unsigned char c : str) cps += (c & 0xC0) != 0x80;
        if (s.contains("minLength") && cps < s["minLength"].get<size_t>()) return false;
        if (s.contains("maxLength") && cps > s["maxLength"].get<size_t>()) return false;
    }
    if (v.is_number()) {
        const double x = v.get<double>();
        if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
        if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
        if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
        if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    }
    return true;
}

// A vocabulary for random texts: printable ASCII, a few words and multi-byte
// pieces, two-byte and three-byte UTF-8 characters.
std::vector<std::string> test_pieces() {
    std::vector<std::string> p;
    for (int c = 0x20; c < 0x7F; ++c) p.push_back(std::string(1, char(c)));
    for (const char* w : {"\n", "\t", "true", "false", "null", "\"name\"", "\": \"", "\",", "{\"", "}}", "12", "3.5",
                          "e+", "\\n", "\\u00e9", "\\ud800", "é", "日本", "-0", "00", " {", "\"}", "\u00ff"})
        p.push_back(w);
    p.push_back("");  // a control token: never text
    return p;
}

// Draws a random text under the grammar: uniform among the allowed pieces;
// stops when complete with probability 1/3. Empty when it did not end.
std::string random_text(const std::shared_ptr<const Grammar>& g, const TokenTable& table,
                        const std::vector<std::string>& pieces, std::mt19937& rng) {
    Matcher m(g);
    std::string out;
    std::vector<uint8_t> allowed;
    for (int step = 0; step < 3000; ++step) {
        if (m.complete() && (m.finished() || rng() % 3 == 0)) return out;
        m.allowed_tokens(table.index(), allowed);
        std::vector<int32_t> ok;
        for (size_t i = 0; i < allowed.size(); ++i)
            if (allowed[i]) ok.push_back(int32_t(i));
        if (ok.empty()) return m.complete() ? out : std::string();
        const int32_t t = ok[rng() % ok.size()];
        if (!m.accept(pieces[size_t(t)])) return "<accept refused an allowed token>";
        out += pieces[size_t(t)];
    }
    return {};
}

}  // namespace

class TestGrammar : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void literalsClassesAndRepetition() {
        const std::string g = kRaw[0];  // a grammar
        QVERIFY(matches(g, "ab1x\xC3\xA9!-"));   // é is one character of [^"\\]
        QVERIFY(matches(g, "ab123qqqz"));
        QVERIFY(matches(g, "ab9yzqq\xE6\x97\xA5"));  // . is a whole character
        QVERIFY(!matches(g, "ab"));
        QVERIFY(!matches(g, "abx12"));
        QVERIFY(!matches(g, "ab1\"qq!"));
        QVERIFY(!matches(g, "ab1qqqq!"));          // at most 3
        QVERIFY(!matches(g, "ab1qq\xC3"));         // half a character
        QVERIFY(!matches(g, "ab1qq\xC0\x80"));     // an overlong encoding is no character
        QVERIFY(matches("root ::= [\\u00e0-\\u00ff\\x41]+\n", "A\xC3\xA9\xC3\xBF"));
        QVERIFY(!matches("root ::= [\\u00e0-\\u00ff]+\n", "\xC3\x9F"));
        QVERIFY(matches("root ::= [^a] \"\\n\"\n", "\xF0\x9F\x98\x80\n"));
        QVERIFY(matches("root ::= x{3}\nx ::= \"-\" | \"+\"\n", "-+-"));
        QVERIFY(!matches("root ::= x{3}\nx ::= \"-\" | \"+\"\n", "-+"));
    }

    void rulesAcrossLines() {
        const std::string g = "# a comment\nroot ::= item (\",\" item)*   # trailing\nitem ::= \"a\" |\n  \"b\" | (\n \"c\"\n)\n";
        QVERIFY(matches(g, "a,b,c"));
        QVERIFY(!matches(g, "a,"));
        // Recursion that consumes first is fine (nesting).
        QVERIFY(matches("root ::= \"(\" root \")\" | \"\"\n", "((()))"));
    }

    void errorsNameLineAndColumn() {
        QVERIFY(error_of("root ::= \"a\n").find("line 1, column 10") != std::string::npos);
        QVERIFY(error_of("root ::= a\n").find("rule 'a' is used but not defined") != std::string::npos);
        QVERIFY(error_of("root ::= \"a\"\nroot ::= \"b\"\n").find("line 2, column 1: rule 'root' is defined twice") != std::string::npos);
        QVERIFY(error_of("root ::= [b-a]\n").find("ends before it starts") != std::string::npos);
        QVERIFY(error_of("start ::= \"a\"\n").find("no rule 'root'") != std::string::npos);
        QVERIFY(error_of("root ::= \"a\" )\n").find("closes no group") != std::string::npos);
        QVERIFY(error_of("root ::= \"a\"{2,1}\n").find("n smaller than m") != std::string::npos);
        QVERIFY(error_of("root ::= \"a\"{99999}\n").find("above 10000") != std::string::npos);
        QVERIFY(error_of("root ::= \"\\q\"\n").find("unknown escape") != std::string::npos);
        QVERIFY(error_of("root ::= root \"a\" | \"b\"\n").find("rule 'root' can reach itself") != std::string::npos);
        QVERIFY(error_of("root ::= (\"a\"?)*\n").find("a group or repetition in rule 'root'") != std::string::npos);
        // Expanded repetitions are bounded in total.
        // Nested repetitions share their rule: small. Expanded elements are bounded in total.
        QVERIFY(error_of("root ::= ((\"a\"{10000}){10000}){10000}\n").empty());
        std::string big = "root ::=";
        for (int i = 0; i < 105; ++i) big += " \"a\"{10000}";
        QVERIFY(error_of(big + "\n").find("too large") != std::string::npos);
    }

    // From a review: names, nesting, UTF-8 and long chains.
    void hostileGrammarsAreRefusedQuickly() {
        // A rule named like a generated one neither hangs nor clashes.
        QVERIFY(matches("root ::= root-2 \"x\"*\nroot-2 ::= \"a\"\n", "axx"));
        QVERIFY(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')).find("nest more than 256") != std::string::npos);
        QVERIFY(error_of(std::string(300, 'r') + " ::= \"a\"\n").find("longer than 256") != std::string::npos);
        QVERIFY(error_of("root ::= \"\xC0\x80\"\n").find("not valid UTF-8") != std::string::npos);
        QVERIFY(error_of("root ::= \"\xED\xA0\x80\"\n").find("not valid UTF-8") != std::string::npos);
        // A long chain of rules that can be empty: linear work, then matched.
        std::string chain = "root ::= a0 \"!\"\n";
        for (int i = 0; i < 200000; ++i) ((chain += 'a') += std::to_string(i) + " ::= a") += std::to_string(i + 1) + "\n";
        chain += "a200000 ::= \"\"\n";
        QVERIFY(error_of(chain).empty());
    }

    void schemaEdgesFromAReview() {
        // Many optional properties: no generated name clashes.
        std::string props;
        for (int i = 0; i < 60; ++i) props += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\":{\"type\":\"string\"}";
        QVERIFY(schema_error("{\"type\":\"object\",\"properties\":{" + props + "}}").empty());
        // Keywords beside anyOf apply to every branch.
        const auto g = compile(json_schema_gbnf(ojson::parse(
            "{\"properties\":{\"a\":{\"type\":\"integer\"}},\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}")));
        Matcher m(g);
        QVERIFY(!m.allows("{\"a\": \"x"));
        QVERIFY(m.allows("{\"a\": 5}"));
        // A property whose schema is false is never written.
        Matcher f(compile(json_schema_gbnf(ojson::parse("{\"properties\":{\"a\":false,\"b\":{\"type\":\"null\"}}}"))));
        QVERIFY(!f.allows("{\"a\""));
        QVERIFY(f.allows("{\"b\": null}"));
        QVERIFY(schema_error("{\"properties\":{\"a\":false},\"required\":[\"a\"]}").find("schema is false") != std::string::npos);
        // Deep nesting is refused, not recursed into.
        std::string deep = "true";
        for (int i = 0; i < 300; ++i) deep = "{\"items\":" + deep + "}";
        QVERIFY(schema_error(deep).find("nest more than 128") != std::string::npos);
    }

    void ambiguityIsBounded() {
        // Each 'a' doubles the ways to read it: refused once past the limit, not exhausting memory.
        Matcher m(compile("root ::= x*\nx ::= \"a\" | \"a\" y\ny ::= \"a\"*\n"));
        bool threw = false;
        try {
            for (int i = 0; i < 64; ++i) m.accept("a");
        } catch (const GrammarError& e) {
            threw = std::string(e.what()).find("too ambiguous") != std::string::npos;
        }
        QVERIFY(threw || m.stacks() <= Matcher::kMaxStacks);
    }

    void maskEqualsTokenByTokenCheck() {
        const auto pieces = test_pieces();
        const TokenTable table(pieces);
        const auto g = compile(json_schema_gbnf(ojson::parse(
            kRaw[1])));
        std::mt19937 rng(7);
        for (int run = 0; run < 20; ++run) {
            Matcher m(g);
            std::vector<uint8_t> allowed;
            for (int step = 0; step < 40 && !m.finished(); ++step) {
                m.allowed_tokens(table.index(), allowed);
                std::vector<int32_t> ok;
                for (size_t i = 0; i < pieces.size(); ++i) {
                    const bool single = !pieces[i].empty() && m.allows(pieces[i]);
                    QCOMPARE(bool(allowed[i]), single);
                    if (single) ok.push_back(int32_t(i));
                }
                if (ok.empty()) break;
                QVERIFY(m.accept(pieces[size_t(ok[rng() % ok.size()])]));
            }
        }
    }

    void refusedTokenChangesNothing() {
        Matcher m(compile("root ::= \"ab\" \"c\"*\n"));
        QVERIFY(!m.accept("ax"));
        QVERIFY(m.accept("a"));
        QVERIFY(!m.complete());
        QVERIFY(m.accept("bcc"));
        QVERIFY(m.complete());
        QVERIFY(!m.finished());
        QVERIFY(!m.accept("d"));
        QVERIFY(m.accept("c"));
    }

    void longGenerationsStaySmall() {
        // A long string: frames are compacted, the answer does not change.
        Matcher m(compile(json_schema_gbnf(ojson::parse(kRaw[2]))));
        QVERIFY(m.accept("[\""));
        for (int i = 0; i < 200000; ++i) QVERIFY(m.accept("x"));
        QVERIFY(m.accept("\", \"y\"]"));
        QVERIFY(m.complete());
    }

    void schemasGenerateValidJson_data() {
        QTest::addColumn<QString>("schema");
        QTest::newRow("object") << kRaw[3];
        QTest::newRow("optional only") << kRaw[4];
        QTest::newRow("nested arrays") << kRaw[5];
        QTest::newRow("tuple") << kRaw[6];
        QTest::newRow("anyOf") << kRaw[7];
        QTest::newRow("refs and recursion") << kRaw[8];
        QTest::newRow("additional") << kRaw[9];
        QTest::newRow("allOf") << kRaw[10];
        QTest::newRow("any json") << kRaw[11];
        QTest::newRow("json object") << kRaw[12];
    }
    void schemasGenerateValidJson() {
        QFETCH(QString, schema);
        const ojson s = ojson::parse(schema.toStdString());
        const std::string gbnf = json_schema_gbnf(s);
        const auto g = compile(gbnf);
        const auto pieces = test_pieces();
        const TokenTable table(pieces);
        std::mt19937 rng(1234);
        int done = 0;
        for (int i = 0; i < 60; ++i) {
            const std::string text = random_text(g, table, pieces, rng);
            if (text.empty()) continue;  // ran long: try again
            ++done;
            nlohmann::json v;
            try {
                v = nlohmann::json::parse(text);
            } catch (const std::exception& e) {
                QFAIL(qPrintable(QString::fromStdString("not JSON: " + text + " (" + e.what() + ")\n" + gbnf)));
            }
            const nlohmann::json plain = nlohmann::json::parse(schema.toStdString());
            if (!valid(v, plain, plain)) QFAIL(qPrintable(QString::fromStdString("does not validate: " + text + "\n" + gbnf)));
        }
        QVERIFY2(done >= 30, qPrintable(QString("only %1 of 60 random texts ended").arg(done)));
    }

    // An additional property's key is any string but a declared one: no key twice.
    void additionalKeysNeverRepeatADeclaredOne() {
        const std::string gbnf = json_schema_gbnf(ojson::parse(kExtraKeys));
        for (const auto& [text, ok] : kExtraKeyTexts)
            QVERIFY2(matches(gbnf, text) == (ok[0] == '1'), text);
    }

    void integerRangesAreExact() {
        // Every integer in and around the bounds: accepted exactly when inside.
        for (auto [lo, hi] : std::vector<std::pair<int, int>>{{-120, -3}, {-7, 95}, {0, 0}, {5, 1005}, {99, 101}}) {
            const std::string s = "{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) + ",\"maximum\":" + std::to_string(hi) + "}";
            const auto g = compile(json_schema_gbnf(ojson::parse(s)));
            for (int x = lo - 30; x <= hi + 30; ++x) {
                Matcher m(g);
                const bool ok = m.accept(std::to_string(x)) && m.complete();
                QVERIFY2(ok == (x >= lo && x <= hi), qPrintable(QString::fromStdString(s + " " + std::to_string(x))));
            }
            Matcher m(g);
            const std::string padded = std::string(1, '0').append(std::to_string(std::abs(lo)));
            QVERIFY(!(m.accept(padded) && m.complete() && lo != 0));  // no leading zeros
        }
    }

    void unsupportedKeywordsAreNamed() {
        QVERIFY(schema_error(kRaw[13]).find("keyword 'pattern' at /") != std::string::npos);
        QVERIFY(schema_error(kRaw[14]).find("'minimum' at /properties/x") != std::string::npos);
        QVERIFY(schema_error(kRaw[15]).find("'uniqueItems'") != std::string::npos);
        QVERIFY(schema_error(kRaw[16]).find("format 'email' is not supported") != std::string::npos);
        QVERIFY(schema_error(kRaw[17]).find("'$ref'") != std::string::npos);
        QVERIFY(schema_error(kRaw[18]).find("does not point at anything") != std::string::npos);
        QVERIFY(schema_error(kRaw[19]).find("unknown type 'frog'") != std::string::npos);
        QVERIFY(schema_error(kRaw[20]).find("no integer") != std::string::npos);
        QVERIFY(schema_error(kRaw[21]).find("'false'") != std::string::npos);
        QVERIFY(schema_error(kRaw[22]).empty());
    }
};

QTEST_APPLESS_MAIN(TestGrammar)
#include "test_grammar.moc"
