#include "sched/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.h"
#include "runner/context.h"
#include "sched/drafter.h"
#include "tokenizer/vocab.h"

namespace strata::sched {

std::string SpeculativeParams::validate() const {
    if (k_min < 1 || k_max > 64 || k_min > k_max)
        return "speculative k range " + std::to_string(k_min) + ".." + std::to_string(k_max) + " is invalid (1 <= k_min <= k_max <= 64)";
    if (k < k_min || k > k_max)
        return "speculative k " + std::to_string(k) + " is outside " + std::to_string(k_min) + ".." + std::to_string(k_max);
    if (!(p_min >= 0.0f && p_min <= 1.0f)) return "speculative p_min " + std::to_string(p_min) + " is outside 0..1";
    return "";
}

double SpeculativeStats::tokens_per_round() const { return rounds > 0 ? static_cast<double>(generated) / rounds : 0.0; }

std::string vocab_mismatch(const tok::Vocab& a, const tok::Vocab& b) {
    if (a.n_tokens() != b.n_tokens())
        return "the vocabularies differ in size (" + std::to_string(a.n_tokens()) + " vs " + std::to_string(b.n_tokens()) + " tokens)";
    for (int32_t i = 0; i < a.n_tokens(); ++i)
        if (a.token_text(i) != b.token_text(i)) return "the vocabularies differ at token " + std::to_string(i);
    return "";
}

namespace {

// The softmax's largest probability of a row of logits.
float top_probability(const float* logits, int32_t n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    return static_cast<float>(1.0 / sum);
}

// The draft's sampler: the target's filters and temperature without the
// penalties (their window would have to be rolled back after rejections; the
// rejection rule is exact for any draft distribution).
SamplingParams draft_params(const SamplingParams& p) {
    SamplingParams d = p;
    d.repeat_penalty = 1.0f;
    d.presence_penalty = 0.0f;
    d.frequency_penalty = 0.0f;
    d.stop.clear();
    d.seed = p.seed ^ 0x5bd1e995u;
    return d;
}

}  // namespace

GenerationResult generate_speculative(model::Context& target, model::Context& draft, const tok::Vocab& vocab,
                                      const SamplingParams& params, const std::vector<int32_t>& prompt,
                                      const SpeculativeParams& spec, SpeculativeStats* stats_out,
                                      const TextSink& sink, const std::atomic<bool>* cancel) {
    ContextDrafter d(draft);
    return generate_speculative(target, d, vocab, params, prompt, spec, stats_out, sink, cancel);
}

GenerationResult generate_speculative(model::Context& target, Drafter& draft, const tok::Vocab& vocab,
                                      const SamplingParams& params, const std::vector<int32_t>& prompt,
                                      const SpeculativeParams& spec, SpeculativeStats* stats_out,
                                      const TextSink& sink, const std::atomic<bool>* cancel) {
    using clock = std::chrono::steady_clock;
    if (const std::string err = spec.validate(); !err.empty()) throw Error(err);
    if (target.model().config().n_vocab != draft.n_vocab())
        throw Error("the draft model's vocabulary (" + std::to_string(draft.n_vocab()) +
                    " tokens) differs from the target's (" + std::to_string(target.model().config().n_vocab) + ")");
    if (prompt.empty()) throw Error("the prompt is empty: nothing to generate from");
    if (target.n_past() + static_cast<int64_t>(prompt.size()) >= target.n_ctx()) {
        throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                    std::to_string(target.n_ctx()) + "; shorten the prompt or raise the context size");
    }
    // Rejected drafts rewind the target (and the draft) by up to k_max tokens each round.
    allow_rewind(target, spec.k_max, "the model");
    draft.begin(spec.k_max);
    const bool hidden = draft.wants_target_hidden();
    target.set_keep_hidden(hidden);
    struct KeepHiddenOff {
        model::Context& c;
        ~KeepHiddenOff() { c.set_keep_hidden(false); }
    } keep_hidden_off{target};
    const int32_t n_vocab = static_cast<int32_t>(target.model().config().n_vocab);
    TokenStream stream(vocab, params, n_vocab, prompt, sink);
    Sampler& ts = stream.sampler();
    Sampler ds(draft_params(params), n_vocab);
    const bool greedy = params.greedy();
    SpeculativeStats st;

    // `seq`: everything accepted so far. The target holds all of it but the
    // last token; the draft holds some prefix of it.
    std::vector<int32_t> seq(prompt.begin(), prompt.end());
    const int64_t base_t = target.n_past();

    GenerationResult r;
    r.prompt_tokens = static_cast<int64_t>(prompt.size());
    const auto t0 = clock::now();
    // An empty target starts from the KV blocks an earlier request left with
    // the same leading tokens (a chat's system prompt and earlier turns); the
    // draft, small, computes its prompt itself. (Not for a draft that reads
    // the target's hidden states: the reused positions' are not kept.)
    if (target.n_past() == 0 && !hidden)
        r.prefix_reused = target.kv_cache().attach_prefix(target.default_sequence(), prompt);
    const float* logits = target.decode(std::span<const int32_t>(prompt).subspan(static_cast<size_t>(r.prefix_reused)), false);
    if (hidden) draft.target_ran(0, static_cast<int64_t>(prompt.size()), target.hidden());
    int32_t last = ts.sample(logits);
    const auto t_first = clock::now();
    r.prompt_seconds = std::chrono::duration<double>(t_first - t0).count();
    bool going = stream.push(last);
    if (going) seq.push_back(last);

    std::vector<float> q_probs, p_probs(static_cast<size_t>(n_vocab)), resid(static_cast<size_t>(n_vocab));
    std::vector<int32_t> drafted, verify;
    int k = spec.k;
    while (going) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            stream.stop(FinishReason::Cancelled);
            break;
        }
        const int64_t held = base_t + static_cast<int64_t>(seq.size()) - 1;  // target holds seq minus `last`
        const int k_room = static_cast<int>(std::min<int64_t>(k, target.n_ctx() - held - 1));
        if (held + 1 > target.n_ctx()) {
            stream.stop(FinishReason::ContextFull);
            break;
        }
        // 1. Draft up to k_room tokens: catch the draft up on the accepted
        // sequence, then propose while it is confident enough (p_min).
        drafted.clear();
        q_probs.resize(static_cast<size_t>(std::max(k_room, 1)) * n_vocab);
        if (k_room > 0) {
            const float* dl = draft.start(seq);
            for (int i = 0; i < k_room; ++i) {
                int32_t d;
                float p_d = 1.0f;
                if (greedy) {
                    // The draft's argmax (its sampler has no penalties): no distribution needed.
                    d = static_cast<int32_t>(std::max_element(dl, dl + n_vocab) - dl);
                    if (spec.p_min > 0.0f) p_d = top_probability(dl, n_vocab);
                } else {
                    float* q = q_probs.data() + static_cast<size_t>(i) * n_vocab;
                    ds.distribution(dl, q);
                    d = ds.sample_from(q);
                    p_d = q[d];
                }
                if (p_d < spec.p_min) break;
                drafted.push_back(d);
                if (i + 1 < k_room) dl = draft.next(d);
            }
        }
        const int kk = static_cast<int>(drafted.size());
        // 2. Verify [last, d_1 .. d_kk] in one target pass: row i predicts the token after position i.
        verify.assign(1, last);
        verify.insert(verify.end(), drafted.begin(), drafted.end());
        const float* rows = target.decode(verify, /*all_logits=*/true);
        if (hidden) draft.target_ran(held - base_t, static_cast<int64_t>(verify.size()), target.hidden());
        ++st.rounds;
        st.drafted += kk;
        // 3. Accept a prefix of the draft, then one token from the target.
        int accepted = 0;
        int32_t next = -1;
        for (int i = 0; i < kk && next < 0; ++i) {
            const float* row = rows + static_cast<size_t>(i) * n_vocab;
            const int32_t d = drafted[static_cast<size_t>(i)];
            if (greedy) {
                const int32_t t = ts.sample(row);
                if (t != d) next = t;
            } else {
                ts.distribution(row, p_probs.data());
                const float* q = q_probs.data() + static_cast<size_t>(i) * n_vocab;
                const double ratio = q[d] > 0.0f ? static_cast<double>(p_probs[d]) / q[d] : 0.0;
                if (ts.uniform() >= std::min(1.0, ratio)) {
                    double mass = 0.0;
                    for (int32_t j = 0; j < n_vocab; ++j) {
                        resid[j] = std::max(0.0f, p_probs[j] - q[j]);
                        mass += resid[j];
                    }
                    next = mass > 0.0 ? ts.sample_from(resid.data()) : ts.sample_from(p_probs.data());
                }
            }
            if (next >= 0) break;
            ++accepted;
            going = stream.push(d);
            seq.push_back(d);
            if (!going) break;
        }
        st.accepted += accepted;
        if (going && next < 0) next = ts.sample(rows + static_cast<size_t>(accepted) * n_vocab);  // bonus token
        // Keep the target's cache to `last` + the accepted drafts.
        target.truncate(held + 1 + accepted);
        if (going) {
            going = stream.push(next);
            seq.push_back(next);
            last = next;
        }
        if (spec.adaptive && kk > 0) {
            if (accepted == kk) k = std::min(k + 1, spec.k_max);
            else if (2 * accepted < kk) k = std::max(k - 1, spec.k_min);
        }
    }
    r.tokens = stream.tokens();
    r.text = stream.text();
    r.finish = stream.finish();
    r.decode_seconds = std::chrono::duration<double>(clock::now() - t_first).count();
    st.generated = static_cast<int64_t>(r.tokens.size());
    if (stats_out) *stats_out = st;
    return r;
}

}  // namespace strata::sched
