// strata-cli quantize's library: recipes and classes, and bytes equal to
// llama-quantize's for the same source and type (the fixtures' Q8_0 and
// Q4_K_M files were written by llama-quantize from the F32 files beside them).
#include <QtTest>

#include <cstring>
#include <random>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "kernels/ref/quant_ref.h"
#include "runner/context.h"
#include "model/model.h"
#include "quant/activation_stats.h"
#include "quant/importance.h"
#include "quant/quantize.h"
#include "test_support.h"

using namespace strata;
using kernels::WeightType;

namespace {

std::string tmp_path(const char* name) {
    return (std::filesystem::temp_directory_path() / (std::string("strata_quant_") + name)).string();
}

// Tensors of `ours` whose type equals llama-quantize's are byte-identical;
// returns how many were compared.
int compare_with_llama(const std::string& ours, const std::string& theirs) {
    auto a = gguf::File::open(ours);
    auto b = gguf::File::open(theirs);
    int same_type = 0;
    for (const gguf::TensorInfo& tb : b->tensors()) {
        const gguf::TensorInfo* ta = a->tensor(tb.name);
        if (!ta) {
            qWarning("missing tensor %s", tb.name.c_str());
            return -1;
        }
        if (ta->type != tb.type) continue;
        if (ta->nbytes != tb.nbytes || std::memcmp(ta->data, tb.data, tb.nbytes) != 0) {
            qWarning("tensor %s differs", tb.name.c_str());
            return -1;
        }
        ++same_type;
    }
    return same_type;
}

// A llama.cpp imatrix file (llama-imatrix's legacy .dat layout).
void write_imatrix(const std::string& path, const std::vector<std::pair<std::string, std::vector<float>>>& entries,
                   int32_t ncall, bool with_dataset) {
    std::ofstream f(path, std::ios::binary);
    const auto put = [&](const void* p, size_t n) { f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); };
    const int32_t n_entries = static_cast<int32_t>(entries.size());
    put(&n_entries, 4);
    for (const auto& [name, v] : entries) {
        const int32_t len = static_cast<int32_t>(name.size()), nval = static_cast<int32_t>(v.size());
        put(&len, 4);
        put(name.data(), name.size());
        put(&ncall, 4);
        put(&nval, 4);
        std::vector<float> stored(v);
        for (float& x : stored) x *= static_cast<float>(ncall);  // llama-imatrix stores sums over the calls
        put(stored.data(), stored.size() * 4);
    }
    if (with_dataset) {
        const int32_t chunks = 100;
        const std::string ds = "wiki.train.raw";
        const int32_t len = static_cast<int32_t>(ds.size());
        put(&chunks, 4);
        put(&len, 4);
        put(ds.data(), ds.size());
    }
}

// sum_i w_i (x_i - dequantized_i)^2
double weighted_error(WeightType t, const std::vector<float>& x, const std::vector<uint8_t>& q, const std::vector<float>& w) {
    std::vector<float> y(x.size());
    kernels::dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += w[i] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    return e;
}

}  // namespace

class TestQuantize : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void tensors_are_classified_by_their_gguf_names() {
        int64_t layer = -2;
        QCOMPARE(quant::classify("blk.3.ffn_gate_inp.weight", &layer), quant::TensorClass::Router);
        QCOMPARE(layer, int64_t{3});
        QCOMPARE(quant::classify("blk.12.ffn_down_exps.weight"), quant::TensorClass::RoutedExpert);
        QCOMPARE(quant::classify("blk.0.ffn_up_shexp.weight"), quant::TensorClass::SharedExpert);
        QCOMPARE(quant::classify("blk.0.ffn_gate.weight"), quant::TensorClass::DenseFfn);
        QCOMPARE(quant::classify("blk.0.attn_kv_b.weight"), quant::TensorClass::AttnV);
        QCOMPARE(quant::classify("blk.0.attn_q_a.weight"), quant::TensorClass::AttnQ);
        QCOMPARE(quant::classify("blk.0.attn_output.weight"), quant::TensorClass::AttnOutput);
        QCOMPARE(quant::classify("blk.0.attn_norm.weight"), quant::TensorClass::Other);
        QCOMPARE(quant::classify("blk.0.attn_q.bias"), quant::TensorClass::Other);
        QCOMPARE(quant::classify("token_embd.weight", &layer), quant::TensorClass::Embedding);
        QCOMPARE(layer, int64_t{-1});
        QCOMPARE(quant::classify("output.weight"), quant::TensorClass::OutputHead);
    }

    void recipes_built_in_and_from_files() {
        const quant::Recipe q4 = quant::load_recipe("q4-experts");
        QCOMPARE(q4.type_for(quant::TensorClass::RoutedExpert, 0, false, WeightType::F32), WeightType::Q4_K);
        QCOMPARE(q4.type_for(quant::TensorClass::Router, 0, false, WeightType::F32), WeightType::F32);
        QCOMPARE(q4.type_for(quant::TensorClass::AttnQ, 0, false, WeightType::F32), WeightType::Q8_0);
        QCOMPARE(q4.type_for(quant::TensorClass::Embedding, -1, false, WeightType::F32), WeightType::Q6_K);
        const quant::Recipe q4s = quant::load_recipe("q4-experts-small");
        QCOMPARE(q4s.type_for(quant::TensorClass::AttnV, 0, false, WeightType::F32), WeightType::Q6_K);
        QCOMPARE(q4s.type_for(quant::TensorClass::RoutedExpert, 0, true, WeightType::F32), WeightType::Q4_K);
        QCOMPARE(q4s.type_for(quant::TensorClass::Router, 0, false, WeightType::F32), WeightType::F32);
        const quant::Recipe q2 = quant::load_recipe("q2-experts");
        QCOMPARE(q2.type_for(quant::TensorClass::RoutedExpert, 1, false, WeightType::F32), WeightType::Q2_K);
        QCOMPARE(q2.type_for(quant::TensorClass::RoutedExpert, 1, true, WeightType::F32), WeightType::Q3_K);

        const std::string path = tmp_path("recipe.json");
        std::ofstream(path) << R"({"name":"mine","types":{"routed_expert":"q5_k","router":"f16"},"expert_layers":{"0":"q8_0"}})";
        const quant::Recipe r = quant::load_recipe(path);
        QCOMPARE(r.name, std::string("mine"));
        QCOMPARE(r.type_for(quant::TensorClass::RoutedExpert, 0, false, WeightType::F32), WeightType::Q8_0);
        QCOMPARE(r.type_for(quant::TensorClass::RoutedExpert, 1, false, WeightType::F32), WeightType::Q5_K);
        QCOMPARE(r.type_for(quant::TensorClass::AttnQ, 1, false, WeightType::F16), WeightType::F16);  // kept
        // Per-layer types, as llama.cpp's Q4_K_M gives some layers' attn_v and ffn_down more bits.
        std::ofstream(path) << R"({"types":{"attn_v":"q4_k","routed_expert":"q4_k"},"expert_down":"q5_k",)"
                               R"("layers":{"2":{"attn_v":"q6_k","expert_down":"q6_k"},"3":{"routed_expert":"q8_0"}}})";
        const quant::Recipe l = quant::load_recipe(path);
        QCOMPARE(l.type_for(quant::TensorClass::AttnV, 1, false, WeightType::F32), WeightType::Q4_K);
        QCOMPARE(l.type_for(quant::TensorClass::AttnV, 2, false, WeightType::F32), WeightType::Q6_K);
        QCOMPARE(l.type_for(quant::TensorClass::RoutedExpert, 1, true, WeightType::F32), WeightType::Q5_K);
        QCOMPARE(l.type_for(quant::TensorClass::RoutedExpert, 2, true, WeightType::F32), WeightType::Q6_K);
        QCOMPARE(l.type_for(quant::TensorClass::RoutedExpert, 2, false, WeightType::F32), WeightType::Q4_K);
        QCOMPARE(l.type_for(quant::TensorClass::RoutedExpert, 3, true, WeightType::F32), WeightType::Q8_0);
        QCOMPARE(l.type_for(quant::TensorClass::AttnQ, 2, false, WeightType::F16), WeightType::F16);  // kept

        const std::pair<const char*, const char*> bad[] = {
            {R"({"types":{"rooter":"f16"}})", "unknown tensor class 'rooter'"},
            {R"({"types":{"router":"q9_9"}})", "not a weight type"},
            {R"({"types":{"router":"f16"},"extra":1})", "unknown key 'extra'"},
            {R"({"types":{"router":"f16"},"expert_layers":{"x":"q8_0"}})", "not a layer number"},
            {R"({"types":{},"layers":{"-1":{"attn_v":"q6_k"}}})", "not a layer number"},
            {R"({"types":{},"layers":{"1":{"atn_v":"q6_k"}}})", "layers.1.atn_v: unknown tensor class"},
            {R"({"types":{},"layers":{"1":{"attn_v":"q7_k"}}})", "not a weight type"},
            {R"({"types":{},"layers":{"1":"q6_k"}})", "layers.1 must be an object"},
            {R"({"types":[1]})", "'types' (an object) is missing"},
            {R"({"types":)", "JSON error"},
        };
        for (const auto& [text, says] : bad) {
            std::ofstream(path) << text;
            try {
                quant::load_recipe(path);
                QFAIL(text);
            } catch (const Error& e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(QString::fromUtf8(says)), e.what());
            }
        }
        try {
            quant::load_recipe("no-such-recipe");
            QFAIL("accepted an unknown recipe");
        } catch (const Error& e) {
            QVERIFY(QString::fromUtf8(e.what()).contains("q4-experts"));
        }
        std::filesystem::remove(path);
    }

    void q8_0_equals_llama_quantize_byte_for_byte() {
        STRATA_REQUIRE_FIXTURES();
        const std::string out = tmp_path("q8.gguf");
        quant::QuantizeOptions opt;
        opt.recipe = quant::load_recipe("q8");
        opt.threads = 2;
        const quant::QuantizeReport rep =
            quant::quantize_file(test::fixture_path("models/moe-tiny-f32.gguf"), out, opt);
        QVERIFY(!rep.input_quantized);
        const std::string theirs = test::fixture_path("models/moe-tiny-q8_0.gguf");
        const int same = compare_with_llama(out, theirs);
        QCOMPARE(same, static_cast<int>(gguf::File::open(theirs)->tensors().size()));  // every tensor, same type and bytes
        QCOMPARE(std::filesystem::file_size(out), std::filesystem::file_size(theirs));
        // Deterministic whatever the thread count.
        const std::string out1 = tmp_path("q8_1.gguf");
        opt.threads = 1;
        quant::quantize_file(test::fixture_path("models/moe-tiny-f32.gguf"), out1, opt);
        std::ifstream fa(out, std::ios::binary), fb(out1, std::ios::binary);
        QVERIFY(std::equal(std::istreambuf_iterator<char>(fa), {}, std::istreambuf_iterator<char>(fb)));
        std::filesystem::remove(out);
        std::filesystem::remove(out1);
    }

    void k_quants_equal_llama_quantize_where_the_types_agree() {
        STRATA_REQUIRE_FIXTURES();
        // The fixture's rows are 128 wide except the dense FFN's down
        // projection (256): Q4_K there, Q5_0 (llama-quantize's fallback for
        // Q4_K) in the 128-wide expert matrices, Q6_K -> Q8_0 in the head.
        const std::string out = tmp_path("q4.gguf");
        const std::string recipe = tmp_path("q4.json");
        std::ofstream(recipe) << R"({"types":{"dense_ffn":"q4_k","routed_expert":"q4_k","output":"q6_k"},"file_type":15})";
        quant::QuantizeOptions opt;
        opt.recipe = quant::load_recipe(recipe);
        opt.threads = 2;
        const quant::QuantizeReport rep =
            quant::quantize_file(test::fixture_path("models/deepseek3-tiny-f32.gguf"), out, opt);
        int q4k = 0, q5_0 = 0;
        for (const quant::TensorReport& t : rep.tensors) {
            q4k += t.to == WeightType::Q4_K;
            q5_0 += t.to == WeightType::Q5_0;
        }
        QCOMPARE(q4k, 1);          // blk.0.ffn_down
        QVERIFY(q5_0 >= 6);        // the experts' gate/up/down fell back
        const int same = compare_with_llama(out, test::fixture_path("models/deepseek3-tiny-q4_k_m.gguf"));
        QVERIFY2(same >= 1 + 6, "a tensor differs from llama-quantize's, or too few were comparable");
        auto f = gguf::File::open(out);
        QCOMPARE(f->get_uint("general.file_type"), uint64_t{15});
        std::filesystem::remove(out);
        std::filesystem::remove(recipe);
    }

    // The weighted quantizers (ports of ggml's imatrix path) spend precision
    // where the importance is: on rows whose importance favours a few
    // channels, their weighted error is below the plain quantizers'.
    void importance_weighted_quantizers_lower_the_weighted_error() {
        std::mt19937 rng(3);
        std::normal_distribution<float> g(0.f, 1.f);
        for (WeightType t : {WeightType::Q4_K, WeightType::Q6_K, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                             WeightType::Q5_1, WeightType::Q5_K, WeightType::Q2_K, WeightType::Q3_K}) {
            QVERIFY(kernels::has_weighted_quantizer(t));
            const int64_t n = 1024;
            double plain = 0, weighted = 0;
            for (int row = 0; row < 16; ++row) {
                std::vector<float> x(n), w(n);
                for (int64_t i = 0; i < n; ++i) {
                    x[i] = g(rng) * (i % 97 == 0 ? 8.f : 1.f);  // a few outlier channels
                    w[i] = (i % 7 == 0) ? 50.f : 0.02f;          // a few important ones
                }
                const int64_t rb = kernels::row_bytes(t, n);
                std::vector<uint8_t> a(static_cast<size_t>(rb)), b(static_cast<size_t>(rb));
                kernels::quantize_row(t, x.data(), a.data(), n);
                QVERIFY(kernels::quantize_row_weighted_ref(t, x.data(), b.data(), n, w.data()));
                plain += weighted_error(t, x, a, w);
                weighted += weighted_error(t, x, b, w);
            }
            QVERIFY2(weighted < 0.9 * plain, qPrintable(QString("%1: weighted error %2 against %3 without importance")
                                                            .arg(kernels::type_traits(t)->name)
                                                            .arg(weighted)
                                                            .arg(plain)));
        }
        std::vector<float> x(256, 1.f), w(256, 1.f);
        std::vector<uint8_t> q(512);
        QVERIFY(!kernels::quantize_row_weighted_ref(WeightType::Q8_0, x.data(), q.data(), 256, w.data()));
        QVERIFY(!kernels::quantize_row_weighted_ref(WeightType::Q4_K, x.data(), q.data(), 256, nullptr));
    }

    // llama.cpp's imatrix files: read (values over the call count, as
    // llama-quantize divides them), used for the tensors they name, and a
    // broken file is a clear error.
    void llama_imatrix_files_are_read_and_used() {
        STRATA_REQUIRE_FIXTURES();
        const std::string in = test::fixture_path("models/moe-tiny-f32.gguf");
        auto f = gguf::File::open(in);
        const gguf::TensorInfo* gate = nullptr;
        const gguf::TensorInfo* q = nullptr;
        for (const gguf::TensorInfo& t : f->tensors()) {
            if (!gate && t.name.find("ffn_gate_exps") != std::string::npos) gate = &t;
            if (!q && t.name.find("attn_q.weight") != std::string::npos) q = &t;
        }
        QVERIFY(gate && q && gate->n_dims == 3);
        std::vector<float> gate_imp(static_cast<size_t>(gate->ne[0] * gate->ne[2]), 1.f);
        for (size_t i = 0; i < gate_imp.size(); i += 3) gate_imp[i] = 40.f;
        const std::string dat = tmp_path("imatrix.dat");
        write_imatrix(dat, {{gate->name, gate_imp}, {q->name, std::vector<float>(7, 1.f)}}, 4, true);
        const quant::ImportanceMatrix m = quant::read_llama_imatrix(dat);
        QCOMPARE(m.values.size(), size_t{2});
        QCOMPARE(m.chunks, 100);
        QCOMPARE(m.dataset, std::string("wiki.train.raw"));
        QCOMPARE(m.values.at(gate->name)[0], 40.f);  // stored x4 calls, read back /4

        quant::QuantizeOptions opt;
        opt.recipe = quant::load_recipe("q4-experts");
        // The fixture's rows (64) fit no 256-block: routed experts in q4_0, which takes an importance too.
        opt.recipe.types[quant::TensorClass::RoutedExpert] = WeightType::Q4_0;
        opt.importance = &m;
        const std::string out = tmp_path("weighted.gguf"), plain = tmp_path("plain.gguf");
        const quant::QuantizeReport rep = quant::quantize_file(in, out, opt);
        int weighted = 0;
        for (const quant::TensorReport& t : rep.tensors) weighted += t.weighted;
        QCOMPARE(weighted, 1);  // the gate; attn_q's entry has the wrong size (and q8_0 takes no importance)
        bool warned = false;
        for (const std::string& w : rep.warnings) warned = warned || w.find(q->name) != std::string::npos;
        QVERIFY(warned || opt.recipe.type_for(quant::TensorClass::AttnQ, 0, false, WeightType::F32) == WeightType::Q8_0);
        opt.importance = nullptr;
        quant::quantize_file(in, plain, opt);
        auto a = gguf::File::open(out), b = gguf::File::open(plain);
        const gguf::TensorInfo* ga = a->tensor(gate->name);
        const gguf::TensorInfo* gb = b->tensor(gate->name);
        QVERIFY(ga && gb && ga->type == WeightType::Q4_0 && ga->nbytes == gb->nbytes);
        QVERIFY(std::memcmp(ga->data, gb->data, ga->nbytes) != 0);  // the importance changed the bytes
        std::filesystem::remove(out);
        std::filesystem::remove(plain);

        // Broken files.
        { std::ofstream(dat, std::ios::binary | std::ios::trunc) << "xx"; }
        try {
            (void)quant::read_llama_imatrix(dat);
            QFAIL("a two-byte file was read");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("not a llama.cpp importance matrix") != std::string::npos, e.what());
        }
        write_imatrix(dat, {{gate->name, {1.f, -2.f}}}, 1, false);
        QVERIFY_THROWS_EXCEPTION(Error, quant::read_llama_imatrix(dat));
        QVERIFY_THROWS_EXCEPTION(Error, quant::read_llama_imatrix(tmp_path("no-such.dat")));
        std::filesystem::remove(dat);
    }

    // Strata's own calibration statistics: every matrix's input channels'
    // mean squares over the prompts' tokens (per expert over the tokens routed
    // to it), checked against the inputs computed here from the weights; saved
    // as an imatrix file and read back; used by the quantizer.
    void calibration_statistics_are_the_inputs_mean_squares() {
        STRATA_REQUIRE_FIXTURES();
        const std::string in = test::fixture_path("models/moe-tiny-f32.gguf");
        auto m = model::Model::load(in);
        const model::ModelConfig& c = m->config();
        const std::vector<std::string> prompts = {"Once upon a time there was a little dog.", "The cat sat on the mat",
                                                  "Lily and Tom went to the park to play with a red ball."};
        quant::CalibrationOptions co;
        co.threads = 2;
        const quant::ActivationStats st = quant::collect_activation_stats(*m, prompts, co);
        QCOMPARE(st.prompts, int64_t{3});

        // Layer 0's Q, K and V see RMSNorm(embedding) x attn_norm of each token.
        const model::LayerWeights& L0 = m->weights().layers[0];
        const int64_t d = c.n_embd;
        std::vector<double> want(static_cast<size_t>(d), 0.0);
        std::vector<float> row(static_cast<size_t>(d));
        int64_t tokens = 0;
        std::vector<int64_t> routed(static_cast<size_t>(c.n_expert), 0);
        for (const std::string& p : prompts) {
            const std::vector<int32_t> ids = m->vocab().encode(p, true);
            tokens += static_cast<int64_t>(ids.size());
            for (const int32_t id : ids) {
                kernels::dequantize_row(m->weights().tok_embd.type, m->weights().tok_embd.row(id), row.data(), d);
                double ss = 0;
                for (float x : row) ss += double(x) * x;
                const double r = 1.0 / std::sqrt(ss / double(d) + c.norm_eps);
                for (int64_t i = 0; i < d; ++i) {
                    const double h = row[static_cast<size_t>(i)] * r * L0.attn_norm[static_cast<size_t>(i)];
                    want[static_cast<size_t>(i)] += h * h;
                }
            }
            // Layer 0's routing, from a context of its own.
            model::ContextParams cp;
            cp.n_ctx = 256;
            cp.n_threads = 1;
            model::Context ctx(*m, cp);
            ctx.set_routing_observer([&](const model::RoutingEvent& e) {
                if (e.layer == 0)
                    for (int64_t k = 0; k < e.n_used; ++k) ++routed[static_cast<size_t>(e.experts[k])];
            });
            ctx.decode(ids, false);
        }
        QCOMPARE(st.tokens, tokens);
        for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
            const auto it = st.entries.find(std::string(name));
            QVERIFY2(it != st.entries.end(), name);
            QCOMPARE(it->second.tokens, std::vector<int64_t>{tokens});
            for (int64_t i = 0; i < d; ++i) {
                const double got = it->second.sum_sq[static_cast<size_t>(i)] / double(tokens);
                const double w = want[static_cast<size_t>(i)] / double(tokens);
                QVERIFY2(std::fabs(got - w) <= 1e-4 * std::max(w, 1e-3), qPrintable(QString("%1 channel %2: %3 against %4")
                                                                                  .arg(name).arg(i).arg(got).arg(w)));
            }
        }
        // Per expert: the tokens the router sent there, for gate, up and down alike.
        for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"}) {
            const auto it = st.entries.find(std::string(name));
            QVERIFY2(it != st.entries.end(), name);
            QCOMPARE(it->second.tokens, routed);
            QCOMPARE(it->second.sum_sq.size(), size_t(c.n_expert * it->second.cols));
        }
        QVERIFY(st.entries.count(std::string(m->weights().output.name)));
        QVERIFY(st.entries.count("blk.0.ffn_gate_inp.weight"));  // the router

        // Saved in llama.cpp's format and read back as the same means.
        int64_t unreached = -1;
        const quant::ImportanceMatrix imp = st.importance(&unreached);
        int64_t zero_experts = 0;  // experts of any layer that no token reached, in each of their tensors
        for (const model::LayerWeights& L : m->weights().layers)
            if (L.n_experts() > 0)
                for (const auto& [name, e] : st.entries)
                    if (name.rfind("blk." + std::to_string(L.index) + ".ffn_", 0) == 0 && e.tokens.size() > 1)
                        zero_experts += std::count(e.tokens.begin(), e.tokens.end(), int64_t{0});
        QCOMPARE(unreached, zero_experts);
        const std::string dat = tmp_path("collected.imatrix");
        quant::write_llama_imatrix(imp, dat);
        const quant::ImportanceMatrix back = quant::read_llama_imatrix(dat);
        QCOMPARE(back.values, imp.values);
        QCOMPARE(back.chunks, 3);

        // The quantizer uses it: the experts' q4_0 bytes change.
        quant::QuantizeOptions opt;
        opt.recipe = quant::load_recipe("q4-experts");
        opt.recipe.types[quant::TensorClass::RoutedExpert] = WeightType::Q4_0;
        opt.importance = &back;
        const std::string out = tmp_path("calibrated.gguf"), plain = tmp_path("uncalibrated.gguf");
        const quant::QuantizeReport rep = quant::quantize_file(in, out, opt);
        QVERIFY(std::count_if(rep.tensors.begin(), rep.tensors.end(), [](const auto& t) { return t.weighted; }) > 0);
        opt.importance = nullptr;
        quant::quantize_file(in, plain, opt);
        auto a = gguf::File::open(out), b = gguf::File::open(plain);
        const gguf::TensorInfo* ga = a->tensor("blk.0.ffn_gate_exps.weight");
        const gguf::TensorInfo* gb = b->tensor("blk.0.ffn_gate_exps.weight");
        QVERIFY(ga && gb && std::memcmp(ga->data, gb->data, ga->nbytes) != 0);
        QVERIFY(model::Model::load(out) != nullptr);
        for (const std::string& p : {dat, out, plain}) std::filesystem::remove(p);

        // Bad input.
        QVERIFY_THROWS_EXCEPTION(Error, quant::collect_activation_stats(*m, {}, co));
        QVERIFY_THROWS_EXCEPTION(Error, quant::write_llama_imatrix(imp, "/nonexistent-dir/x.imatrix"));
    }

    void cancelling_writes_nothing_and_bad_input_is_an_error() {
        STRATA_REQUIRE_FIXTURES();
        const std::string out = tmp_path("cancel.gguf");
        std::filesystem::remove(out);
        quant::QuantizeOptions opt;
        opt.recipe = quant::load_recipe("q8");
        opt.progress = [](uint64_t done, uint64_t total) { return done < total / 2; };
        QVERIFY_THROWS_EXCEPTION(Cancelled, quant::quantize_file(test::fixture_path("models/moe-tiny-f32.gguf"), out, opt));
        QVERIFY(!std::filesystem::exists(out));
        opt.progress = {};
        // A quantized input works, with a warning.
        const quant::QuantizeReport rep = quant::quantize_file(test::fixture_path("models/moe-tiny-q8_0.gguf"), out, opt);
        QVERIFY(rep.input_quantized);
        QVERIFY(!rep.warnings.empty());
        // Not a GGUF; the output over the input.
        QVERIFY_THROWS_EXCEPTION(Error, quant::quantize_file(STRATA_SOURCE_DIR "/README.md", out, opt));
        QVERIFY_THROWS_EXCEPTION(Error, quant::quantize_file(out, out, opt));
        std::filesystem::remove(out);
    }
};

QTEST_GUILESS_MAIN(TestQuantize)
#include "test_quantize.moc"
