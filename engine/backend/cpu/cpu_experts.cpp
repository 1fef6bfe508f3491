// The CPU backend's routed experts (backend/cpu/cpu_backend.h): one expert at a
// time with its rows shared out, the ready experts together in two regions,
// or each expert's whole FFN on one thread.
#include <algorithm>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/ref/ops_ref.h"
#include "backend/cpu/cpu_backend.h"
#include "model/expert_provider.h"

namespace strata::model {

namespace ops = kernels::ops;

namespace {
// Whether two matrices have the same type, shape and row stride.
bool same_shape(const Matrix& a, const Matrix& b) {
    return a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes;
}
}  // namespace

void CpuBackend::experts_each(const LayerWeights& L, int64_t n, bool weight_before) {
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    FfnMatrices mats;
    for (int32_t e; (e = provider_->take(L.index, &mats)) >= 0;) {
        const int64_t m = expert_count_[e];
        const int32_t* slots = expert_tokens_.data() + expert_offset_[e];
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / U;
            std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + i * d);
            if (weight_before) kernels::ref::scale_rows(xe_.data() + i * d, d, &route_w_[static_cast<size_t>(slots[i])], 1, d);
        }
        observed_expert_ = e;
        const ExpertBias bias = expert_bias(L, e);
        ffn(mats, xe_.data(), m, ye_.data(), L.n_ff_expert, bias.gate ? &bias : nullptr);
        observed_expert_ = -1;
        provider_->release(L.index, e);
        for (int64_t i = 0; i < m; ++i)
            std::copy(ye_.begin() + i * d, ye_.begin() + (i + 1) * d, expert_out_.begin() + slots[i] * d);
    }
    (void)n;
}

void CpuBackend::experts_small(const LayerWeights& L, int64_t n) {
    // The experts that are ready go together: their gate/up rows in one
    // parallel region, their down rows in another, so two threads share a
    // layer's few small products instead of splitting each one. A token's
    // rows are computed as ffn_dense computes them (bit for bit).
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    const int64_t ff = L.n_ff_expert;
    FfnMatrices mats;
    for (int32_t e; (e = provider_->take(L.index, &mats)) >= 0;) {
        ready_.clear();
        int64_t rows = 0;
        ready_.push_back({e, mats, rows});
        rows += expert_count_[e];
        for (int32_t f; (f = provider_->take_if_ready(L.index, &mats)) >= 0;) {
            ready_.push_back({f, mats, rows});
            rows += expert_count_[f];
        }
        if (experts_fused(L, n)) continue;
        batch_.clear();
        for (const ReadyExpert& r : ready_) {
            const int64_t m = expert_count_[r.e];
            const float* X = h_.data();  // every token routed here: its rows are h_ itself
            if (m != n) {
                const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
                for (int64_t i = 0; i < m; ++i) {
                    const int64_t t = slots[i] / U;
                    std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + (r.base + i) * d);
                }
                X = xe_.data() + r.base * d;
            }
            batch_.push_back({&r.mats.gate, X, m, ge_.data() + r.base * ff});
            batch_.push_back({&r.mats.up, X, m, ue_.data() + r.base * ff});
        }
        matmul_batch();
        ops::swiglu(ge_.data(), ue_.data(), ge_.data(), rows * ff);
        batch_.clear();
        for (const ReadyExpert& r : ready_)
            batch_.push_back({&r.mats.down, ge_.data() + r.base * ff, expert_count_[r.e], ye_.data() + r.base * d});
        matmul_batch();
        for (const ReadyExpert& r : ready_) {
            provider_->release(L.index, r.e);
            const int64_t m = expert_count_[r.e];
            const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
            for (int64_t i = 0; i < m; ++i)
                std::copy(ye_.begin() + (r.base + i) * d, ye_.begin() + (r.base + i + 1) * d,
                          expert_out_.begin() + slots[i] * d);
        }
    }
}

// One expert's whole FFN per thread (gate, up, SiLU*mul, down), when the
// ready experts split evenly over the threads: as many tokens each, a
// multiple of the thread count. Decode is that case (one token, top-k
// experts), and there it saves the barrier between gate/up and down and the
// serial SiLU between them, 12 regions a token on a 12-layer model, and each
// thread streams whole experts. From kFusedAnyCountsTokens tokens on
// (prefill) the experts may have any token counts: the threads claim them
// biggest first, and the down rows shared at the end even out the rest
// (64-token prefill of the 1.2B make-model, 2 threads, in-process A/B
// against the two-region path per expert, 15 rounds: +7% Q8_0, +8% Q4_0,
// and biggest first a further +2% and +6%; both against the code before,
// 20 rounds: +4% and +10%). Each row is computed as in the
// two-region path (gemm_q is batch-invariant; swiglu is element-wise), so
// the results are the same bits. False: not this case, nothing done.
bool CpuBackend::experts_fused(const LayerWeights& L, int64_t n) {
    const int64_t k = static_cast<int64_t>(ready_.size());
    const int64_t threads = pool_->size();
    if (threads < 2) return false;
    if (n < kFusedAnyCountsTokens) {
        if (k % threads != 0) return false;
        for (const ReadyExpert& r : ready_)
            if (expert_count_[r.e] != expert_count_[ready_[0].e]) return false;
    } else {
        // Biggest first (the threads claim experts in this order), so the
        // last ones claimed are small and the threads end close together.
        std::stable_sort(ready_.begin(), ready_.end(),
                         [&](const ReadyExpert& a, const ReadyExpert& b) { return expert_count_[a.e] > expert_count_[b.e]; });
    }
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    // An expert with one token writes its down rows straight into that
    // token's row of expert_out_ (decode: no copy after the region); with
    // more, into ye_, copied out after the region.
    for (ReadyExpert& r : ready_)
        r.out = expert_count_[r.e] == 1 ? expert_out_.data() + expert_tokens_[expert_offset_[r.e]] * d : ye_.data() + r.base * d;
    // Each expert's rows of xe_ (its tokens), as the two-region path gathers them.
    for (const ReadyExpert& r : ready_) {
        const int64_t m = expert_count_[r.e];
        if (m == n) continue;
        const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / U;
            std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + (r.base + i) * d);
        }
    }
    const int64_t ff = L.n_ff_expert;
    // Per expert: its quantized inputs (m rows, at most 2 bytes an element)
    // in its own part of act_scratch_, which holds n_batch rows of the widest
    // matrix in floats; the small path has at most n_batch expert rows.
    const auto act_per_row = static_cast<uint64_t>(2 * std::max(d, ff));
    // Each thread owns whole experts (gate, up, SiLU*mul, then its down rows
    // from the front); a thread with no expert left takes down rows of the
    // others from the back, so the threads finish within a chunk of each
    // other instead of within an expert. (Measured on the 1.2B q4_0 model:
    // the main thread's wait at the end of this region fell from 26-32 to
    // 2-5 Mcycles per 160 tokens, and decode was ahead in 3 of 3 pairs.)
    const int64_t n_chunks = (d + kDownChunkRows - 1) / kDownChunkRows;
    for (int64_t i = 0; i < k; ++i) {
        down_ready_[i].store(0, std::memory_order_relaxed);
        down_chunks_[i].store(cpu::pack_range(0, n_chunks), std::memory_order_relaxed);
    }
    std::atomic<int64_t> next_owner{0};
    pool_->parallel_for(threads, 1, [&](int64_t, int64_t, int) {
        for (int64_t i; (i = next_owner.fetch_add(1, std::memory_order_relaxed)) < k;) {
            const ReadyExpert& r = ready_[static_cast<size_t>(i)];
            uint8_t* act = act_scratch_.data() + static_cast<uint64_t>(r.base) * act_per_row;
            expert_up_on_one_thread(r, n, ff, act);
            down_ready_[i].store(1, std::memory_order_release);
            for (Chunks c; (c = take_down_chunks(i, true)).begin < c.end;) expert_down_rows(r, ff, act, c.begin, c.end);
        }
        for (int64_t i = 0; i < k; ++i) {  // help with the others' down rows
            if (!down_left(i)) continue;
            wait_until([&] { return down_ready_[i].load(std::memory_order_acquire) != 0; });
            const ReadyExpert& r = ready_[static_cast<size_t>(i)];
            uint8_t* act = act_scratch_.data() + static_cast<uint64_t>(r.base) * act_per_row;
            for (Chunks c; (c = take_down_chunks(i, false)).begin < c.end;) expert_down_rows(r, ff, act, c.begin, c.end);
        }
    });
    for (const ReadyExpert& r : ready_) {
        provider_->release(L.index, r.e);
        const int64_t m = expert_count_[r.e];
        if (m == 1) continue;  // written in place
        const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
        for (int64_t i = 0; i < m; ++i)
            std::copy(ye_.begin() + (r.base + i) * d, ye_.begin() + (r.base + i + 1) * d, expert_out_.begin() + slots[i] * d);
    }
    return true;
}

// Gate and up, SiLU*mul, and the down projection's input quantized into act.
void CpuBackend::expert_up_on_one_thread(const ReadyExpert& r, int64_t n, int64_t ff, uint8_t* act) {
    const int64_t d = cfg_.n_embd;
    const int64_t m = expert_count_[r.e];
    const float* X = m == n ? h_.data() : xe_.data() + r.base * d;  // every token routed here: its rows are h_ itself
    float* g = ge_.data() + r.base * ff;
    float* u = ue_.data() + r.base * ff;
    const Matrix &gate = r.mats.gate, &up = r.mats.up;
    // No burst of prefetches here for up's and down's first 8 KiB (as there
    // was): 256 of them at the expert's start held the core's line-fill
    // buffers while its gate stream should start, and the lines were asked
    // ~15 us before use. Without it, host at 70-80 GB/s: decode 5% faster
    // (median of 12 alternating pairs, 10 ahead); slow host: the same.
    quantize_for(gate, X, m, act);
    if (m == 1 && same_shape(gate, up) && gate.type != kernels::WeightType::F32) {
        // One token (decode): gate's and up's rows together, two streams of
        // memory per core instead of one, the activations loaded once for
        // both (kernels::gemm_q_once_pair; the same bits). 1.2B make-model, 2 threads, in-process A/B (blocks of 16
        // tokens alternating, 40 rounds): decode Q4_0 +1.3% and +5.9% in two
        // runs (25 and 34 ahead), Q8_0 +4.3% (32 ahead).
        profiled(DecodeProfile::QuantWeights, 2 * static_cast<uint64_t>(gate.rows) * gate.row_bytes, [&] {
            kernels::gemm_q_once_pair(gate.type, gate.data, up.data, gate.row_bytes, gate.rows, act, gate.cols, g, u);
        });
    } else {
        rows_product(gate, X, act, m, 0, gate.rows, g, true);
        if (up.type != gate.type) quantize_for(up, X, m, act);  // the same activation rows otherwise
        rows_product(up, X, act, m, 0, up.rows, u, true);
    }
    ops::swiglu(g, u, g, m * ff);
    quantize_for(r.mats.down, g, m, act);
}

// Down rows of chunks [c0, c1) of expert r for all its tokens, from the input in act.
void CpuBackend::expert_down_rows(const ReadyExpert& r, int64_t ff, const uint8_t* act, int64_t c0, int64_t c1) {
    const Matrix& W = r.mats.down;
    const int64_t r0 = c0 * kDownChunkRows;
    rows_product(W, ge_.data() + r.base * ff, act, expert_count_[r.e], r0, std::min(W.rows, c1 * kDownChunkRows), r.out,
                 true);
}

// Chunks of expert i's down rows: for its owner (front) half of those left,
// at least one, so it streams long runs while a helper is still far away;
// for a helper (back) one chunk. Empty when none is left. The owner's runs
// shrink as the helper closes in, so the two still end within a chunk of
// each other. (One chunk per call before: the owner's 16 calls and stream
// starts per expert made its down rows ~10% slower than its gate rows.)
CpuBackend::Chunks CpuBackend::take_down_chunks(int64_t i, bool front) {
    Chunks c;
    const auto want = [front](int64_t left) { return front ? left / 2 : 1; };  // at least one (take_from_range)
    if (!cpu::take_from_range(down_chunks_[i], front, want, &c.begin, &c.end)) return {};
    return c;
}

// Whether any of expert i's down rows are still untaken.
bool CpuBackend::down_left(int64_t i) const { return !cpu::range_empty(down_chunks_[i].load(std::memory_order_relaxed)); }

}  // namespace strata::model
