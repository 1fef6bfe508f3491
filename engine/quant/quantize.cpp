#include "quant/quantize.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "backend/cpu/thread_pool.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

bool is_float(WeightType t) { return t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16; }

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
    const int64_t matrices = t.n_dims >= 3 ? t.ne[2] : 1;
    if (static_cast<int64_t>(it->second.size()) != t.ne[0] * matrices) {
        rep->warnings.push_back("importance matrix entry '" + t.name + "' has " + std::to_string(it->second.size()) +
                                " values for " + std::to_string(t.ne[0] * matrices) + " columns: quantized without it");
        return nullptr;
    }
    tr->weighted = true;
    return it->second.data();
}

}  // namespace

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
        if (!is_float(t.type)) rep.input_quantized = true;
    }
    if (rep.input_quantized)
        rep.warnings.push_back(in_path + " is already quantized: its quantized tensors are de-quantized and quantized "
                                         "again, which adds error; quantize from an F32/F16/BF16 file where you can");

    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    if (opt.recipe.file_type >= 0) w.set("general.file_type", gguf::Value::make_u32(static_cast<uint32_t>(opt.recipe.file_type)));
    w.set("general.quantization_version", gguf::Value::make_u32(2));

    cpu::ThreadPool pool(std::max(1, opt.threads));
    uint64_t done = 0;
    std::vector<float> scratch;
    for (const gguf::TensorInfo& t : in->tensors()) {
        TensorReport tr;
        tr.name = t.name;
        int64_t layer = -1;
        tr.cls = classify(t.name, &layer);
        tr.from = t.type;
        const bool matrix = t.n_dims >= 2;
        const bool down = t.name.find("ffn_down_exps") != std::string::npos;
        WeightType want = matrix ? opt.recipe.type_for(tr.cls, layer, down, t.type) : t.type;
        if (want != t.type) want = fit_row(want, t.ne[0], &tr.note);
        tr.to = want;
        tr.bytes_in = t.nbytes;
        std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(1, t.n_dims));
        if (want == t.type) {
            w.add_tensor_view(t.name, t.type, ne, t.data, t.nbytes);  // copied as it is
            tr.bytes_out = t.nbytes;
        } else {
            const int64_t row = t.ne[0];
            const int64_t rows = t.n_elements() / row;
            const int64_t in_row = kernels::row_bytes(t.type, row), out_row = kernels::row_bytes(want, row);
            std::vector<uint8_t> out(static_cast<size_t>(out_row * rows));
            const int n_threads = pool.size();
            scratch.assign(static_cast<size_t>(row * n_threads), 0.0f);
            const float* imp = importance_for(opt.importance, t, want, &tr, &rep);
            // A 3-D tensor (the experts) has one importance vector per matrix.
            const int64_t rows_per_matrix = t.n_dims >= 3 ? t.ne[1] : rows;
            pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int ti) {
                float* f = scratch.data() + static_cast<size_t>(row) * static_cast<size_t>(ti);
                for (int64_t r = r0; r < r1; ++r) {
                    kernels::dequantize_row(t.type, t.data + r * in_row, f, row);
                    uint8_t* dst = out.data() + r * out_row;
                    if (!imp || !kernels::quantize_row_weighted_ref(want, f, dst, row, imp + (r / rows_per_matrix) * row))
                        kernels::quantize_row(want, f, dst, row);
                }
            });
            tr.bytes_out = out.size();
            w.add_tensor(t.name, want, ne, std::move(out));
        }
        rep.bytes_in += tr.bytes_in;
        rep.bytes_out += tr.bytes_out;
        rep.tensors.push_back(std::move(tr));
        done += t.nbytes;
        if (opt.progress && !opt.progress(done, total)) throw Cancelled("quantization cancelled; nothing was written");
    }
    w.write(out_path);
    rep.file_bytes = w.byte_size();
    return rep;
}

}  // namespace strata::quant
