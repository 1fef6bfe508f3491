// A conversation's prompt tokens (chat/prompt.h), the one preparation the app,
// the HTTP server and strata-cli use: the template rendered and tokenized as
// chat_template.h says (one BOS, markers as single tokens), the app's policy
// leaving out the oldest exchanges (never the system prompt or the last user
// turn) and the API's refusing instead, each refusal naming its cause.
#include <QtTest>

#include "chat/prompt.h"
#include "gguf/gguf.h"
#include "test_support.h"
#include "tokenizer/vocab.h"

using namespace strata;
using chat::Message;
using chat::PromptError;

namespace {

const std::vector<Message> kTalk = {
    {"system", "You answer in one line."},
    {"user", "Who begat Enoch?"},
    {"assistant", "Cain begat Enoch."},
    {"user", "And who begat Irad?"},
    {"assistant", "Enoch begat Irad."},
    {"user", "And Mehujael?"},
};

struct Phi3 {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<tok::Vocab> vocab;
    chat::ChatTemplate tmpl = chat::ChatTemplate::of(chat::Family::Fallback);
};

Phi3 phi3() {
    Phi3 p;
    p.file = gguf::File::open(test::fixture_path("tokenizers/ggml-vocab-phi-3.gguf"));
    p.vocab = tok::Vocab::from_gguf(*p.file);
    p.tmpl = chat::ChatTemplate::detect(p.file->get_string_or("tokenizer.chat_template", ""),
                                        p.vocab->token_text(p.vocab->bos()), p.vocab->token_text(p.vocab->eos()));
    return p;
}

}  // namespace

class TestPrompt : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void tokens_are_the_rendered_template_with_one_bos() {
        STRATA_REQUIRE_FIXTURES();
        const Phi3 p = phi3();
        const chat::Prompt got = chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {4096, false, 1});
        QVERIFY(got.tokens == p.vocab->encode(p.tmpl.render(kTalk, true), true, true));
        QCOMPARE(std::count(got.tokens.begin(), got.tokens.end(), p.vocab->bos()), p.vocab->add_bos() ? 1 : 0);
        QVERIFY(got.stop == p.tmpl.stop_strings());
        QCOMPARE(got.dropped_messages, 0);
        // The app's policy changes nothing when everything fits.
        QVERIFY(chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {4096, true, 256}).tokens == got.tokens);
    }

    void the_app_leaves_out_the_oldest_exchanges() {
        STRATA_REQUIRE_FIXTURES();
        const Phi3 p = phi3();
        const auto whole = int64_t(chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {4096, false, 1}).tokens.size());
        // Room for all but the first exchange: that one (user + assistant) goes.
        const std::vector<Message> shorter = {kTalk[0], kTalk[3], kTalk[4], kTalk[5]};
        const auto n_shorter = int64_t(chat::prepare_prompt(shorter, p.tmpl, *p.vocab, {4096, false, 1}).tokens.size());
        const int64_t room = 8;
        const chat::Prompt got = chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {n_shorter + room, true, room});
        QCOMPARE(got.dropped_messages, 2);
        QVERIFY(got.tokens == chat::prepare_prompt(shorter, p.tmpl, *p.vocab, {4096, false, 1}).tokens);
        QVERIFY(int64_t(got.tokens.size()) < whole);
        // Even with no room at all, the system prompt and the last user turn stay.
        const std::vector<Message> last = {kTalk[0], kTalk[5]};
        const auto n_last = int64_t(chat::prepare_prompt(last, p.tmpl, *p.vocab, {4096, false, 1}).tokens.size());
        const chat::Prompt tight = chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {n_last + 1, true, 1000});
        QCOMPARE(tight.dropped_messages, 4);
        QVERIFY(tight.tokens == chat::prepare_prompt(last, p.tmpl, *p.vocab, {4096, false, 1}).tokens);
    }

    void what_cannot_be_a_prompt_is_refused_saying_why() {
        STRATA_REQUIRE_FIXTURES();
        const Phi3 p = phi3();
        const auto n = int64_t(chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {4096, false, 1}).tokens.size());
        // Too long for the API (nothing dropped), and for the app once only the last turn is left.
        for (bool drop : {false, true}) {
            try {
                (void)chat::prepare_prompt(drop ? std::vector<Message>{kTalk[5]} : kTalk, p.tmpl, *p.vocab, {4, drop, 1});
                QFAIL("a prompt over the context was accepted");
            } catch (const PromptError& e) {
                QCOMPARE(e.kind(), PromptError::Kind::TooLong);
                QVERIFY(e.n_tokens() >= 4);
                QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("context holds 4")), e.what());
            }
        }
        // Exactly one token of room left: accepted.
        QCOMPARE(int64_t(chat::prepare_prompt(kTalk, p.tmpl, *p.vocab, {n + 1, false, 1}).tokens.size()), n);
        // A conversation the template refuses (a system message after a turn).
        try {
            (void)chat::prepare_prompt({{"user", "a"}, {"system", "b"}}, p.tmpl, *p.vocab, {4096, false, 1});
            QFAIL("a misplaced system message was accepted");
        } catch (const PromptError& e) {
            QCOMPARE(e.kind(), PromptError::Kind::Template);
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("system")), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestPrompt)
#include "test_prompt.moc"
