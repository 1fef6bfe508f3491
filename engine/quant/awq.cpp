#include "quant/awq.h"

#include <algorithm>
#include <cmath>

#include "platform/thread_pool.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"
#include "quant/quantize.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

// Some rows of one matrix (one expert's, for a 3-D tensor), dequantized, with
// the importance of its columns: what the search quantizes for each alpha.
struct Sample {
    WeightType to = WeightType::F32;
    int64_t cols = 0;
    std::vector<float> rows;        // k x cols
    std::vector<float> importance;  // cols
};

// The importance of slab `slab` of tensor t: its own entry, else the group's
// mean squares (a matrix without statistics reads the same input).
std::vector<float> importance_of(const ImportanceMatrix& imp, const gguf::TensorInfo& t, int64_t slab,
                                 const std::vector<float>& fallback) {
    const auto it = imp.values.find(t.name);
    const int64_t slabs = t.n_matrices();
    if (it == imp.values.end() || static_cast<int64_t>(it->second.size()) != t.ne[0] * slabs) return fallback;
    const float* v = it->second.data() + slab * t.ne[0];
    return std::vector<float>(v, v + t.ne[0]);
}

Sample sample_rows(const gguf::TensorInfo& t, WeightType to, int64_t slab, int64_t max_rows, std::vector<float> imp) {
    Sample s;
    s.to = to;
    s.cols = t.ne[0];
    s.importance = std::move(imp);
    const int64_t rows = t.ne[1];
    const int64_t stride = std::max<int64_t>(1, rows / std::max<int64_t>(1, max_rows));
    const int64_t row_bytes = kernels::row_bytes(t.type, t.ne[0]);
    for (int64_t r = 0; r < rows && static_cast<int64_t>(s.rows.size()) < max_rows * s.cols; r += stride) {
        const size_t at = s.rows.size();
        s.rows.resize(at + static_cast<size_t>(s.cols));
        kernels::dequantize_row(t.type, t.data + (slab * rows + r) * row_bytes, s.rows.data() + at, s.cols);
    }
    return s;
}

// The importance-weighted error of quantizing s's rows with their columns
// multiplied by `scale`, measured on the original columns:
// sum_j imp_j (w_j - q_j / scale_j)^2.
double scaled_error(const Sample& s, const float* scale) {
    const int64_t n = s.cols;
    std::vector<float> ws(static_cast<size_t>(n)), imp(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    std::vector<uint8_t> q(static_cast<size_t>(kernels::row_bytes(s.to, n)));
    for (int64_t j = 0; j < n; ++j) imp[static_cast<size_t>(j)] = s.importance[static_cast<size_t>(j)] / (scale[j] * scale[j]);
    double err = 0.0;
    for (size_t r = 0; r < s.rows.size(); r += static_cast<size_t>(n)) {
        for (int64_t j = 0; j < n; ++j) ws[static_cast<size_t>(j)] = s.rows[r + static_cast<size_t>(j)] * scale[j];
        if (!kernels::quantize_row_weighted_ref(s.to, ws.data(), q.data(), n, imp.data()))
            kernels::quantize_row(s.to, ws.data(), q.data(), n);
        kernels::dequantize_row(s.to, q.data(), back.data(), n);
        for (int64_t j = 0; j < n; ++j) {
            const double d = double(ws[static_cast<size_t>(j)]) - double(back[static_cast<size_t>(j)]);
            err += double(imp[static_cast<size_t>(j)]) * d * d;
        }
    }
    return err;
}

// s_j = m_j^alpha over sqrt(max * min), m_j = the channel's RMS (floored so a
// channel nothing reached does not get a zero scale).
std::vector<float> scales_for(const std::vector<float>& mean_sq, double alpha) {
    std::vector<double> m(mean_sq.size());
    double top = 0.0;
    for (size_t j = 0; j < m.size(); ++j) top = std::max(top, m[j] = std::sqrt(std::max(0.0f, mean_sq[j])));
    double lo = 1e300, hi = 0.0;
    for (double& v : m) {
        v = std::pow(std::max(v, 1e-4 * top + 1e-12), alpha);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    const double norm = std::sqrt(lo * hi);
    std::vector<float> s(m.size());
    for (size_t j = 0; j < m.size(); ++j) s[j] = static_cast<float>(norm > 0 ? m[j] / norm : 1.0);
    return s;
}

struct Choice {
    std::vector<float> scale;
    double alpha = 0, before = 0, after = 0;
};

// The alpha (0 included) whose scales give the lowest error over the samples.
Choice search(const std::vector<Sample>& samples, const std::vector<float>& mean_sq, const AwqOptions& o,
              cpu::ThreadPool& pool) {
    auto total_error = [&](const std::vector<float>& s) {
        std::vector<double> per(samples.size(), 0.0);
        pool.parallel_for(static_cast<int64_t>(samples.size()), 1, [&](int64_t a, int64_t b, int) {
            for (int64_t i = a; i < b; ++i) per[static_cast<size_t>(i)] = scaled_error(samples[static_cast<size_t>(i)], s.data());
        });
        double e = 0.0;
        for (double v : per) e += v;
        return e;
    };
    Choice best;
    best.scale.assign(mean_sq.size(), 1.0f);
    best.before = best.after = total_error(best.scale);
    for (int k = 1; k <= o.alpha_steps; ++k) {
        const double alpha = static_cast<double>(k) / o.alpha_steps;
        std::vector<float> s = scales_for(mean_sq, alpha);
        const double e = total_error(s);
        if (e < best.after) {
            best.after = e;
            best.alpha = alpha;
            best.scale = std::move(s);
        }
    }
    return best;
}

std::string blk(int64_t layer, const char* name) { return "blk." + std::to_string(layer) + "." + name + ".weight"; }

}  // namespace

ChannelScaling awq_search(const gguf::File& in, const Recipe& recipe, const ImportanceMatrix& imp, const AwqOptions& o) {
    ChannelScaling out;
    cpu::ThreadPool pool(std::max(1, o.threads));
    const std::string arch = in.get_string_or("general.architecture", "");
    const bool gpt_oss = arch == "gpt-oss";
    int64_t layers = 0;
    for (const gguf::TensorInfo& t : in.tensors()) {
        int64_t layer = -1;
        classify(t.name, &layer);
        layers = std::max(layers, layer + 1);
    }
    // The tensor if present, with the type the recipe gives it, quantized (not float).
    auto quantized = [&](const std::string& name, WeightType* to) -> const gguf::TensorInfo* {
        const gguf::TensorInfo* t = in.tensor(name);
        if (!t || t->n_dims < 2) return nullptr;
        std::string note;
        *to = target_type(recipe, *t, &note);
        return t;
    };
    for (int64_t L = 0; L < layers; ++L) {
        // Groups folded into a norm: the norm, the matrices reading its output,
        // the entries whose statistics describe that output (all tokens).
        struct NormGroup {
            const char* what;
            std::string norm;
            std::vector<const char*> readers, stats;
        };
        const NormGroup norm_groups[] = {
            {"attention input", blk(L, "attn_norm"), {"attn_q", "attn_k", "attn_v", "attn_qkv", "attn_q_a", "attn_kv_a_mqa"},
             {"attn_q", "attn_qkv", "attn_q_a", "attn_k"}},
            {"ffn input", blk(L, gpt_oss ? "post_attention_norm" : "ffn_norm"),
             {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_gate_shexp", "ffn_up_shexp", "ffn_gate_inp_shexp",
              "ffn_gate", "ffn_up"},
             {"ffn_gate_inp", "ffn_gate", "ffn_up", "ffn_gate_shexp"}},
        };
        for (const NormGroup& g : norm_groups) {
            const gguf::TensorInfo* norm = in.tensor(g.norm);
            if (!norm || norm->n_dims != 1 || !is_float_type(norm->type)) continue;
            const int64_t n = norm->ne[0];
            std::vector<float> mean_sq;
            for (const char* s : g.stats) {
                const auto it = imp.values.find(blk(L, s));
                if (it != imp.values.end() && static_cast<int64_t>(it->second.size()) == n) {
                    mean_sq = it->second;
                    break;
                }
            }
            if (mean_sq.empty()) continue;
            std::vector<Sample> samples;
            std::vector<const gguf::TensorInfo*> readers;
            bool any_quantized = false, fits = true;
            for (const char* r : g.readers) {
                WeightType to{};
                const gguf::TensorInfo* t = quantized(blk(L, r), &to);
                if (!t) {
                    // A 1-D reader: qwen2moe's shared-expert gate, a vector
                    // dotted with the input, is multiplied by s too (exactly
                    // in F32); anything else 1-D is not folded.
                    const gguf::TensorInfo* v = in.tensor(blk(L, r));
                    if (v && (std::string(r) != "ffn_gate_inp_shexp" || v->type != WeightType::F32 || v->ne[0] != n))
                        fits = false;
                    else if (v)
                        readers.push_back(v);
                    continue;
                }
                if (t->ne[0] != n) fits = false;
                readers.push_back(t);
                if (is_float_type(to)) continue;  // scaled exactly: no error to weigh
                any_quantized = true;
                const int64_t slabs = t->n_matrices();
                for (int64_t e = 0; e < slabs; ++e)
                    samples.push_back(sample_rows(*t, to, e, o.sample_rows, importance_of(imp, *t, e, mean_sq)));
            }
            // Files with split experts (blk.L.ffn_gate.N.weight, older
            // Mixtral conversions) have readers under other names: not folded.
            if (in.tensor(blk(L, "ffn_gate.0")) || in.tensor(blk(L, "ffn_up.0"))) fits = false;
            if (!any_quantized || !fits) continue;
            Choice c = search(samples, mean_sq, o, pool);
            out.groups.push_back({"blk." + std::to_string(L) + " " + g.what, static_cast<float>(c.alpha), c.before, c.after});
            if (c.alpha == 0) continue;
            out.norms[g.norm] = c.scale;
            for (const gguf::TensorInfo* t : readers) {
                const int64_t slabs = t->n_matrices();
                std::vector<float>& v = out.columns[t->name];
                for (int64_t e = 0; e < slabs; ++e) v.insert(v.end(), c.scale.begin(), c.scale.end());
            }
        }
        // Down projections: the scale of their input folded into up's rows,
        // per expert. Not for gpt-oss (its SwiGLU clamps and offsets up) or
        // an up with a bias.
        if (gpt_oss) continue;
        const std::pair<const char*, const char*> pairs[] = {
            {"ffn_up_exps", "ffn_down_exps"}, {"ffn_up_shexp", "ffn_down_shexp"}, {"ffn_up", "ffn_down"}};
        for (const auto& [up_name, down_name] : pairs) {
            WeightType down_to{}, up_to{};
            const gguf::TensorInfo* down = quantized(blk(L, down_name), &down_to);
            const gguf::TensorInfo* up = quantized(blk(L, up_name), &up_to);
            if (!down || !up || is_float_type(down_to) || up->ne[1] != down->ne[0] ||
                in.tensor("blk." + std::to_string(L) + "." + up_name + ".bias"))
                continue;
            const auto stats = imp.values.find(down->name);
            const int64_t slabs = down->n_matrices();
            const int64_t n = down->ne[0];
            if (stats == imp.values.end() || static_cast<int64_t>(stats->second.size()) != n * slabs) continue;
            ChannelScaling::Group g{"blk." + std::to_string(L) + " " + down_name + " input", 0, 0, 0};
            std::vector<float> cols, rows;
            bool scaled = false;
            for (int64_t e = 0; e < slabs; ++e) {
                const std::vector<float> mean_sq(stats->second.begin() + e * n, stats->second.begin() + (e + 1) * n);
                std::vector<Sample> samples{sample_rows(*down, down_to, e, o.sample_rows, mean_sq)};
                Choice c = search(samples, mean_sq, o, pool);
                g.alpha += static_cast<float>(c.alpha / static_cast<double>(slabs));
                g.error_before += c.before;
                g.error_after += c.after;
                scaled = scaled || c.alpha != 0;
                cols.insert(cols.end(), c.scale.begin(), c.scale.end());
            }
            out.groups.push_back(g);
            if (!scaled) continue;
            out.rows[up->name] = cols;  // up's row i of expert e is divided by the scale of down's column i
            out.columns[down->name] = std::move(cols);
        }
    }
    return out;
}

}  // namespace strata::quant
