// Grammar-constrained generation with the demo model: its replies follow
// the schema whatever the sampling, through the one-sequence generator and
// through the batching scheduler, and a grammar that cannot go on ends the
// reply without waiting for an end-of-generation token.
#include <QtTest>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context_params.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "kv/kv_cache.h"
#include "runner/context.h"
#include "model/model.h"
#include "sched/generator.h"
#include "sched/scheduler.h"
#include "sched/token_stream.h"
#include "tokenizer/vocab.h"
#include "test_support.h"

using namespace strata;

namespace {

std::shared_ptr<const grammar::Grammar> schema_grammar(const char* schema) {
    return std::make_shared<const grammar::Grammar>(
        grammar::Grammar::parse(grammar::json_schema_gbnf(nlohmann::ordered_json::parse(schema))));
}

// The person schema's demands, checked directly.
bool valid_person(const std::string& text, std::string* why) {
    nlohmann::json v;
    try {
        v = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
        *why = std::string("not JSON: ") + e.what();
        return false;
    }
    const bool ok = v.is_object() && v.size() == 3 && v["name"].is_string() && v["name"].get<std::string>().size() <= 4 * 12 &&
                    v["age"].is_number_integer() && v["age"].get<int64_t>() >= 0 && v["age"].get<int64_t>() <= 120 &&
                    v["tags"].is_array() && v["tags"].size() <= 2;
    if (!ok) *why = "does not follow the schema";
    return ok;
}

const char* kPerson =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":2}},"
    "\"required\":[\"name\",\"age\",\"tags\"],\"additionalProperties\":false}";

}  // namespace

class TestConstrainedGeneration : public QObject {
    Q_OBJECT
    std::unique_ptr<model::Model> m_;

private Q_SLOTS:
    void initTestCase() { m_ = model::Model::load(test::demo_model_path()); }

    void generatorFollowsTheSchema() {
        model::Context ctx(*m_, test::context_params(512, 64, 2));
        const auto prompt = m_->vocab().encode("And God said", true);
        for (float temp : {0.f, 0.8f, 1.5f}) {
            for (uint64_t seed = 1; seed <= 3; ++seed) {
                sched::SamplingParams p;
                p.temperature = temp;
                p.seed = seed;
                p.max_tokens = 300;
                p.grammar = schema_grammar(kPerson);
                ctx.clear();
                const sched::GenerationResult r = sched::generate(ctx, m_->vocab(), p, prompt);
                std::string why;
                QVERIFY2(valid_person(r.text, &why), qPrintable(QString::fromStdString(why + ": " + r.text)));
                QVERIFY(r.finish == sched::FinishReason::EndOfGeneration);
                QVERIFY(r.constraint.has_value());
                // Every token went through the constraint (and the end token, when one was drawn).
                QVERIFY(r.constraint->tokens - int64_t(r.tokens.size()) == 0 || r.constraint->tokens - int64_t(r.tokens.size()) == 1);
                if (temp == 0.f) break;  // greedy: the seed changes nothing
            }
        }
    }

    // A grammar that is complete and closed ends the reply there (the demo
    // model would rarely choose its end token).
    void aClosedGrammarEndsTheReply() {
        model::Context ctx(*m_, test::context_params(256, 64, 2));
        sched::SamplingParams p;
        p.temperature = 0.f;
        p.max_tokens = 100;
        p.grammar = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse("root ::= \"[\" [a-z ]{1,20} \"]\"\n"));
        const auto r = sched::generate(ctx, m_->vocab(), p, m_->vocab().encode("In the beginning", true));
        QVERIFY2(r.text.size() >= 3 && r.text.front() == '[' && r.text.back() == ']', r.text.c_str());
        QVERIFY(r.finish == sched::FinishReason::EndOfGeneration);
    }

    // Batched requests, each with its own schema or none, do not disturb each other.
    void schedulerKeepsEachRequestsGrammar() {
        model::ContextParams cp = test::context_params(512, 256, 2);
        kv::KvCache kvc(model::kv_cache_params(m_->config(), 16 * 32));
        model::Context ctx(*m_, cp, nullptr, nullptr, &kvc);
        sched::Scheduler s(ctx, m_->vocab(), sched::SchedulerConfig{});
        const auto numbers = schema_grammar("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-9,\"maximum\":9},\"minItems\":3,\"maxItems\":3}");
        std::map<int64_t, sched::RequestResult> got;
        std::map<int64_t, int> kind;
        for (int i = 0; i < 6; ++i) {
            sched::SamplingParams p;
            p.temperature = 1.f;
            p.seed = uint64_t(i);
            p.max_tokens = 200;
            if (i % 3 == 0) p.grammar = schema_grammar(kPerson);
            if (i % 3 == 1) p.grammar = numbers;
            const int64_t id = s.submit(m_->vocab().encode("Then " + std::to_string(i), true), p, 0, {},
                                        [&](const sched::RequestResult& r) { got[r.id] = r; });
            kind[id] = i % 3;
        }
        s.run();
        QCOMPARE(got.size(), size_t(6));
        for (const auto& [id, r] : got) {
            std::string why;
            if (kind[id] == 0) QVERIFY2(valid_person(r.text, &why), qPrintable(QString::fromStdString(why + ": " + r.text)));
            if (kind[id] == 1) {
                const auto v = nlohmann::json::parse(r.text);
                QVERIFY2(v.is_array() && v.size() == 3, r.text.c_str());
                for (const auto& x : v) QVERIFY(x.is_number_integer() && x.get<int>() >= -9 && x.get<int>() <= 9);
            }
            if (kind[id] == 2) QVERIFY(r.tokens.size() > 0);
        }
    }

    // A control token the request asks to see (a tool-call marker such as
    // Mistral's [TOOL_CALLS]) is text in the reply and may be used by the grammar.
    void controlMarkersAreTextWhenAsked() {
        const tok::Vocab& v = m_->vocab();
        int32_t id = -1;
        for (int32_t t = 0; t < v.n_tokens() && id < 0; ++t)
            if (v.is_control(t) && !v.is_end_of_generation(t) && !v.token_to_piece(t, true).empty()) id = t;
        QVERIFY(id >= 0);
        const std::string text = v.token_to_piece(id, true);
        auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse("root ::= " + grammar::gbnf_literal(text) + " [a-z]+\n"));
        sched::GrammarConstraint plain(g, v);
        QVERIFY(!plain.allows(id));
        sched::GrammarConstraint marked(g, v, {id});
        QVERIFY(marked.allows(id));
        std::vector<uint8_t> allowed;
        marked.allowed(allowed);
        QVERIFY(allowed[size_t(id)]);
        marked.accept(id);
        QVERIFY(!marked.allows(id));
        sched::SamplingParams p;
        p.render_tokens = {id};
        sched::TokenStream shown(v, p, int32_t(v.n_tokens()), {});
        shown.push(id);
        QCOMPARE(shown.text(), text);
        sched::TokenStream hidden(v, sched::SamplingParams{}, int32_t(v.n_tokens()), {});
        hidden.push(id);
        QCOMPARE(hidden.text(), std::string());
    }

    // A grammar that fails mid-reply (here: twice as many ways to read it
    // with every 'a', past the matcher's limit) ends its own request with the
    // reason; the request batched with it finishes as if alone.
    void aFailingGrammarEndsOnlyItsRequest() {
        kv::KvCache kvc(model::kv_cache_params(m_->config(), 16 * 32));
        model::Context ctx(*m_, test::context_params(512, 256, 2), nullptr, nullptr, &kvc);
        sched::Scheduler s(ctx, m_->vocab(), sched::SchedulerConfig{});
        sched::SamplingParams bad;
        bad.max_tokens = 100;
        bad.grammar = std::make_shared<const grammar::Grammar>(
            grammar::Grammar::parse("root ::= \"a\" root \"b\" | \"a\" root \"c\"\n"));
        sched::SamplingParams plain;
        plain.temperature = 0.f;
        plain.max_tokens = 20;
        std::map<int64_t, sched::RequestResult> got;
        auto done = [&](const sched::RequestResult& r) { got[r.id] = r; };
        const auto prompt = m_->vocab().encode("And", true);
        const int64_t a = s.submit(prompt, bad, 0, {}, done);
        const int64_t b = s.submit(prompt, plain, 0, {}, done);
        s.run();
        QVERIFY2(got[a].error.find("too ambiguous") != std::string::npos, got[a].error.c_str());
        QVERIFY(got[b].error.empty());
        model::Context solo(*m_, test::context_params(512, 64, 2));
        QCOMPARE(got[b].tokens, sched::generate(solo, m_->vocab(), plain, prompt).tokens);
    }
};

QTEST_GUILESS_MAIN(TestConstrainedGeneration)
#include "test_constrained_generation.moc"
