// The sampler: turns one row of logits into the next token.
//
// The chain follows llama.cpp's common sampler chain, in this order:
//   1. penalties over the last `penalty_last_n` accepted tokens (prompt included):
//        repeat:    a positive logit is divided by repeat_penalty, a negative one multiplied;
//        frequency/presence: logit -= count * frequency_penalty + (count > 0) * presence_penalty;
//   2. top-k       keep the k highest logits (ties broken towards the lower token id);
//   3. top-p       keep the smallest prefix (by descending logit) whose probability at
//                  temperature 1 reaches top_p;
//   4. min-p       keep tokens whose probability is at least min_p times the top one's;
//   5. temperature divide the kept logits by it, softmax, draw with the seeded RNG.
// temperature <= 0 means greedy: the argmax of the penalized logits, ties to the lowest id
// (the filters never remove the top token, so they cannot change it).
//
// NaN and -inf logits are never chosen. If some logits are +inf, the choice is uniform
// among them. A row with nothing finite or +inf in it is an error.
//
// With a constraint (set_constraint: a grammar the output must follow), the
// token drawn is checked first; only when the constraint refuses it is the
// draw repeated among the kept candidates it allows, and, if it allows none
// of them, over every token it allows (llama.cpp's order: most tokens cost
// one check, not a pass over the vocabulary).
//
// A Sampler belongs to one sequence and is not thread-safe; sample() and distribution()
// do not allocate (all scratch is sized at construction).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::grammar {
class Grammar;
}

namespace strata::sched {

struct SamplingParams {
    float temperature = 0.8f;      // <= 0: greedy (argmax, ties to the lowest id)
    int32_t top_k = 40;            // <= 0: off (-1 and 0 are accepted; below -1 is rejected)
    float top_p = 0.95f;           // 0 < top_p <= 1; 1: off
    float min_p = 0.05f;           // 0 <= min_p <= 1; 0: off
    float repeat_penalty = 1.0f;   // > 0; 1: off
    float presence_penalty = 0.0f; // any finite value; 0: off (negative values favour repeats)
    float frequency_penalty = 0.0f;// any finite value; 0: off
    int32_t penalty_last_n = 64;   // window of accepted tokens; 0: off; -1: everything since reset()
    uint64_t seed = 0;             // fixed seed => same tokens for the same logits
    std::vector<std::string> stop; // stop strings (none empty); see StopMatcher
    int32_t max_tokens = 256;      // > 0: the most tokens one request may generate
    bool ignore_eos = false;       // benchmarks: end-of-generation tokens do not end the request
    // The grammar the generated text must follow (grammar/grammar.h); none: free text.
    std::shared_ptr<const grammar::Grammar> grammar;
    // Control tokens whose text the reply shows (and the grammar may use):
    // tool-call markers such as Mistral's [TOOL_CALLS], as llama-server's
    // preserved tokens. Sorted.
    std::vector<int32_t> render_tokens;

    // Empty when valid, else one message naming the field, the value and the allowed
    // range, e.g. "top_p 1.5 is out of range: expected 0 < top_p <= 1".
    std::string validate() const;
    bool greedy() const { return temperature <= 0.f; }
    bool penalties_active() const {
        return penalty_last_n != 0 && (repeat_penalty != 1.f || presence_penalty != 0.f || frequency_penalty != 0.f);
    }
};

// xoshiro256** seeded through splitmix64: fast, and the same numbers on every platform
// and standard library (std::uniform_real_distribution is not).
class Rng {
public:
    explicit Rng(uint64_t seed = 0) { reseed(seed); }
    void reseed(uint64_t seed);
    uint64_t next();
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    uint64_t s_[4];
};

// Which tokens may come next (a grammar, sched/constraint.h).
class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    // Whether `token` may come next.
    virtual bool allows(int32_t token) = 0;
    // allowed[id] for every token at once (resized to the vocabulary).
    virtual void allowed(std::vector<uint8_t>& allowed) = 0;
};

// What a constraint cost a sampler: checks of single tokens, whole-vocabulary
// passes, and the time spent in both.
struct ConstraintStats {
    int64_t tokens = 0;       // tokens sampled under the constraint
    int64_t refused = 0;      // first draws the constraint refused
    int64_t full_passes = 0;  // passes over the whole vocabulary
    double seconds = 0.0;
};

class Sampler {
public:
    // Throws strata::Error if params.validate() is not empty or n_vocab <= 0.
    Sampler(const SamplingParams& params, int32_t n_vocab);

    // Picks the next token from logits[n_vocab]; logits are not modified. Does not accept
    // the token: call accept() with the token actually appended to the sequence.
    int32_t sample(const float* logits);

    // Appends a token to the penalty window (feed the prompt tokens too). Throws
    // strata::Error when the id is outside [0, n_vocab).
    void accept(int32_t token);

    // Clears the penalty window and reseeds the RNG with params().seed.
    void reset();

    // The distribution sample() draws from for these logits (after penalties, filters and
    // temperature): fills probs[n_vocab], zeros outside the kept set; for greedy, one-hot
    // at the argmax. Does not advance the RNG. For speculative decoding's rejection rule.
    void distribution(const float* logits, float* probs);

    // Draws a token from an explicit distribution probs[n_vocab] (non-negative, need not be
    // normalized) with this sampler's RNG; e.g. the residual max(0, p - q) of speculative
    // decoding. Throws strata::Error if the weights sum to zero or are not finite.
    int32_t sample_from(const float* probs);

    // Restricts sample() to what `c` allows (nullptr: no restriction). Not
    // owned; it must outlive the sampler's use. distribution() refuses to run
    // under a constraint.
    void set_constraint(TokenConstraint* c) { constraint_ = c; }
    const ConstraintStats& constraint_stats() const { return constraint_stats_; }

    // A uniform draw in [0, 1) from this sampler's RNG (speculative acceptance tests).
    double uniform() { return rng_.uniform(); }

    // logits[n_vocab] after the penalties only (step 1 of the chain), into out[n_vocab].
    void penalized_logits(const float* logits, float* out) const;

    // End-of-generation tokens (EOS, EOT, ...) from the model's vocabulary. Ids outside
    // [0, n_vocab) throw strata::Error.
    void set_end_tokens(std::vector<int32_t> ids);
    bool is_end_token(int32_t token) const;
    const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

    const SamplingParams& params() const { return params_; }
    int32_t n_vocab() const { return n_vocab_; }
    // How many times the token occurs in the current penalty window.
    int32_t window_count(int32_t token) const;

private:
    struct Cand {
        float logit;
        int32_t id;
        float p;
    };
    // The logits after the penalties: `logits` itself when nothing is penalized, else a
    // copy in work_ with the window's tokens patched.
    const float* penalized(const float* logits);
    // Runs the whole chain; on return cand_[0..n) hold the kept tokens with normalized p.
    size_t prepare(const float* logits);
    // Draws from cand_[0..n) (normalized p).
    int32_t draw(size_t n);
    // The draw again, after the constraint refused the first one.
    int32_t constrained_redraw(const float* logits, size_t n);
    float penalize(float logit, int32_t count) const;
    void count_in(int32_t token);
    void count_out(int32_t token);
    void extend_sorted(size_t& sorted, size_t n);

    SamplingParams params_;
    int32_t n_vocab_;
    bool penalties_;
    Rng rng_;
    std::vector<Cand> cand_;
    std::vector<float> work_;        // penalized logits
    std::vector<int32_t> counts_;    // occurrences in the window, per token
    std::vector<int32_t> distinct_;  // the tokens with counts_ > 0
    std::vector<int32_t> where_;     // position of a token in distinct_
    std::vector<int32_t> ring_;      // the window itself when penalty_last_n > 0
    size_t ring_pos_ = 0;
    size_t ring_size_ = 0;
    std::vector<int32_t> end_tokens_;
    TokenConstraint* constraint_ = nullptr;
    ConstraintStats constraint_stats_;
    std::vector<uint8_t> allowed_;   // the constraint's whole-vocabulary answer
    std::vector<float> masked_;      // logits with the refused tokens at -inf
};

}  // namespace strata::sched
