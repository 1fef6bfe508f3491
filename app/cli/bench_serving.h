// `strata-cli bench --concurrency C` / `--draft D`: the serving benchmark.
// Closed loop: C requests in flight through the continuous-batching scheduler
// (a new one is submitted as one finishes) until R have completed; or, with a
// draft, R requests one after another through speculative decoding.
#pragma once

#include <string>

#include "args.h"
#include "strata/settings.h"

namespace strata::cli {

void add_serving_options(Args& a);
bool wants_serving(const Args& a);
// Prints one JSON object (or a table); returns the exit code.
int bench_serving(const Args& a, EngineSettings settings, double machine_read_gbs, const std::string& text);

}  // namespace strata::cli
