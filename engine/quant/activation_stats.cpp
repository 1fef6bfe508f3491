#include "quant/activation_stats.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "model/context.h"
#include "model/model.h"

namespace strata::quant {

ImportanceMatrix ActivationStats::importance(int64_t* unreached) const {
    ImportanceMatrix m;
    m.chunks = static_cast<int>(prompts);
    m.dataset = dataset;
    int64_t missing = 0;
    for (const auto& [name, e] : entries) {
        std::vector<float> v(e.sum_sq.size(), 1.0f);
        for (size_t slab = 0; slab < e.tokens.size(); ++slab) {
            const int64_t n = e.tokens[slab];
            if (n == 0) {
                ++missing;
                continue;
            }
            for (int64_t c = 0; c < e.cols; ++c) {
                const size_t i = slab * static_cast<size_t>(e.cols) + static_cast<size_t>(c);
                v[i] = static_cast<float>(e.sum_sq[i] / static_cast<double>(n));
            }
        }
        m.values[name] = std::move(v);
    }
    if (unreached) *unreached = missing;
    return m;
}

ActivationStats collect_activation_stats(const model::Model& m, const std::vector<std::string>& prompts,
                                         const CalibrationOptions& o) {
    if (prompts.empty()) throw Error("calibration: no prompts to collect activation statistics from");
    if (o.max_tokens_per_prompt < 2) throw Error("calibration: a prompt must be allowed at least 2 tokens");
    ActivationStats st;
    model::ContextParams cp;
    cp.n_ctx = o.max_tokens_per_prompt;
    cp.n_batch = std::min<int64_t>(o.max_tokens_per_prompt, 512);
    cp.n_threads = std::max(1, o.threads);
    model::Context ctx(m, cp);
    // The stacked tensors' slab counts, so an entry knows its experts up front.
    std::map<std::string, int64_t, std::less<>> slabs;
    for (const model::LayerWeights& L : m.weights().layers)
        if (L.n_experts() > 0 && L.experts_stacked.gate.data) {
            // Split experts (ffn_gate.N.weight) are tensors of one slab each.
            const model::FfnMatrices& f = L.experts_stacked;
            for (const model::Matrix* x : {&f.gate, &f.up, &f.down}) slabs[std::string(x->name)] = L.n_experts();
        }
    if (o.covariance) {
        // The second moments' size, known from the file before anything runs.
        uint64_t bytes = 0;
        for (const gguf::TensorInfo& t : m.file().tensors())
            if (t.n_dims >= 2 && o.covariance(t.name))
                bytes += static_cast<uint64_t>(t.ne[0]) * static_cast<uint64_t>(t.ne[0]) * sizeof(double) *
                         static_cast<uint64_t>(t.n_matrices());
        if (bytes > o.max_covariance_bytes)
            throw Error("calibration: the inputs' second moments for error compensation would take " +
                        std::to_string(bytes >> 20) + " MiB (over the limit of " +
                        std::to_string(o.max_covariance_bytes >> 20) +
                        " MiB): too large a model for --gptq on this machine; quantize without it (--awq and the importance "
                        "matrix need one value per channel)");
    }
    ctx.set_activation_observer([&](const model::Matrix& W, const float* X, int64_t n, int32_t expert) {
        auto it = st.entries.find(W.name);
        if (it == st.entries.end()) {
            ActivationStats::Entry e;
            e.cols = W.cols;
            const auto s = slabs.find(W.name);
            const int64_t k = s != slabs.end() ? s->second : 1;
            e.sum_sq.assign(static_cast<size_t>(k * W.cols), 0.0);
            e.tokens.assign(static_cast<size_t>(k), 0);
            if (o.covariance && o.covariance(std::string(W.name)))
                e.cov.assign(static_cast<size_t>(k * W.cols * W.cols), 0.0);
            it = st.entries.emplace(std::string(W.name), std::move(e)).first;
        }
        ActivationStats::Entry& e = it->second;
        const int64_t slab = expert >= 0 && static_cast<size_t>(expert) < e.tokens.size() ? expert : 0;
        double* acc = e.sum_sq.data() + slab * e.cols;
        for (int64_t t = 0; t < n; ++t) {
            const float* x = X + t * W.cols;
            for (int64_t c = 0; c < W.cols; ++c) acc[c] += double(x[c]) * double(x[c]);
        }
        if (!e.cov.empty()) {
            double* cov = e.cov.data() + slab * e.cols * e.cols;
            std::vector<double> xd(static_cast<size_t>(e.cols));
            for (int64_t t = 0; t < n; ++t) {
                const float* x = X + t * W.cols;
                for (int64_t c = 0; c < W.cols; ++c) xd[static_cast<size_t>(c)] = x[c];
                for (int64_t i = 0; i < e.cols; ++i) {
                    const double xi = xd[static_cast<size_t>(i)];
                    if (xi == 0.0) continue;
                    double* row = cov + i * e.cols;  // the upper triangle: the matrix is symmetric
                    for (int64_t j = i; j < e.cols; ++j) row[j] += xi * xd[static_cast<size_t>(j)];
                }
            }
        }
        e.tokens[static_cast<size_t>(slab)] += n;
    });
    const int64_t total = static_cast<int64_t>(prompts.size());
    for (int64_t i = 0; i < total; ++i) {
        std::vector<int32_t> tokens = m.vocab().encode(prompts[static_cast<size_t>(i)], true);
        if (static_cast<int64_t>(tokens.size()) > o.max_tokens_per_prompt) tokens.resize(static_cast<size_t>(o.max_tokens_per_prompt));
        if (!tokens.empty()) {
            ctx.clear();
            (void)ctx.decode(tokens, /*all_logits=*/true);  // every row through the output head too
            st.tokens += static_cast<int64_t>(tokens.size());
            ++st.prompts;
        }
        if (o.progress && !o.progress(i + 1, total)) throw Cancelled("calibration cancelled");
    }
    if (st.tokens == 0) throw Error("calibration: the prompts encode to no tokens");
    return st;
}

void write_llama_imatrix(const ImportanceMatrix& m, const std::string& path) {
    static std::atomic<int> counter{0};
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(path + ": cannot write the importance matrix here (is the folder writable?)");
        auto i32 = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); };
        i32(static_cast<int32_t>(m.values.size()));
        for (const auto& [name, v] : m.values) {
            i32(static_cast<int32_t>(name.size()));
            out.write(name.data(), static_cast<std::streamsize>(name.size()));
            i32(1);  // call count: the values are means already (readers divide by it)
            i32(static_cast<int32_t>(v.size()));
            out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
        }
        i32(m.chunks);
        i32(static_cast<int32_t>(m.dataset.size()));
        out.write(m.dataset.data(), static_cast<std::streamsize>(m.dataset.size()));
        out.flush();
        if (!out) {
            out.close();
            std::remove(tmp.c_str());
            throw Error(path + ": writing the importance matrix failed (disk full?)");
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(path + ": cannot replace it with the new importance matrix: " + ec.message());
    }
}

}  // namespace strata::quant
