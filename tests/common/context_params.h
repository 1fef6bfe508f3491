// ContextParams for tests that make their own Context: a context of n_ctx
// tokens, forward chunks of n_batch, n_threads compute threads, the rest as
// the engine's defaults (an aggregate with three of its fields given draws
// -Wmissing-field-initializers for each of the others).
#pragma once

#include <cstdint>

#include "runner/context.h"

namespace strata::test {

inline model::ContextParams context_params(int64_t n_ctx, int64_t n_batch, int n_threads) {
    model::ContextParams p;
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = n_threads;
    return p;
}

}  // namespace strata::test
