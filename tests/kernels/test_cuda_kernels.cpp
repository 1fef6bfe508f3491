// The CUDA kernels (kernels/cuda) against their scalar twins in kernels/ref,
// on random shapes with tails (rows not a multiple of a block's warps, token
// counts not a multiple of a pass, keys not a multiple of a KV block). Label
// gpu: skipped, saying why, where no CUDA device exists.
//
// Tolerances: weights decode exactly (test_cuda_decode), so every format gets
// the same bound, set by F32 accumulation in another order:
//   |gpu - ref| <= 2e-5 * sum_j |w_j x_j| + 1e-6      (weight products)
// and 1e-5 relative for the float ops (expf/sqrt against libm).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "backend/device.h"
#include "kernels/cuda/cuda_kernels.h"
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
                          kc::QType::Q4_K, kc::QType::Q5_K, kc::QType::Q6_K};

const char* name_of(kc::QType t) { return kernels::type_traits(static_cast<kernels::WeightType>(t))->name; }

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

}  // namespace

class TestCudaKernels : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        const backend::DeviceProbe& p = backend::probe_devices();
        if (p.gpus.empty()) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(p.why_none)));
        bc::set_device(0);
        qInfo("%s", backend::describe_gpu(p.gpus[0]).c_str());
    }

    void gemm_q_every_format() {
        std::mt19937 rng(7);
        Dev dev;
        for (kc::QType t : kAll) {
            const int64_t be = kc::block_elems(t);
            const int64_t cols = std::max<int64_t>(be, 256) * 3;  // several blocks
            for (int64_t rows : {1, 5, 67}) {
                for (int64_t n : {1, 3, 8, 11}) {
                    const auto* tr = kernels::type_traits(static_cast<kernels::WeightType>(t));
                    const int64_t row_bytes = cols / tr->block_elems * tr->block_bytes;
                    std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes));
                    for (int64_t r = 0; r < rows; ++r) {
                        const std::vector<float> f = random_floats(rng, size_t(cols));
                        kernels::quantize_row(static_cast<kernels::WeightType>(t), f.data(), w.data() + r * row_bytes, cols);
                    }
                    const std::vector<float> x = random_floats(rng, size_t(n * cols));
                    const uint8_t* dw = dev.up(w);
                    const float* dx = dev.up(x);
                    float* dy = dev.zeros<float>(size_t(n * rows));
                    dev.ok(kc::gemm_q(t, dw, row_bytes, rows, cols, dx, cols, n, dy, rows, dev.stream.get()), "gemm_q");
                    const std::vector<float> y = dev.down(dy, size_t(n * rows));
                    std::vector<float> wf(static_cast<size_t>(cols));
                    for (int64_t r = 0; r < rows; ++r) {
                        kernels::dequantize_row(static_cast<kernels::WeightType>(t), w.data() + r * row_bytes, wf.data(), cols);
                        for (int64_t i = 0; i < n; ++i) {
                            const float want = kernels::dot_row_ref(static_cast<kernels::WeightType>(t),
                                                                    w.data() + r * row_bytes, x.data() + i * cols, cols);
                            double mag = 0;
                            for (int64_t j = 0; j < cols; ++j) mag += std::fabs(double(wf[j]) * x[size_t(i * cols + j)]);
                            const float got = y[size_t(i * rows + r)];
                            if (!close(got, want, float(2e-5 * mag + 1e-6)))
                                QFAIL(qPrintable(QStringLiteral("%1 rows %2 tokens %3: row %4 token %5: gpu %6, ref %7 (|w.x| %8)")
                                                     .arg(name_of(t)).arg(rows).arg(n).arg(r).arg(i)
                                                     .arg(double(got)).arg(double(want)).arg(mag)));
                        }
                    }
                }
            }
        }
    }

    // Grouped: each group equals gemm_q over its own tokens, bit for bit (same
    // kernel path, same passes over the tokens).
    void gemm_q_grouped_equals_per_group() {
        std::mt19937 rng(11);
        Dev dev;
        for (kc::QType t : {kc::QType::Q4_0, kc::QType::Q8_0, kc::QType::Q4_K, kc::QType::Q6_K, kc::QType::F16}) {
            const auto* tr = kernels::type_traits(static_cast<kernels::WeightType>(t));
            const int64_t cols = 512, rows = 37, row_bytes = cols / tr->block_elems * tr->block_bytes;
            const std::vector<int32_t> offsets = {0, 3, 3, 12, 13};  // an empty group, one of 9, one of 1
            const int64_t groups = int64_t(offsets.size()) - 1, n = offsets.back();
            std::vector<const void*> ptrs;
            std::vector<std::vector<uint8_t>> mats;
            for (int64_t g = 0; g < groups; ++g) {
                std::vector<uint8_t> w(size_t(rows * row_bytes));
                for (int64_t r = 0; r < rows; ++r) {
                    const std::vector<float> f = random_floats(rng, size_t(cols));
                    kernels::quantize_row(static_cast<kernels::WeightType>(t), f.data(), w.data() + r * row_bytes, cols);
                }
                ptrs.push_back(dev.up(w));
                mats.push_back(std::move(w));
            }
            const std::vector<float> x = random_floats(rng, size_t(n * cols));
            const float* dx = dev.up(x);
            float* dy = dev.zeros<float>(size_t(n * rows));
            const void* const* dptrs = reinterpret_cast<const void* const*>(dev.up(ptrs));
            dev.ok(kc::gemm_q_grouped(t, dptrs, row_bytes, rows, cols, dx, cols, dev.up(offsets), groups, 9, dy, rows,
                                      dev.stream.get()),
                   "gemm_q_grouped");
            const std::vector<float> y = dev.down(dy, size_t(n * rows));
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t k = offsets[size_t(g + 1)] - offsets[size_t(g)];
                if (k == 0) continue;
                float* one = dev.zeros<float>(size_t(k * rows));
                dev.ok(kc::gemm_q(t, ptrs[size_t(g)], row_bytes, rows, cols, dx + offsets[size_t(g)] * cols, cols, k, one,
                                  rows, dev.stream.get()),
                       "gemm_q");
                const std::vector<float> want = dev.down(one, size_t(k * rows));
                QVERIFY2(std::equal(want.begin(), want.end(), y.begin() + offsets[size_t(g)] * rows), name_of(t));
            }
        }
    }

    void get_rows_decodes_rows() {
        std::mt19937 rng(3);
        Dev dev;
        for (kc::QType t : kAll) {
            const auto* tr = kernels::type_traits(static_cast<kernels::WeightType>(t));
            const int64_t cols = 768, rows = 10, row_bytes = cols / tr->block_elems * tr->block_bytes;
            std::vector<uint8_t> w(size_t(rows * row_bytes));
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> f = random_floats(rng, size_t(cols), -3, 3);
                kernels::quantize_row(static_cast<kernels::WeightType>(t), f.data(), w.data() + r * row_bytes, cols);
            }
            const std::vector<int32_t> ids = {9, 0, 4, 4, 7};
            float* out = dev.zeros<float>(ids.size() * size_t(cols));
            dev.ok(kc::get_rows(t, dev.up(w), row_bytes, cols, dev.up(ids), int64_t(ids.size()), out, dev.stream.get()),
                   "get_rows");
            const std::vector<float> got = dev.down(out, ids.size() * size_t(cols));
            std::vector<float> want(static_cast<size_t>(cols));
            for (size_t i = 0; i < ids.size(); ++i) {
                kernels::dequantize_row(static_cast<kernels::WeightType>(t), w.data() + ids[i] * row_bytes, want.data(), cols);
                for (int64_t j = 0; j < cols; ++j)
                    // One rounding apart at most (a*b-c contracted to an FMA on the GPU).
                    if (!close(got[i * size_t(cols) + size_t(j)], want[size_t(j)], 1e-6f * (1 + std::fabs(want[size_t(j)]))))
                        QFAIL(qPrintable(QStringLiteral("%1 row %2 element %3").arg(name_of(t)).arg(ids[i]).arg(j)));
            }
        }
    }

    void float_ops() {
        std::mt19937 rng(5);
        Dev dev;
        // rms_norm: 3 rows of 1000 (a tail of the 256 threads), strided.
        {
            const int64_t n = 1000, stride = 1024, rows = 3;
            const std::vector<float> x = random_floats(rng, size_t(rows * stride), -4, 4);
            const std::vector<float> w = random_floats(rng, size_t(n));
            float* dy = dev.zeros<float>(size_t(rows * stride));
            dev.ok(kc::rms_norm(dev.up(x), stride, dev.up(w), dy, stride, rows, n, 1e-5f, dev.stream.get()), "rms_norm");
            const std::vector<float> y = dev.down(dy, size_t(rows * stride));
            std::vector<float> want(static_cast<size_t>(n));
            for (int64_t r = 0; r < rows; ++r) {
                kernels::ref::rmsnorm(x.data() + r * stride, w.data(), want.data(), n, 1e-5f);
                for (int64_t i = 0; i < n; ++i)
                    QVERIFY(close(y[size_t(r * stride + i)], want[size_t(i)], 1e-5f * (1 + std::fabs(want[size_t(i)]))));
            }
        }
        // RoPE, normal and NeoX, partial rotation (n_rot < head_dim), per-token positions.
        for (bool neox : {false, true}) {
            const int64_t tokens = 5, heads = 3, hd = 64, n_rot = 32, stride = heads * hd + 8;
            std::vector<float> x = random_floats(rng, size_t(tokens * stride));
            std::vector<float> cs(size_t(tokens * n_rot));
            for (int64_t t = 0; t < tokens; ++t)
                kernels::ref::rope_table(n_rot, 17 * t + 3, 10000.0f, 1.0f, cs.data() + t * n_rot);
            float* dx = dev.up(x);
            dev.ok(kc::rope_apply(dx, tokens, stride, heads, hd, n_rot, dev.up(cs), neox, dev.stream.get()), "rope_apply");
            const std::vector<float> got = dev.down(dx, x.size());
            for (int64_t t = 0; t < tokens; ++t)
                kernels::ref::rope_apply(x.data() + t * stride, heads, hd, n_rot, cs.data() + t * n_rot, neox);
            for (size_t i = 0; i < x.size(); ++i) QVERIFY(close(got[i], x[i], 1e-5f));
        }
        // SwiGLU, add, axpy, on an odd length.
        {
            const int64_t n = 4099;
            const std::vector<float> g = random_floats(rng, size_t(n), -6, 6), u = random_floats(rng, size_t(n));
            float* dy = dev.zeros<float>(size_t(n));
            dev.ok(kc::swiglu(dev.up(g), dev.up(u), dy, n, dev.stream.get()), "swiglu");
            std::vector<float> y = dev.down(dy, size_t(n)), want(static_cast<size_t>(n));
            kernels::ref::swiglu(g.data(), u.data(), want.data(), n);
            for (int64_t i = 0; i < n; ++i) QVERIFY(close(y[size_t(i)], want[size_t(i)], 1e-5f * (1 + std::fabs(want[size_t(i)]))));
            float* da = dev.up(g);
            dev.ok(kc::add(da, dev.up(u), n, dev.stream.get()), "add");
            dev.ok(kc::axpy(0.5f, dev.up(u), da, n, dev.stream.get()), "axpy");
            y = dev.down(da, size_t(n));
            for (int64_t i = 0; i < n; ++i) QCOMPARE(y[size_t(i)], (g[size_t(i)] + u[size_t(i)]) + 0.5f * u[size_t(i)]);
        }
        // The weighted combine: rows added into their destinations in order.
        {
            const int64_t rows = 7, cols = 300;
            const std::vector<float> x = random_floats(rng, size_t(rows * cols)), w = random_floats(rng, size_t(rows));
            const std::vector<int32_t> dst = {1, 0, 1, 2, 0, 1, 2};
            std::vector<float> y = random_floats(rng, size_t(3 * cols));
            float* dy = dev.up(y);
            dev.ok(kc::scatter_add_rows(dev.up(x), dev.up(w), dev.up(dst), rows, cols, dy, dev.stream.get()),
                   "scatter_add_rows");
            const std::vector<float> got = dev.down(dy, y.size());
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t c = 0; c < cols; ++c) y[size_t(dst[size_t(i)] * cols + c)] += w[size_t(i)] * x[size_t(i * cols + c)];
            for (size_t i = 0; i < y.size(); ++i) QVERIFY(close(got[i], y[i], 1e-6f * (1 + std::fabs(y[i]))));
        }
    }

    void bias_gate_and_kv_store() {
        std::mt19937 rng(17);
        Dev dev;
        const int64_t rows = 3, cols = 70, stride = 80;
        std::vector<float> y = random_floats(rng, size_t(rows * stride));
        const std::vector<float> b = random_floats(rng, size_t(cols));
        float* dy = dev.up(y);
        dev.ok(kc::add_bias(dy, stride, dev.up(b), rows, cols, dev.stream.get()), "add_bias");
        std::vector<float> got = dev.down(dy, y.size());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < stride; ++c)
                QCOMPARE(got[size_t(r * stride + c)], y[size_t(r * stride + c)] + (c < cols ? b[size_t(c)] : 0.0f));

        // Gated: sigmoid of a per-row logit, and ungated (null logits).
        const std::vector<float> x = random_floats(rng, size_t(rows * cols)), g = random_floats(rng, size_t(rows), -3, 3);
        std::vector<float> acc = random_floats(rng, size_t(rows * cols));
        float* da = dev.up(acc);
        dev.ok(kc::gated_add(dev.up(x), dev.up(g), rows, cols, da, dev.stream.get()), "gated_add");
        dev.ok(kc::gated_add(dev.up(x), nullptr, rows, cols, da, dev.stream.get()), "gated_add");
        got = dev.down(da, acc.size());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const size_t i = size_t(r * cols + c);
                const float want = (acc[i] + 1.0f / (1.0f + std::exp(-g[size_t(r)])) * x[i]) + x[i];
                QVERIFY(close(got[i], want, 1e-6f * (1 + std::fabs(want))));
            }

        // kv_store then attention_paged reads what was stored: tokens to (block, slot).
        const int64_t n = 4, n_kv = 2, hd = 32, bt = 8, blocks = 5, head_stride = bt * hd, block_stride = n_kv * head_stride;
        const std::vector<float> k = random_floats(rng, size_t(n * n_kv * hd)), v = random_floats(rng, size_t(n * n_kv * hd));
        const std::vector<int32_t> blk = {3, 3, 0, 4}, slot = {0, 7, 5, 1};
        float* kp = dev.zeros<float>(size_t(blocks * block_stride));
        float* vp = dev.zeros<float>(size_t(blocks * block_stride));
        dev.ok(kc::kv_store(dev.up(k), n_kv * hd, dev.up(v), n_kv * hd, n, n_kv, hd, kp, vp, block_stride, head_stride,
                            dev.up(blk), dev.up(slot), dev.stream.get()),
               "kv_store");
        const std::vector<float> kh = dev.down(kp, size_t(blocks * block_stride));
        const std::vector<float> vh = dev.down(vp, size_t(blocks * block_stride));
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < n_kv; ++h)
                for (int64_t d = 0; d < hd; ++d) {
                    const size_t at = size_t(blk[size_t(t)] * block_stride + h * head_stride + slot[size_t(t)] * hd + d);
                    QCOMPARE(kh[at], k[size_t(t * n_kv * hd + h * hd + d)]);
                    QCOMPARE(vh[at], v[size_t(t * n_kv * hd + h * hd + d)]);
                }
    }

    void router_topk_matches_reference() {
        std::mt19937 rng(9);
        Dev dev;
        for (int64_t experts : {8, 60, 128}) {
            const int64_t tokens = 37, k = std::min<int64_t>(8, experts / 2), stride = experts + 3;
            std::vector<float> logits = random_floats(rng, size_t(tokens * stride), -3, 3);
            float* dl = dev.up(logits);
            int32_t* ids = dev.zeros<int32_t>(size_t(tokens * k));
            float* w = dev.zeros<float>(size_t(tokens * k));
            dev.ok(kc::router_topk(dl, stride, tokens, experts, k, ids, w, dev.stream.get()), "router_topk");
            const std::vector<int32_t> got_ids = dev.down(ids, size_t(tokens * k));
            const std::vector<float> got_w = dev.down(w, size_t(tokens * k));
            std::vector<int32_t> want_ids(static_cast<size_t>(k));
            std::vector<float> want_w(static_cast<size_t>(k));
            for (int64_t t = 0; t < tokens; ++t) {
                kernels::ref::router_topk(logits.data() + t * stride, experts, k, nullptr, want_ids.data(), want_w.data());
                for (int64_t r = 0; r < k; ++r) {
                    QCOMPARE(got_ids[size_t(t * k + r)], want_ids[size_t(r)]);
                    QVERIFY(close(got_w[size_t(t * k + r)], want_w[size_t(r)], 1e-6f));
                }
            }
        }
    }

    // Paged attention with GQA: blocks shuffled in the pool, tokens of two
    // sequences with key counts that end inside a block.
    void attention_paged_matches_reference() {
        std::mt19937 rng(13);
        Dev dev;
        const int64_t n_head = 8, n_kv = 2, hd = 64, bt = 16, pool_blocks = 12;
        const int64_t head_stride = bt * hd, block_stride = n_kv * head_stride;
        const std::vector<float> kpool = random_floats(rng, size_t(pool_blocks * block_stride));
        const std::vector<float> vpool = random_floats(rng, size_t(pool_blocks * block_stride));
        const std::vector<int32_t> tables = {7, 2, 9, 0, /* seq 2: */ 5, 11, 3};
        // Tokens: three of sequence 1 (keys 1, 37, 64), two of sequence 2 (keys 16, 45).
        const std::vector<int32_t> offset = {0, 0, 0, 4, 4}, keys = {1, 37, 64, 16, 45};
        const int64_t tokens = int64_t(keys.size());
        const std::vector<float> q = random_floats(rng, size_t(tokens * n_head * hd));
        float* out = dev.zeros<float>(size_t(tokens * n_head * hd));
        const float scale = 1.0f / std::sqrt(float(hd));
        dev.ok(kc::attention_paged(dev.up(q), n_head * hd, tokens, n_head, n_kv, hd, dev.up(kpool), dev.up(vpool), bt,
                                   block_stride, head_stride, dev.up(tables), dev.up(offset), dev.up(keys), scale, out,
                                   n_head * hd, dev.stream.get()),
               "attention_paged");
        const std::vector<float> got = dev.down(out, size_t(tokens * n_head * hd));
        for (int64_t t = 0; t < tokens; ++t) {
            const int64_t m = keys[size_t(t)];
            for (int64_t h = 0; h < n_head; ++h) {
                const int64_t g = h / (n_head / n_kv);
                std::vector<float> kk(static_cast<size_t>(m * hd)), vv(static_cast<size_t>(m * hd)), s(static_cast<size_t>(m)),
                    o(static_cast<size_t>(hd), 0.0f);
                for (int64_t j = 0; j < m; ++j) {
                    const int64_t b = tables[size_t(offset[size_t(t)] + j / bt)];
                    const size_t off = size_t(b * block_stride + g * head_stride + (j % bt) * hd);
                    std::copy_n(kpool.begin() + long(off), hd, kk.begin() + j * hd);
                    std::copy_n(vpool.begin() + long(off), hd, vv.begin() + j * hd);
                }
                const float* qh = q.data() + (t * n_head + h) * hd;
                kernels::ref::attn_scores(qh, 1, kk.data(), m, hd, scale, s.data(), m);
                kernels::ref::softmax(s.data(), m);
                kernels::ref::attn_accumulate(s.data(), m, 1, vv.data(), m, hd, o.data());
                for (int64_t d = 0; d < hd; ++d)
                    if (!close(got[size_t((t * n_head + h) * hd + d)], o[size_t(d)], 1e-5f))
                        QFAIL(qPrintable(QStringLiteral("token %1 head %2 dim %3: gpu %4, ref %5").arg(t).arg(h).arg(d)
                                             .arg(double(got[size_t((t * n_head + h) * hd + d)])).arg(double(o[size_t(d)]))));
            }
        }
    }

    void read_probe_reads_everything() {
        Dev dev;
        std::vector<uint32_t> words(1 << 20);
        std::iota(words.begin(), words.end(), 1u);
        unsigned long long* sum = dev.zeros<unsigned long long>(1);
        dev.ok(kc::read_sum(dev.up(words), int64_t(words.size() / 4), sum, dev.stream.get()), "read_sum");
        const unsigned long long want = std::accumulate(words.begin(), words.end(), 0ull);
        QCOMPARE(dev.down(sum, 1)[0], want);
    }

    void bad_launches_are_errors() {
        Dev dev;
        // head_dim over the kernel's limit and an unknown type: error codes, not launches.
        QVERIFY(kc::attention_paged(nullptr, 0, 1, 1, 1, 512, nullptr, nullptr, 16, 0, 0, nullptr, nullptr, nullptr, 1.0f,
                                    nullptr, 0, dev.stream.get()) != 0);
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
