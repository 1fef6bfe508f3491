// The GPU's rooflines for bench: its read bandwidth (kernels/cuda read_sum
// over a buffer far larger than L2) and what the weight kernel alone streams
// (gemm_q, one token, over rows of a format), each timed with events, best
// of several passes. Built with STRATA_HAVE_CUDA (backend/device.h's
// measure_device_* call these).
#include "backend/cuda/cuda_probes.h"

#include <algorithm>
#include <exception>

#include "backend/cuda/cuda_runtime.h"
#include "common/log.h"
#include "kernels/cuda/cuda_kernels.h"

namespace strata::backend::cuda {

namespace kc = kernels::cuda;

namespace {
template <class F>
double best_gbs(uint64_t bytes, int passes, F&& launch) {
    Stream s;
    Event a(true), b(true);
    launch(s);  // warm-up
    s.synchronize("a bandwidth probe");
    double best = 0;
    for (int i = 0; i < passes; ++i) {
        a.record(s);
        launch(s);
        b.record(s);
        b.synchronize();
        const double ms = b.ms_since(a);
        if (ms > 0) best = std::max(best, static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
    return best;
}
}  // namespace

double device_read_gbs(int device, uint64_t bytes) {
    try {
        set_device(device);
        memory::Ledger scratch;
        DeviceBuffer buf(scratch, memory::Account::Activations, memory::Tier::Fast, bytes);
        DeviceBuffer sum(scratch, memory::Account::Activations, memory::Tier::Fast, 8);
        Stream fill;
        fill_zero(buf.data(), bytes, fill, "the read probe's buffer");
        fill.synchronize("the read probe's buffer");
        return best_gbs(bytes, 5, [&](const Stream& s) {
            check(kc::read_sum(buf.data(), static_cast<int64_t>(bytes / 16), sum.as<unsigned long long>(), s.get()),
                  "the read probe");
        });
    } catch (const std::exception& e) {
        logger("cuda")->warn("read probe: {}", e.what());
        return 0;
    }
}

namespace {
struct GemmRate {
    double gbs = 0, flops = 0;
};

// gemm_q over `tokens` tokens and `bytes` of zero rows: the weight bytes and
// the flops per second of the best of 5 passes.
GemmRate gemm_probe(int device, uint32_t type, int64_t cols, int64_t tokens, uint64_t bytes) {
    try {
        set_device(device);
        const auto t = static_cast<kc::QType>(type);
        if (!kc::known_qtype(type) || cols % kc::block_elems(t) != 0) return {};
        const int64_t row_bytes = cols / kc::block_elems(t) * kc::block_bytes(t);
        const int64_t rows = static_cast<int64_t>(bytes / static_cast<uint64_t>(row_bytes));
        memory::Ledger scratch;
        DeviceBuffer w(scratch, memory::Account::Activations, memory::Tier::Fast, static_cast<uint64_t>(rows * row_bytes));
        const auto n = static_cast<uint64_t>(std::max<int64_t>(tokens, 1));
        DeviceBuffer x(scratch, memory::Account::Activations, memory::Tier::Fast, n * static_cast<uint64_t>(cols) * 4);
        DeviceBuffer y(scratch, memory::Account::Activations, memory::Tier::Fast, n * static_cast<uint64_t>(rows) * 4);
        Stream fill;
        // Zero bytes are valid blocks of every format (scales of +0).
        fill_zero(w.data(), w.size(), fill, "the kernel probe's weights");
        fill_zero(x.data(), x.size(), fill, "the kernel probe's input");
        fill.synchronize("the kernel probe's buffers");
        const double gbs = best_gbs(w.size(), 5, [&](const Stream& s) {
            check(kc::gemm_q(t, w.data(), row_bytes, rows, cols, x.as<float>(), cols, static_cast<int64_t>(n),
                             y.as<float>(), rows, s.get()),
                  "the kernel probe");
        });
        // best_gbs's bytes per second over the weights -> the flops of those passes.
        const double passes_per_s = gbs * 1e9 / static_cast<double>(w.size());
        return {gbs, passes_per_s * 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(n)};
    } catch (const std::exception& e) {
        logger("cuda")->warn("kernel probe: {}", e.what());
        return {};
    }
}
}  // namespace

double device_gemm_gbs(int device, uint32_t type, int64_t cols, uint64_t bytes) {
    return gemm_probe(device, type, cols, 1, bytes).gbs;
}

double device_gemm_flops(int device, uint32_t type, int64_t cols, int64_t tokens, uint64_t bytes) {
    return gemm_probe(device, type, cols, tokens, bytes).flops;
}

}  // namespace strata::backend::cuda
