// strata-cli quantize IN.gguf OUT.gguf [--recipe NAME|FILE] [--imatrix FILE | --calibration PROMPTS] [--awq] [--gptq [--gptq-memory MIB]] [--threads N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "commands.h"
#include "common/error.h"
#include "common/prompt_file.h"
#include "common.h"
#include "model/model.h"
#include "quant/activation_stats.h"
#include "quant/quantize.h"
#include "quant/second_moments.h"

namespace strata::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

}  // namespace

int cmd_quantize(int argc, char** argv) {
    std::string recipes;
    for (const std::string& n : quant::builtin_recipe_names()) recipes += (recipes.empty() ? "" : ", ") + n;
    Args a("quantize", "IN.gguf OUT.gguf [--recipe NAME|FILE] [--imatrix FILE | --calibration PROMPTS] [--awq] [--gptq [--gptq-memory MIB]] [--threads N]",
           "Writes OUT.gguf with each tensor in the type its class gets in the recipe (router, attention Q/K/V/O,\n"
           "shared experts, routed experts, dense FFN, embeddings, output head), using ggml's reference quantizers:\n"
           "a standard GGUF that llama.cpp reads. Deterministic; OUT appears complete or not at all (Ctrl-C leaves\n"
           "nothing). Built-in recipes: " + recipes + ".\n"
           "  q8           every matrix Q8_0 (router F32)\n"
           "  q4-experts   router F32, attention, shared experts and dense FFN Q8_0, routed experts Q4_K,\n"
           "               embeddings and head Q6_K\n"
           "  q4-experts-small  as q4-experts with attention, shared experts and dense FFN Q6_K (about Q4_K_M's size)\n"
           "  q2-experts   as q4-experts with routed experts Q2_K (down projections Q3_K)\n"
           "  demo         the demo model's: routed experts Q8_0, embeddings F16, the rest F32\n"
           "A recipe file is JSON: {\"types\": {\"routed_expert\": \"q4_k\", ...}, \"expert_layers\": {\"0\": \"q8_0\"},\n"
           "\"expert_down\": \"q5_k\", \"layers\": {\"2\": {\"attn_v\": \"q6_k\", \"expert_down\": \"q6_k\"}}} (classes: router,\n"
           "attn_q, attn_k, attn_v, attn_output, shared_expert, routed_expert, dense_ffn, embedding, output).\n"
           "--imatrix: llama.cpp's importance matrix (llama-imatrix's .dat): q4_0, q4_1, q5_0, q5_1 and q2_K..q6_K\n"
           "matrices with an entry are quantized with it, as llama-quantize --imatrix does (the same bytes); q8_0 and\n"
           "float types take none.\n"
           "--calibration: Strata collects the same statistics itself: IN runs over the prompts (one per line, as\n"
           "eval reads them) and every matrix's input channels are averaged (per expert over the tokens routed to\n"
           "it); --save-imatrix keeps them in llama.cpp's imatrix format for --imatrix (or llama-quantize) later.\n"
           "Two compensations, whose results are still standard GGUF:\n"
           "--awq: activation-aware channel scaling. The input channels that carry the most signal get more of the\n"
           "grid: the columns of the matrices reading an RMSNorm's output (Q/K/V; router and experts' gate/up) are\n"
           "multiplied by s and the norm's weight divided by it; a down projection's columns likewise, with the\n"
           "division folded into up's rows, per expert. s = RMS^alpha, alpha searched per group (0 included) on the\n"
           "importance-weighted error. Needs --imatrix or --calibration.\n"
           "--gptq: error compensation fitted on the calibration text (GPTQ): each column's rounding error is\n"
           "pushed onto the columns not yet rounded, so that W X is kept rather than W. Needs --calibration (the\n"
           "inputs' full second moments are collected: cols^2 doubles per matrix and expert; what does not fit in\n"
           "--gptq-memory is collected by further passes over the prompts, one group of tensors at a time;\n"
           "experts reached by fewer than max(32, cols/4) calibration tokens are rounded plainly).");
    a.positional("IN", "the source GGUF (F32/F16/BF16; a quantized one is re-quantized, with a warning)");
    a.positional("OUT", "the GGUF to write");
    a.option("--recipe", "-r", "NAME|FILE", "the recipe", "q4-experts");
    a.option("--imatrix", "", "FILE", "importance matrix (llama-imatrix's .dat) for the scale search");
    a.option("--calibration", "", "PROMPTS", "collect the importance matrix from these prompts (a prompts file)");
    a.option("--calibration-tokens", "", "N", "tokens of each calibration prompt at most", "512");
    a.option("--save-imatrix", "", "FILE", "with --calibration: also write the statistics as an imatrix file");
    a.flag("--awq", "activation-aware channel scaling folded into the norms and up projections");
    a.flag("--gptq", "error compensation fitted on the calibration prompts (needs --calibration)");
    a.option("--gptq-memory", "", "MIB", "memory for --gptq's second moments; more passes over the prompts when over", "8192");
    a.option("--threads", "-t", "N", "threads", "2");
    a.flag("--quiet", "no progress bar");
    if (!a.parse(argc, argv, 2)) return 0;

    quant::QuantizeOptions opt;
    opt.recipe = quant::load_recipe(a.str("--recipe"));
    opt.threads = static_cast<int>(a.integer("--threads", 1, 1024));
    quant::ImportanceMatrix imatrix;
    std::string imatrix_from;
    if (a.has("--imatrix") && a.has("--calibration"))
        throw UsageError("--imatrix and --calibration both give the importance matrix: use one");
    if (a.has("--save-imatrix") && !a.has("--calibration"))
        throw UsageError("--save-imatrix saves what --calibration collects: give the calibration prompts too");
    const bool awq = a.flag_set("--awq"), gptq = a.flag_set("--gptq");
    if (awq && !a.has("--imatrix") && !a.has("--calibration"))
        throw UsageError("--awq scales channels by their activations: give --calibration PROMPTS or --imatrix FILE");
    if (gptq && !a.has("--calibration"))
        throw UsageError("--gptq fits its compensation on the inputs' second moments, which an imatrix file does not "
                         "hold: give --calibration PROMPTS");
    if (a.has("--imatrix")) {
        imatrix = quant::read_llama_imatrix(a.str("--imatrix"));
        imatrix_from = a.str("--imatrix");
        opt.importance = &imatrix;
    }
    const bool quiet = a.flag_set("--quiet");
    const uint64_t gptq_mib = static_cast<uint64_t>(a.integer("--gptq-memory", 1, int64_t{1} << 30));
    quant::ActivationStats st;
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    std::unique_ptr<model::Model> model;              // runs the calibration passes
    std::unique_ptr<quant::SecondMomentPasses> moments;  // --gptq's sums, pass by pass
    if (a.has("--calibration")) {
        // Read before anything is run, so a bad prompts file costs nothing.
        const std::vector<std::string> prompts = read_prompt_file(a.str("--calibration"));
        model = model::Model::load(a.pos("IN"));
        quant::CalibrationOptions co;
        co.threads = opt.threads;
        co.max_tokens_per_prompt = a.integer("--calibration-tokens", 2, 1 << 20);
        int64_t pass = 1;
        co.progress = [&](int64_t done, int64_t total) {
            if (!quiet) {
                const std::string of = moments && moments->runs() > 1
                                           ? " (pass " + std::to_string(pass) + " of " + std::to_string(moments->runs()) + ")"
                                           : "";
                // Later passes run while the progress bar is drawn: a line of their own.
                if (pass > 1 && done == 1) std::fprintf(stderr, "\n");
                std::fprintf(stderr, "\rcalibration%s: prompt %lld of %lld", of.c_str(), static_cast<long long>(done),
                             static_cast<long long>(total));
                if (pass > 1 && done == total) std::fprintf(stderr, "\n");
            }
            if (done == total) ++pass;
            return !g_interrupted.load();
        };
        if (gptq) {
            quant::CalibrationOptions all = co;
            all.covariance = [&](const std::string& name) {
                const gguf::TensorInfo* t = model->file().tensor(name);
                return t && quant::compensated_by_gptq(opt.recipe, *t);
            };
            moments = std::make_unique<quant::SecondMomentPasses>(*model, prompts, all, gptq_mib << 20);
            co = moments->first_pass(co);
        }
        try {
            st = quant::collect_activation_stats(*model, prompts, co);
        } catch (const Cancelled&) {
            std::fprintf(stderr, "\nstrata-cli quantize: interrupted; %s was not written\n", a.pos("OUT").c_str());
            return 130;
        }
        if (!quiet) std::fprintf(stderr, "\n");
        st.dataset = std::filesystem::path(a.str("--calibration")).filename().string();
        int64_t unreached = 0;
        imatrix = st.importance(&unreached);
        std::printf("calibration: %lld prompts, %lld tokens, %zu matrices%s\n", static_cast<long long>(st.prompts),
                    static_cast<long long>(st.tokens), imatrix.values.size(),
                    unreached ? (", " + std::to_string(unreached) + " experts no token reached (weighted evenly)").c_str()
                              : "");
        if (a.has("--save-imatrix")) {
            quant::write_llama_imatrix(imatrix, a.str("--save-imatrix"));
            std::printf("importance matrix saved to %s (llama.cpp's imatrix format)\n", a.str("--save-imatrix").c_str());
        }
        imatrix_from = "calibration " + a.str("--calibration");
        opt.importance = &imatrix;
        if (gptq) {
            if (moments->runs() > 1)
                std::printf("error compensation: the second moments in %lld passes over the calibration prompts (at most "
                            "%lld MiB each; --gptq-memory)\n",
                            static_cast<long long>(moments->runs()), static_cast<long long>(gptq_mib));
            moments->adopt_first_run(std::move(st));
            opt.second_moments = [&](const std::string& name) { return moments->find(name); };
        }
    }
    quant::ChannelScaling scaling;
    if (awq) {
        auto in = gguf::File::open(a.pos("IN"));
        quant::AwqOptions ao;
        ao.threads = opt.threads;
        scaling = quant::awq_search(*in, opt.recipe, imatrix, ao);
        double before = 0, after = 0;
        int scaled = 0;
        for (const auto& g : scaling.groups) {
            if (g.alpha <= 0) continue;
            before += g.error_before;
            after += g.error_after;
            ++scaled;
        }
        std::printf("activation-aware scaling: %d of %zu groups scaled, their weighted quantization error %.1f%% lower\n",
                    scaled, scaling.groups.size(), before > 0 ? 100.0 * (before - after) / before : 0.0);
        opt.scaling = &scaling;
    }
    int shown = -1;
    opt.progress = [&](uint64_t done, uint64_t total) {
        const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
        if (!quiet && static_cast<int>(f * 100) != shown) {
            shown = static_cast<int>(f * 100);
            const int w = 40, filled = static_cast<int>(f * w + 0.5);
            std::fprintf(stderr, "\r[%s%s] %5.1f%%", std::string(static_cast<size_t>(filled), '#').c_str(),
                         std::string(static_cast<size_t>(w - filled), ' ').c_str(), 100.0 * f);
            std::fflush(stderr);
        }
        return !g_interrupted.load();
    };
    const auto t0 = std::chrono::steady_clock::now();
    quant::QuantizeReport rep;
    try {
        rep = quant::quantize_file(a.pos("IN"), a.pos("OUT"), opt);
    } catch (const Cancelled&) {
        if (!quiet) std::fprintf(stderr, "\n");
        std::fprintf(stderr, "strata-cli quantize: interrupted; %s was not written\n", a.pos("OUT").c_str());
        return 130;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!quiet) std::fprintf(stderr, "\n");
    for (const std::string& w : rep.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

    // Per class: tensors, bytes, the types written.
    struct ClassSum {
        int n = 0;
        uint64_t in = 0, out = 0;
        std::map<std::string, int> types;
    };
    std::map<std::string, ClassSum> by_class;
    for (const quant::TensorReport& t : rep.tensors) {
        ClassSum& s = by_class[quant::class_name(t.cls)];
        ++s.n;
        s.in += t.bytes_in;
        s.out += t.bytes_out;
        ++s.types[kernels::type_traits(t.to)->name];
        if (!t.note.empty()) std::fprintf(stderr, "note: %s: %s\n", t.name.c_str(), t.note.c_str());
    }
    std::printf("recipe %s: %s -> %s\n", opt.recipe.name.c_str(), a.pos("IN").c_str(), a.pos("OUT").c_str());
    if (opt.importance) {
        const auto weighted = std::count_if(rep.tensors.begin(), rep.tensors.end(), [](const quant::TensorReport& t) { return t.weighted; });
        std::printf("importance matrix %s (%zu entries, %d chunks%s%s): %ld tensors quantized with it\n", imatrix_from.c_str(),
                    imatrix.values.size(), imatrix.chunks, imatrix.dataset.empty() ? "" : ", from ",
                    imatrix.dataset.c_str(), static_cast<long>(weighted));
    }
    if (awq || gptq) {
        long scaled = 0, compensated = 0;
        for (const quant::TensorReport& t : rep.tensors) {
            scaled += t.scaled;
            compensated += t.compensated;
        }
        if (awq) std::printf("channel scaling applied to %ld tensors (norms, routers and matrices)\n", scaled);
        if (gptq) std::printf("error compensation: %ld matrices (experts counted one by one)\n", compensated);
    }
    std::printf("%-14s %7s %12s %12s  %s\n", "class", "tensors", "in", "out", "types");
    for (const auto& [name, s] : by_class) {
        std::string types;
        for (const auto& [t, n] : s.types) types += (types.empty() ? "" : ", ") + t + (s.types.size() > 1 ? " x" + std::to_string(n) : "");
        std::printf("%-14s %7d %12s %12s  %s\n", name.c_str(), s.n, human_bytes(s.in).c_str(), human_bytes(s.out).c_str(),
                    types.c_str());
    }
    std::printf("tensor data %s -> %s (%.2fx smaller), file %s, %.1f s\n", human_bytes(rep.bytes_in).c_str(),
                human_bytes(rep.bytes_out).c_str(),
                rep.bytes_out ? static_cast<double>(rep.bytes_in) / static_cast<double>(rep.bytes_out) : 0.0,
                human_bytes(rep.file_bytes).c_str(), secs);
    return 0;
}

}  // namespace strata::cli
