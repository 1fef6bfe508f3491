#include "sched/generator.h"

#include <chrono>

#include "common/error.h"
#include "runner/context.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

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
    TokenStream stream(vocab, params, n_vocab, prompt, sink);

    GenerationResult r;
    r.prompt_tokens = static_cast<int64_t>(prompt.size());
    const auto t0 = clock::now();
    const float* logits = ctx.decode(prompt, false);
    auto t_first = clock::now();
    r.prompt_seconds = std::chrono::duration<double>(t_first - t0).count();

    for (;;) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            stream.stop(FinishReason::Cancelled);
            break;
        }
        const int32_t tok = stream.sampler().sample(logits);
        if (!stream.push(tok)) break;
        if (ctx.n_past() >= ctx.n_ctx()) {
            stream.stop(FinishReason::ContextFull);
            break;
        }
        logits = ctx.decode({&tok, 1}, false);
    }
    r.tokens = stream.tokens();
    r.text = stream.text();
    r.finish = stream.finish();
    if (const ConstraintStats* c = stream.constraint_stats()) r.constraint = *c;
    r.decode_seconds = std::chrono::duration<double>(clock::now() - t_first).count();
    return r;
}

}  // namespace strata::sched
