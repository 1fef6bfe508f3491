#include <cmath>
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "model/model.h"
#include "quant/quality.h"

namespace strata::cli {

int cmd_quality(int argc, char** argv) {
    Args a("quality", "BASE.gguf QUANT.gguf --prompts FILE [--json] [--threads N]",
           "What quantization did: runs each prompt of FILE (one per line; a literal \\n is a newline; the\n"
           "format of 'eval') through both models, teacher-forced, and reports the perplexity of each (the\n"
           "rise with its standard error over positions: a rise within two of them is noise),\n"
           "KL(base || quant) of the next-token distributions per position (mean, p95, p99, max), top-1\n"
           "agreement, and for every MoE layer the routing drift: the share of tokens whose top-k expert sets\n"
           "are equal, their mean Jaccard overlap, and the mean KL between the router probabilities.");
    a.positional("BASE.gguf", "the reference model (e.g. the float file)");
    a.positional("QUANT.gguf", "its quantization");
    a.option("--prompts", "", "FILE", "prompts, one per line");
    a.option("--threads", "-t", "N", "compute threads (0: all cores)", "0");
    a.flag("--json", "print one JSON object");
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");
    const int threads = static_cast<int>(a.integer("--threads", 0, 1024));
    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));
    auto base = model::Model::load(a.pos("BASE.gguf"));
    auto quant = model::Model::load(a.pos("QUANT.gguf"));
    std::vector<std::vector<int32_t>> lists;
    for (const std::string& p : prompts) {
        std::vector<int32_t> t = base->vocab().encode(p, false);
        if (base->vocab().bos() >= 0) t.insert(t.begin(), base->vocab().bos());
        lists.push_back(std::move(t));
    }
    const quant::QualityReport r = quant::measure_quality(*base, *quant, lists, threads);
    if (a.flag_set("--json")) {
        std::ostringstream os;
        os.precision(6);
        os << "{\"base\": \"" << json_escape(a.pos("BASE.gguf")) << "\", \"quant\": \"" << json_escape(a.pos("QUANT.gguf"))
           << "\", \"prompts\": " << r.prompts << ", \"positions\": " << r.positions << ", \"ppl_base\": " << r.ppl_base
           << ", \"ppl_quant\": " << r.ppl_quant << ", \"ln_ppl_ratio\": " << r.ln_ppl_ratio
           << ", \"ln_ppl_ratio_se\": " << r.ln_ppl_ratio_se << ", \"kl_mean\": " << r.kl_mean << ", \"kl_p95\": " << r.kl_p95
           << ", \"kl_p99\": " << r.kl_p99 << ", \"kl_max\": " << r.kl_max << ", \"top1\": " << r.top1 << ", \"layers\": [";
        for (size_t i = 0; i < r.layers.size(); ++i) {
            const quant::LayerDrift& d = r.layers[i];
            os << (i ? ", " : "") << "{\"layer\": " << d.layer << ", \"tokens\": " << d.tokens << ", \"exact_set\": " << d.exact_set
               << ", \"jaccard\": " << d.jaccard << ", \"router_kl\": " << d.router_kl << "}";
        }
        os << "]}\n";
        std::fputs(os.str().c_str(), stdout);
        return 0;
    }
    std::printf("%lld prompts, %lld positions\n", static_cast<long long>(r.prompts), static_cast<long long>(r.positions));
    // The rise in percent with one standard error (the ratio is the exp of a mean NLL difference).
    std::printf("perplexity      base %.4f, quant %.4f (%+.3f%% +- %.3f%%)\n", r.ppl_base, r.ppl_quant,
                100.0 * std::expm1(r.ln_ppl_ratio), 100.0 * std::exp(r.ln_ppl_ratio) * r.ln_ppl_ratio_se);
    std::printf("KL(base||quant) mean %.5f, p95 %.5f, p99 %.5f, max %.5f\n", r.kl_mean, r.kl_p95, r.kl_p99, r.kl_max);
    std::printf("top-1 agreement %.4f\n", r.top1);
    if (!r.layers.empty()) {
        std::printf("\nrouting drift per MoE layer\n%-6s %8s %10s %9s %10s\n", "layer", "tokens", "same set", "jaccard", "router KL");
        for (const quant::LayerDrift& d : r.layers)
            std::printf("%-6lld %8lld %10.4f %9.4f %10.5f\n", static_cast<long long>(d.layer), static_cast<long long>(d.tokens),
                        d.exact_set, d.jaccard, d.router_kl);
    }
    return 0;
}

}  // namespace strata::cli
