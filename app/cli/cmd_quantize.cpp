// strata-cli quantize IN.gguf OUT.gguf [--recipe NAME|FILE] [--imatrix FILE] [--threads N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>

#include "commands.h"
#include "common/error.h"
#include "common.h"
#include "quant/quantize.h"

namespace strata::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

}  // namespace

int cmd_quantize(int argc, char** argv) {
    std::string recipes;
    for (const std::string& n : quant::builtin_recipe_names()) recipes += (recipes.empty() ? "" : ", ") + n;
    Args a("quantize", "IN.gguf OUT.gguf [--recipe NAME|FILE] [--imatrix FILE] [--threads N]",
           "Writes OUT.gguf with each tensor in the type its class gets in the recipe (router, attention Q/K/V/O,\n"
           "shared experts, routed experts, dense FFN, embeddings, output head), using ggml's reference quantizers:\n"
           "a standard GGUF that llama.cpp reads. Deterministic; OUT appears complete or not at all (Ctrl-C leaves\n"
           "nothing). Built-in recipes: " + recipes + ".\n"
           "  q8           every matrix Q8_0 (router F32)\n"
           "  q4-experts   router F32, attention, shared experts and dense FFN Q8_0, routed experts Q4_K,\n"
           "               embeddings and head Q6_K\n"
           "  q2-experts   as q4-experts with routed experts Q2_K (down projections Q3_K)\n"
           "  demo         the demo model's: routed experts Q8_0, embeddings F16, the rest F32\n"
           "A recipe file is JSON: {\"types\": {\"routed_expert\": \"q4_k\", ...}, \"expert_layers\": {\"0\": \"q8_0\"}}.\n"
           "--imatrix: llama.cpp's importance matrix (llama-imatrix's .dat): q4_0, q4_K and q6_K matrices with an\n"
           "entry are quantized with it, as llama-quantize --imatrix does (the same bytes); other types without it.");
    a.positional("IN", "the source GGUF (F32/F16/BF16; a quantized one is re-quantized, with a warning)");
    a.positional("OUT", "the GGUF to write");
    a.option("--recipe", "-r", "NAME|FILE", "the recipe", "q4-experts");
    a.option("--imatrix", "", "FILE", "importance matrix (llama-imatrix's .dat) for the scale search");
    a.option("--threads", "-t", "N", "threads", "2");
    a.flag("--quiet", "no progress bar");
    if (!a.parse(argc, argv, 2)) return 0;

    quant::QuantizeOptions opt;
    opt.recipe = quant::load_recipe(a.str("--recipe"));
    opt.threads = static_cast<int>(a.integer("--threads", 1, 1024));
    quant::ImportanceMatrix imatrix;
    if (a.has("--imatrix")) {
        imatrix = quant::read_llama_imatrix(a.str("--imatrix"));
        opt.importance = &imatrix;
    }
    const bool quiet = a.flag_set("--quiet");
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
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
        std::printf("importance matrix %s (%zu entries, %d chunks%s%s): %ld tensors quantized with it\n", a.str("--imatrix").c_str(),
                    imatrix.values.size(), imatrix.chunks, imatrix.dataset.empty() ? "" : ", from ",
                    imatrix.dataset.c_str(), static_cast<long>(weighted));
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
