#include "sched/sampler.h"

#include "common/error.h"
#include "common/log.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

namespace strata::sched {

namespace {

std::string num(float v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::string("?");
}
std::string num(int64_t v) { return std::to_string(v); }

std::string out_of_range(const char* field, const std::string& value, const std::string& expected) {
    return std::string(field) + " " + value + " is out of range: expected " + expected;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

// Higher logit first; equal logits: lower id first. A strict weak order (no NaN reaches it).
struct Ranks {
    template <class C>
    bool operator()(const C& a, const C& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};

uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

// --- SamplingParams --------------------------------------------------------

std::string SamplingParams::validate() const {
    if (!std::isfinite(temperature))
        return out_of_range("temperature", num(temperature), "a finite number (<= 0 means greedy)");
    if (top_k < -1) return out_of_range("top_k", num(int64_t(top_k)), "top_k >= 0 (0 or -1 turn it off)");
    if (!(top_p > 0.f && top_p <= 1.f)) return out_of_range("top_p", num(top_p), "0 < top_p <= 1");
    if (!(min_p >= 0.f && min_p <= 1.f)) return out_of_range("min_p", num(min_p), "0 <= min_p <= 1");
    if (!(repeat_penalty > 0.f) || !std::isfinite(repeat_penalty))
        return out_of_range("repeat_penalty", num(repeat_penalty), "a finite repeat_penalty > 0 (1 turns it off)");
    if (!std::isfinite(presence_penalty))
        return out_of_range("presence_penalty", num(presence_penalty), "a finite number (0 turns it off)");
    if (!std::isfinite(frequency_penalty))
        return out_of_range("frequency_penalty", num(frequency_penalty), "a finite number (0 turns it off)");
    if (penalty_last_n < -1)
        return out_of_range("penalty_last_n", num(int64_t(penalty_last_n)),
                            "penalty_last_n >= 0, or -1 for every token since the start");
    if (max_tokens <= 0) return out_of_range("max_tokens", num(int64_t(max_tokens)), "max_tokens >= 1");
    for (size_t i = 0; i < stop.size(); ++i)
        if (stop[i].empty()) return "stop[" + std::to_string(i) + "] is empty: a stop string needs at least one character";
    return {};
}

// --- Rng -------------------------------------------------------------------

void Rng::reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

// --- Sampler ---------------------------------------------------------------

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), penalties_(params.penalties_active()), rng_(params.seed) {
    if (std::string msg = params_.validate(); !msg.empty()) throw Error("invalid sampling parameters: " + msg);
    if (n_vocab <= 0) throw Error("sampler: vocabulary size " + std::to_string(n_vocab) + " must be positive");
    cand_.resize(size_t(n_vocab));
    if (penalties_) {
        work_.resize(size_t(n_vocab));
        counts_.assign(size_t(n_vocab), 0);
        where_.assign(size_t(n_vocab), 0);
        size_t distinct_max = size_t(n_vocab);
        if (params_.penalty_last_n > 0) {
            ring_.assign(size_t(params_.penalty_last_n), 0);
            distinct_max = std::min(distinct_max, ring_.size());
        }
        distinct_.reserve(distinct_max);  // accept() never allocates either
    }
    logger("sampler")->debug(
        "sampler: n_vocab {}, temperature {}, top_k {}, top_p {}, min_p {}, repeat {}, presence {}, frequency {}, "
        "last_n {}, seed {}",
        n_vocab_, params_.temperature, params_.top_k, params_.top_p, params_.min_p, params_.repeat_penalty,
        params_.presence_penalty, params_.frequency_penalty, params_.penalty_last_n, params_.seed);
}

void Sampler::count_in(int32_t token) {
    if (counts_[size_t(token)]++ == 0) {
        where_[size_t(token)] = int32_t(distinct_.size());
        distinct_.push_back(token);
    }
}

void Sampler::count_out(int32_t token) {
    if (--counts_[size_t(token)] == 0) {
        const int32_t at = where_[size_t(token)];
        const int32_t last = distinct_.back();
        distinct_[size_t(at)] = last;
        where_[size_t(last)] = at;
        distinct_.pop_back();
    }
}

void Sampler::accept(int32_t token) {
    if (token < 0 || token >= n_vocab_)
        throw Error("sampler: token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                    std::to_string(n_vocab_) + ")");
    if (!penalties_) return;
    if (!ring_.empty()) {
        if (ring_size_ == ring_.size()) {
            count_out(ring_[ring_pos_]);  // the oldest token leaves the window
        } else {
            ++ring_size_;
        }
        ring_[ring_pos_] = token;
        ring_pos_ = (ring_pos_ + 1) % ring_.size();
    }
    count_in(token);  // penalty_last_n == -1: nothing leaves until reset()
}

void Sampler::reset() {
    for (int32_t t : distinct_) counts_[size_t(t)] = 0;
    distinct_.clear();
    ring_pos_ = 0;
    ring_size_ = 0;
    rng_.reseed(params_.seed);
}

int32_t Sampler::window_count(int32_t token) const {
    if (!penalties_ || token < 0 || token >= n_vocab_) return 0;
    return counts_[size_t(token)];
}

void Sampler::set_end_tokens(std::vector<int32_t> ids) {
    for (int32_t id : ids)
        if (id < 0 || id >= n_vocab_)
            throw Error("sampler: end token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(n_vocab_) + ")");
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    end_tokens_ = std::move(ids);
}

bool Sampler::is_end_token(int32_t token) const {
    return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

inline float Sampler::penalize(float logit, int32_t count) const {
    if (logit <= 0.f)
        logit *= params_.repeat_penalty;
    else
        logit /= params_.repeat_penalty;
    return logit - float(count) * params_.frequency_penalty - params_.presence_penalty;
}

void Sampler::penalized_logits(const float* logits, float* out) const {
    std::copy(logits, logits + n_vocab_, out);
    for (int32_t t : distinct_) out[t] = penalize(logits[t], counts_[size_t(t)]);
}

const float* Sampler::penalized(const float* logits) {
    if (distinct_.empty()) return logits;
    penalized_logits(logits, work_.data());
    return work_.data();
}

// cand_[0..sorted) is sorted and ranks above all of cand_[sorted..n): sort some more.
void Sampler::extend_sorted(size_t& sorted, size_t n) {
    const size_t want = std::min(n, sorted == 0 ? size_t(256) : sorted * 4);
    if (want < n) std::nth_element(cand_.begin() + sorted, cand_.begin() + want, cand_.begin() + n, Ranks{});
    std::sort(cand_.begin() + sorted, cand_.begin() + want, Ranks{});
    sorted = want;
}

size_t Sampler::prepare(const float* logits) {
    const float* l = penalized(logits);

    // The top token: the lowest id among the highest; NaN and -inf never win (l > max is false).
    float max = kNegInf;
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab_; ++i)
        if (l[i] > max) {
            max = l[i];
            best = i;
        }
    if (best < 0) throw Error("sampler: every logit is -inf or NaN; there is no token to choose");
    if (params_.greedy()) {
        cand_[0] = Cand{max, best, 1.f};
        return 1;
    }

    // The candidates: finite (or, if any, only the +inf) logits; top-k selected on the way.
    size_t n = 0, sorted = 0;
    const size_t k = params_.top_k > 0 ? size_t(params_.top_k) : 0;
    if (max == kPosInf) {  // uniform among the +inf tokens
        for (int32_t i = best; i < n_vocab_; ++i)  // `best` is the first +inf
            if (l[i] == kPosInf) cand_[n++] = Cand{0.f, i, 0.f};
        max = 0.f;
        if (k > 0 && k < n) {
            std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.begin() + n, Ranks{});
            n = sorted = k;
        }
    } else if (k > 0 && k < size_t(n_vocab_)) {
        // Heap selection straight from the logits: the heap's front is the worst kept token.
        // Ids arrive in increasing order, so an equal logit never displaces a kept token.
        for (int32_t i = 0; i < n_vocab_; ++i) {
            const float v = l[i];
            if (!(v > kNegInf)) continue;
            if (n < k) {
                cand_[n++] = Cand{v, i, 0.f};
                if (n == k) std::make_heap(cand_.begin(), cand_.begin() + k, Ranks{});
            } else if (v > cand_[0].logit) {
                std::pop_heap(cand_.begin(), cand_.begin() + k, Ranks{});
                cand_[k - 1] = Cand{v, i, 0.f};
                std::push_heap(cand_.begin(), cand_.begin() + k, Ranks{});
            }
        }
        if (n == k)
            std::sort_heap(cand_.begin(), cand_.begin() + n, Ranks{});
        else
            std::sort(cand_.begin(), cand_.begin() + n, Ranks{});
        sorted = n;
    } else {
        for (int32_t i = 0; i < n_vocab_; ++i)
            if (l[i] > kNegInf) cand_[n++] = Cand{l[i], i, 0.f};
    }

    // top-p over the temperature-1 distribution of what is left
    if (params_.top_p < 1.f && n > 1) {
        double z = 0.0;
        for (size_t i = 0; i < n; ++i) z += std::exp(cand_[i].logit - max);
        const double target = double(params_.top_p) * z;
        double cum = 0.0;
        size_t i = 0;
        while (i < n) {
            if (i == sorted) extend_sorted(sorted, n);
            cum += std::exp(cand_[i].logit - max);
            ++i;
            if (cum >= target) break;
        }
        n = i;
    }

    // min-p: p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p); the top token always stays
    if (params_.min_p > 0.f && n > 1) {
        const float threshold = max + std::log(params_.min_p);
        if (sorted >= n) {
            size_t i = 1;
            while (i < n && cand_[i].logit >= threshold) ++i;
            n = i;
        } else {
            size_t m = 0;
            for (size_t i = 0; i < n; ++i)
                if (cand_[i].logit >= threshold) cand_[m++] = cand_[i];
            n = m;
        }
    }

    // temperature + softmax (float exponentials, double sum)
    const float inv_t = 1.f / params_.temperature;
    double z = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const float w = std::exp((cand_[i].logit - max) * inv_t);
        cand_[i].p = w;
        z += w;
    }
    // z >= the top token's weight of 1 (the top token is always kept), so this is safe.
    const float inv_z = float(1.0 / z);
    for (size_t i = 0; i < n; ++i) cand_[i].p *= inv_z;
    return n;
}

int32_t Sampler::draw(size_t n) {
    if (n == 1) return cand_[0].id;
    double u = rng_.uniform();  // the p are normalized up to rounding: walk and fall back to the last
    for (size_t i = 0; i < n; ++i) {
        u -= double(cand_[i].p);
        if (u < 0.0) return cand_[i].id;
    }
    for (size_t i = n; i-- > 0;)
        if (cand_[i].p > 0.f) return cand_[i].id;
    return cand_[0].id;
}

int32_t Sampler::sample(const float* logits) {
    const size_t n = prepare(logits);
    const int32_t t = draw(n);
    if (!constraint_) return t;
    const auto t0 = std::chrono::steady_clock::now();
    ++constraint_stats_.tokens;
    int32_t out = t;
    if (!constraint_->allows(t)) {
        ++constraint_stats_.refused;
        out = constrained_redraw(logits, n);
    }
    constraint_stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

// Among the few kept candidates first: the ones the constraint allows,
// renormalized (exactly the kept distribution restricted to them). When it
// allows none of them, or there are many, the constraint's whole answer masks
// the logits and the chain runs again.
int32_t Sampler::constrained_redraw(const float* logits, size_t n) {
    constexpr size_t kCheckFew = 64;
    if (n > 1 && n <= kCheckFew) {
        size_t m = 0;
        double z = 0.0;
        for (size_t i = 0; i < n; ++i)
            if (cand_[i].p > 0.f && constraint_->allows(cand_[i].id)) {
                cand_[m++] = cand_[i];
                z += cand_[i].p;
            }
        if (m > 0) {
            for (size_t i = 0; i < m; ++i) cand_[i].p = float(cand_[i].p / z);
            return draw(m);
        }
    }
    ++constraint_stats_.full_passes;
    constraint_->allowed(allowed_);
    masked_.resize(size_t(n_vocab_));
    bool any = false;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        const bool ok = size_t(i) < allowed_.size() && allowed_[size_t(i)];
        masked_[size_t(i)] = ok ? logits[i] : kNegInf;
        any = any || (ok && !std::isnan(logits[i]));
    }
    if (!any)
        throw Error("sampler: the grammar allows no token here (the vocabulary cannot spell what it requires next)");
    return draw(prepare(masked_.data()));
}

void Sampler::distribution(const float* logits, float* probs) {
    if (constraint_) throw Error("sampler: speculative decoding does not run under a grammar");
    const size_t n = prepare(logits);
    std::fill(probs, probs + n_vocab_, 0.f);
    for (size_t i = 0; i < n; ++i) probs[cand_[i].id] = cand_[i].p;
}

int32_t Sampler::sample_from(const float* probs) {
    double z = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        if (!(probs[i] >= 0.f) || !std::isfinite(probs[i]))
            throw Error("sampler: probability " + num(probs[i]) + " of token " + std::to_string(i) +
                        " is negative or not finite");
        if (probs[i] > 0.f) last = i;
        z += probs[i];
    }
    if (last < 0) throw Error("sampler: every probability is zero; there is no token to choose");
    double u = rng_.uniform() * z;
    for (int32_t i = 0; i < last; ++i) {
        u -= probs[i];
        if (u < 0.0 && probs[i] > 0.f) return i;
    }
    return last;
}

}  // namespace strata::sched
