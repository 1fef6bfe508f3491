// The quantizer's two compensations: activation-aware channel scaling folded
// into the model (quant/awq.h) and GPTQ-style error compensation (quant/gptq.h),
// with the block-level codes they rest on (kernels::set_block_levels_ref).
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"
#include "runner/context.h"
#include "model/make_model.h"
#include "model/model.h"
#include "quant/activation_stats.h"
#include "quant/awq.h"
#include "quant/gptq.h"
#include "quant/quantize.h"
#include "quant/second_moments.h"
#include "small_moe.h"
#include "test_support.h"

using namespace strata;
using kernels::WeightType;

namespace {

const WeightType kTypes[] = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                             WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

std::string tmp_path(const char* name) {
    return (std::filesystem::temp_directory_path() / (std::string("strata_comp_") + name)).string();
}

// Normal values with a few large ones, as weights have.
std::vector<float> weights_row(std::mt19937& rng, int64_t n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    for (int64_t j = 0; j < n; j += 37) x[static_cast<size_t>(j)] *= 4.0f;
    return x;
}

// Calibration inputs with correlated channels and a few loud ones: X = Z A.
std::vector<double> correlated_inputs(std::mt19937& rng, int64_t tokens, int64_t n) {
    std::normal_distribution<double> nd(0.0, 1.0);
    std::vector<double> A(static_cast<size_t>(n * n)), Z(static_cast<size_t>(tokens * n)), X(static_cast<size_t>(tokens * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) A[i * n + j] = (i == j ? 1.0 : 0.0) + 0.3 * nd(rng) / std::sqrt(double(n)) * 4;
    for (double& z : Z) z = nd(rng);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t k = 0; k < n; ++k) {
            const double z = Z[t * n + k];
            for (int64_t j = 0; j < n; ++j) X[t * n + j] += z * A[k * n + j];
        }
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < n; j += 23) X[t * n + j] *= 6.0;
    return X;
}

// ||(W - Q) X^T||^2 over the tokens, for one row.
double output_error(const std::vector<float>& w, const std::vector<float>& q, const std::vector<double>& X, int64_t tokens) {
    const int64_t n = static_cast<int64_t>(w.size());
    double e = 0.0;
    for (int64_t t = 0; t < tokens; ++t) {
        double d = 0.0;
        for (int64_t j = 0; j < n; ++j) d += (double(w[static_cast<size_t>(j)]) - q[static_cast<size_t>(j)]) * X[t * n + j];
        e += d * d;
    }
    return e;
}

// Teacher-forced logits of a prompt's tokens.
std::vector<float> logits_of(const model::Model& m, const std::vector<int32_t>& ids) {
    model::ContextParams cp;
    cp.n_ctx = 128;
    cp.n_threads = 1;
    model::Context ctx(m, cp);
    const float* l = ctx.decode(ids, true);
    return std::vector<float>(l, l + ids.size() * static_cast<size_t>(m.config().n_vocab));
}

}  // namespace

class TestCompensation : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Codes probed from a block and written back under its scales give the
    // quantizer's own bytes: the grid GPTQ rounds to is the format's.
    void block_levels_rewrite_the_codes_under_the_same_scales() {
        std::mt19937 rng(11);
        for (const WeightType t : kTypes) {
            const int64_t n = 512;
            const std::vector<float> x = weights_row(rng, n);
            const int64_t B = kernels::type_traits(t)->block_elems, bb = kernels::row_bytes(t, B);
            std::vector<uint8_t> q(static_cast<size_t>(kernels::row_bytes(t, n)));
            kernels::quantize_row(t, x.data(), q.data(), n);
            std::vector<float> y(static_cast<size_t>(n));
            kernels::dequantize_row(t, q.data(), y.data(), n);
            const int levels = kernels::block_levels(t);
            QVERIFY(levels > 1);
            for (int64_t c0 = 0; c0 < n; c0 += B) {
                const uint8_t* blk = q.data() + (c0 / B) * bb;
                std::vector<uint8_t> probe(blk, blk + bb), codes(static_cast<size_t>(B));
                std::vector<float> base(static_cast<size_t>(B)), one(static_cast<size_t>(B));
                std::fill(codes.begin(), codes.end(), uint8_t{0});
                QVERIFY(kernels::set_block_levels_ref(t, probe.data(), codes.data()));
                kernels::dequantize_row(t, probe.data(), base.data(), B);
                std::fill(codes.begin(), codes.end(), uint8_t{1});
                kernels::set_block_levels_ref(t, probe.data(), codes.data());
                kernels::dequantize_row(t, probe.data(), one.data(), B);
                for (int64_t j = 0; j < B; ++j) {
                    const float a = one[static_cast<size_t>(j)] - base[static_cast<size_t>(j)];
                    QVERIFY2(a != 0.0f, kernels::type_traits(t)->name);
                    const long c = std::lround((y[static_cast<size_t>(c0 + j)] - base[static_cast<size_t>(j)]) / a);
                    QVERIFY2(c >= 0 && c < levels, qPrintable(QString("%1: code %2").arg(kernels::type_traits(t)->name).arg(c)));
                    codes[static_cast<size_t>(j)] = static_cast<uint8_t>(c);
                }
                kernels::set_block_levels_ref(t, probe.data(), codes.data());
                QVERIFY2(std::memcmp(probe.data(), blk, static_cast<size_t>(bb)) == 0, kernels::type_traits(t)->name);
            }
        }
        QCOMPARE(kernels::block_levels(WeightType::F32), 0);
    }

    void gptq_factor_is_the_upper_cholesky_factor_of_the_inverse() {
        std::mt19937 rng(5);
        const int64_t n = 40, tokens = 200;
        const std::vector<double> X = correlated_inputs(rng, tokens, n);
        std::vector<double> H(static_cast<size_t>(n * n), 0.0);
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = i; j < n; ++j) H[i * n + j] += X[t * n + i] * X[t * n + j];
        for (int64_t j = 0; j < n; ++j) H[7 * n + j] = H[j * n + 7] = 0.0;  // a channel nothing reached
        std::vector<float> scale(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) scale[static_cast<size_t>(j)] = 0.5f + 0.05f * static_cast<float>(j);
        for (const float* s : {static_cast<const float*>(nullptr), static_cast<const float*>(scale.data())}) {
            std::vector<float> U;
            QVERIFY(quant::gptq_factor(H.data(), n, s, 0.01, &U));
            // (U^T U) (H' + damp) = I, H' the scaled and mended H.
            std::vector<double> A(static_cast<size_t>(n * n));
            double mean = 0;
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    double h = H[std::min(i, j) * n + std::max(i, j)];
                    if (i == j && h == 0) h = s ? 1.0 * double(s[i]) * s[i] : 1.0;
                    if (s) h /= double(s[i]) * s[j];
                    A[i * n + j] = h;
                }
            for (int64_t i = 0; i < n; ++i) mean += A[i * n + i] / double(n);
            for (int64_t i = 0; i < n; ++i) A[i * n + i] += 0.01 * mean;
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < i; ++j) QCOMPARE(U[static_cast<size_t>(i * n + j)], 0.0f);
            double worst = 0;
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    double p = 0;
                    for (int64_t k = 0; k < n; ++k) {
                        double inv = 0;  // (U^T U)[i][k]
                        for (int64_t m = 0; m <= std::min(i, k); ++m) inv += double(U[m * n + i]) * U[m * n + k];
                        p += inv * A[k * n + j];
                    }
                    worst = std::max(worst, std::fabs(p - (i == j ? 1.0 : 0.0)));
                }
            QVERIFY2(worst < 1e-3, qPrintable(QString::number(worst)));
        }
        // Not positive definite even with damping: refused.
        std::vector<double> bad(static_cast<size_t>(4), 0.0);
        bad[0] = 1;
        bad[1] = 5;  // [[1, 5], [5, 1]]
        bad[3] = 1;
        std::vector<float> U;
        QVERIFY(!quant::gptq_factor(bad.data(), 2, nullptr, 0.01, &U));
    }

    // On correlated inputs, compensation keeps W X closer than rounding each
    // block alone, in every format it supports.
    void gptq_lowers_the_output_error() {
        std::mt19937 rng(3);
        const int64_t n = 256, tokens = 1024, rows = 8;
        const std::vector<double> X = correlated_inputs(rng, tokens, n);
        std::vector<double> H(static_cast<size_t>(n * n), 0.0);
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = i; j < n; ++j) H[i * n + j] += X[t * n + i] * X[t * n + j];
        std::vector<float> diag(static_cast<size_t>(n)), U;
        for (int64_t j = 0; j < n; ++j) diag[static_cast<size_t>(j)] = static_cast<float>(H[j * n + j] / tokens);
        QVERIFY(quant::gptq_factor(H.data(), n, nullptr, 0.01, &U));
        for (const WeightType t : kTypes) {
            QVERIFY(quant::gptq_supports(t));
            double plain = 0, comp = 0;
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> w = weights_row(rng, n);
                std::vector<uint8_t> q(static_cast<size_t>(kernels::row_bytes(t, n)));
                std::vector<float> back(static_cast<size_t>(n));
                if (!kernels::quantize_row_weighted_ref(t, w.data(), q.data(), n, diag.data()))
                    kernels::quantize_row(t, w.data(), q.data(), n);
                kernels::dequantize_row(t, q.data(), back.data(), n);
                plain += output_error(w, back, X, tokens);
                std::vector<float> work(w);
                quant::gptq_quantize_row(t, work.data(), n, U.data(), diag.data(), q.data());
                kernels::dequantize_row(t, q.data(), back.data(), n);
                comp += output_error(w, back, X, tokens);
            }
            QVERIFY2(comp < 0.8 * plain, qPrintable(QString("%1: %2 against %3").arg(kernels::type_traits(t)->name).arg(comp).arg(plain)));
        }
        QVERIFY(!quant::gptq_supports(WeightType::F16));
    }

    // Scaling folded into norms, router, gate/up columns, up rows and down
    // columns leaves the model's function as it was (an all-float recipe,
    // so only the folding is measured).
    void channel_scaling_folds_exactly() {
        const std::string base = tmp_path("base.gguf"), scaled = tmp_path("scaled.gguf");
        model::make_model(test::small_moe_spec(WeightType::F32), base);
        auto in = gguf::File::open(base);
        std::mt19937 rng(9);
        std::uniform_real_distribution<float> ud(0.25f, 4.0f);
        auto scales = [&](int64_t n) {
            std::vector<float> v(static_cast<size_t>(n));
            for (float& x : v) x = ud(rng);
            return v;
        };
        quant::ChannelScaling cs;
        for (int L = 0; L < 2; ++L) {
            const std::string b = "blk." + std::to_string(L) + ".";
            const int64_t d = in->tensor(b + "attn_norm.weight")->ne[0];
            const std::vector<float> sa = scales(d), sf = scales(d);
            cs.norms[b + "attn_norm.weight"] = sa;
            for (const char* r : {"attn_q", "attn_k", "attn_v"}) cs.columns[b + r + ".weight"] = sa;
            cs.norms[b + "ffn_norm.weight"] = sf;
            cs.columns[b + "ffn_gate_inp.weight"] = sf;
            const gguf::TensorInfo* up = in->tensor(b + "ffn_up_exps.weight");
            const int64_t experts = up->ne[2], ff = up->ne[1];
            std::vector<float> rep, down = scales(ff * experts);
            for (int64_t e = 0; e < experts; ++e) rep.insert(rep.end(), sf.begin(), sf.end());
            cs.columns[b + "ffn_gate_exps.weight"] = rep;
            cs.columns[b + "ffn_up_exps.weight"] = rep;
            cs.rows[b + "ffn_up_exps.weight"] = down;
            cs.columns[b + "ffn_down_exps.weight"] = down;
        }
        quant::QuantizeOptions opt;  // an empty recipe keeps every type
        opt.scaling = &cs;
        const quant::QuantizeReport rep = quant::quantize_file(base, scaled, opt);
        QCOMPARE(std::count_if(rep.tensors.begin(), rep.tensors.end(), [](const auto& t) { return t.scaled; }), 18L);
        auto a = model::Model::load(base), b = model::Model::load(scaled);
        const std::vector<int32_t> ids = {1, 17, 99, 4, 250, 33, 7, 401, 12, 5};
        const std::vector<float> la = logits_of(*a, ids), lb = logits_of(*b, ids);
        QCOMPARE(la.size(), lb.size());
        float spread = 0, worst = 0;
        for (size_t i = 0; i < la.size(); ++i) {
            spread = std::max(spread, std::fabs(la[i]));
            worst = std::max(worst, std::fabs(la[i] - lb[i]));
        }
        QVERIFY2(worst <= 1e-4f * std::max(1.0f, spread), qPrintable(QString("%1 of %2").arg(worst).arg(spread)));
        // And the weights did change (the test would pass on an unscaled copy otherwise).
        auto fa = gguf::File::open(base), fb = gguf::File::open(scaled);
        QVERIFY(std::memcmp(fa->tensor("blk.0.ffn_norm.weight")->data, fb->tensor("blk.0.ffn_norm.weight")->data,
                            fa->tensor("blk.0.ffn_norm.weight")->nbytes) != 0);
        std::filesystem::remove(base);
        std::filesystem::remove(scaled);
    }

    // The search scales the loud channels when they dominate, never raises
    // its own measure of the error, and leaves a model that still runs close
    // to the original.
    void awq_search_scales_the_loud_channels() {
        const std::string base = tmp_path("awq_base.gguf"), out = tmp_path("awq_q4.gguf");
        model::make_model(test::small_moe_spec(WeightType::F32), base);
        auto in = gguf::File::open(base);
        quant::ImportanceMatrix imp;
        for (const gguf::TensorInfo& t : in->tensors()) {
            if (t.n_dims < 2 || t.name.rfind("blk.", 0) != 0) continue;
            const int64_t slabs = t.n_dims >= 3 ? t.ne[2] : 1;
            std::vector<float> v(static_cast<size_t>(t.ne[0] * slabs), 1.0f);
            for (size_t j = 0; j < v.size(); j += 16) v[j] = 400.0f;  // one loud channel in 16
            imp.values[t.name] = v;
        }
        const quant::Recipe recipe = quant::load_recipe("q4-experts");
        quant::AwqOptions ao;
        ao.threads = 2;
        const quant::ChannelScaling cs = quant::awq_search(*in, recipe, imp, ao);
        QVERIFY(!cs.groups.empty());
        bool ffn_scaled = false;
        for (const auto& g : cs.groups)
            if (g.what.find("ffn input") != std::string::npos && g.alpha > 0) {
                ffn_scaled = true;
                // Loud channels: scaling lowers the weighted error clearly.
                QVERIFY2(g.error_after < 0.97 * g.error_before, qPrintable(QString("%1: %2 against %3")
                                                                             .arg(g.what.c_str()).arg(g.error_after).arg(g.error_before)));
            }
        QVERIFY(ffn_scaled);
        QVERIFY(cs.norms.count("blk.0.ffn_norm.weight"));
        QVERIFY(cs.columns.count("blk.0.ffn_gate_inp.weight"));  // the router follows its norm
        const std::vector<float>& s = cs.norms.at("blk.0.ffn_norm.weight");
        QVERIFY(s[0] > s[1]);  // the loud channel gets the larger scale

        quant::QuantizeOptions opt;
        opt.recipe = recipe;
        opt.importance = &imp;
        opt.scaling = &cs;
        quant::quantize_file(base, out, opt);
        auto a = model::Model::load(base), b = model::Model::load(out);
        const std::vector<int32_t> ids = {1, 17, 99, 4, 250, 33, 7, 401};
        const std::vector<float> la = logits_of(*a, ids), lb = logits_of(*b, ids);
        const int64_t V = a->config().n_vocab;
        int agree = 0;
        for (size_t p = 0; p < ids.size(); ++p) {
            const float* x = la.data() + p * static_cast<size_t>(V);
            const float* y = lb.data() + p * static_cast<size_t>(V);
            agree += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
        }
        QVERIFY2(agree >= 6, qPrintable(QString::number(agree)));
        std::filesystem::remove(base);
        std::filesystem::remove(out);
    }

    // Statistics with second moments, both compensations, a file that loads;
    // the same bytes twice (deterministic whatever the threads).
    void compensated_quantization_end_to_end() {
        STRATA_REQUIRE_FIXTURES();
        const std::string in = test::fixture_path("models/moe-tiny-f32.gguf");
        auto m = model::Model::load(in);
        const quant::Recipe recipe = quant::load_recipe("q4-experts");
        quant::CalibrationOptions co;
        co.threads = 2;
        co.covariance = [&](const std::string& name) {
            const gguf::TensorInfo* t = m->file().tensor(name);
            return t && quant::compensated_by_gptq(recipe, *t);
        };
        const quant::ActivationStats st = quant::collect_activation_stats(
            *m, {"Once upon a time there was a little dog.", "The cat sat on the mat and looked at the bird."}, co);
        const auto e = st.entries.find("blk.0.ffn_gate_exps.weight");
        QVERIFY(e != st.entries.end());
        QCOMPARE(e->second.cov.size(), e->second.tokens.size() * static_cast<size_t>(e->second.cols * e->second.cols));
        QVERIFY(st.entries.at("blk.0.ffn_gate_inp.weight").cov.empty());  // the router stays float: none collected
        const quant::ImportanceMatrix imp = st.importance();
        quant::AwqOptions ao;
        ao.threads = 2;
        const quant::ChannelScaling cs = quant::awq_search(m->file(), recipe, imp, ao);
        quant::QuantizeOptions opt;
        opt.recipe = recipe;
        opt.importance = &imp;
        opt.scaling = &cs;
        opt.second_moments = quant::second_moments_of(st);
        const std::string a = tmp_path("comp1.gguf"), b = tmp_path("comp2.gguf");
        opt.threads = 1;
        const quant::QuantizeReport rep = quant::quantize_file(in, a, opt);
        opt.threads = 3;
        quant::quantize_file(in, b, opt);
        int64_t compensated = 0;
        for (const auto& t : rep.tensors) compensated += t.compensated;
        QVERIFY(compensated > 0);
        auto fa = gguf::File::open(a), fb = gguf::File::open(b);
        QCOMPARE(fa->file_size(), fb->file_size());
        QVERIFY(std::memcmp(fa->base(), fb->base(), fa->file_size()) == 0);
        QVERIFY(model::Model::load(a) != nullptr);

        // The same sums collected pass by pass under a budget that holds about
        // two tensors' give the same bytes; each run is collected once.
        const std::vector<std::string> prompts = {"Once upon a time there was a little dog.",
                                                  "The cat sat on the mat and looked at the bird."};
        std::string largest;  // the tensor with the most sums
        uint64_t most = 0;
        for (const auto& [name, entry] : st.entries)
            if (entry.cov.size() * sizeof(double) > most) {
                most = entry.cov.size() * sizeof(double);
                largest = name;
            }
        const uint64_t budget = 2 * most;
        quant::SecondMomentPasses passes(*m, prompts, co, budget);
        QVERIFY2(passes.runs() >= 3, qPrintable(QString::number(passes.runs())));
        passes.adopt_first_run(quant::collect_activation_stats(*m, prompts, passes.first_pass(co)));
        opt.second_moments = [&](const std::string& name) { return passes.find(name); };
        const std::string c = tmp_path("comp3.gguf");
        quant::quantize_file(in, c, opt);
        QCOMPARE(passes.passes_run(), passes.runs() - 1);
        auto fc = gguf::File::open(c);
        QCOMPARE(fc->file_size(), fa->file_size());
        QVERIFY(std::memcmp(fa->base(), fc->base(), fa->file_size()) == 0);
        std::filesystem::remove(a);
        std::filesystem::remove(b);
        std::filesystem::remove(c);

        // One tensor's sums over the budget: refused, naming it.
        try {
            quant::SecondMomentPasses tight(*m, prompts, co, most - 1);
            QFAIL("a budget below one tensor's sums was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find(largest) != std::string::npos, e.what());
            QVERIFY2(std::string(e.what()).find("--gptq-memory") != std::string::npos, e.what());
        }
        // Over the limit in one pass: refused before anything runs.
        co.max_covariance_bytes = 1024;
        QVERIFY_THROWS_EXCEPTION(Error, quant::collect_activation_stats(*m, {"Once"}, co));
    }
};

QTEST_GUILESS_MAIN(TestCompensation)
#include "test_compensation.moc"
