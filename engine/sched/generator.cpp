#include "sched/generator.h"

#include <chrono>

#include "common/error.h"
#include "model/context.h"
#include "sched/stop_strings.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::EndOfGeneration: return "eos";
        case FinishReason::StopString: return "stop";
        case FinishReason::MaxTokens: return "length";
        case FinishReason::ContextFull: return "context";
        case FinishReason::Cancelled: return "cancelled";
    }
    return "?";
}

GenerationResult generate(model::Context& ctx, const tok::Vocab& vocab, const SamplingParams& params,
                          const std::vector<int32_t>& prompt, const TextSink& sink,
                          const std::atomic<bool>* cancel) {
    using clock = std::chrono::steady_clock;
    if (prompt.empty()) throw Error("the prompt is empty: nothing to generate from");
    if (ctx.n_past() + static_cast<int64_t>(prompt.size()) >= ctx.n_ctx()) {
        throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                    std::to_string(ctx.n_ctx()) + " (" + std::to_string(ctx.n_past()) +
                    " already used); shorten the prompt or raise the context size");
    }
    const int32_t n_vocab = static_cast<int32_t>(ctx.model().config().n_vocab);
    Sampler sampler(params, n_vocab);
    for (int32_t t : prompt) sampler.accept(t);
    StopMatcher stops(params.stop);
    tok::StreamDecoder decoder(vocab);

    GenerationResult r;
    r.prompt_tokens = static_cast<int64_t>(prompt.size());
    bool keep_going = true;
    auto emit = [&](const std::string& text) {
        if (text.empty()) return;
        r.text += text;
        if (sink && !sink(text)) keep_going = false;
    };

    const auto t0 = clock::now();
    const float* logits = ctx.decode(prompt, false);
    auto t_first = clock::now();
    r.prompt_seconds = std::chrono::duration<double>(t_first - t0).count();

    for (;;) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            r.finish = FinishReason::Cancelled;
            break;
        }
        const int32_t tok = sampler.sample(logits);
        if (vocab.is_end_of_generation(tok)) {
            r.finish = FinishReason::EndOfGeneration;
            break;
        }
        r.tokens.push_back(tok);
        sampler.accept(tok);
        const auto res = stops.push(decoder.push(tok));
        emit(res.text);
        if (res.stopped) {
            r.finish = FinishReason::StopString;
            break;
        }
        if (!keep_going) {
            r.finish = FinishReason::Cancelled;
            break;
        }
        if (static_cast<int32_t>(r.tokens.size()) >= params.max_tokens) {
            r.finish = FinishReason::MaxTokens;
            break;
        }
        if (ctx.n_past() >= ctx.n_ctx()) {
            r.finish = FinishReason::ContextFull;
            break;
        }
        logits = ctx.decode({&tok, 1}, false);
    }
    if (r.finish != FinishReason::StopString) {
        auto res = stops.push(decoder.flush());
        emit(res.text);
        emit(stops.flush());
    }
    r.decode_seconds = std::chrono::duration<double>(clock::now() - t_first).count();
    return r;
}

}  // namespace strata::sched
