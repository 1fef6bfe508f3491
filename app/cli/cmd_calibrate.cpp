#include <cstdio>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "common/json.h"
#include "core/calibration.h"
#include "core/engine.h"

namespace strata::cli {

int cmd_calibrate(int argc, char** argv) {
    Args a("calibrate", "MODEL --prompts FILE --out hot.json [--pin N | --pin-fraction F] [--greedy N]",
           "Counts how often each (layer, expert) is routed to on the prompts of FILE (each prompt, then N\n"
           "greedy tokens one at a time, as decoding routes), and writes the counts and the pin list (the\n"
           "most used experts) to hot.json. Load it with --pin-file (run, eval, bench) or in the app's settings.");
    a.positional("MODEL", "a GGUF mixture-of-experts model");
    a.option("--prompts", "", "FILE", "calibration prompts, one per line (a literal \\n is a newline)");
    a.option("--out", "-o", "FILE", "where to write the calibration file");
    a.option("--pin", "", "N", "experts to pin (default: --pin-fraction of all experts)");
    a.option("--pin-fraction", "", "F", "fraction of all experts to pin", "0.125");
    a.option("--greedy", "", "N", "greedy tokens decoded after each prompt", "32");
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");
    if (!a.has("--out")) throw UsageError("missing --out FILE");
    const int64_t n_greedy = a.integer("--greedy", 0, 1 << 20);
    const double pin_fraction = a.number("--pin-fraction", 0.0, 1.0);
    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));

    auto engine = core::Engine::load(a.pos("MODEL"), engine_settings(a));
    core::CalibrationOptions o;
    o.n_greedy = n_greedy;
    o.pin_fraction = pin_fraction;
    if (a.has("--pin")) {
        int64_t total = 0;
        for (const auto& L : engine->model().weights().layers)
            if (L.ffn == model::FfnKind::Moe) total += engine->model().config().n_expert;
        o.n_pin = a.integer("--pin", 0, total);
    }
    if (engine->model().config().n_expert == 0)
        throw Error(a.pos("MODEL") + ": not a mixture-of-experts model (no experts to pin)");
    const core::Calibration c = core::calibrate(*engine, prompts, o);
    const std::string path = a.str("--out");
    core::write_calibration(path, c);
    std::printf("%lld tokens; pinned %lld of %lld experts, which took %.1f%% of all expert uses; wrote %s\n",
                static_cast<long long>(c.tokens), static_cast<long long>(c.pinned.size()),
                static_cast<long long>(c.experts_total), 100.0 * c.pinned_share, path.c_str());
    return 0;
}

}  // namespace strata::cli
