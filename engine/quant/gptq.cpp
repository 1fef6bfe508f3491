#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

// In-place lower Cholesky factor of the symmetric positive definite A (n x n):
// A = L L^T, L in the lower triangle. False if a pivot is not positive.
bool cholesky_lower(std::vector<double>& A, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        double* aj = A.data() + j * n;
        double d = aj[j];
        for (int64_t k = 0; k < j; ++k) d -= aj[k] * aj[k];
        if (!(d > 0.0)) return false;
        d = std::sqrt(d);
        aj[j] = d;
        for (int64_t i = j + 1; i < n; ++i) {
            double* ai = A.data() + i * n;
            double s = ai[j];
            for (int64_t k = 0; k < j; ++k) s -= ai[k] * aj[k];
            ai[j] = s / d;
        }
    }
    return true;
}

}  // namespace

bool gptq_supports(WeightType t) { return kernels::block_levels(t) > 0; }

bool gptq_factor(const double* H, int64_t n, const float* column_scale, double damp, std::vector<float>* U) {
    std::vector<double> A(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i; j < n; ++j) A[i * n + j] = A[j * n + i] = H[i * n + j];
    if (column_scale)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) A[i * n + j] /= double(column_scale[i]) * double(column_scale[j]);
    double mean = 0.0;
    for (int64_t j = 0; j < n; ++j) {
        if (A[j * n + j] <= 0.0) A[j * n + j] = 1.0;  // a channel nothing reached
        mean += A[j * n + j];
    }
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) A[j * n + j] += damp * mean;
    if (!cholesky_lower(A, n)) return false;
    // Linv = L^-1 (lower), by forward substitution column by column.
    std::vector<double> Li(static_cast<size_t>(n * n), 0.0);
    for (int64_t c = 0; c < n; ++c) {
        Li[c * n + c] = 1.0 / A[c * n + c];
        for (int64_t i = c + 1; i < n; ++i) {
            double s = 0.0;
            for (int64_t k = c; k < i; ++k) s += A[i * n + k] * Li[k * n + c];
            Li[i * n + c] = -s / A[i * n + i];
        }
    }
    // H^-1 = Linv^T Linv.
    std::vector<double> Hi(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) {
            double s = 0.0;
            for (int64_t k = i; k < n; ++k) s += Li[k * n + i] * Li[k * n + j];
            Hi[i * n + j] = Hi[j * n + i] = s;
        }
    // U = the upper factor of H^-1 (H^-1 = U^T U): the lower factor, transposed.
    if (!cholesky_lower(Hi, n)) return false;
    U->assign(static_cast<size_t>(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) (*U)[static_cast<size_t>(j * n + i)] = static_cast<float>(Hi[i * n + j]);
    return true;
}

void gptq_quantize_row(WeightType t, float* w, int64_t n, const float* U, const float* importance, uint8_t* out) {
    const auto* tr = kernels::type_traits(t);
    const int64_t B = tr->block_elems;
    const int64_t block_bytes = kernels::row_bytes(t, B);
    const int levels = kernels::block_levels(t);
    std::vector<uint8_t> probe(static_cast<size_t>(block_bytes)), whole(static_cast<size_t>(kernels::row_bytes(t, n)));
    std::vector<uint8_t> codes(static_cast<size_t>(B));
    std::vector<float> base(static_cast<size_t>(B)), step(static_cast<size_t>(B));
    for (int64_t c0 = 0; c0 < n; c0 += B) {
        uint8_t* blk = out + (c0 / B) * block_bytes;
        // The block's scales, chosen on the row as compensated so far. The
        // whole row is quantized (the weighted quantizers weigh each element
        // by statistics of the row, as ggml's do) and this block taken.
        if (!importance || !kernels::quantize_row_weighted_ref(t, w, whole.data(), n, importance))
            kernels::quantize_row(t, w, whole.data(), n);
        std::memcpy(blk, whole.data() + (c0 / B) * block_bytes, static_cast<size_t>(block_bytes));
        // Each element's grid: value = step * code + base.
        std::memcpy(probe.data(), blk, static_cast<size_t>(block_bytes));
        std::fill(codes.begin(), codes.end(), uint8_t{0});
        kernels::set_block_levels_ref(t, probe.data(), codes.data());
        kernels::dequantize_row(t, probe.data(), base.data(), B);
        std::fill(codes.begin(), codes.end(), uint8_t{1});
        kernels::set_block_levels_ref(t, probe.data(), codes.data());
        kernels::dequantize_row(t, probe.data(), step.data(), B);
        for (int64_t j = 0; j < B; ++j) {
            const int64_t c = c0 + j;
            const float a = step[static_cast<size_t>(j)] - base[static_cast<size_t>(j)];
            const float b = base[static_cast<size_t>(j)];
            // Clamped as a float, so a huge ratio or a NaN cannot wrap an int.
            const float v = a != 0.0f ? (w[c] - b) / a : 0.0f;
            const int q = std::isfinite(v) ? static_cast<int>(std::clamp(std::nearbyint(v), 0.0f, float(levels - 1))) : 0;
            codes[static_cast<size_t>(j)] = static_cast<uint8_t>(q);
            const float* u = U + c * n;
            const float e = (w[c] - (a * static_cast<float>(q) + b)) / u[c];
            for (int64_t k = c + 1; k < n; ++k) w[k] -= e * u[k];
        }
        kernels::set_block_levels_ref(t, blk, codes.data());
    }
}

}  // namespace strata::quant
