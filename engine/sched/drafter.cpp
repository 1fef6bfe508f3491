#include "sched/drafter.h"

#include <algorithm>

#include "common/error.h"

namespace strata::sched {

void allow_rewind(model::Context& ctx, int64_t positions, const char* who) {
    kv::KvCache& kv = ctx.kv_cache();
    if (kv.params().state_floats == 0 || kv.state_rollback(ctx.default_sequence()) >= positions) return;
    if (ctx.n_past() != 0)
        throw Error(std::string(who) + " is a recurrent model holding " + std::to_string(ctx.n_past()) +
                    " tokens: speculative decoding with it starts from an empty context (clear it first)");
    kv.set_state_rollback(ctx.default_sequence(), positions);
}

void ContextDrafter::begin(int64_t rewind) {
    allow_rewind(draft_, rewind, "the draft");
    base_ = draft_.n_past();
}

const float* ContextDrafter::start(std::span<const int32_t> seq) {
    // The draft holds some prefix of seq (and the proposals after it): keep
    // what matches, feed the rest.
    const int64_t have = draft_.n_past() - base_;
    const int64_t keep = std::min<int64_t>(have, static_cast<int64_t>(seq.size()) - 1);
    draft_.truncate(base_ + keep);
    return draft_.decode(seq.subspan(static_cast<size_t>(keep)), false);
}

const float* ContextDrafter::next(int32_t token) { return draft_.decode({&token, 1}, false); }

MtpDrafter::MtpDrafter(const model::Model& target, const model::ContextParams& params) {
    const model::Model* block = target.nextn();
    if (!block)
        throw Error(target.file().path() + " has no NextN/MTP block (" + target.config().arch_name +
                    ".nextn_predict_layers and blk.N.nextn.* tensors), so --draft mtp has nothing to run; use another draft");
    model::ContextParams p = params;
    p.keep_hidden = true;
    p.max_layers = 0;
    p.n_expert_used = 0;
    p.resident_experts_only = false;
    ctx_ = std::make_unique<model::Context>(*block, p);
    d_ = block->config().n_embd;
    own_h_.resize(static_cast<size_t>(d_));
}

void MtpDrafter::begin(int64_t) {
    // Its positions count from the generation's start (the block attends to
    // this generation's tokens only), so it starts empty.
    ctx_->clear();
    valid_ = 0;
}

void MtpDrafter::target_ran(int64_t first, int64_t n, const float* hidden) {
    if (first < 0 || n <= 0 || !hidden) return;
    const size_t end = static_cast<size_t>((first + n) * d_);
    if (target_h_.size() < end) target_h_.resize(end);
    std::copy(hidden, hidden + n * d_, target_h_.begin() + first * d_);
}

const float* MtpDrafter::start(std::span<const int32_t> seq) {
    const int64_t S = static_cast<int64_t>(seq.size());
    if (S == 0) throw Error("internal: an MTP draft started from nothing");
    // Positions below valid_ read accepted tokens and the target's rows: kept.
    // The block at position p reads token p and the target's row p - 1.
    const int64_t keep = std::min<int64_t>(valid_, S - 1);
    if (static_cast<int64_t>(target_h_.size()) < (S - 1) * d_)
        throw Error("internal: the MTP draft lacks the target's hidden states up to position " + std::to_string(S - 2));
    ctx_->truncate(keep);
    const int64_t n = S - keep;
    feed_h_.assign(static_cast<size_t>(n * d_), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t p = keep + i;
        if (p > 0) std::copy_n(target_h_.begin() + (p - 1) * d_, d_, feed_h_.begin() + i * d_);
    }
    const float* logits = ctx_->decode(seq.subspan(static_cast<size_t>(keep)), feed_h_.data(), false);
    std::copy_n(ctx_->hidden() + (n - 1) * d_, d_, own_h_.begin());
    valid_ = S;
    return logits;
}

const float* MtpDrafter::next(int32_t token) {
    const float* logits = ctx_->decode({&token, 1}, own_h_.data(), false);
    std::copy_n(ctx_->hidden(), d_, own_h_.begin());
    return logits;
}

}  // namespace strata::sched
