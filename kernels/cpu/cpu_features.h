// Run-time CPU feature detection (cpuid + xgetbv) for the kernel dispatch.
//
// A feature counts only when the operating system also saves the register
// state it needs (XCR0): AVX/AVX2/FMA/F16C need the YMM state, the AVX-512
// features the opmask and ZMM state. Compiled without any -m flag, so it runs
// on every x86-64 CPU; on other architectures every flag is false.
#pragma once

namespace strata::kernels::cpu {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512vnni = false;  // AVX512_VNNI (EVEX vpdpbusd, with VL on ymm)
    bool avxvnni = false;     // AVX-VNNI (VEX vpdpbusd on ymm; Alder Lake and later, Zen 5)
};

// Detected once, on first call (thread-safe).
const CpuFeatures& cpu_features();

// "avx2 fma f16c avx512f ..." : the detected features, for logs and reports.
const char* cpu_features_string();

// The CPU's brand string (cpuid 0x80000002..4), e.g. "AMD EPYC 9B45", or
// "unknown CPU": the key under which measured kernel tuning is cached.
const char* cpu_brand();

}  // namespace strata::kernels::cpu
