// The CUDA kernels (kernels/cuda) against their scalar twins in kernels/ref:
// every kernel, every weight format, on shapes with tails and edges (rows not
// a multiple of a block's warps, token counts not a multiple of a pass, odd
// lengths and length 1, keys not a multiple of a KV block and keys ending
// exactly at one, strided rows whose gaps must stay untouched).
//
// One source, two modes:
//   - test_cuda_kernels (label gpu): on a real GPU; skipped, saying why, where
//     no CUDA device exists.
//   - test_cuda_on_cpu_kernels (STRATA_CUDA_ON_CPU): the same kernels and the
//     real cuda_runtime.cpp compiled over the CUDA-on-CPU runtime
//     (tests/cuda_on_cpu, each CUDA thread a fiber), run in CI on the CPU.
//     Every CUDA thread costs about 0.1-1 us per barrier or shuffle there, so
//     each case keeps its grids small: the whole suite is about 6 million
//     thread-steps, two thirds of them gemm_q_every_format.
//
// Tolerances (both modes): weights decode exactly (test_cuda_decode), so every
// format gets the same bound, set by F32 accumulation in another order:
//   |gpu - ref| <= 2e-5 * sum_j |w_j x_j| + 1e-6      (weight products)
// and 1e-5 relative for the float ops (expf/sqrt against libm).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#ifndef STRATA_CUDA_ON_CPU
#include "backend/device.h"
#endif
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/quant_types.h"
#include "kernels/ref/gemm_ref.h"
#include "kernels/ref/ops_ref.h"

using namespace strata;
namespace kc = strata::kernels::cuda;
namespace bc = strata::backend::cuda;

namespace {

const kc::QType kAll[] = {kc::QType::F32,  kc::QType::F16,  kc::QType::BF16, kc::QType::Q4_0, kc::QType::Q4_1,
                          kc::QType::Q5_0, kc::QType::Q5_1, kc::QType::Q8_0, kc::QType::Q2_K, kc::QType::Q3_K,
                          kc::QType::Q4_K, kc::QType::Q5_K, kc::QType::Q6_K, kc::QType::MXFP4};
// The float formats: blocks of one element, so rows of any length.
const kc::QType kFloat[] = {kc::QType::F32, kc::QType::F16, kc::QType::BF16};

kernels::WeightType wt(kc::QType t) { return static_cast<kernels::WeightType>(t); }
const char* name_of(kc::QType t) { return kernels::type_traits(wt(t))->name; }

// What a kernel must leave alone (the gaps of strided rows) holds this.
constexpr float kUntouched = -7.25f;

// Device copies of host vectors, freed at the end of the test.
struct Dev {
    memory::Ledger ledger;
    std::vector<bc::DeviceBuffer> bufs;
    bc::Stream stream;
    template <class T>
    T* up(const std::vector<T>& v) {
        bufs.emplace_back(ledger, memory::Account::Activations, memory::Tier::Fast, std::max<uint64_t>(v.size() * sizeof(T), 4));
        bc::copy_to_device(bufs.back().data(), v.data(), v.size() * sizeof(T), stream, "test upload");
        return bufs.back().as<T>();
    }
    template <class T>
    T* zeros(size_t n) { return up(std::vector<T>(n, T{})); }
    float* untouched(size_t n) { return up(std::vector<float>(n, kUntouched)); }
    template <class T>
    std::vector<T> down(const T* p, size_t n) {
        std::vector<T> v(n);
        bc::copy_to_host(v.data(), p, n * sizeof(T), stream, "test download");
        stream.synchronize("test download");
        return v;
    }
    void ok(int code, const char* what) { bc::check(code, what); }
};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

bool close(float got, float want, float tol) { return std::fabs(got - want) <= tol && std::isfinite(got); }
// The float ops' bound.
bool close_rel(float got, float want, float rel) { return close(got, want, rel * (1 + std::fabs(want))); }

// `rows` random rows of type t, quantized as a file stores them.
struct Matrix {
    int64_t rows = 0, cols = 0, row_bytes = 0;
    std::vector<uint8_t> bytes;
    const uint8_t* row(int64_t r) const { return bytes.data() + r * row_bytes; }
};

Matrix random_matrix(std::mt19937& rng, kc::QType t, int64_t rows, int64_t cols, float lo = -1.0f, float hi = 1.0f) {
    const auto* tr = kernels::type_traits(wt(t));
    Matrix m{rows, cols, cols / tr->block_elems * tr->block_bytes, {}};
    m.bytes.resize(size_t(rows * m.row_bytes));
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> f = random_floats(rng, size_t(cols), lo, hi);
        kernels::quantize_row(wt(t), f.data(), m.bytes.data() + r * m.row_bytes, cols);
    }
    return m;
}

// n tokens of `cols` random floats, x_stride apart; the gaps are NaN, so a
// kernel that reads one poisons its sum.
std::vector<float> random_tokens(std::mt19937& rng, int64_t n, int64_t cols, int64_t x_stride) {
    std::vector<float> x = random_floats(rng, size_t(n * x_stride));
    for (int64_t i = 0; i < n; ++i)
        std::fill(x.begin() + i * x_stride + cols, x.begin() + (i + 1) * x_stride, std::numeric_limits<float>::quiet_NaN());
    return x;
}

// Y (n tokens, y_stride apart) against dot_row_ref of W's rows with X's tokens
// (x_stride apart) within the weight products' bound; the gaps of Y's rows
// (rows..y_stride) must still hold kUntouched. Empty when all agree.
QString compare_products(kc::QType t, const Matrix& w, const float* x, int64_t x_stride, int64_t n, const float* y,
                         int64_t y_stride, const QString& what) {
    std::vector<float> wf(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        kernels::dequantize_row(wt(t), w.row(r), wf.data(), w.cols);
        for (int64_t i = 0; i < n; ++i) {
            const float* xi = x + i * x_stride;
            const float want = kernels::dot_row_ref(wt(t), w.row(r), xi, w.cols);
            double mag = 0;
            for (int64_t j = 0; j < w.cols; ++j) mag += std::fabs(double(wf[size_t(j)]) * xi[j]);
            const float got = y[i * y_stride + r];
            if (!close(got, want, float(2e-5 * mag + 1e-6)))
                return QStringLiteral("%1 %2: row %3 token %4: gpu %5, ref %6 (|w.x| %7)")
                    .arg(name_of(t), what).arg(r).arg(i).arg(double(got)).arg(double(want)).arg(mag);
        }
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t r = w.rows; r < y_stride; ++r)
            if (y[i * y_stride + r] != kUntouched)
                return QStringLiteral("%1 %2: token %3 wrote the gap at %4").arg(name_of(t), what).arg(i).arg(r);
    return {};
}

// gemm_q of a random rows x cols matrix over n random tokens, X and Y strided
// (stride == cols / rows: contiguous), against the reference.
QString check_gemm_q(Dev& dev, std::mt19937& rng, kc::QType t, int64_t rows, int64_t cols, int64_t n, int64_t x_stride,
                     int64_t y_stride) {
    const Matrix w = random_matrix(rng, t, rows, cols);
    const std::vector<float> x = random_tokens(rng, n, cols, x_stride);
    float* dy = dev.untouched(size_t(n * y_stride));
    dev.ok(kc::gemm_q(t, dev.up(w.bytes), w.row_bytes, rows, cols, dev.up(x), x_stride, n, dy, y_stride, dev.stream.get()),
           "gemm_q");
    const std::vector<float> y = dev.down(dy, size_t(n * y_stride));
    return compare_products(t, w, x.data(), x_stride, n, y.data(), y_stride,
                            QStringLiteral("rows %1 cols %2 tokens %3 strides %4/%5")
                                .arg(rows).arg(cols).arg(n).arg(x_stride).arg(y_stride));
}

// gemm_q_grouped over groups of tokens (rows offsets[g]..offsets[g+1] of X, a
// random matrix each) against gemm_q on each group's tokens alone, bit for bit
// (the same kernel path, the same passes over the tokens), and against the
// reference.
QString check_grouped(Dev& dev, std::mt19937& rng, kc::QType t, int64_t rows, int64_t cols,
                      const std::vector<int32_t>& offsets, int64_t max_group) {
    const int64_t groups = int64_t(offsets.size()) - 1, n = offsets.back();
    std::vector<Matrix> mats;
    std::vector<const void*> ptrs;
    for (int64_t g = 0; g < groups; ++g) {
        mats.push_back(random_matrix(rng, t, rows, cols));
        ptrs.push_back(dev.up(mats.back().bytes));
    }
    const int64_t row_bytes = mats[0].row_bytes;
    const std::vector<float> x = random_floats(rng, size_t(n * cols));
    const float* dx = dev.up(x);
    float* dy = dev.zeros<float>(size_t(n * rows));
    const void* const* dptrs = reinterpret_cast<const void* const*>(dev.up(ptrs));
    dev.ok(kc::gemm_q_grouped(t, dptrs, row_bytes, rows, cols, dx, cols, dev.up(offsets), groups, max_group, dy, rows,
                              dev.stream.get()),
           "gemm_q_grouped");
    const std::vector<float> y = dev.down(dy, size_t(n * rows));
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t t0 = offsets[size_t(g)], k = offsets[size_t(g + 1)] - t0;
        if (k == 0) continue;
        float* one = dev.zeros<float>(size_t(k * rows));
        dev.ok(kc::gemm_q(t, ptrs[size_t(g)], row_bytes, rows, cols, dx + t0 * cols, cols, k, one, rows, dev.stream.get()),
               "gemm_q");
        const std::vector<float> alone = dev.down(one, size_t(k * rows));
        if (!std::equal(alone.begin(), alone.end(), y.begin() + t0 * rows))
            return QStringLiteral("%1 group %2: grouped differs from gemm_q on its %3 tokens").arg(name_of(t)).arg(g).arg(k);
        const QString err = compare_products(t, mats[size_t(g)], x.data() + t0 * cols, cols, k, y.data() + t0 * rows, rows,
                                             QStringLiteral("group %1").arg(g));
        if (!err.isEmpty()) return err;
    }
    return {};
}

// get_rows of `ids` from a random matrix against dequantize_row; one rounding
// apart at most (a*b-c contracted to an FMA on the GPU).
QString check_get_rows(Dev& dev, std::mt19937& rng, kc::QType t, int64_t rows, int64_t cols,
                       const std::vector<int32_t>& ids) {
    const Matrix w = random_matrix(rng, t, rows, cols, -3, 3);
    float* out = dev.zeros<float>(ids.size() * size_t(cols));
    dev.ok(kc::get_rows(t, dev.up(w.bytes), w.row_bytes, cols, dev.up(ids), int64_t(ids.size()), out, dev.stream.get()),
           "get_rows");
    const std::vector<float> got = dev.down(out, ids.size() * size_t(cols));
    std::vector<float> want(static_cast<size_t>(cols));
    for (size_t i = 0; i < ids.size(); ++i) {
        kernels::dequantize_row(wt(t), w.row(ids[i]), want.data(), cols);
        for (int64_t j = 0; j < cols; ++j)
            if (!close(got[i * size_t(cols) + size_t(j)], want[size_t(j)], 1e-6f * (1 + std::fabs(want[size_t(j)]))))
                return QStringLiteral("%1 cols %2: row %3 element %4").arg(name_of(t)).arg(cols).arg(ids[i]).arg(j);
    }
    return {};
}

// rms_norm of `rows` rows of n (stride apart, weighted or not) against ref::rmsnorm.
QString check_rms_norm(Dev& dev, std::mt19937& rng, int64_t rows, int64_t n, int64_t stride, bool weighted) {
    const std::vector<float> x = random_floats(rng, size_t(rows * stride), -4, 4);
    const std::vector<float> w = random_floats(rng, size_t(n));
    float* dy = dev.untouched(size_t(rows * stride));
    dev.ok(kc::rms_norm(dev.up(x), stride, weighted ? dev.up(w) : nullptr, dy, stride, rows, n, 1e-5f, dev.stream.get()),
           "rms_norm");
    const std::vector<float> y = dev.down(dy, size_t(rows * stride));
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
        kernels::ref::rmsnorm(x.data() + r * stride, weighted ? w.data() : nullptr, want.data(), n, 1e-5f);
        for (int64_t i = 0; i < stride; ++i) {
            const float got = y[size_t(r * stride + i)];
            if (i < n ? !close_rel(got, want[size_t(i)], 1e-5f) : got != kUntouched)
                return QStringLiteral("n %1%2: row %3 element %4: gpu %5")
                    .arg(n).arg(weighted ? "" : " unweighted").arg(r).arg(i).arg(double(got));
        }
    }
    return {};
}

// rope_apply on `tokens` rows (heads * hd + 8 apart) at positions 17t + 3
// against ref::rope_apply per token; the dims past n_rot and the gaps stay.
QString check_rope(Dev& dev, std::mt19937& rng, int64_t tokens, int64_t heads, int64_t hd, int64_t n_rot, bool neox) {
    const int64_t stride = heads * hd + 8;
    std::vector<float> x = random_floats(rng, size_t(tokens * stride));
    std::vector<float> cs(static_cast<size_t>(tokens * n_rot));
    for (int64_t t = 0; t < tokens; ++t) kernels::ref::rope_table(n_rot, 17 * t + 3, 10000.0f, 1.0f, cs.data() + t * n_rot);
    float* dx = dev.up(x);
    dev.ok(kc::rope_apply(dx, tokens, stride, heads, hd, n_rot, dev.up(cs), neox, dev.stream.get()), "rope_apply");
    const std::vector<float> got = dev.down(dx, x.size());
    for (int64_t t = 0; t < tokens; ++t)
        kernels::ref::rope_apply(x.data() + t * stride, heads, hd, n_rot, cs.data() + t * n_rot, neox);
    for (size_t i = 0; i < x.size(); ++i)
        if (!close(got[i], x[i], 1e-5f))
            return QStringLiteral("%1 tokens %2 heads %3 head_dim %4 n_rot %5: element %6: gpu %7, ref %8")
                .arg(neox ? "neox" : "normal").arg(tokens).arg(heads).arg(hd).arg(n_rot).arg(i)
                .arg(double(got[i])).arg(double(x[i]));
    return {};
}

// swiglu, then add and axpy, on n elements. axpy's factor is 0.5: the product
// is exact, so the GPU's FMA and the host's multiply-add agree bit for bit.
QString check_elementwise(Dev& dev, std::mt19937& rng, int64_t n) {
    const std::vector<float> g = random_floats(rng, size_t(n), -6, 6), u = random_floats(rng, size_t(n));
    float* dy = dev.zeros<float>(size_t(n));
    dev.ok(kc::swiglu(dev.up(g), dev.up(u), dy, n, dev.stream.get()), "swiglu");
    std::vector<float> y = dev.down(dy, size_t(n)), want(static_cast<size_t>(n));
    kernels::ref::swiglu(g.data(), u.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i)
        if (!close_rel(y[size_t(i)], want[size_t(i)], 1e-5f)) return QStringLiteral("swiglu n %1: element %2").arg(n).arg(i);
    float* da = dev.up(g);
    dev.ok(kc::add(da, dev.up(u), n, dev.stream.get()), "add");
    dev.ok(kc::axpy(0.5f, dev.up(u), da, n, dev.stream.get()), "axpy");
    y = dev.down(da, size_t(n));
    for (int64_t i = 0; i < n; ++i)
        if (y[size_t(i)] != (g[size_t(i)] + u[size_t(i)]) + 0.5f * u[size_t(i)])
            return QStringLiteral("add/axpy n %1: element %2").arg(n).arg(i);
    return {};
}

// scatter_add_rows of rows (one per dst entry) of `cols` into y_rows rows:
// rows that share a destination add up in order.
QString check_scatter_add(Dev& dev, std::mt19937& rng, const std::vector<int32_t>& dst, int64_t y_rows, int64_t cols) {
    const int64_t rows = int64_t(dst.size());
    const std::vector<float> x = random_floats(rng, size_t(rows * cols)), w = random_floats(rng, size_t(rows));
    std::vector<float> y = random_floats(rng, size_t(y_rows * cols));
    float* dy = dev.up(y);
    dev.ok(kc::scatter_add_rows(dev.up(x), dev.up(w), dev.up(dst), rows, cols, dy, dev.stream.get()), "scatter_add_rows");
    const std::vector<float> got = dev.down(dy, y.size());
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) y[size_t(dst[size_t(i)] * cols + c)] += w[size_t(i)] * x[size_t(i * cols + c)];
    for (size_t i = 0; i < y.size(); ++i)
        if (!close(got[i], y[i], 1e-6f * (1 + std::fabs(y[i]))))
            return QStringLiteral("rows %1 cols %2: element %3: gpu %4, ref %5").arg(rows).arg(cols).arg(i)
                .arg(double(got[i])).arg(double(y[i]));
    return {};
}

// add_bias on rows of cols, stride apart: the bias lands in the first cols of
// each row, bit for bit (one addition), and the gaps stay.
QString check_add_bias(Dev& dev, std::mt19937& rng, int64_t rows, int64_t cols, int64_t stride) {
    const std::vector<float> y = random_floats(rng, size_t(rows * stride)), b = random_floats(rng, size_t(cols));
    float* dy = dev.up(y);
    dev.ok(kc::add_bias(dy, stride, dev.up(b), rows, cols, dev.stream.get()), "add_bias");
    const std::vector<float> got = dev.down(dy, y.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < stride; ++c)
            if (got[size_t(r * stride + c)] != y[size_t(r * stride + c)] + (c < cols ? b[size_t(c)] : 0.0f))
                return QStringLiteral("rows %1 cols %2 stride %3: row %4 column %5").arg(rows).arg(cols).arg(stride).arg(r).arg(c);
    return {};
}

// gated_add with per-row gate logits (sigmoid), then ungated (null logits).
QString check_gated_add(Dev& dev, std::mt19937& rng, int64_t rows, int64_t cols) {
    const std::vector<float> x = random_floats(rng, size_t(rows * cols)), g = random_floats(rng, size_t(rows), -3, 3);
    const std::vector<float> acc = random_floats(rng, size_t(rows * cols));
    float* da = dev.up(acc);
    dev.ok(kc::gated_add(dev.up(x), dev.up(g), rows, cols, da, dev.stream.get()), "gated_add");
    dev.ok(kc::gated_add(dev.up(x), nullptr, rows, cols, da, dev.stream.get()), "gated_add");
    const std::vector<float> got = dev.down(da, acc.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const size_t i = size_t(r * cols + c);
            const float want = (acc[i] + 1.0f / (1.0f + std::exp(-g[size_t(r)])) * x[i]) + x[i];
            if (!close(got[i], want, 1e-6f * (1 + std::fabs(want))))
                return QStringLiteral("rows %1 cols %2: row %3 column %4").arg(rows).arg(cols).arg(r).arg(c);
        }
    return {};
}

// kv_store of n tokens (rows of n_kv * hd, k_pad / v_pad floats more apart)
// into a zeroed pool of blocks of bt slots at (blk[t], slot[t]): each stored
// row where attention_paged reads it, and nothing else written.
QString check_kv_store(Dev& dev, std::mt19937& rng, int64_t n_kv, int64_t hd, int64_t bt, int64_t blocks,
                       const std::vector<int32_t>& blk, const std::vector<int32_t>& slot, int64_t k_pad, int64_t v_pad) {
    const int64_t n = int64_t(blk.size()), kv_dim = n_kv * hd, ks = kv_dim + k_pad, vs = kv_dim + v_pad;
    const int64_t head_stride = bt * hd, block_stride = n_kv * head_stride, pool = blocks * block_stride;
    const std::vector<float> k = random_floats(rng, size_t(n * ks)), v = random_floats(rng, size_t(n * vs));
    float* kp = dev.zeros<float>(size_t(pool));
    float* vp = dev.zeros<float>(size_t(pool));
    dev.ok(kc::kv_store(dev.up(k), ks, dev.up(v), vs, n, n_kv, hd, kp, vp, block_stride, head_stride, dev.up(blk),
                        dev.up(slot), dev.stream.get()),
           "kv_store");
    std::vector<float> want_k(size_t(pool), 0.0f), want_v(size_t(pool), 0.0f);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < n_kv; ++h)
            for (int64_t d = 0; d < hd; ++d) {
                const size_t at = size_t(blk[size_t(t)] * block_stride + h * head_stride + slot[size_t(t)] * hd + d);
                want_k[at] = k[size_t(t * ks + h * hd + d)];
                want_v[at] = v[size_t(t * vs + h * hd + d)];
            }
    const std::vector<float> got_k = dev.down(kp, size_t(pool)), got_v = dev.down(vp, size_t(pool));
    for (size_t i = 0; i < size_t(pool); ++i)
        if (got_k[i] != want_k[i] || got_v[i] != want_v[i])
            return QStringLiteral("tokens %1 kv heads %2 head_dim %3: pool element %4").arg(n).arg(n_kv).arg(hd).arg(i);
    return {};
}

// router_topk of `tokens` rows of logits (stride apart) against
// ref::router_topk per row: the same ids in the same order, and their weights.
QString check_router(Dev& dev, const std::vector<float>& logits, int64_t tokens, int64_t experts, int64_t stride,
                     int64_t k) {
    float* dl = dev.up(logits);
    int32_t* ids = dev.zeros<int32_t>(size_t(tokens * k));
    float* w = dev.zeros<float>(size_t(tokens * k));
    dev.ok(kc::router_topk(dl, stride, tokens, experts, k, ids, w, dev.stream.get()), "router_topk");
    const std::vector<int32_t> got_ids = dev.down(ids, size_t(tokens * k));
    const std::vector<float> got_w = dev.down(w, size_t(tokens * k));
    std::vector<float> row(static_cast<size_t>(experts));
    std::vector<int32_t> want_ids(static_cast<size_t>(k));
    std::vector<float> want_w(static_cast<size_t>(k));
    for (int64_t t = 0; t < tokens; ++t) {
        std::copy_n(logits.begin() + t * stride, experts, row.begin());
        kernels::ref::router_topk(row.data(), experts, k, nullptr, want_ids.data(), want_w.data());
        for (int64_t r = 0; r < k; ++r)
            if (got_ids[size_t(t * k + r)] != want_ids[size_t(r)] || !close(got_w[size_t(t * k + r)], want_w[size_t(r)], 1e-6f))
                return QStringLiteral("experts %1 k %2: token %3 rank %4: gpu %5 (%6), ref %7 (%8)")
                    .arg(experts).arg(k).arg(t).arg(r).arg(got_ids[size_t(t * k + r)]).arg(double(got_w[size_t(t * k + r)]))
                    .arg(want_ids[size_t(r)]).arg(double(want_w[size_t(r)]));
    }
    return {};
}

// router_scored of `tokens` rows against ref::router_scored per row: the
// same ids in the same order, their weights and the probabilities.
QString check_router_scored(Dev& dev, std::mt19937& rng, int64_t tokens, int64_t experts, int64_t k, bool sigmoid,
                            bool bias, int64_t groups, int64_t groups_used) {
    const int64_t stride = experts + 2;
    const std::vector<float> logits = random_floats(rng, size_t(tokens * stride), -3, 3);
    const std::vector<float> sb = random_floats(rng, size_t(experts), -0.5, 0.5);
    float* dl = dev.up(logits);
    int32_t* ids = dev.zeros<int32_t>(size_t(tokens * k));
    float* w = dev.zeros<float>(size_t(tokens * k));
    float* sel = dev.zeros<float>(size_t(tokens * experts));
    dev.ok(kc::router_scored(dl, stride, tokens, experts, k, sigmoid, bias ? dev.up(sb) : nullptr, groups, groups_used, sel,
                             ids, w, dev.stream.get()),
           "router_scored");
    const std::vector<int32_t> got_ids = dev.down(ids, size_t(tokens * k));
    const std::vector<float> got_w = dev.down(w, size_t(tokens * k)), got_p = dev.down(dl, logits.size());
    std::vector<float> row(static_cast<size_t>(experts)), scratch(static_cast<size_t>(experts)), want_w(static_cast<size_t>(k));
    std::vector<int32_t> want_ids(static_cast<size_t>(k));
    const QString what = QStringLiteral("experts %1 k %2 %3 bias %4 groups %5/%6")
                             .arg(experts).arg(k).arg(sigmoid ? "sigmoid" : "softmax").arg(bias).arg(groups_used).arg(groups);
    for (int64_t t = 0; t < tokens; ++t) {
        std::copy_n(logits.begin() + t * stride, experts, row.begin());
        kernels::ref::router_scored(row.data(), experts, k, sigmoid, bias ? sb.data() : nullptr, groups, groups_used,
                                    nullptr, scratch.data(), want_ids.data(), want_w.data());
        for (int64_t e = 0; e < experts; ++e)
            if (!close(got_p[size_t(t * stride + e)], row[size_t(e)], 1e-6f)) return what + QStringLiteral(": probability %1").arg(e);
        for (int64_t r = 0; r < k; ++r)
            if (got_ids[size_t(t * k + r)] != want_ids[size_t(r)] || !close(got_w[size_t(t * k + r)], want_w[size_t(r)], 1e-6f))
                return what + QStringLiteral(": token %1 rank %2: gpu %3, ref %4").arg(t).arg(r).arg(got_ids[size_t(t * k + r)]).arg(want_ids[size_t(r)]);
    }
    return {};
}

// A paged-attention problem: n_head query heads over n_kv KV heads of hd,
// blocks of bt positions in a pool of pool_blocks; token t reads keys[t] keys
// of the sequence whose block table starts at tables[offset[t]]. q and out
// rows are n_head * hd + pad floats apart.
struct Paged {
    int64_t n_head, n_kv, hd, bt, pool_blocks;
    std::vector<int32_t> tables, offset, keys;
    int64_t pad = 0;
    int64_t window = 0;        // > 0: a sliding window of the last `window` keys
    int64_t chunk = 0;         // > 0: chunked attention, the keys of the query's own chunk
    std::vector<float> sinks = {};  // one logit per query head, or none
};

// The reference of one (token, head): the keys and values gathered from the
// pool in sequence order (the window's only), then ref::attn_scores, softmax
// (ops::softmax_sink with a sink, as the CPU's gpt-oss attention) and
// attn_accumulate.
std::vector<float> attention_ref(const Paged& c, const std::vector<float>& kpool, const std::vector<float>& vpool,
                                 const float* qh, int64_t t, int64_t h, float scale) {
    const int64_t keys = c.keys[size_t(t)], hd = c.hd, g = h / (c.n_head / c.n_kv);
    int64_t first = c.window > 0 && keys > c.window ? keys - c.window : 0;
    if (c.chunk > 0) first = std::max(first, (keys - 1) / c.chunk * c.chunk);
    const int64_t m = keys - first;
    const int64_t head_stride = c.bt * hd, block_stride = c.n_kv * head_stride;
    std::vector<float> kk(static_cast<size_t>(m * hd)), vv(static_cast<size_t>(m * hd)), s(static_cast<size_t>(m)),
        o(static_cast<size_t>(hd), 0.0f);
    for (int64_t i = 0; i < m; ++i) {
        const int64_t j = first + i;
        const int64_t b = c.tables[size_t(c.offset[size_t(t)] + j / c.bt)];
        const size_t off = size_t(b * block_stride + g * head_stride + (j % c.bt) * hd);
        std::copy_n(kpool.begin() + long(off), hd, kk.begin() + i * hd);
        std::copy_n(vpool.begin() + long(off), hd, vv.begin() + i * hd);
    }
    kernels::ref::attn_scores(qh, 1, kk.data(), m, hd, scale, s.data(), m);
    if (c.sinks.empty())
        kernels::ref::softmax(s.data(), m);
    else
        kernels::ops::softmax_sink(s.data(), m, c.sinks[size_t(h)]);
    kernels::ref::attn_accumulate(s.data(), m, 1, vv.data(), m, hd, o.data());
    return o;
}

// attention_paged on a random pool and queries against attention_ref, within
// 1e-5 (outputs are convex combinations of values in [-1, 1]); the out rows'
// gaps stay.
QString check_attention(Dev& dev, std::mt19937& rng, const Paged& c) {
    const int64_t hd = c.hd, head_stride = c.bt * hd, block_stride = c.n_kv * head_stride;
    const int64_t tokens = int64_t(c.keys.size()), stride = c.n_head * hd + c.pad;
    const std::vector<float> kpool = random_floats(rng, size_t(c.pool_blocks * block_stride));
    const std::vector<float> vpool = random_floats(rng, size_t(c.pool_blocks * block_stride));
    const std::vector<float> q = random_floats(rng, size_t(tokens * stride));
    float* out = dev.untouched(size_t(tokens * stride));
    const float scale = 1.0f / std::sqrt(float(hd));
    dev.ok(kc::attention_paged(dev.up(q), stride, tokens, c.n_head, c.n_kv, hd, dev.up(kpool), dev.up(vpool), c.bt,
                               block_stride, head_stride, dev.up(c.tables), dev.up(c.offset), dev.up(c.keys), scale,
                               c.sinks.empty() ? nullptr : dev.up(c.sinks), c.window, c.chunk, out, stride,
                               dev.stream.get()),
           "attention_paged");
    const std::vector<float> got = dev.down(out, size_t(tokens * stride));
    const QString shape = QStringLiteral("heads %1/%2 head_dim %3 block %4 window %5 chunk %6%7")
                              .arg(c.n_head).arg(c.n_kv).arg(hd).arg(c.bt).arg(c.window).arg(c.chunk)
                              .arg(c.sinks.empty() ? QString() : QStringLiteral(" sinks"));
    for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const std::vector<float> o = attention_ref(c, kpool, vpool, q.data() + t * stride + h * hd, t, h, scale);
            for (int64_t d = 0; d < hd; ++d) {
                const float g = got[size_t(t * stride + h * hd + d)];
                if (!close(g, o[size_t(d)], 1e-5f))
                    return QStringLiteral("%1: token %2 (%3 keys) head %4 dim %5: gpu %6, ref %7")
                        .arg(shape).arg(t).arg(c.keys[size_t(t)]).arg(h).arg(d).arg(double(g)).arg(double(o[size_t(d)]));
            }
        }
        for (int64_t i = c.n_head * hd; i < stride; ++i)
            if (got[size_t(t * stride + i)] != kUntouched) return QStringLiteral("%1: token %2 wrote its gap").arg(shape).arg(t);
    }
    return {};
}

// read_sum of n16 16-byte words (4 * n16 32-bit words 1, 2, 3, ...).
QString check_read_sum(Dev& dev, int64_t n16) {
    std::vector<uint32_t> words(size_t(n16 * 4));
    std::iota(words.begin(), words.end(), 1u);
    unsigned long long* sum = dev.zeros<unsigned long long>(1);
    dev.ok(kc::read_sum(dev.up(words), n16, sum, dev.stream.get()), "read_sum");
    const unsigned long long want = std::accumulate(words.begin(), words.end(), 0ull);
    const unsigned long long got = dev.down(sum, 1)[0];
    if (got != want) return QStringLiteral("%1 words: sum %2, want %3").arg(n16).arg(got).arg(want);
    return {};
}

}  // namespace

// Every check_* returns what went wrong (empty: nothing).
#define CHECK_OK(expr)                                     \
    do {                                                   \
        const QString err_ = (expr);                       \
        QVERIFY2(err_.isEmpty(), qPrintable(err_));        \
    } while (0)

class TestCudaKernels : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
#ifndef STRATA_CUDA_ON_CPU
        const backend::DeviceProbe& p = backend::probe_devices();
        if (p.gpus.empty()) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(p.why_none)));
        bc::set_device(0);
        qInfo("%s", backend::describe_gpu(p.gpus[0]).c_str());
#else
        bc::set_device(0);
        qInfo("CUDA on the CPU (tests/cuda_on_cpu): each CUDA thread a fiber");
#endif
    }

    // ---- gemm_q ------------------------------------------------------------

    // Every format, several blocks per row; rows 1, a tail of the 4-row blocks
    // and many blocks; tokens 1, a partial pass, one whole pass, and two passes.
    void gemm_q_every_format() {
        std::mt19937 rng(7);
        Dev dev;
        for (kc::QType t : kAll) {
            const int64_t cols = std::max<int64_t>(kc::block_elems(t), 256) * 3;
            for (int64_t rows : {1, 5, 67})
                for (int64_t n : {1, 3, 8, 11}) CHECK_OK(check_gemm_q(dev, rng, t, rows, cols, n, cols, rows));
        }
    }

    // Float formats have blocks of one element: rows of 33 and 257 leave a
    // warp's lanes partly idle on the last lap. One row and one token; and a
    // tail of rows over 19 tokens (three passes, the last of 3), strided.
    void gemm_q_odd_float_cols() {
        std::mt19937 rng(19);
        Dev dev;
        for (kc::QType t : kFloat)
            for (int64_t cols : {33, 257}) {
                CHECK_OK(check_gemm_q(dev, rng, t, 1, cols, 1, cols, 1));
                CHECK_OK(check_gemm_q(dev, rng, t, 6, cols, 19, cols + 3, 6 + 2));
            }
    }

    // Every format: a tail of rows (6 = 4 + 2), 19 tokens (gridDim.y 3, the
    // last pass partial), X and Y rows with gaps (NaN in X's: never read;
    // Y's: never written).
    void gemm_q_strided_token_passes() {
        std::mt19937 rng(23);
        Dev dev;
        for (kc::QType t : kAll) {
            const int64_t cols = std::max<int64_t>(kc::block_elems(t), 256);
            CHECK_OK(check_gemm_q(dev, rng, t, 6, cols, 19, cols + 13, 6 + 5));
        }
    }

    // ---- gemm_q_grouped ----------------------------------------------------

    // Every format; groups of 3, 0 (empty), 11 (two passes, the last of 3) and
    // 1 tokens; max_group 17 sizes a third row of blocks that finds no tokens.
    void gemm_q_grouped_every_format() {
        std::mt19937 rng(11);
        Dev dev;
        for (kc::QType t : kAll) CHECK_OK(check_grouped(dev, rng, t, 13, 512, {0, 3, 3, 14, 15}, 17));
    }

    // ---- get_rows ----------------------------------------------------------

    void get_rows_every_format() {
        std::mt19937 rng(3);
        Dev dev;
        for (kc::QType t : kAll) CHECK_OK(check_get_rows(dev, rng, t, 10, 768, {9, 0, 4, 4, 7}));
    }

    // Rows of 1, 33 and 257 floats (the last a second lap of the 256 threads
    // for one element).
    void get_rows_odd_float_cols() {
        std::mt19937 rng(29);
        Dev dev;
        for (kc::QType t : kFloat)
            for (int64_t cols : {1, 33, 257}) CHECK_OK(check_get_rows(dev, rng, t, 3, cols, {2, 0, 2}));
    }

    // ---- float ops ---------------------------------------------------------

    // 3 rows of 1000 (a tail of the 256 threads), strided.
    void rms_norm_rows() {
        std::mt19937 rng(5);
        Dev dev;
        CHECK_OK(check_rms_norm(dev, rng, 3, 1000, 1024, true));
    }

    // Lengths 1 (one thread of 256 works), 31 and 33 (a warp's tail either
    // side of one warp), 4096 (every warp, 16 laps); weighted and not.
    void rms_norm_lengths() {
        std::mt19937 rng(31);
        Dev dev;
        for (int64_t n : {1, 31, 33, 4096})
            for (bool weighted : {true, false}) CHECK_OK(check_rms_norm(dev, rng, 2, n, n + 3, weighted));
    }

    // Normal and NeoX, partial rotation (n_rot < head_dim), per-token positions.
    void rope_partial_rotation() {
        std::mt19937 rng(5);
        Dev dev;
        for (bool neox : {false, true}) CHECK_OK(check_rope(dev, rng, 5, 3, 64, 32, neox));
    }

    // head_dim 256 rotated whole (n_rot == head_dim), one token and nine.
    void rope_full_head() {
        std::mt19937 rng(37);
        Dev dev;
        for (bool neox : {false, true})
            for (int64_t tokens : {1, 9}) CHECK_OK(check_rope(dev, rng, tokens, 2, 256, 256, neox));
    }

    // swiglu, add, axpy: length 1, 257 (a second block for one element), 4099.
    void swiglu_add_axpy() {
        std::mt19937 rng(41);
        Dev dev;
        for (int64_t n : {1, 257, 4099}) CHECK_OK(check_elementwise(dev, rng, n));
    }

    // The weighted combine: rows added into their destinations in order; one
    // row of one column, and 257 columns (a second block for one column).
    void scatter_add_rows() {
        std::mt19937 rng(43);
        Dev dev;
        CHECK_OK(check_scatter_add(dev, rng, {1, 0, 1, 2, 0, 1, 2}, 3, 300));
        CHECK_OK(check_scatter_add(dev, rng, {0}, 1, 1));
        CHECK_OK(check_scatter_add(dev, rng, {3, 1, 3, 3}, 4, 1));
        CHECK_OK(check_scatter_add(dev, rng, {2, 2, 0, 2, 1}, 3, 257));
    }

    void add_bias() {
        std::mt19937 rng(17);
        Dev dev;
        CHECK_OK(check_add_bias(dev, rng, 3, 70, 80));
        CHECK_OK(check_add_bias(dev, rng, 1, 1, 1));
        CHECK_OK(check_add_bias(dev, rng, 5, 1, 3));
        CHECK_OK(check_add_bias(dev, rng, 2, 257, 263));
    }

    void gated_add() {
        std::mt19937 rng(47);
        Dev dev;
        CHECK_OK(check_gated_add(dev, rng, 3, 70));
        CHECK_OK(check_gated_add(dev, rng, 1, 1));
        CHECK_OK(check_gated_add(dev, rng, 3, 257));
    }

    // Tokens to (block, slot), blocks shuffled; one token of one element; 7
    // tokens of 3 heads of 33 with padded K and V rows.
    void kv_store() {
        std::mt19937 rng(53);
        Dev dev;
        CHECK_OK(check_kv_store(dev, rng, 2, 32, 8, 5, {3, 3, 0, 4}, {0, 7, 5, 1}, 0, 0));
        CHECK_OK(check_kv_store(dev, rng, 1, 1, 4, 2, {1}, {3}, 0, 0));
        CHECK_OK(check_kv_store(dev, rng, 3, 33, 4, 3, {2, 0, 2, 1, 0, 2, 1}, {0, 3, 3, 1, 0, 1, 0}, 5, 2));
    }

    // ---- router_scored, swiglu_oai, add_bias_rows, MLA ----------------------

    void router_scored_matches_reference() {
        std::mt19937 rng(71);
        Dev dev;
        CHECK_OK(check_router_scored(dev, rng, 19, 64, 8, true, true, 8, 4));    // DeepSeek-V3's shape
        CHECK_OK(check_router_scored(dev, rng, 7, 64, 6, false, false, 8, 3));   // V2: softmax, groups by best
        CHECK_OK(check_router_scored(dev, rng, 5, 16, 4, true, true, 0, 0));     // no groups
        CHECK_OK(check_router_scored(dev, rng, 3, 16, 16, true, false, 4, 4));   // every expert, every group
    }

    void swiglu_oai_matches_reference() {
        std::mt19937 rng(73);
        Dev dev;
        const int64_t n = 1000;
        const std::vector<float> g = random_floats(rng, size_t(n), -10, 10), u = random_floats(rng, size_t(n), -10, 10);
        float* dy = dev.zeros<float>(size_t(n));
        dev.ok(kc::swiglu_oai(dev.up(g), dev.up(u), dy, n, 1.702f, 7.0f, dev.stream.get()), "swiglu_oai");
        const std::vector<float> got = dev.down(dy, size_t(n));
        std::vector<float> want(static_cast<size_t>(n));
        kernels::ref::swiglu_oai(g.data(), u.data(), want.data(), n, 1.702f, 7.0f);
        for (int64_t i = 0; i < n; ++i)
            QVERIFY2(close(got[size_t(i)], want[size_t(i)], 1e-6f * (1 + std::fabs(want[size_t(i)]))), qPrintable(QString::number(i)));
    }

    // Activations rounded through Q8_0 as the reference quantizes them:
    // bit for bit, in place and into another buffer.
    void round_q8_0_matches_reference() {
        std::mt19937 rng(89);
        Dev dev;
        const int64_t rows = 7, cols = 96, stride = 100;
        std::vector<float> x = random_floats(rng, size_t(rows * stride), -4, 4);
        for (int64_t j = 0; j < 32; ++j) x[size_t(2 * stride + j)] = 0.0f;  // an all-zero block
        float* dx = dev.up(x);
        float* dy = dev.zeros<float>(size_t(rows * cols));
        dev.ok(kc::round_q8_0(dx, stride, rows, cols, dy, cols, dev.stream.get()), "round_q8_0 into");
        dev.ok(kc::round_q8_0(dx, stride, rows, cols, nullptr, 0, dev.stream.get()), "round_q8_0 in place");
        const std::vector<float> into = dev.down(dy, size_t(rows * cols)), inplace = dev.down(dx, x.size());
        for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> want(x.begin() + r * stride, x.begin() + r * stride + cols);
            kernels::ref::round_q8_0(want.data(), cols);
            for (int64_t j = 0; j < cols; ++j) {
                QVERIFY2(into[size_t(r * cols + j)] == want[size_t(j)], qPrintable(QString("row %1 column %2").arg(r).arg(j)));
                QVERIFY2(inplace[size_t(r * stride + j)] == want[size_t(j)], qPrintable(QString("in place: row %1 column %2").arg(r).arg(j)));
            }
            for (int64_t j = cols; j < stride; ++j) QCOMPARE(inplace[size_t(r * stride + j)], x[size_t(r * stride + j)]);
        }
    }

    void add_bias_rows_picks_each_rows_bias() {
        std::mt19937 rng(79);
        Dev dev;
        const int64_t rows = 9, cols = 37, stride = 40, table_rows = 5;
        const std::vector<float> y = random_floats(rng, size_t(rows * stride)), table = random_floats(rng, size_t(table_rows * cols));
        const std::vector<int32_t> pick = {4, 0, 0, 2, 1, 4, 3, 3, 0};
        float* dy = dev.up(y);
        dev.ok(kc::add_bias_rows(dy, stride, dev.up(table), cols, dev.up(pick), rows, cols, dev.stream.get()), "add_bias_rows");
        const std::vector<float> got = dev.down(dy, y.size());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < stride; ++c) {
                const float want = y[size_t(r * stride + c)] + (c < cols ? table[size_t(pick[size_t(r)] * cols + c)] : 0.0f);
                QVERIFY2(got[size_t(r * stride + c)] == want, qPrintable(QString("row %1 column %2").arg(r).arg(c)));
            }
    }

    // qwen35moe's gated delta net, kernel by kernel against the reference:
    // two sequences' tokens interleaved in one chunk (each state carried from
    // token to token, zeroed at position 0), 2 key and 4 value heads of 32.
    // Sequence 0 updates its state in place (slot 0); sequence 1 keeps the
    // state before each token (slots 1..3 in turn, as a rewindable sequence).
    void delta_net_kernels_match_reference() {
        std::mt19937 rng(97);
        Dev dev;
        const int64_t Hk = 2, H = 4, d = 32, K = 4, C = (2 * Hk + H) * d, V = H * d;
        const int64_t conv_floats = (K - 1) * C, per_seq = conv_floats + H * d * d;
        const std::vector<int32_t> seq = {0, 1, 0, 0, 1, 1, 0};
        std::vector<int32_t> n_keys, slot_in, slot_out;
        int32_t next[2] = {0, 0};
        for (int32_t s : seq) {
            const int32_t pos = next[s]++;
            n_keys.push_back(pos + 1);
            slot_in.push_back(s == 0 ? 0 : 1 + pos % 3);
            slot_out.push_back(s == 0 ? 0 : 1 + (pos + 1) % 3);
        }
        const int64_t n = static_cast<int64_t>(seq.size());
        const std::vector<float> mixed = random_floats(rng, size_t(n * C)), w = random_floats(rng, size_t(C * K));
        std::vector<float> alpha = random_floats(rng, size_t(n * H), -2, 2), beta = random_floats(rng, size_t(n * H), -2, 2);
        const std::vector<float> dt = random_floats(rng, size_t(H)), a = random_floats(rng, size_t(H), -2, -0.1f);
        // The states start as garbage: position 0 must zero them.
        std::vector<float> states = random_floats(rng, size_t(4 * per_seq));

        float* dstate = dev.up(states);
        float* dconv = dev.zeros<float>(size_t(n * C));
        float* dalpha = dev.up(alpha);
        float* dbeta = dev.up(beta);
        float* dout = dev.zeros<float>(size_t(n * V));
        const int32_t* din = dev.up(slot_in);
        const int32_t* dout_slot = dev.up(slot_out);
        const int32_t* dkeys = dev.up(n_keys);
        dev.ok(kc::delta_conv(dev.up(mixed), n, C, K, dev.up(w), dstate, per_seq, 0, din, dout_slot, dkeys, dconv,
                              dev.stream.get()),
               "delta_conv");
        dev.ok(kc::l2_norm_heads(dconv, n, C, 2 * Hk, d, 1e-6f, dev.stream.get()), "l2_norm_heads");
        dev.ok(kc::delta_gates(dalpha, dbeta, dev.up(dt), dev.up(a), n, H, dev.stream.get()), "delta_gates");
        dev.ok(kc::gated_delta(dconv, n, C, Hk, H, d, dalpha, dbeta, dstate, per_seq, conv_floats, din, dout_slot, dkeys,
                               dout, dev.stream.get()),
               "gated_delta");

        std::vector<float> want_conv(size_t(n * C)), want_out(size_t(n * V)), st = states;
        for (int64_t t = 0; t < n; ++t) {
            float* s = st.data() + slot_out[size_t(t)] * per_seq;
            const float* src = st.data() + slot_in[size_t(t)] * per_seq;
            if (n_keys[size_t(t)] == 1) {
                std::fill(s, s + per_seq, 0.0f);
                src = s;
            }
            float* c = want_conv.data() + t * C;
            kernels::ref::ssm_conv_step(mixed.data() + t * C, C, K, w.data(), src, s, c);
            for (int64_t h = 0; h < 2 * Hk; ++h) kernels::ref::l2_norm(c + h * d, c + h * d, d, 1e-6f);
            kernels::ref::delta_gates(alpha.data() + t * H, beta.data() + t * H, dt.data(), a.data(), H);
            kernels::ref::gated_delta_step(src + conv_floats, s + conv_floats, c, c + Hk * d, c + 2 * Hk * d,
                                           alpha.data() + t * H, beta.data() + t * H, 0, H, Hk, d,
                                           want_out.data() + t * V);
        }
        const auto compare = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) -> QString {
            for (size_t i = 0; i < want.size(); ++i)
                if (!close_rel(got[i], want[i], 1e-4f))
                    return QString("%1 [%2]: %3, want %4").arg(what).arg(i).arg(got[i]).arg(want[i]);
            return {};
        };
        CHECK_OK(compare(dev.down(dconv, want_conv.size()), want_conv, "conv, q/k normed"));
        CHECK_OK(compare(dev.down(dout, want_out.size()), want_out, "delta rule output"));
        CHECK_OK(compare(dev.down(dstate, st.size()), st, "states"));

        // The gates: sigmoid, and SiLU (the gated norm's).
        for (bool silu : {false, true}) {
            const std::vector<float> y = random_floats(rng, 300), g = random_floats(rng, 300, -4, 4);
            float* dy = dev.up(y);
            dev.ok(kc::gate_mul(dy, dev.up(g), 300, silu, dev.stream.get()), "gate_mul");
            std::vector<float> want = y;
            kernels::ref::gate_mul(want.data(), g.data(), 300, silu);
            CHECK_OK(compare(dev.down(dy, 300), want, silu ? "gate_mul silu" : "gate_mul sigmoid"));
        }
    }

    // Each row times its factor, the gaps between rows untouched.
    void scale_rows_matches_reference() {
        std::mt19937 rng(89);
        Dev dev;
        const int64_t rows = 7, cols = 45, stride = 48;
        const std::vector<float> x = random_floats(rng, size_t(rows * stride)), f = random_floats(rng, size_t(rows), -3, 3);
        float* dx = dev.up(x);
        dev.ok(kc::scale_rows(dx, stride, dev.up(f), rows, cols, dev.stream.get()), "scale_rows");
        std::vector<float> want = x;
        kernels::ref::scale_rows(want.data(), stride, f.data(), rows, cols);
        QVERIFY(dev.down(dx, x.size()) == want);
        QCOMPARE(kc::scale_rows(dx, cols - 1, dev.up(f), rows, cols, dev.stream.get()) != 0, true);  // a stride narrower than a row: an error code, not a launch
    }

    // Activations rounded through Q8_K (the K-quants'), bit for bit, with an
    // all-zero block and one whose extreme is positive; round_activations
    // picks Q8_0 or Q8_K by weight type and leaves f32's alone.
    void round_q8_k_matches_reference() {
        std::mt19937 rng(91);
        Dev dev;
        const int64_t rows = 3, cols = 512, stride = 520;
        std::vector<float> x = random_floats(rng, size_t(rows * stride), -4, 4);
        for (int64_t j = 0; j < 256; ++j) x[size_t(stride + j)] = 0.0f;
        x[size_t(2 * stride + 7)] = 9.0f;
        float* dx = dev.up(x);
        float* dy = dev.zeros<float>(size_t(rows * cols));
        dev.ok(kc::round_activations(kc::QType::Q4_K, dx, stride, rows, cols, dy, cols, dev.stream.get()), "round q8_K");
        const std::vector<float> got = dev.down(dy, size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> want(x.begin() + r * stride, x.begin() + r * stride + cols);
            kernels::ref::round_q8_k(want.data(), cols);
            for (int64_t j = 0; j < cols; ++j)
                QVERIFY2(got[size_t(r * cols + j)] == want[size_t(j)], qPrintable(QString("row %1 column %2").arg(r).arg(j)));
        }
        QVERIFY(kc::rounds_activations(kc::QType::Q4_1) && kc::rounds_activations(kc::QType::Q6_K));
        QVERIFY(!kc::rounds_activations(kc::QType::F16));
        QCOMPARE(kc::round_q8_k(dx, stride, rows, 300, nullptr, 0, dev.stream.get()) != 0, true);  // not whole blocks
    }

    // The latent query and values of multi-head latent attention against the reference.
    void mla_query_and_values_match_reference() {
        std::mt19937 rng(83);
        Dev dev;
        const int64_t n = 5, H = 4, kl = 48, rot = 16, rank = 32, vl = 24, row = rank + rot;
        const std::vector<float> q = random_floats(rng, size_t(n * H * kl)), kup = random_floats(rng, size_t(H * rank * (kl - rot)));
        float* dq = dev.zeros<float>(size_t(n * H * row));
        dev.ok(kc::mla_absorb_query(dev.up(q), n, H, kl, rot, dev.up(kup), rank, dq, dev.stream.get()), "mla_absorb_query");
        std::vector<float> want(size_t(n * H * row));
        kernels::ref::mla_absorb_query(q.data(), n, H, kl, rot, kup.data(), rank, want.data());
        const std::vector<float> got = dev.down(dq, want.size());
        for (size_t i = 0; i < want.size(); ++i)
            QVERIFY2(close(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))), qPrintable(QString("query element %1").arg(i)));

        const std::vector<float> o = random_floats(rng, size_t(n * H * row)), vup = random_floats(rng, size_t(H * vl * rank));
        float* dv = dev.zeros<float>(size_t(n * H * vl));
        dev.ok(kc::mla_value_up(dev.up(o), n, H, row, rank, dev.up(vup), vl, dv, dev.stream.get()), "mla_value_up");
        std::vector<float> want_v(size_t(n * H * vl));
        kernels::ref::mla_value_up(o.data(), n, H, row, rank, vup.data(), vl, want_v.data());
        const std::vector<float> got_v = dev.down(dv, want_v.size());
        for (size_t i = 0; i < want_v.size(); ++i)
            QVERIFY2(close(got_v[i], want_v[i], 1e-5f * (1 + std::fabs(want_v[i]))), qPrintable(QString("value element %1").arg(i)));
    }

    // ---- router_topk -------------------------------------------------------

    void router_topk_matches_reference() {
        std::mt19937 rng(9);
        Dev dev;
        for (int64_t experts : {8, 60, 128}) {
            const int64_t tokens = 37, k = std::min<int64_t>(8, experts / 2), stride = experts + 3;
            CHECK_OK(check_router(dev, random_floats(rng, size_t(tokens * stride), -3, 3), tokens, experts, stride, k));
        }
    }

    // k = 1, k = n_expert (every expert, in order), and one expert.
    void router_topk_k_edges() {
        std::mt19937 rng(59);
        Dev dev;
        const int64_t tokens = 5;
        const std::pair<int64_t, int64_t> cases[] = {{8, 1}, {8, 8}, {1, 1}};  // (experts, k)
        for (auto [experts, k] : cases) {
            const int64_t stride = experts + 1;
            CHECK_OK(check_router(dev, random_floats(rng, size_t(tokens * stride), -3, 3), tokens, experts, stride, k));
        }
    }

    // Equal logits (a few levels, and a row all equal): ties go to the lower
    // id, on the GPU as in the reference (equal logits give equal
    // probabilities on either side).
    void router_topk_ties() {
        std::mt19937 rng(61);
        Dev dev;
        const int64_t tokens = 6, experts = 16, stride = experts;
        const float levels[] = {-1.0f, 0.0f, 0.5f, 0.5f};
        std::uniform_int_distribution<int> pick(0, 3);
        std::vector<float> logits(static_cast<size_t>(tokens * stride));
        for (float& x : logits) x = levels[pick(rng)];
        std::fill_n(logits.begin(), experts, 0.25f);  // token 0: all tied
        for (int64_t k : {1, 3, 16}) CHECK_OK(check_router(dev, logits, tokens, experts, stride, k));
    }

    // ---- attention_paged ---------------------------------------------------

    // GQA (8 query heads over 2), blocks shuffled in the pool, tokens of two
    // sequences with key counts that end inside a block and at one.
    void attention_paged_matches_reference() {
        std::mt19937 rng(13);
        Dev dev;
        CHECK_OK(check_attention(dev, rng, {.n_head = 8, .n_kv = 2, .hd = 64, .bt = 16, .pool_blocks = 12,
                                            .tables = {7, 2, 9, 0, /* seq 2: */ 5, 11, 3},
                                            .offset = {0, 0, 0, 4, 4},
                                            .keys = {1, 37, 64, 16, 45}}));
    }

    // head_dim 256 (8 dims per lane), 40 (not a multiple of 32: lanes idle
    // on the second lap), 576 (MLA's latent rows, 512 + 64 RoPE, one KV head:
    // 20 per lane) and 640 (the maximum); q and out rows padded. 641 is refused.
    void attention_paged_head_dims() {
        std::mt19937 rng(67);
        Dev dev;
        CHECK_OK(check_attention(dev, rng, {.n_head = 4, .n_kv = 2, .hd = 256, .bt = 16, .pool_blocks = 4,
                                            .tables = {3, 0, 2}, .offset = {0, 0}, .keys = {16, 33}, .pad = 4}));
        CHECK_OK(check_attention(dev, rng, {.n_head = 6, .n_kv = 3, .hd = 40, .bt = 8, .pool_blocks = 3,
                                            .tables = {2, 0}, .offset = {0, 0, 0}, .keys = {8, 13, 1}, .pad = 3}));
        CHECK_OK(check_attention(dev, rng, {.n_head = 4, .n_kv = 1, .hd = 576, .bt = 16, .pool_blocks = 3,
                                            .tables = {2, 0}, .offset = {0, 0}, .keys = {3, 29}, .pad = 2}));
        CHECK_OK(check_attention(dev, rng, {.n_head = 2, .n_kv = 2, .hd = 640, .bt = 8, .pool_blocks = 2,
                                            .tables = {1, 0}, .offset = {0}, .keys = {11}}));
        QVERIFY(kc::attention_paged(nullptr, 641, 1, 1, 1, 641, nullptr, nullptr, 16, 641 * 16, 641 * 16, nullptr, nullptr,
                                    nullptr, 1.0f, nullptr, 0, 0, nullptr, 641, dev.stream.get()) != 0);
    }

    // One KV head for 8 query heads (MQA), and as many KV heads as query
    // heads (no grouping).
    void attention_paged_head_sharing() {
        std::mt19937 rng(71);
        Dev dev;
        CHECK_OK(check_attention(dev, rng, {.n_head = 8, .n_kv = 1, .hd = 64, .bt = 16, .pool_blocks = 3,
                                            .tables = {1, 2}, .offset = {0, 0}, .keys = {5, 32}}));
        CHECK_OK(check_attention(dev, rng, {.n_head = 4, .n_kv = 4, .hd = 32, .bt = 16, .pool_blocks = 3,
                                            .tables = {2, 0}, .offset = {0, 0}, .keys = {16, 23}}));
    }

    // One token with one key (three of the four warps see none); and a
    // prefill of 40 tokens, token t reading keys 0..t, so the key counts end
    // inside every block and exactly at each of its edges (8, 16, .., 40).
    void attention_paged_token_counts() {
        std::mt19937 rng(73);
        Dev dev;
        CHECK_OK(check_attention(dev, rng, {.n_head = 4, .n_kv = 2, .hd = 64, .bt = 16, .pool_blocks = 2,
                                            .tables = {1}, .offset = {0}, .keys = {1}}));
        Paged prefill{.n_head = 2, .n_kv = 1, .hd = 32, .bt = 8, .pool_blocks = 7, .tables = {4, 0, 6, 2, 5}, .offset = {},
                      .keys = {}};
        for (int32_t t = 0; t < 40; ++t) {
            prefill.offset.push_back(0);
            prefill.keys.push_back(t + 1);
        }
        CHECK_OK(check_attention(dev, rng, prefill));
    }

    // gpt-oss's attention: sinks (a per-head logit in the denominator) and
    // sliding windows (the last `window` keys), alone and together, on a
    // 40-token prefill whose key counts run from 1 past the window.
    void attention_paged_sinks_and_windows() {
        std::mt19937 rng(79);
        Dev dev;
        Paged c{.n_head = 4, .n_kv = 2, .hd = 64, .bt = 8, .pool_blocks = 7, .tables = {4, 0, 6, 2, 5}, .offset = {},
                .keys = {}};
        for (int32_t t = 0; t < 40; ++t) {
            c.offset.push_back(0);
            c.keys.push_back(t + 1);
        }
        for (int64_t window : {0, 1, 8, 13}) {
            for (bool sinks : {false, true}) {
                c.window = window;
                c.sinks = sinks ? random_floats(rng, size_t(c.n_head), -2, 4) : std::vector<float>{};
                CHECK_OK(check_attention(dev, rng, c));
            }
        }
        // Llama 4's chunked attention: each query sees its own chunk's keys
        // (chunks of 1, 7 and 16 over the 40 positions: some start mid-block).
        c.window = 0;
        c.sinks.clear();
        for (int64_t chunk : {1, 7, 16}) {
            c.chunk = chunk;
            CHECK_OK(check_attention(dev, rng, c));
        }
    }

    // ---- read_sum and errors -----------------------------------------------

    // 2^18 words, and 300007 (odd: never a multiple of the grid's threads, a
    // multiple of 2048; on a 132-SM GPU, a second lap of the grid-stride loop
    // that some threads take and others not).
    void read_probe_reads_everything() {
        Dev dev;
        for (int64_t n16 : {int64_t(1) << 18, int64_t(300007)}) CHECK_OK(check_read_sum(dev, n16));
    }

    void bad_launches_are_errors() {
        Dev dev;
        // head_dim over the kernel's limit and an unknown type: error codes, not launches.
        QVERIFY(kc::attention_paged(nullptr, 0, 1, 1, 1, 641, nullptr, nullptr, 16, 0, 0, nullptr, nullptr, nullptr, 1.0f,
                                    nullptr, 0, 0, nullptr, 0, dev.stream.get()) != 0);
        QVERIFY(kc::gemm_q(static_cast<kc::QType>(9), nullptr, 0, 1, 32, nullptr, 32, 1, nullptr, 1, dev.stream.get()) != 0);
        bool threw = false;
        try {
            bc::check(kc::router_topk(nullptr, 4, 1, 4, 5, nullptr, nullptr, dev.stream.get()), "router_topk");
        } catch (const std::exception& e) {
            threw = QString::fromUtf8(e.what()).contains(QStringLiteral("router_topk"));
        }
        QVERIFY(threw);
    }
};

QTEST_GUILESS_MAIN(TestCudaKernels)
#include "test_cuda_kernels.moc"
