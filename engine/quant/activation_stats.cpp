#include "quant/activation_stats.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "platform/thread_pool.h"
#include "common/error.h"
#include "runner/context.h"
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

namespace {

// cov (n x n, upper triangle) += X^T X for the `tokens` rows of X. The rows
// of cov are taken in blocks that stay in cache while every token passes
// over them (one token at a time over all of cov would stream its cols^2
// doubles from memory once per token), and the blocks are shared among the
// threads. Each element still sums the tokens in order: the same result
// whatever the blocking and the thread count.
void accumulate_second_moments(double* cov, const float* X, int64_t tokens, int64_t cols, cpu::ThreadPool& pool,
                               std::vector<double>& xd) {
    xd.resize(static_cast<size_t>(tokens * cols));
    for (int64_t k = 0; k < tokens * cols; ++k) xd[static_cast<size_t>(k)] = X[k];
    constexpr int64_t kRowsPerBlock = 16;
    const int64_t blocks = (cols + kRowsPerBlock - 1) / kRowsPerBlock;
    pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int) {
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t i0 = b * kRowsPerBlock, i1 = std::min(cols, i0 + kRowsPerBlock);
            for (int64_t t = 0; t < tokens; ++t) {
                const double* x = xd.data() + t * cols;
                for (int64_t i = i0; i < i1; ++i) {
                    const double xi = x[i];
                    if (xi == 0.0) continue;
                    double* row = cov + i * cols;  // the upper triangle: the matrix is symmetric
                    for (int64_t j = i; j < cols; ++j) row[j] += xi * x[j];
                }
            }
        }
    });
}

}  // namespace

uint64_t second_moment_bytes(const gguf::TensorInfo& t) {
    return static_cast<uint64_t>(t.ne[0]) * static_cast<uint64_t>(t.ne[0]) * sizeof(double) *
           static_cast<uint64_t>(t.n_matrices());
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
            if (t.n_dims >= 2 && o.covariance(t.name)) bytes += second_moment_bytes(t);
        if (bytes > o.max_covariance_bytes)
            throw Error("calibration: the inputs' second moments for error compensation would take " +
                        std::to_string(bytes >> 20) + " MiB (over the limit of " +
                        std::to_string(o.max_covariance_bytes >> 20) +
                        " MiB): too large a model for --gptq on this machine; quantize without it (--awq and the importance "
                        "matrix need one value per channel)");
    }
    // The second moments' sums run between the forward pass's products, when
    // its threads are idle: a pool of as many threads shares them.
    cpu::ThreadPool pool(o.covariance ? std::max(1, o.threads) : 1);
    std::vector<double> xd;
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
        if (!e.cov.empty()) accumulate_second_moments(e.cov.data() + slab * e.cols * e.cols, X, n, e.cols, pool, xd);
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
