// The drafts of speculative decoding (sched/speculative.h): what proposes the
// tokens the target then checks in one pass.
//
// - ContextDrafter: any Context over a model with the target's vocabulary (a
//   smaller GGUF, or the target's own weights run with fewer layers or
//   experts): it decodes the accepted tokens, then its own proposals.
// - MtpDrafter: the target file's own NextN/MTP block (model::Model::nextn;
//   DeepSeek-V3, GLM-4.5, Qwen3.5), as llama.cpp's draft-mtp: the block at
//   position p reads token p and the target's hidden state at p - 1 (zeros
//   at the first position), so it catches up on what the target ran, and
//   each proposal feeds its own hidden state to the next.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runner/context.h"

namespace strata::sched {

// A recurrent model's sequence is rewound by the rejected drafts each round:
// its state keeps the last `positions` tokens' states (kv::KvCache::
// set_state_rollback), which it can be given only while empty. Throws
// strata::Error naming `who` where it is not. No effect for other models.
void allow_rewind(model::Context& ctx, int64_t positions, const char* who);

class Drafter {
public:
    virtual ~Drafter() = default;
    virtual int64_t n_vocab() const = 0;
    // A generation begins; rejected proposals will rewind the draft by up to
    // `rewind` tokens a round.
    virtual void begin(int64_t rewind) = 0;
    // Whether the target must keep its hidden states (Context::set_keep_hidden)
    // and report them with target_ran; then it computes its whole prompt
    // (no prefix reuse: the reused positions' hidden states are not kept).
    virtual bool wants_target_hidden() const { return false; }
    // The target ran n tokens at positions first .. first + n - 1 (counted
    // from where this generation began) with these hidden rows.
    virtual void target_ran(int64_t first, int64_t n, const float* hidden) {
        (void)first, (void)n, (void)hidden;
    }
    // Catches up on `seq` (everything accepted: the target holds all but its
    // last token) and returns logits for the token after it.
    virtual const float* start(std::span<const int32_t> seq) = 0;
    // After proposing `token`: logits for the one after it.
    virtual const float* next(int32_t token) = 0;
};

class ContextDrafter final : public Drafter {
public:
    // Uses the context's default sequence from its contents when a generation begins.
    explicit ContextDrafter(model::Context& draft) : draft_(draft) {}
    int64_t n_vocab() const override { return draft_.model().config().n_vocab; }
    void begin(int64_t rewind) override;
    const float* start(std::span<const int32_t> seq) override;
    const float* next(int32_t token) override;

private:
    model::Context& draft_;
    int64_t base_ = 0;  // what the draft held when the generation began
};

class MtpDrafter final : public Drafter {
public:
    // Throws strata::Error where the target's file has no NextN block.
    MtpDrafter(const model::Model& target, const model::ContextParams& params);
    int64_t n_vocab() const override { return ctx_->model().config().n_vocab; }
    void begin(int64_t rewind) override;
    bool wants_target_hidden() const override { return true; }
    void target_ran(int64_t first, int64_t n, const float* hidden) override;
    const float* start(std::span<const int32_t> seq) override;
    const float* next(int32_t token) override;
    model::Context& context() { return *ctx_; }

private:
    std::unique_ptr<model::Context> ctx_;
    int64_t d_;                    // n_embd
    std::vector<float> target_h_;  // the target's hidden row at each position
    std::vector<float> feed_h_;    // the rows a catch-up reads
    std::vector<float> own_h_;     // the block's last hidden row (the next proposal reads it)
    int64_t valid_ = 0;            // positions computed from accepted tokens and the target's rows
};

}  // namespace strata::sched
