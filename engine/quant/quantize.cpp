#include "quant/quantize.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "platform/thread_pool.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"
#include "quant/gptq.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

// A row length the type cannot hold (blocks of 32 or 256) falls back as
// llama-quantize falls back (llama_tensor_get_type): Q2_K/Q3_K to Q4_0, Q4_K
// to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; a row that fits no 32-block, to F16.
WeightType fit_row(WeightType want, int64_t row, std::string* note) {
    if (kernels::row_bytes(want, row) > 0) return want;
    WeightType alt = WeightType::F16;
    switch (want) {
        case WeightType::Q2_K:
        case WeightType::Q3_K: alt = WeightType::Q4_0; break;
        case WeightType::Q4_K: alt = WeightType::Q5_0; break;
        case WeightType::Q5_K: alt = WeightType::Q5_1; break;
        case WeightType::Q6_K: alt = WeightType::Q8_0; break;
        default: break;
    }
    if (kernels::row_bytes(alt, row) <= 0) alt = WeightType::F16;
    *note = std::string("rows of ") + std::to_string(row) + " do not fit " + kernels::type_traits(want)->name +
            " blocks: " + kernels::type_traits(alt)->name;
    return alt;
}

// The importance values for tensor t quantized to `want`, or null (no
// matrix, no entry, a type without a weighted quantizer, or a size that does
// not match, which is warned about).
const float* importance_for(const ImportanceMatrix* m, const gguf::TensorInfo& t, WeightType want, TensorReport* tr,
                            QuantizeReport* rep) {
    if (!m || !kernels::has_weighted_quantizer(want)) return nullptr;
    const auto it = m->values.find(t.name);
    if (it == m->values.end()) return nullptr;
    const int64_t matrices = t.n_matrices();
    if (static_cast<int64_t>(it->second.size()) != t.ne[0] * matrices) {
        rep->warnings.push_back("importance matrix entry '" + t.name + "' has " + std::to_string(it->second.size()) +
                                " values for " + std::to_string(t.ne[0] * matrices) + " columns: quantized without it");
        return nullptr;
    }
    tr->weighted = true;
    return it->second.data();
}

constexpr int64_t kMinCompensationTokens = 32;

// What channel scaling does to one tensor (null members: nothing).
struct Transform {
    const std::vector<float>* columns = nullptr;  // multiply column j of slab e
    const std::vector<float>* rows = nullptr;     // divide row i of slab e
    const std::vector<float>* norm = nullptr;     // divide element j (1-D)
    bool any() const { return columns || rows || norm; }
};

Transform transform_for(const QuantizeOptions& opt, const gguf::TensorInfo& t) {
    Transform tf;
    if (!opt.scaling) return tf;
    auto find = [&](const std::map<std::string, std::vector<float>>& m) -> const std::vector<float>* {
        const auto it = m.find(t.name);
        return it != m.end() ? &it->second : nullptr;
    };
    const int64_t slabs = t.n_matrices();
    tf.columns = find(opt.scaling->columns);
    if (t.n_dims >= 2) tf.rows = find(opt.scaling->rows);
    else tf.norm = find(opt.scaling->norms);
    // A scaling that does not fit its tensor would change the model's function
    // (the norm is divided all the same): an error, never skipped.
    if ((tf.columns && static_cast<int64_t>(tf.columns->size()) != t.ne[0] * slabs) ||
        (tf.rows && static_cast<int64_t>(tf.rows->size()) != t.ne[1] * slabs) ||
        (tf.norm && static_cast<int64_t>(tf.norm->size()) != t.ne[0]))
        throw Error(t.name + ": the channel scaling does not match the tensor's shape " + t.shape_string());
    return tf;
}

// The input's second moments of t for error compensation, or null.
const ActivationStats::Entry* second_moments_for(const QuantizeOptions& opt, const gguf::TensorInfo& t) {
    if (!opt.second_moments || !compensated_by_gptq(opt.recipe, t)) return nullptr;
    const ActivationStats::Entry* e = opt.second_moments(t.name);
    const int64_t slabs = t.n_matrices();
    if (!e || e->cols != t.ne[0] || static_cast<int64_t>(e->tokens.size()) != slabs ||
        e->cov.size() != static_cast<size_t>(slabs * e->cols * e->cols))
        return nullptr;
    return e;
}

// Slab e's share of them, or null where too few tokens reached it: second
// moments of low rank would push error into directions the calibration never
// saw. Plain rounding then.
const double* slab_second_moments(const ActivationStats::Entry* e, int64_t slab) {
    if (!e || e->tokens[static_cast<size_t>(slab)] < std::max<int64_t>(kMinCompensationTokens, e->cols / 4)) return nullptr;
    return e->cov.data() + slab * e->cols * e->cols;
}

// One tensor's conversion: its shape, target and what is applied to it.
struct Conversion {
    const gguf::TensorInfo& t;
    WeightType want;
    const Transform& tf;
    int64_t row = 0, rows_per_slab = 0, in_row = 0, out_row = 0;
    const float* importance = nullptr;  // all slabs' (row values each), or null
    uint8_t* out = nullptr;
};

// Slab e's rows, on all threads: dequantized, scaled, then quantized with
// the importance and, given the factor U, with error compensation (H: the
// slab's second moments, whose diagonal is the importance if none is given).
void convert_slab(const Conversion& c, int64_t e, const float* U, const double* H, cpu::ThreadPool& pool,
                  std::vector<float>& scratch) {
    const int64_t row = c.row;
    const float* col = c.tf.columns ? c.tf.columns->data() + e * row : nullptr;
    const float* rsc = c.tf.rows ? c.tf.rows->data() + e * c.rows_per_slab : nullptr;
    // Scaled columns carry 1/s^2 of the importance: x_j / s_j is their input now.
    std::vector<float> imp_scaled;
    const float* imp = c.importance ? c.importance + e * row : nullptr;
    if (imp && col) {
        imp_scaled.assign(imp, imp + row);
        for (int64_t j = 0; j < row; ++j) imp_scaled[static_cast<size_t>(j)] /= col[j] * col[j];
        imp = imp_scaled.data();
    }
    if (U && !imp && kernels::has_weighted_quantizer(c.want)) {
        // No importance matrix given: the second moments' diagonal is one.
        imp_scaled.resize(static_cast<size_t>(row));
        for (int64_t j = 0; j < row; ++j)
            imp_scaled[static_cast<size_t>(j)] = static_cast<float>(H[j * row + j]) / (col ? col[j] * col[j] : 1.0f);
        imp = imp_scaled.data();
    }
    pool.parallel_for(c.rows_per_slab, 16, [&](int64_t r0, int64_t r1, int ti) {
        float* f = scratch.data() + static_cast<size_t>(row) * static_cast<size_t>(ti);
        for (int64_t r = e * c.rows_per_slab + r0; r < e * c.rows_per_slab + r1; ++r) {
            kernels::dequantize_row(c.t.type, c.t.data + r * c.in_row, f, row);
            if (col) for (int64_t j = 0; j < row; ++j) f[j] *= col[j];  // also a 1-D gate vector
            if (rsc) for (int64_t j = 0; j < row; ++j) f[j] /= rsc[r - e * c.rows_per_slab];
            if (c.tf.norm) for (int64_t j = 0; j < row; ++j) f[j] /= (*c.tf.norm)[static_cast<size_t>(j)];
            uint8_t* dst = c.out + r * c.out_row;
            if (U)
                gptq_quantize_row(c.want, f, row, U, imp, dst);
            else if (!imp || !kernels::quantize_row_weighted_ref(c.want, f, dst, row, imp))
                kernels::quantize_row(c.want, f, dst, row);
        }
    });
}

// Tensor t converted to `want`, slab by slab (the experts of a 3-D tensor),
// with its channel scaling, importance and error compensation.
std::vector<uint8_t> convert(const gguf::TensorInfo& t, WeightType want, const Transform& tf, const QuantizeOptions& opt,
                             cpu::ThreadPool& pool, TensorReport* tr, QuantizeReport* rep) {
    Conversion c{t, want, tf};
    c.row = t.ne[0];
    const int64_t rows = t.n_elements() / c.row;
    const int64_t slabs = t.n_matrices();
    c.rows_per_slab = rows / slabs;
    c.in_row = kernels::row_bytes(t.type, c.row);
    c.out_row = kernels::row_bytes(want, c.row);
    std::vector<uint8_t> out(static_cast<size_t>(c.out_row * rows));
    c.out = out.data();
    c.importance = importance_for(opt.importance, t, want, tr, rep);
    std::vector<float> scratch(static_cast<size_t>(c.row * pool.size()));
    const ActivationStats::Entry* moments = second_moments_for(opt, t);
    // The compensation's factors (an O(cols^3) step per expert) are computed
    // for a batch of slabs at once, one slab per thread; each slab's rows are
    // then quantized by all threads.
    const int64_t batch = std::max<int64_t>(1, pool.size());
    std::vector<std::vector<float>> factors(static_cast<size_t>(batch));
    std::vector<char> factored(static_cast<size_t>(batch));
    for (int64_t e0 = 0; e0 < slabs; e0 += batch) {
        const int64_t e1 = std::min(slabs, e0 + batch);
        pool.parallel_for(e1 - e0, 1, [&](int64_t b0, int64_t b1, int) {
            for (int64_t b = b0; b < b1; ++b) {
                const int64_t e = e0 + b;
                const double* H = slab_second_moments(moments, e);
                const float* col = tf.columns ? tf.columns->data() + e * c.row : nullptr;
                factored[static_cast<size_t>(b)] = H && gptq_factor(H, c.row, col, opt.gptq_damp, &factors[static_cast<size_t>(b)]);
            }
        });
        for (int64_t e = e0; e < e1; ++e) {
            const double* H = slab_second_moments(moments, e);
            const bool gptq = factored[static_cast<size_t>(e - e0)] != 0;
            if (H && !gptq)
                rep->warnings.push_back(t.name + ": its inputs' second moments are singular; quantized without "
                                                 "error compensation");
            if (gptq) ++tr->compensated;
            convert_slab(c, e, gptq ? factors[static_cast<size_t>(e - e0)].data() : nullptr, H, pool, scratch);
        }
    }
    return out;
}

}  // namespace

std::function<const ActivationStats::Entry*(const std::string&)> second_moments_of(const ActivationStats& stats) {
    return [&stats](const std::string& name) -> const ActivationStats::Entry* {
        const auto it = stats.entries.find(name);
        return it != stats.entries.end() && !it->second.cov.empty() ? &it->second : nullptr;
    };
}

bool is_float_type(WeightType t) { return t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16; }

bool compensated_by_gptq(const Recipe& recipe, const gguf::TensorInfo& t) {
    // The token embeddings are looked up, not multiplied (a tied head's
    // inputs are observed under their name): compensation would only add error.
    if (t.n_dims < 2 || t.name == "token_embd.weight") return false;
    std::string note;
    const WeightType to = target_type(recipe, t, &note);
    return to != t.type && gptq_supports(to);
}

WeightType target_type(const Recipe& recipe, const gguf::TensorInfo& t, std::string* note) {
    if (t.n_dims < 2) return t.type;
    int64_t layer = -1;
    const TensorClass cls = classify(t.name, &layer);
    const bool down = t.name.find("ffn_down_exps") != std::string::npos;
    const WeightType want = recipe.type_for(cls, layer, down, t.type);
    return want != t.type ? fit_row(want, t.ne[0], note) : want;
}

QuantizeReport quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opt) {
    std::error_code ec;
    if (std::filesystem::equivalent(in_path, out_path, ec))
        throw Error(out_path + ": the output would overwrite the input; choose another file name");
    auto in = gguf::File::open(in_path);
    QuantizeReport rep;
    uint64_t total = 0;
    for (const gguf::TensorInfo& t : in->tensors()) {
        if (!kernels::has_kernels(t.type))
            throw Error(in_path + ": tensor '" + t.name + "' has a type Strata cannot read (raw type " +
                        std::to_string(t.raw_type) + ")");
        total += t.nbytes;
        if (!is_float_type(t.type)) rep.input_quantized = true;
    }
    if (rep.input_quantized)
        rep.warnings.push_back(in_path + " is already quantized: its quantized tensors are de-quantized and quantized "
                                         "again, which adds error; quantize from an F32/F16/BF16 file where you can");

    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    if (opt.recipe.file_type >= 0) w.set("general.file_type", gguf::Value::make_u32(static_cast<uint32_t>(opt.recipe.file_type)));
    w.set("general.quantization_version", gguf::Value::make_u32(2));

    cpu::ThreadPool pool(std::max(1, opt.threads));
    // Converted tensors are made while the writer streams the file, one at a
    // time, so the output is never held in memory whole (a model larger than
    // RAM quantizes). The reports are filled in as they are made.
    rep.tensors.reserve(in->tensors().size());
    uint64_t done = 0;
    for (const gguf::TensorInfo& t : in->tensors()) {
        TensorReport tr;
        tr.name = t.name;
        int64_t layer = -1;
        tr.cls = classify(t.name, &layer);
        tr.from = t.type;
        const WeightType want = target_type(opt.recipe, t, &tr.note);
        tr.to = want;
        tr.bytes_in = t.nbytes;
        const Transform tf = transform_for(opt, t);
        std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(1, t.n_dims));
        done += t.nbytes;
        if (want == t.type && !tf.any()) {
            w.add_tensor_view(t.name, t.type, ne, t.data, t.nbytes);  // copied as it is
            tr.bytes_out = t.nbytes;
        } else {
            tr.scaled = tf.any();
            tr.bytes_out = static_cast<uint64_t>(kernels::row_bytes(want, t.ne[0])) *
                           static_cast<uint64_t>(t.n_elements() / t.ne[0]);
            const size_t index = rep.tensors.size();
            w.add_tensor_produced(t.name, want, ne, tr.bytes_out, [&, index, want, tf, done, tp = &t] {
                std::vector<uint8_t> out = convert(*tp, want, tf, opt, pool, &rep.tensors[index], &rep);
                if (opt.progress && !opt.progress(done, total)) throw Cancelled("quantization cancelled; nothing was written");
                return out;
            });
        }
        rep.bytes_in += tr.bytes_in;
        rep.bytes_out += tr.bytes_out;
        rep.tensors.push_back(std::move(tr));
    }
    w.write(out_path);
    if (opt.progress) opt.progress(total, total);
    rep.file_bytes = w.byte_size();
    return rep;
}

}  // namespace strata::quant
