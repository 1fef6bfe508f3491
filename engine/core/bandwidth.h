// Measures the machine's memory read bandwidth the way decode reads weights:
// streaming sequential reads of a buffer much larger than the caches, by
// `threads` threads. The roofline every decode figure is compared against.
#pragma once

#include <cstdint>

namespace strata::core {

// GB/s (1e9 bytes per second), best of several passes over `bytes`.
double measure_read_gbs(int threads, uint64_t bytes = 512ull << 20);

}  // namespace strata::core
