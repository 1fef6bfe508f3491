#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

// A dot product with four running sums: the compiler cannot reorder a
// floating-point sum itself, and one chain of dependent adds would leave the
// factorisation latency-bound. Deterministic: the order is fixed.
double dot(const double* a, const double* b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += a[k] * b[k];
        s1 += a[k + 1] * b[k + 1];
        s2 += a[k + 2] * b[k + 2];
        s3 += a[k + 3] * b[k + 3];
    }
    for (; k < n; ++k) s0 += a[k] * b[k];
    return (s0 + s1) + (s2 + s3);
}

// In-place lower Cholesky factor of the symmetric positive definite A (n x n):
// A = L L^T, L in the lower triangle (row-major, so each step is a dot product
// of two rows). False if a pivot is not positive.
bool cholesky_lower(std::vector<double>& A, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        double* aj = A.data() + j * n;
        const double d2 = aj[j] - dot(aj, aj, j);
        if (!(d2 > 0.0)) return false;
        const double d = std::sqrt(d2);
        aj[j] = d;
        for (int64_t i = j + 1; i < n; ++i) {
            double* ai = A.data() + i * n;
            ai[j] = (ai[j] - dot(ai, aj, j)) / d;
        }
    }
    return true;
}

// The inverse of the lower triangular L (in A's lower triangle), row by row:
// row i of L^-1 is (e_i - sum_{k<i} L_ik row k of L^-1) / L_ii, so every
// update runs along contiguous rows.
std::vector<double> invert_lower(const std::vector<double>& L, int64_t n) {
    std::vector<double> Li(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        double* row = Li.data() + i * n;
        const double* li = L.data() + i * n;
        for (int64_t k = 0; k < i; ++k) {
            const double f = li[k];
            const double* rk = Li.data() + k * n;
            for (int64_t c = 0; c <= k; ++c) row[c] -= f * rk[c];
        }
        row[i] += 1.0;
        const double inv = 1.0 / li[i];
        for (int64_t c = 0; c <= i; ++c) row[c] *= inv;
    }
    return Li;
}

}  // namespace

bool gptq_supports(WeightType t) { return kernels::block_levels(t) > 0; }

// U is upper with U^T U = A^-1, so A = R R^T with R = U^-1 upper: the
// Cholesky factor of A with the order of the channels reversed (J A J =
// L L^T with J the reversal gives R = J L J), and U = J L^-1 J. One
// factorisation and one triangular inverse instead of inverting A and
// factoring the inverse: a third of the work.
bool gptq_factor(const double* H, int64_t n, const float* column_scale, double damp, std::vector<float>* U) {
    // B = J A J, A the scaled, mended and damped H (only H's upper triangle is read).
    std::vector<double> B(static_cast<size_t>(n * n));
    const auto rev = [n](int64_t i) { return n - 1 - i; };
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i; j < n; ++j) {
            double h = H[i * n + j];
            if (column_scale) h /= double(column_scale[i]) * double(column_scale[j]);
            B[rev(i) * n + rev(j)] = B[rev(j) * n + rev(i)] = h;
        }
    double mean = 0.0;
    for (int64_t j = 0; j < n; ++j) {
        if (B[j * n + j] <= 0.0) B[j * n + j] = 1.0;  // a channel nothing reached
        mean += B[j * n + j];
    }
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) B[j * n + j] += damp * mean;
    if (!cholesky_lower(B, n)) return false;
    const std::vector<double> Li = invert_lower(B, n);
    U->assign(static_cast<size_t>(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) (*U)[static_cast<size_t>(rev(i) * n + rev(j))] = static_cast<float>(Li[i * n + j]);
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
