#include "sched/embedding.h"

#include <cmath>

#include "common/error.h"
#include "runner/context.h"

namespace strata::sched {

std::vector<float> embed(model::Context& ctx, std::span<const int32_t> tokens) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) throw Error("nothing to embed: the input has no tokens");
    if (n > ctx.n_ctx())
        throw Error("the input has " + std::to_string(n) + " tokens but the context holds " + std::to_string(ctx.n_ctx()) +
                    "; shorten it");
    kv::KvCache& kv = ctx.kv_cache();
    const kv::SeqId s = kv.create_sequence(n);
    struct Release {
        model::Context& c;
        kv::SeqId s;
        ~Release() {
            c.set_keep_hidden(false);
            c.kv_cache().free_sequence(s);
        }
    } release{ctx, s};
    const std::vector<kv::SeqId> seqs(static_cast<size_t>(n), s);
    const std::vector<uint8_t> no_logits(static_cast<size_t>(n), 0);  // the hidden rows alone: no output head
    ctx.set_keep_hidden(true);
    ctx.decode_batch(tokens, seqs, no_logits);
    const int64_t d = ctx.model().config().n_embd;
    std::vector<double> sum(static_cast<size_t>(d), 0.0);
    const float* h = ctx.hidden();
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < d; ++i) sum[static_cast<size_t>(i)] += h[t * d + i];
    double norm = 0.0;
    for (double& x : sum) {
        x /= static_cast<double>(n);
        norm += x * x;
    }
    norm = std::sqrt(norm);
    std::vector<float> out(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) out[static_cast<size_t>(i)] = static_cast<float>(norm > 0 ? sum[static_cast<size_t>(i)] / norm : 0.0);
    return out;
}

}  // namespace strata::sched
