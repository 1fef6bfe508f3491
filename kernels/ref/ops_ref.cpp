#include "kernels/ref/ops_ref.h"

#include "kernels/ref/quant_ref.h"
#include "kernels/ref/router_scored.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace strata::kernels::ref {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void softmax(float* x, int64_t n) {
    float max = x[0];
    for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void rope_table(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float* cs, const float* freq_factors) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        // Same expression as ggml's rope_yarn without extrapolation mixing:
        // theta = pos * base^(-2i/n_rot) / factor, scaled linearly.
        const double theta = static_cast<double>(pos) * freq_scale *
                             std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / n_rot) /
                             (freq_factors ? static_cast<double>(freq_factors[i]) : 1.0);
        cs[2 * i] = static_cast<float>(std::cos(theta));
        cs[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
}

void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    // The pair index whose wavelength turns n_rot times over n_ctx_orig... as ggml_rope_yarn_corr_dim.
    const auto corr = [&](float n_turns) {
        return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / (n_turns * 2.0f * 3.14159265358979323846f)) /
               (2.0f * std::log(freq_base));
    };
    dims[0] = std::max(0.0f, std::floor(corr(beta_fast)));
    dims[1] = std::min(static_cast<float>(n_rot - 1), std::ceil(corr(beta_slow)));
}

void rope_table_yarn(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float ext_factor, const float corr[2],
                     float mscale, float* cs, const float* freq_factors) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        const double extrap = static_cast<double>(pos) *
                              std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / n_rot) /
                              (freq_factors ? static_cast<double>(freq_factors[i]) : 1.0);
        const double interp = extrap * freq_scale;
        // ggml's rope_yarn_ramp at i0 = 2i: 1 below corr[0] (extrapolate), 0 above corr[1] (interpolate).
        const float y = (static_cast<float>(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
        const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
        const double theta = interp * (1.0 - ramp) + extrap * ramp;
        cs[2 * i] = static_cast<float>(std::cos(theta)) * mscale;
        cs[2 * i + 1] = static_cast<float>(std::sin(theta)) * mscale;
    }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, bool neox) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i];
        const float s = cs[2 * i + 1];
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = x + h * head_dim;
            const int64_t a = neox ? i : 2 * i;
            const int64_t b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a];
            const float x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
          float freq_scale, bool neox) {
    float cs[2 * 512];
    if (n_rot / 2 <= 512) {
        rope_table(n_rot, pos, freq_base, freq_scale, cs);
        rope_apply(x, n_heads, head_dim, n_rot, cs, neox);
        return;
    }
    std::vector<float> big(static_cast<size_t>(n_rot));
    rope_table(n_rot, pos, freq_base, freq_scale, big.data());
    rope_apply(x, n_heads, head_dim, n_rot, big.data(), neox);
}

float dot_f32(const float* a, const float* b, int64_t n) {
    float lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) lane[k] += a[i + k] * b[i + k];
    float sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale_i8(const int8_t* x, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]) * s;
}

void attn_scores(const float* q, int64_t n_q, const float* k, int64_t m, int64_t hd, float scale, float* out,
                 int64_t out_stride, const void*, int64_t) {
    for (int64_t h = 0; h < n_q; ++h)
        for (int64_t j = 0; j < m; ++j) out[h * out_stride + j] = dot_f32(q + h * hd, k + j * hd, hd) * scale;
}

void attn_accumulate(const float* p, int64_t p_stride, int64_t n_q, const float* v, int64_t m, int64_t hd,
                     float* out, const void*, int64_t) {
    for (int64_t h = 0; h < n_q; ++h)
        for (int64_t j = 0; j < m; ++j) axpy(p[h * p_stride + j], v + j * hd, out + h * hd, hd);
}

void router_topk(float* logits, int64_t n_expert, int64_t k, const uint8_t* allowed, int32_t* ids, float* w) {
    softmax(logits, n_expert);
    for (int64_t r = 0; r < k; ++r) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; ++e) {
            bool taken = allowed && !allowed[e];
            for (int64_t j = 0; j < r; ++j) taken |= ids[j] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        ids[r] = best;
        w[r] = best >= 0 ? logits[best] : 0.0f;
    }
}

namespace {
template <int Locality>
uint64_t read_sum_with(const uint64_t* p, int64_t n, int64_t ahead_words) {
    uint64_t acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if constexpr (Locality >= 0) __builtin_prefetch(p + i + ahead_words, 0, Locality);
        acc[0] += p[i] + p[i + 4];
        acc[1] += p[i + 1] + p[i + 5];
        acc[2] += p[i + 2] + p[i + 6];
        acc[3] += p[i + 3] + p[i + 7];
    }
    for (; i < n; ++i) acc[0] += p[i];
    return acc[0] + acc[1] + acc[2] + acc[3];
}
}  // namespace

uint64_t read_sum(const uint64_t* p, int64_t n, ReadAhead ahead, int64_t ahead_bytes) {
    const int64_t words = ahead_bytes / static_cast<int64_t>(sizeof(uint64_t));
    switch (ahead) {
        case ReadAhead::T0: return read_sum_with<3>(p, n, words);
        case ReadAhead::Nta: return read_sum_with<0>(p, n, words);
        case ReadAhead::None: break;
    }
    return read_sum_with<-1>(p, n, 0);
}

// One run, then the other: the same sum (the SIMD versions interleave them).
uint64_t read_sum2(const uint64_t* a, const uint64_t* b, int64_t n, ReadAhead ahead, int64_t ahead_bytes) {
    return read_sum(a, n, ahead, ahead_bytes) + read_sum(b, n, ahead, ahead_bytes);
}

void router_scored(float* p, int64_t n_expert, int64_t k, bool sigmoid, const float* select_bias, int64_t groups,
                   int64_t groups_used, const uint8_t* allowed, float* sel, int32_t* ids, float* w) {
    router_scored_with([](float* x, int64_t n) { softmax(x, n); }, p, n_expert, k, sigmoid, select_bias, groups,
                       groups_used, allowed, sel, ids, w);
}

void swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float a = std::min(g[i], limit);
        const float b = std::clamp(u[i], -limit, limit);
        y[i] = a / (1.0f + std::exp(-alpha * a)) * (b + 1.0f);
    }
}

void ssm_conv_step(const float* x, int64_t C, int64_t K, const float* w, const float* state_in, float* state_out,
                   float* y) {
    for (int64_t ch = 0; ch < C; ++ch) {
        const float* src = state_in + ch * (K - 1);
        float* dst = state_out + ch * (K - 1);
        const float* wc = w + ch * K;
        float acc = 0.0f;
        for (int64_t i = 0; i < K - 1; ++i) acc += wc[i] * src[i];
        acc += wc[K - 1] * x[ch];
        for (int64_t i = 0; i + 1 < K - 1; ++i) dst[i] = src[i + 1];  // in order: in place works too
        if (K > 1) dst[K - 2] = x[ch];
        y[ch] = acc / (1.0f + std::exp(-acc));
    }
}

void l2_norm(const float* x, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), eps);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

void gated_delta_step(const float* S_in, float* S_out, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, int64_t h0, int64_t h1, int64_t n_k_heads, int64_t d, float* o) {
    const float qscale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int64_t h = h0; h < h1; ++h) {
        const float* Sh_in = S_in + h * d * d;
        float* Sh = S_out + h * d * d;
        const float* kh = k + (h % n_k_heads) * d;
        const float* qh = q + (h % n_k_heads) * d;
        const float* vh = v + h * d;
        float* oh = o + h * d;
        const float decay = std::exp(g[h]);
        for (int64_t j = 0; j < d; ++j) {
            const float* src = Sh_in + j * d;
            float* col = Sh + j * d;  // S[., j]
            float sk = 0.0f;
            for (int64_t i = 0; i < d; ++i) {
                col[i] = src[i] * decay;
                sk += col[i] * kh[i];
            }
            const float delta = beta[h] * (vh[j] - sk);
            float out = 0.0f;
            for (int64_t i = 0; i < d; ++i) {
                col[i] += kh[i] * delta;
                out += col[i] * qh[i];
            }
            oh[j] = out * qscale;
        }
    }
}

void delta_gates(float* alpha, float* beta, const float* dt_bias, const float* a, int64_t heads) {
    for (int64_t h = 0; h < heads; ++h) {
        const float x = alpha[h] + dt_bias[h];
        alpha[h] = (x > 20.0f ? x : std::log1p(std::exp(x))) * a[h];
        beta[h] = 1.0f / (1.0f + std::exp(-beta[h]));
    }
}

void gate_mul(float* y, const float* g, int64_t n, bool silu) {
    for (int64_t i = 0; i < n; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-g[i]));
        y[i] *= silu ? g[i] * s : s;
    }
}

void scale_rows(float* x, int64_t stride, const float* f, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) x[r * stride + c] *= f[r];
}

void mla_absorb_query(const float* q, int64_t n_tokens, int64_t n_head, int64_t key_len, int64_t n_rot,
                      const float* k_up_t, int64_t rank, float* out) {
    const int64_t nope = key_len - n_rot, row = rank + n_rot;
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t h = 0; h < n_head; ++h) {
            const float* qh = q + (t * n_head + h) * key_len;
            float* o = out + (t * n_head + h) * row;
            for (int64_t l = 0; l < rank; ++l) {
                const float* uk = k_up_t + (h * rank + l) * nope;
                float s = 0.0f;
                for (int64_t j = 0; j < nope; ++j) s += uk[j] * qh[j];
                o[l] = s;
            }
            for (int64_t i = 0; i < n_rot; ++i) o[rank + i] = qh[nope + i];
        }
}

void mla_value_up(const float* o, int64_t n_tokens, int64_t n_head, int64_t row, int64_t rank, const float* v_up,
                  int64_t v_len, float* out) {
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t h = 0; h < n_head; ++h) {
            const float* oh = o + (t * n_head + h) * row;
            for (int64_t j = 0; j < v_len; ++j) {
                const float* uv = v_up + (h * v_len + j) * rank;
                float s = 0.0f;
                for (int64_t l = 0; l < rank; ++l) s += uv[l] * oh[l];
                out[(t * n_head + h) * v_len + j] = s;
            }
        }
}

void round_q8_k(float* x, int64_t n) {
    std::vector<block_q8_K> q(static_cast<size_t>(n / QK_K));
    quantize_row_q8_K_ref(x, q.data(), n);
    dequantize_row_q8_K_ref(q.data(), x, n);
}

void round_q8_0(float* x, int64_t n) {
    std::vector<block_q8_0> q(static_cast<size_t>(n / QK8_0));
    quantize_row_q8_0_ref(x, q.data(), n);
    dequantize_row_q8_0_ref(q.data(), x, n);
}

}  // namespace strata::kernels::ref
