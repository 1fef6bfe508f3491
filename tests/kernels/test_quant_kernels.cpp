// Tests of the reference weight-format kernels (kernels/ref) through the
// type-dispatched front door (kernels/quant.h).
//
//  - fp16/bf16 conversions: exhaustive round trips, an independent widening,
//    rounding of every fp16 midpoint, known values.
//  - every format: quantize -> dequantize error against a per-format bound,
//    dot_row against a float64 dot of the dequantized row, zero rows.
//  - hand-built blocks: bytes laid out by hand following ggml's layout, values
//    worked out by hand, to catch layout transcription errors.
//  - fixtures (skipped without ../shared/fixtures): llama.cpp quantized the
//    F32 model moe-tiny-f32 into moe-tiny-{q8_0,q4_0,f16}; quantizing the same
//    F32 tensors here must give the same bytes. The Q4_K_M model must decode
//    to finite values with dot_row agreeing with dequantize.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "kernels/quant_types.h"
#include "kernels/ref/quant_ref.h"
#include "test_support.h"

using namespace strata::kernels;

namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Independent, obviously-correct fp16 widening (for cross-checking the
// branch-free one).
double half_value(uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exp = (h >> 10) & 0x1F;
    const int mant = h & 0x3FF;
    double v;
    if (exp == 0)
        v = std::ldexp(static_cast<double>(mant), -24);
    else if (exp == 31)
        v = mant ? std::nan("") : INFINITY;
    else
        v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
    return sign ? -v : v;
}

bool half_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

struct Format {
    WeightType type;
    const char* name;
    double max_rel_rms;  // bound on rms(dequant - x) / rms(x), gaussian rows
};

// Bounds on the relative RMS error of quantize -> dequantize, rms(y - x) /
// rms(x), for N(0,1) rows and for rows whose 256-element chunks alternate in
// scale by 100x (measured per chunk). The comments give the worst value seen
// over all rows of roundtrip_error (fixed seeds); f16/bf16 bounds are the hard
// limits 2^-11 and 2^-8 (half an ulp, relative).
const Format kFormats[] = {
    {WeightType::F32, "f32", 0.0},          // exact
    {WeightType::F16, "f16", 4.9e-4},       // measured 2.6e-4
    {WeightType::BF16, "bf16", 3.9e-3},     // measured 1.9e-3
    {WeightType::Q8_0, "q8_0", 0.010},      // measured 0.0060
    {WeightType::Q4_0, "q4_0", 0.12},       // measured 0.099
    {WeightType::Q4_1, "q4_1", 0.10},       // measured 0.085
    {WeightType::Q5_0, "q5_0", 0.065},      // measured 0.053
    {WeightType::Q5_1, "q5_1", 0.050},      // measured 0.041
    {WeightType::Q2_K, "q2_k", 0.40},       // measured 0.31
    {WeightType::Q3_K, "q3_k", 0.21},       // measured 0.165
    {WeightType::Q4_K, "q4_k", 0.10},       // measured 0.077
    {WeightType::Q5_K, "q5_k", 0.050},      // measured 0.040
    {WeightType::Q6_K, "q6_k", 0.026},      // measured 0.021
    {WeightType::Q8_K, "q8_k", 0.012},      // measured 0.0088
    {WeightType::MXFP4, "mxfp4", 0.20},     // measured: see roundtrip_error's output
};

int64_t block_elems(WeightType t) { return type_traits(t)->block_elems; }

std::vector<uint8_t> quantize(WeightType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, static_cast<int64_t>(x.size()))));
    quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
    return q;
}

std::vector<float> dequantize(WeightType t, const std::vector<uint8_t>& q, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    return y;
}

double rms(const std::vector<float>& v) {
    double s = 0;
    for (float f : v) s += static_cast<double>(f) * f;
    return v.empty() ? 0 : std::sqrt(s / static_cast<double>(v.size()));
}

// float64 dot and the sum of |terms| (the scale of its rounding error).
void dot_f64(const std::vector<float>& a, const float* x, double* dot, double* abs_sum) {
    double s = 0, as = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double p = static_cast<double>(a[i]) * x[i];
        s += p;
        as += std::fabs(p);
    }
    *dot = s;
    *abs_sum = as;
}

std::vector<float> gaussian_row(std::mt19937& rng, int64_t n, float mean = 0.f, float sd = 1.f) {
    std::normal_distribution<float> dist(mean, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = dist(rng);
    return v;
}

// Row lengths for a format: 1, 3 and 7 blocks, plus a long row.
std::vector<int64_t> row_lengths(WeightType t) {
    const int64_t b = block_elems(t);
    if (b == 1) return {1, 3, 7, 31, 64, 67, 1000, 4096};
    return {b, 3 * b, 7 * b, 4096};
}

// ---------------------------------------------------------------------------
// Minimal GGUF reader for the fixture test (enough for tensor names, types,
// shapes and data; the engine's reader lives in engine/gguf).

struct GgufTensor {
    uint32_t type = 0;
    std::vector<int64_t> ne;
    uint64_t offset = 0;
    int64_t n_elements() const {
        int64_t n = 1;
        for (int64_t d : ne) n *= d;
        return n;
    }
};

struct GgufFile {
    std::vector<uint8_t> bytes;
    std::map<std::string, GgufTensor> tensors;
    size_t data_start = 0;
    const uint8_t* data(const GgufTensor& t) const { return bytes.data() + data_start + t.offset; }
};

class Cursor {
public:
    explicit Cursor(const std::vector<uint8_t>& b) : b_(b) {}
    template <class T>
    T get() {
        if (pos_ + sizeof(T) > b_.size()) throw std::runtime_error("gguf: truncated");
        T v;
        std::memcpy(&v, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string str() {
        const uint64_t n = get<uint64_t>();
        if (pos_ + n > b_.size()) throw std::runtime_error("gguf: truncated string");
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    void skip_value(uint32_t type) {
        static const size_t kSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        if (type == 8) {
            str();
        } else if (type == 9) {
            const uint32_t et = get<uint32_t>();
            const uint64_t n = get<uint64_t>();
            for (uint64_t i = 0; i < n; ++i) skip_value(et);
        } else if (type < 13) {
            pos_ += kSize[type];
        } else {
            throw std::runtime_error("gguf: bad value type");
        }
    }
    size_t pos() const { return pos_; }

private:
    const std::vector<uint8_t>& b_;
    size_t pos_ = 0;
};

bool load_gguf(const std::string& path, GgufFile* out, QString* error) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        *error = QString::fromStdString("cannot open " + path);
        return false;
    }
    out->bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    try {
        Cursor c(out->bytes);
        if (c.get<uint32_t>() != 0x46554747u) throw std::runtime_error("not a GGUF file");
        const uint32_t version = c.get<uint32_t>();
        if (version < 2) throw std::runtime_error("GGUF version < 2");
        const uint64_t n_tensors = c.get<uint64_t>();
        const uint64_t n_kv = c.get<uint64_t>();
        uint64_t alignment = 32;
        for (uint64_t i = 0; i < n_kv; ++i) {
            const std::string key = c.str();
            const uint32_t type = c.get<uint32_t>();
            if (key == "general.alignment" && type == 4)
                alignment = c.get<uint32_t>();
            else
                c.skip_value(type);
        }
        for (uint64_t i = 0; i < n_tensors; ++i) {
            const std::string name = c.str();
            GgufTensor t;
            const uint32_t n_dims = c.get<uint32_t>();
            for (uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(static_cast<int64_t>(c.get<uint64_t>()));
            t.type = c.get<uint32_t>();
            t.offset = c.get<uint64_t>();
            out->tensors[name] = t;
        }
        out->data_start = (c.pos() + alignment - 1) / alignment * alignment;
        for (const auto& [name, t] : out->tensors) {
            const TypeTraits* tr = type_traits(t.type);
            if (!tr) throw std::runtime_error("unknown tensor type in " + name);
            const int64_t bytes = t.n_elements() / tr->block_elems * tr->block_bytes;
            if (out->data_start + t.offset + static_cast<uint64_t>(bytes) > out->bytes.size())
                throw std::runtime_error("tensor data out of range: " + name);
        }
    } catch (const std::exception& e) {
        *error = QString::fromStdString(path + ": " + e.what());
        return false;
    }
    return true;
}

}  // namespace

class TestQuantKernels : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // --- fp16 / bf16 ---------------------------------------------------------
    void fp16_exhaustive_roundtrip();
    void fp16_rounding_midpoints();
    void fp16_known_values();
    void bf16_exhaustive_roundtrip();
    void bf16_known_values();

    // --- layouts and traits --------------------------------------------------
    void traits_match_block_structs();
    void has_kernels_matches_traits();

    // --- every format --------------------------------------------------------
    void roundtrip_error_data();
    void roundtrip_error();
    void dot_matches_dequantize_data();
    void dot_matches_dequantize();
    void zero_rows_roundtrip();
    void quantize_is_deterministic();

    // --- hand-built blocks ---------------------------------------------------
    void known_block_q8_0();
    void known_block_q4_0();
    void known_block_q4_1();
    void known_block_q5_0();
    void known_block_q5_1();
    void known_block_q2_k();
    void known_block_q3_k();
    void known_block_q4_k();
    void known_block_q5_k();
    void known_block_q6_k();
    void mxfp4_matches_the_ocp_value_table();
    void q3_k_scales_match_kmask_unpacking();
    void quantizers_hit_exact_grid_values();

    // --- fixtures ------------------------------------------------------------
    void fixture_quantizers_match_llama_cpp_data();
    void fixture_quantizers_match_llama_cpp();
    void fixture_q4_k_m_decodes();
};

// ---------------------------------------------------------------------------

void TestQuantKernels::fp16_exhaustive_roundtrip() {
    int nan_count = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t hh = static_cast<uint16_t>(h);
        const float f = fp16_to_fp32(hh);
        const double expect = half_value(hh);
        if (half_is_nan(hh)) {
            ++nan_count;
            if (!std::isnan(f)) QFAIL(qPrintable(QString("0x%1 must widen to NaN").arg(h, 4, 16, QChar('0'))));
            QCOMPARE(std::signbit(f), (h & 0x8000) != 0);
            const uint16_t back = fp32_to_fp16(f);
            if (!half_is_nan(back)) QFAIL(qPrintable(QString("NaN 0x%1 lost").arg(h, 4, 16, QChar('0'))));
            QCOMPARE(back & 0x8000, h & 0x8000);
            // A quiet NaN keeps its whole payload.
            if (h & 0x200) QCOMPARE(static_cast<uint32_t>(back), h);
            continue;
        }
        if (static_cast<double>(f) != expect)
            QFAIL(qPrintable(QString("0x%1 widened to %2, expected %3").arg(h, 4, 16, QChar('0')).arg(f).arg(expect)));
        QCOMPARE(std::signbit(f), (h & 0x8000) != 0);  // -0 stays -0
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(f)), h);
    }
    QCOMPARE(nan_count, 2 * 1023);
}

void TestQuantKernels::fp16_rounding_midpoints() {
    // For every pair of adjacent positive halves a < b, the float exactly
    // between them rounds to the one with an even mantissa; one float ulp
    // either side rounds to the nearer one. Covers subnormals, the
    // subnormal/normal boundary and the overflow to Inf above 65504.
    for (uint32_t a = 0; a < 0x7C00; ++a) {
        const uint32_t b = a + 1;  // 0x7C00 = +Inf: the midpoint 65520 must round to Inf
        const double va = half_value(static_cast<uint16_t>(a));
        const double vb = b == 0x7C00 ? 65536.0 : half_value(static_cast<uint16_t>(b));
        const float mid = static_cast<float>((va + vb) / 2);  // exact in float
        QCOMPARE(static_cast<double>(mid), (va + vb) / 2);
        const uint32_t even = (a & 1) ? b : a;
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(mid)), even);
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(-mid)), even | 0x8000u);
        const float below = std::nextafter(mid, 0.f);
        const float above = std::nextafter(mid, INFINITY);
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(below)), a);
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(above)), b);
    }
}

void TestQuantKernels::fp16_known_values() {
    struct Case {
        float f;
        uint16_t h;
    };
    const Case cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3C00},
        {-2.0f, 0xC000},
        {0.5f, 0x3800},
        {65504.0f, 0x7BFF},                   // largest finite
        {65519.996f, 0x7BFF},                 // just below the midpoint to Inf
        {65520.0f, 0x7C00},                   // midpoint: ties to even = Inf
        {1e6f, 0x7C00},                       // overflow
        {INFINITY, 0x7C00},
        {-INFINITY, 0xFC00},
        {0.1f, 0x2E66},                       // 0.0999755859375
        {std::ldexp(1.0f, -14), 0x0400},      // smallest normal
        {std::ldexp(1.0f, -24), 0x0001},      // smallest subnormal
        {std::ldexp(1.0f, -25), 0x0000},      // tie between 0 and 2^-24: even (0)
        {std::ldexp(3.0f, -25), 0x0002},      // tie between 1 and 2 ulp: even (2)
        {std::ldexp(1.0f, -26), 0x0000},
        {1.0f + std::ldexp(1.0f, -11), 0x3C00},        // tie: even
        {1.0f + std::ldexp(3.0f, -11), 0x3C02},        // tie: even (up)
        {std::ldexp(1.0f, -130), 0x0000},              // float subnormal
        {-std::ldexp(1.0f, -130), 0x8000},
    };
    for (const Case& c : cases) {
        QVERIFY2(fp32_to_fp16(c.f) == c.h, qPrintable(QString("fp32_to_fp16(%1) = 0x%2, expected 0x%3")
                                                          .arg(static_cast<double>(c.f), 0, 'g', 10)
                                                          .arg(fp32_to_fp16(c.f), 4, 16, QChar('0'))
                                                          .arg(c.h, 4, 16, QChar('0'))));
    }
    QCOMPARE(fp16_to_fp32(0x3555), 0.333251953125f);
    QCOMPARE(fp16_to_fp32(0xFBFF), -65504.0f);
    QCOMPARE(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
    QVERIFY(std::isinf(fp16_to_fp32(0x7C00)) && fp16_to_fp32(0x7C00) > 0);
    // NaN narrowing: payload kept in the top bits, quiet bit set, sign kept.
    QCOMPARE(fp32_to_fp16(float_of(0x7FC00000u)), uint16_t(0x7E00));
    QCOMPARE(fp32_to_fp16(float_of(0xFFC00000u)), uint16_t(0xFE00));
    QVERIFY(half_is_nan(fp32_to_fp16(float_of(0x7F800001u))));  // payload only in dropped bits
    QCOMPARE(fp32_to_fp16(float_of(0x7FA02000u)), uint16_t(0x7F01));  // signalling -> quiet, payload kept
}

void TestQuantKernels::bf16_exhaustive_roundtrip() {
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t hh = static_cast<uint16_t>(h);
        const float f = bf16_to_fp32(hh);
        QCOMPARE(bits_of(f), h << 16);
        const bool nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
        const uint16_t back = fp32_to_bf16(f);
        if (nan) {
            QVERIFY(std::isnan(bf16_to_fp32(back)));
            QCOMPARE(back & 0x8000, h & 0x8000);
            if (h & 0x40) QCOMPARE(static_cast<uint32_t>(back), h);
        } else {
            QCOMPARE(static_cast<uint32_t>(back), h);
        }
    }
}

void TestQuantKernels::bf16_known_values() {
    QCOMPARE(fp32_to_bf16(1.0f), uint16_t(0x3F80));
    QCOMPARE(fp32_to_bf16(-1.0f), uint16_t(0xBF80));
    QCOMPARE(fp32_to_bf16(float_of(0x3F808000u)), uint16_t(0x3F80));  // tie: even (down)
    QCOMPARE(fp32_to_bf16(float_of(0x3F818000u)), uint16_t(0x3F82));  // tie: even (up)
    QCOMPARE(fp32_to_bf16(float_of(0x3F808001u)), uint16_t(0x3F81));  // above the tie
    QCOMPARE(fp32_to_bf16(float_of(0x7F7FFFFFu)), uint16_t(0x7F80));  // FLT_MAX rounds to Inf
    QCOMPARE(fp32_to_bf16(INFINITY), uint16_t(0x7F80));
    QCOMPARE(fp32_to_bf16(float_of(0x7FC00000u)), uint16_t(0x7FC0));
    QVERIFY(std::isnan(bf16_to_fp32(fp32_to_bf16(float_of(0x7F800001u)))));  // payload below bit 16
    QCOMPARE(fp32_to_bf16(3.14159265f), uint16_t(0x4049));
    QCOMPARE(bf16_to_fp32(0x4049), 3.140625f);
}

// ---------------------------------------------------------------------------

void TestQuantKernels::traits_match_block_structs() {
    QCOMPARE(type_traits(WeightType::Q4_0)->block_bytes, int64_t(sizeof(block_q4_0)));
    QCOMPARE(type_traits(WeightType::Q4_1)->block_bytes, int64_t(sizeof(block_q4_1)));
    QCOMPARE(type_traits(WeightType::Q5_0)->block_bytes, int64_t(sizeof(block_q5_0)));
    QCOMPARE(type_traits(WeightType::Q5_1)->block_bytes, int64_t(sizeof(block_q5_1)));
    QCOMPARE(type_traits(WeightType::Q8_0)->block_bytes, int64_t(sizeof(block_q8_0)));
    QCOMPARE(type_traits(WeightType::Q2_K)->block_bytes, int64_t(sizeof(block_q2_K)));
    QCOMPARE(type_traits(WeightType::Q3_K)->block_bytes, int64_t(sizeof(block_q3_K)));
    QCOMPARE(type_traits(WeightType::Q4_K)->block_bytes, int64_t(sizeof(block_q4_K)));
    QCOMPARE(type_traits(WeightType::Q5_K)->block_bytes, int64_t(sizeof(block_q5_K)));
    QCOMPARE(type_traits(WeightType::Q6_K)->block_bytes, int64_t(sizeof(block_q6_K)));
    QCOMPARE(type_traits(WeightType::Q8_K)->block_bytes, int64_t(sizeof(block_q8_K)));
    for (const Format& f : kFormats) {
        const TypeTraits* tr = type_traits(f.type);
        QVERIFY(tr);
        QCOMPARE(QString(tr->name), QString(f.name));
    }
}

void TestQuantKernels::has_kernels_matches_traits() {
    for (uint32_t id = 0; id < 64; ++id) {
        const TypeTraits* tr = type_traits(static_cast<WeightType>(id));  // file types and in-memory layouts
        const bool has = has_kernels(static_cast<WeightType>(id));
        QCOMPARE(has, tr != nullptr && tr->supported);
    }
    // Unsupported types: NaN out, not silence.
    float out[32] = {};
    uint8_t blob[64] = {};
    dequantize_row(WeightType::Q8_1, blob, out, 32);
    QVERIFY(std::isnan(out[0]) && std::isnan(out[31]));
    QVERIFY(std::isnan(dot_row(WeightType::Q8_1, blob, out, 32)));
}

// ---------------------------------------------------------------------------

void TestQuantKernels::roundtrip_error_data() {
    QTest::addColumn<int>("format");
    for (int i = 0; i < int(std::size(kFormats)); ++i) QTest::newRow(kFormats[i].name) << i;
}

void TestQuantKernels::roundtrip_error() {
    QFETCH(int, format);
    const Format& f = kFormats[format];
    std::mt19937 rng(1234u + static_cast<unsigned>(format));
    double worst = 0;
    for (int64_t n : row_lengths(f.type)) {
        for (int rep = 0; rep < 3; ++rep) {
            // rep 1: shifted mean (exercises the min of the asymmetric formats);
            // rep 2: wide dynamic range between blocks.
            std::vector<float> x = gaussian_row(rng, n, rep == 1 ? 0.7f : 0.f, 1.f);
            if (rep == 2)
                for (size_t i = 0; i < x.size(); ++i) x[i] *= (i / 256) % 2 ? 0.01f : 1.f;
            const std::vector<uint8_t> q = quantize(f.type, x);
            const std::vector<float> y = dequantize(f.type, q, n);
            // Measured per block-size chunk for rep 2 (otherwise the small
            // blocks would be invisible in the row's RMS); per row otherwise.
            const int64_t chunk = rep == 2 ? std::min<int64_t>(n, 256) : n;
            for (int64_t s = 0; s + chunk <= n; s += chunk) {
                std::vector<float> xs(x.begin() + s, x.begin() + s + chunk), err(chunk);
                for (int64_t i = 0; i < chunk; ++i) err[i] = y[s + i] - x[s + i];
                const double rel = rms(err) / rms(xs);
                worst = std::max(worst, rel);
                QVERIFY2(rel <= f.max_rel_rms,
                         qPrintable(QString("%1 n=%2 rep=%3: relative RMS error %4 > bound %5")
                                        .arg(f.name)
                                        .arg(n)
                                        .arg(rep)
                                        .arg(rel)
                                        .arg(f.max_rel_rms)));
            }
        }
    }
    qInfo("%s: worst relative RMS error %.4g (bound %.4g)", f.name, worst, f.max_rel_rms);
}

void TestQuantKernels::dot_matches_dequantize_data() { roundtrip_error_data(); }

void TestQuantKernels::dot_matches_dequantize() {
    QFETCH(int, format);
    const Format& f = kFormats[format];
    std::mt19937 rng(777u + static_cast<unsigned>(format));
    for (int64_t n : row_lengths(f.type)) {
        for (int rep = 0; rep < 3; ++rep) {
            const std::vector<float> w = gaussian_row(rng, n, rep == 1 ? -0.3f : 0.f);
            const std::vector<float> x = gaussian_row(rng, n, 0.f, rep == 2 ? 100.f : 1.f);
            const std::vector<uint8_t> q = quantize(f.type, w);
            const std::vector<float> y = dequantize(f.type, q, n);
            double expect, abs_sum;
            dot_f64(y, x.data(), &expect, &abs_sum);
            const float got = dot_row(f.type, q.data(), x.data(), n);
            // Float accumulation in 8 lanes: error well below 1e-5 of sum|terms|.
            const double tol = 1e-5 * abs_sum + 1e-30;
            QVERIFY2(std::fabs(got - expect) <= tol, qPrintable(QString("%1 n=%2: dot %3, float64 %4, tol %5")
                                                                     .arg(f.name)
                                                                     .arg(n)
                                                                     .arg(got, 0, 'g', 9)
                                                                     .arg(expect, 0, 'g', 9)
                                                                     .arg(tol)));
        }
    }
}

void TestQuantKernels::zero_rows_roundtrip() {
    for (const Format& f : kFormats) {
        const int64_t n = 3 * std::max<int64_t>(block_elems(f.type), 32);
        std::vector<float> x(static_cast<size_t>(n), 0.f);
        // One block of zeros between two non-zero blocks (all-zero paths).
        std::mt19937 rng(5);
        const int64_t b = n / 3;
        std::vector<float> g = gaussian_row(rng, n);
        for (int64_t i = 0; i < b; ++i) {
            x[i] = g[i];
            x[2 * b + i] = g[2 * b + i];
        }
        const std::vector<uint8_t> q = quantize(f.type, x);
        const std::vector<float> y = dequantize(f.type, q, n);
        for (int64_t i = b; i < 2 * b; ++i)
            QVERIFY2(y[i] == 0.f, qPrintable(QString("%1: zero block decodes to %2 at %3").arg(f.name).arg(y[i]).arg(i)));
        for (float v : y) QVERIFY(std::isfinite(v));
        std::vector<float> ones(static_cast<size_t>(n), 1.f);
        const std::vector<float> zeros(static_cast<size_t>(n), 0.f);
        const std::vector<uint8_t> qz = quantize(f.type, zeros);
        QCOMPARE(dot_row(f.type, qz.data(), ones.data(), n), 0.f);
    }
}

void TestQuantKernels::quantize_is_deterministic() {
    std::mt19937 rng(99);
    for (const Format& f : kFormats) {
        const int64_t n = 7 * std::max<int64_t>(block_elems(f.type), 32);
        const std::vector<float> x = gaussian_row(rng, n);
        QVERIFY(quantize(f.type, x) == quantize(f.type, x));
    }
}

// ---------------------------------------------------------------------------
// Hand-built blocks. Each comment works the expected value out from the bytes.

void TestQuantKernels::known_block_q8_0() {
    block_q8_0 b{};
    b.d = 0x3800;  // 0.5
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);  // -128, -120, ... 120
    float y[32];
    dequantize_row(WeightType::Q8_0, &b, y, 32);
    QCOMPARE(y[0], -64.f);   // -128 * 0.5
    QCOMPARE(y[1], -60.f);   // -120 * 0.5
    QCOMPARE(y[16], 0.f);    // 0
    QCOMPARE(y[31], 60.f);   // 120 * 0.5
}

void TestQuantKernels::known_block_q4_0() {
    block_q4_0 b{};
    b.d = 0x4000;  // 2.0
    for (int j = 0; j < 16; ++j) b.qs[j] = 0x88;  // both nibbles 8 -> 0
    b.qs[0] = 0x1F;  // element 0: low nibble 15 -> (15-8)*2 = 14; element 16: high nibble 1 -> (1-8)*2 = -14
    b.qs[5] = 0x80;  // element 5: 0 -> -16; element 21: 8 -> 0
    b.qs[15] = 0xC3; // element 15: 3 -> -10; element 31: 12 -> 8
    float y[32];
    dequantize_row(WeightType::Q4_0, &b, y, 32);
    QCOMPARE(y[0], 14.f);
    QCOMPARE(y[16], -14.f);
    QCOMPARE(y[5], -16.f);
    QCOMPARE(y[21], 0.f);
    QCOMPARE(y[15], -10.f);
    QCOMPARE(y[31], 8.f);
    QCOMPARE(y[1], 0.f);
}

void TestQuantKernels::known_block_q4_1() {
    block_q4_1 b{};
    b.d = 0x3400;  // 0.25
    b.m = 0xBC00;  // -1.0
    b.qs[0] = 0x4A;  // element 0: 10 -> 10*0.25 - 1 = 1.5; element 16: 4 -> 0
    b.qs[7] = 0xF0;  // element 7: 0 -> -1; element 23: 15 -> 2.75
    float y[32];
    dequantize_row(WeightType::Q4_1, &b, y, 32);
    QCOMPARE(y[0], 1.5f);
    QCOMPARE(y[16], 0.f);
    QCOMPARE(y[7], -1.f);
    QCOMPARE(y[23], 2.75f);
    QCOMPARE(y[1], -1.f);
}

void TestQuantKernels::known_block_q5_0() {
    block_q5_0 b{};
    b.d = 0x3C00;  // 1.0
    // qh little-endian: bit j = 5th bit of element j.
    // Set bits 0, 3 and 17 (bytes: 0x09, 0x00, 0x02, 0x00).
    b.qh[0] = 0x09;
    b.qh[2] = 0x02;
    b.qs[0] = 0x21;  // element 0: 1 | 16 = 17 -> 1; element 16: 2, bit 16 clear -> 2 - 16 = -14
    b.qs[1] = 0x0F;  // element 1: 15, bit 1 clear -> -1; element 17: 0 | 16 -> 0
    b.qs[3] = 0xFF;  // element 3: 15 | 16 = 31 -> 15; element 19: 15 -> -1
    float y[32];
    dequantize_row(WeightType::Q5_0, &b, y, 32);
    QCOMPARE(y[0], 1.f);
    QCOMPARE(y[16], -14.f);
    QCOMPARE(y[1], -1.f);
    QCOMPARE(y[17], 0.f);
    QCOMPARE(y[3], 15.f);
    QCOMPARE(y[19], -1.f);
    QCOMPARE(y[2], -16.f);
}

void TestQuantKernels::known_block_q5_1() {
    block_q5_1 b{};
    b.d = 0x3800;  // 0.5
    b.m = 0x4000;  // 2.0
    b.qh[3] = 0x80;  // bit 31: element 31 gets +16
    b.qs[15] = 0xE0;  // element 15: 0 -> 2.0; element 31: 14 | 16 = 30 -> 15 + 2 = 17
    float y[32];
    dequantize_row(WeightType::Q5_1, &b, y, 32);
    QCOMPARE(y[15], 2.f);
    QCOMPARE(y[31], 17.f);
}

void TestQuantKernels::known_block_q2_k() {
    block_q2_K b{};
    b.d = 0x3800;     // 0.5
    b.dmin = 0x3400;  // 0.25
    b.scales[0] = 0x37;  // sub-block 0: scale 7 -> dl 3.5, min 3 -> ml 0.75
    b.scales[2] = 0x12;  // sub-block 2: dl 1.0, ml 0.25
    b.scales[6] = 0x21;  // sub-block 6: dl 0.5, ml 0.5
    b.scales[9] = 0xF1;  // sub-block 9: dl 0.5, ml 3.75
    b.qs[0] = 0xB6;      // 0b10'11'01'10: elements 0 (bits 0-1) = 2, 32 (bits 2-3) = 1, 64 = 3, 96 (bits 6-7) = 2
    b.qs[49] = 0x03;     // second half, byte 17 of its 32: element 128 + 17 (bits 0-1) = 3, sub-block 9
    float y[256];
    dequantize_row(WeightType::Q2_K, &b, y, 256);
    QCOMPARE(y[0], 6.25f);    // 3.5 * 2 - 0.75
    QCOMPARE(y[32], 0.75f);   // 1.0 * 1 - 0.25
    QCOMPARE(y[96], 0.5f);    // 0.5 * 2 - 0.5
    QCOMPARE(y[145], -2.25f); // 0.5 * 3 - 3.75
    QCOMPARE(y[1], -0.75f);   // q 0 in sub-block 0: -ml
    QCOMPARE(y[64], 0.f);     // sub-block 4 has scale byte 0
}

void TestQuantKernels::known_block_q3_k() {
    block_q3_K b{};
    b.d = 0x3C00;  // 1.0
    // Scale j = (low 4 bits) | (2 high bits) << 4, minus 32.
    //   j = 0: low = scales[0] & 15 = 5, high = scales[8] bits 0-1 = 2 -> 37 - 32 = 5
    //   j = 2: low = scales[2] & 15 = 0, high = scales[10] bits 0-1 = 0 -> -32
    //   j = 12: low = scales[4] >> 4 = 7, high = scales[8] bits 6-7 = 1 -> 23 - 32 = -9
    b.scales[0] = 0x05;
    b.scales[2] = 0x00;
    b.scales[4] = 0x70;
    b.scales[8] = 0x42;
    // Element 0: sub-block 0, 2 low bits = qs[0] bits 0-1 = 3, high bit = hmask[0] bit 0 = 1 -> q = 3.
    // Element 32: sub-block 2, qs[0] bits 2-3 = 1, hmask[0] bit 1 = 0 -> q = 1 - 4 = -3.
    b.qs[0] = 0x07;
    b.hmask[0] = 0x01;
    // Element 200 = 128 + 72: second half (qs[32..63]), plane 2 (shift 4), byte 8
    // -> qs[40] bits 4-5 = 2; hmask[8] bit 4 + 2 = 6 set -> q = 2; sub-block 12.
    b.qs[40] = 0x20;
    b.hmask[8] = 0x40;
    float y[256];
    dequantize_row(WeightType::Q3_K, &b, y, 256);
    QCOMPARE(y[0], 15.f);    // 5 * 3
    QCOMPARE(y[32], 96.f);   // -32 * -3
    QCOMPARE(y[200], -18.f); // -9 * 2
    QCOMPARE(y[1], -20.f);   // sub-block 0, q bits 0, high bit 0 -> -4; 5 * -4
}

void TestQuantKernels::known_block_q4_k() {
    block_q4_K b{};
    b.d = 0x3C00;     // 1.0
    b.dmin = 0x3800;  // 0.5
    // Sub-blocks 0..3: scale = scales[j] & 63, min = scales[j + 4] & 63.
    // Sub-blocks 4..7: scale = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4,
    //                  min = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
    b.scales[0] = 0x45;  // scale0 = 5; top bits 01 -> scale4 high = 16
    b.scales[1] = 0x02;  // scale1 = 2
    b.scales[4] = 0xC3;  // min0 = 3; top bits 11 -> min4 high = 48
    b.scales[5] = 0x01;  // min1 = 1
    b.scales[8] = 0x27;  // scale4 = 7 | 16 = 23; min4 = 2 | 48 = 50
    b.scales[9] = 0x40;  // scale5 = 0; min5 = 4
    b.qs[0] = 0xA3;      // element 0 (sub-block 0) = 3; element 32 (sub-block 1) = 10
    b.qs[64] = 0x0F;     // element 128 (sub-block 4) = 15; element 160 (sub-block 5) = 0
    float y[256];
    dequantize_row(WeightType::Q4_K, &b, y, 256);
    QCOMPARE(y[0], 13.5f);    // 1*5*3 - 0.5*3
    QCOMPARE(y[32], 19.5f);   // 1*2*10 - 0.5*1
    QCOMPARE(y[128], 320.f);  // 1*23*15 - 0.5*50
    QCOMPARE(y[160], -2.f);   // 0 - 0.5*4
    QCOMPARE(y[1], -1.5f);    // 1*5*0 - 0.5*3
}

void TestQuantKernels::known_block_q5_k() {
    block_q5_K b{};
    b.d = 0x3C00;  // 1.0
    b.dmin = 0x3800;  // 0.5
    b.scales[0] = 1;  // sub-block 0: scale 1
    b.scales[1] = 2;  // sub-block 1: scale 2
    b.scales[2] = 3;  // sub-block 2: scale 3
    b.scales[6] = 5;  // sub-block 2: min 5
    b.scales[11] = 0x12;  // sub-block 7: scale 2, min 1
    // Element l of chunk c (64 elements, 32 bytes of qs) takes its fifth bit
    // from qh[l] bit 2c (low nibbles) or 2c+1 (high nibbles).
    b.qs[0] = 0x21;   // element 0: 1; element 32: 2
    b.qh[0] = 0x05;   // bit 0: element 0 += 16; bit 2: element 64 += 16
    b.qs[32] = 0x04;  // element 64 (chunk 1, low nibble): 4
    b.qs[127] = 0xF0; // element 255 (chunk 3, high nibble, l = 31): 15
    b.qh[31] = 0x80;  // bit 7: element 255 += 16
    float y[256];
    dequantize_row(WeightType::Q5_K, &b, y, 256);
    QCOMPARE(y[0], 17.f);     // 1 * (1 + 16)
    QCOMPARE(y[32], 4.f);     // 2 * 2
    QCOMPARE(y[64], 57.5f);   // 3 * (4 + 16) - 0.5 * 5
    QCOMPARE(y[255], 61.5f);  // 2 * 31 - 0.5 * 1
    QCOMPARE(y[65], -2.5f);   // 3 * 0 - 2.5
}

void TestQuantKernels::known_block_q6_k() {
    block_q6_K b{};
    b.d = 0x3400;  // 0.25
    b.scales[0] = 2;
    b.scales[1] = 7;
    b.scales[2] = -3;
    b.scales[4] = 4;
    b.scales[6] = 5;
    b.scales[8] = 1;
    // Half 0: ql[l] low -> element l, ql[l + 32] low -> l + 32, ql[l] high ->
    // l + 64, ql[l + 32] high -> l + 96; qh[l] bits 0-1, 2-3, 4-5, 6-7 are
    // their top bits. Sub-block = element / 16.
    b.ql[0] = 0x5A;
    b.ql[32] = 0x3C;
    b.qh[0] = 0xE6;  // 0b11'10'01'10: top bits 2, 1, 2, 3
    b.ql[64] = 0x01; // half 1: element 128 low bits 1, qh[32] = 0
    float y[256];
    dequantize_row(WeightType::Q6_K, &b, y, 256);
    QCOMPARE(y[0], 5.f);       // q = 10 | 2<<4 = 42 - 32 = 10; 0.25 * 2 * 10
    QCOMPARE(y[32], 3.f);      // q = 12 | 1<<4 = 28 - 32 = -4; 0.25 * -3 * -4
    QCOMPARE(y[64], 5.f);      // q = 5 | 2<<4 = 37 - 32 = 5; 0.25 * 4 * 5
    QCOMPARE(y[96], 23.75f);   // q = 3 | 3<<4 = 51 - 32 = 19; 0.25 * 5 * 19
    QCOMPARE(y[128], -7.75f);  // q = 1 - 32 = -31; 0.25 * 1 * -31
    QCOMPARE(y[16], -56.f);    // q = -32, sub-block 1; 0.25 * 7 * -32
}

void TestQuantKernels::q3_k_scales_match_kmask_unpacking() {
    // ggml unpacks the q3_K scales with 32-bit masks (kmask1/kmask2); the
    // per-scale formula used here must give the same 16 values for any bytes.
    std::mt19937 rng(3);
    for (int trial = 0; trial < 1000; ++trial) {
        uint8_t packed[12];
        for (uint8_t& p : packed) p = static_cast<uint8_t>(rng());
        uint32_t aux[4];
        std::memcpy(aux, packed, 12);
        const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
        const uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t expect[16];
        std::memcpy(expect, aux, 16);
        int8_t got[16];
        unpack_q3_K_scales(packed, got);
        for (int j = 0; j < 16; ++j) QCOMPARE(int(got[j]), int(expect[j]) - 32);
    }
}

void TestQuantKernels::quantizers_hit_exact_grid_values() {
    // A block whose values lie exactly on the q8_0 / q4_0 grid must come back
    // exactly (scale a power of two, so no fp16 rounding of d).
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j % 16) - 8) * 0.25f;  // q4_0 levels, d = 0.25
    block_q4_0 b4;
    quantize_row(WeightType::Q4_0, x, &b4, 32);
    QCOMPARE(b4.d, uint16_t(0x3400));  // max |x| = 2.0 at -8 -> d = -2 / -8 = 0.25
    float y[32];
    dequantize_row(WeightType::Q4_0, &b4, y, 32);
    for (int j = 0; j < 32; ++j) QCOMPARE(y[j], x[j]);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j * 8 - 127) / 64.f;  // max 1.984375 = 127/64
    block_q8_0 b8;
    quantize_row(WeightType::Q8_0, x, &b8, 32);
    dequantize_row(WeightType::Q8_0, &b8, y, 32);
    for (int j = 0; j < 32; ++j) QCOMPARE(y[j], x[j]);
}

// ---------------------------------------------------------------------------

void TestQuantKernels::fixture_quantizers_match_llama_cpp_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("q8_0") << "models/moe-tiny-q8_0.gguf";
    QTest::newRow("q4_0") << "models/moe-tiny-q4_0.gguf";
    QTest::newRow("f16") << "models/moe-tiny-f16.gguf";
}

void TestQuantKernels::fixture_quantizers_match_llama_cpp() {
    STRATA_REQUIRE_FIXTURES();
    QFETCH(QString, file);
    GgufFile src, quant;
    QString error;
    QVERIFY2(load_gguf(strata::test::fixture_path("models/moe-tiny-f32.gguf"), &src, &error), qPrintable(error));
    QVERIFY2(load_gguf(strata::test::fixture_path(file), &quant, &error), qPrintable(error));

    std::map<std::string, int> checked;  // type name -> tensors compared
    for (const auto& [name, qt] : quant.tensors) {
        const WeightType type = static_cast<WeightType>(qt.type);
        if (type == WeightType::F32) continue;  // kept in F32 by llama-quantize
        QVERIFY2(has_kernels(type), qPrintable(QString("%1: no kernels for type %2").arg(name.c_str()).arg(qt.type)));
        const auto it = src.tensors.find(name);
        QVERIFY2(it != src.tensors.end(), qPrintable(QString("%1 missing in the F32 model").arg(name.c_str())));
        const GgufTensor& st = it->second;
        QCOMPARE(st.type, uint32_t(0));
        QVERIFY(st.ne == qt.ne);
        const int64_t n_per_row = qt.ne[0];
        const int64_t rows = qt.n_elements() / n_per_row;
        const int64_t rb = row_bytes(type, n_per_row);
        const float* x = reinterpret_cast<const float*>(src.data(st));
        const uint8_t* expect = quant.data(qt);
        std::vector<uint8_t> got(static_cast<size_t>(rb));
        std::vector<float> deq(static_cast<size_t>(n_per_row));
        int64_t bad_rows = 0;
        double max_err = 0, max_abs = 0;
        for (int64_t r = 0; r < rows; ++r) {
            quantize_row(type, x + r * n_per_row, got.data(), n_per_row);
            if (std::memcmp(got.data(), expect + r * rb, static_cast<size_t>(rb)) != 0) ++bad_rows;
            dequantize_row(type, expect + r * rb, deq.data(), n_per_row);
            for (int64_t i = 0; i < n_per_row; ++i) {
                max_err = std::max(max_err, std::fabs(static_cast<double>(deq[i]) - x[r * n_per_row + i]));
                max_abs = std::max(max_abs, std::fabs(static_cast<double>(x[r * n_per_row + i])));
            }
        }
        QVERIFY2(bad_rows == 0, qPrintable(QString("%1 (%2): %3 of %4 rows differ from llama.cpp's bytes")
                                               .arg(name.c_str())
                                               .arg(type_traits(type)->name)
                                               .arg(bad_rows)
                                               .arg(rows)));
        // llama.cpp's bytes decode close to the F32 source (a layout error would not).
        QVERIFY2(max_err <= 0.2 * max_abs, qPrintable(QString("%1: decoded max error %2 vs max |x| %3")
                                                          .arg(name.c_str())
                                                          .arg(max_err)
                                                          .arg(max_abs)));
        ++checked[type_traits(type)->name];
    }
    QVERIFY(!checked.empty());
    QString summary;
    for (const auto& [t, count] : checked) summary += QString(" %1:%2").arg(t.c_str()).arg(count);
    qInfo("%s: byte-identical tensors by type:%s", qPrintable(file), qPrintable(summary));
}

void TestQuantKernels::fixture_q4_k_m_decodes() {
    STRATA_REQUIRE_FIXTURES();
    GgufFile m;
    QString error;
    QVERIFY2(load_gguf(strata::test::fixture_path("models/moe-small-q4_k_m.gguf"), &m, &error), qPrintable(error));
    std::map<std::string, int> seen;
    std::mt19937 rng(11);
    for (const auto& [name, t] : m.tensors) {
        const WeightType type = static_cast<WeightType>(t.type);
        QVERIFY2(has_kernels(type), qPrintable(QString("%1: no kernels for type %2").arg(name.c_str()).arg(t.type)));
        const int64_t n_per_row = t.ne[0];
        const int64_t rows = t.n_elements() / n_per_row;
        const int64_t rb = row_bytes(type, n_per_row);
        std::vector<float> deq(static_cast<size_t>(n_per_row));
        const std::vector<float> x = gaussian_row(rng, n_per_row);
        double sumsq = 0;
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t* row = m.data(t) + r * rb;
            dequantize_row(type, row, deq.data(), n_per_row);
            for (float v : deq) {
                QVERIFY2(std::isfinite(v), qPrintable(QString("%1: non-finite value").arg(name.c_str())));
                sumsq += static_cast<double>(v) * v;
            }
            if (r % 17 == 0) {
                double expect, abs_sum;
                dot_f64(deq, x.data(), &expect, &abs_sum);
                const float got = dot_row(type, row, x.data(), n_per_row);
                QVERIFY(std::fabs(got - expect) <= 1e-5 * abs_sum + 1e-30);
            }
        }
        QVERIFY2(sumsq > 0, qPrintable(QString("%1 decodes to all zeros").arg(name.c_str())));
        ++seen[type_traits(type)->name];
    }
    QVERIFY(seen.count("q4_k") && seen.count("q6_k"));
    QString summary;
    for (const auto& [t, count] : seen) summary += QString(" %1:%2").arg(t.c_str()).arg(count);
    qInfo("moe-small-q4_k_m tensors by type:%s", qPrintable(summary));
}

// MXFP4 against the OCP Microscaling Formats v1.0 spec: an element is the
// FP4 E2M1 value of its code (sign, 2 exponent bits with bias 1, 1 mantissa
// bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) times the block's E8M0
// scale 2^(e - 127). Every code at several scales, both nibbles, and the
// subnormal-float scales e = 0 and 1. (E8M0's 0xFF is NaN in the spec; ggml
// and this engine read it as 2^128 and never write it: the quantizer's largest
// e is for amax < 2^127.)
void TestQuantKernels::mxfp4_matches_the_ocp_value_table() {
    const double e2m1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    for (int e : {0, 1, 100, 126, 127, 128, 130, 200, 250}) {  // 254 x 6 overflows a float
        block_mxfp4 b{};
        b.e = static_cast<uint8_t>(e);
        for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));  // codes j and 15 - j
        float y[32];
        dequantize_row(WeightType::MXFP4, &b, y, 32);
        for (int k = 0; k < 32; ++k) {
            const int code = k < 16 ? k : 15 - (k - 16);
            const double value = (code & 8 ? -1.0 : 1.0) * e2m1[code & 7] * std::ldexp(1.0, e - 127);
            QVERIFY2(static_cast<double>(y[k]) == value,
                     qPrintable(QString("e=%1 code=%2: %3, the spec says %4").arg(e).arg(code).arg(y[k]).arg(value)));
        }
    }
    // The quantizer: values on the grid come back exactly; the scale puts the largest magnitude at most on 6.
    float x[32];
    for (int k = 0; k < 32; ++k) x[k] = static_cast<float>((k % 2 ? -1 : 1) * e2m1[k % 8] * 0.25);
    block_mxfp4 q{};
    quantize_row(WeightType::MXFP4, x, &q, 32);
    QCOMPARE(int(q.e), 127 - 2);  // amax 1.5 = 6 * 2^-2
    float y[32];
    dequantize_row(WeightType::MXFP4, &q, y, 32);
    for (int k = 0; k < 32; ++k) QCOMPARE(y[k], x[k]);
}

QTEST_APPLESS_MAIN(TestQuantKernels)
#include "test_quant_kernels.moc"
