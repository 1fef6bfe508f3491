#include "kernels/cpu/cpu_features.h"

#include <cstdint>
#include <string>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#define STRATA_X86 1
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#endif

namespace strata::kernels::cpu {

namespace {

#if STRATA_X86
void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
#if defined(_MSC_VER)
    int v[4];
    __cpuidex(v, static_cast<int>(leaf), static_cast<int>(sub));
    for (int i = 0; i < 4; ++i) r[i] = static_cast<uint32_t>(v[i]);
#else
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#endif
}

uint64_t xgetbv0() {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
#endif
}
#endif

CpuFeatures detect() {
    CpuFeatures f;
#if STRATA_X86
    uint32_t r[4];
    cpuid(0, 0, r);
    const uint32_t max_leaf = r[0];
    if (max_leaf < 1) return f;
    cpuid(1, 0, r);
    const uint32_t ecx1 = r[2];
    const bool osxsave = (ecx1 >> 27) & 1;
    const bool avx = (ecx1 >> 28) & 1;
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = xgetbv0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6;      // SSE + AVX state
    const bool os_zmm = (xcr0 & 0xE6) == 0xE6;    // + opmask, ZMM_Hi256, Hi16_ZMM
    if (!os_ymm) return f;
    f.fma = (ecx1 >> 12) & 1;
    f.f16c = (ecx1 >> 29) & 1;
    if (max_leaf >= 7) {
        cpuid(7, 0, r);
        const uint32_t ebx7 = r[1];
        const uint32_t ecx7 = r[2];
        const uint32_t max_sub7 = r[0];
        f.avx2 = (ebx7 >> 5) & 1;
        if (os_zmm) {
            f.avx512f = (ebx7 >> 16) & 1;
            f.avx512bw = (ebx7 >> 30) & 1;
            f.avx512vl = (ebx7 >> 31) & 1;
            f.avx512vnni = (ecx7 >> 11) & 1;
        }
        if (max_sub7 >= 1) {
            cpuid(7, 1, r);
            f.avxvnni = (r[0] >> 4) & 1;
        }
    }
#endif
    return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures f = detect();
    return f;
}

const char* cpu_features_string() {
    static const std::string s = [] {
        const CpuFeatures& f = cpu_features();
        std::string out;
        auto add = [&](bool on, const char* name) {
            if (!on) return;
            if (!out.empty()) out += ' ';
            out += name;
        };
        add(f.avx2, "avx2");
        add(f.fma, "fma");
        add(f.f16c, "f16c");
        add(f.avx512f, "avx512f");
        add(f.avx512bw, "avx512bw");
        add(f.avx512vl, "avx512vl");
        add(f.avx512vnni, "avx512vnni");
        add(f.avxvnni, "avxvnni");
        if (out.empty()) out = "(none)";
        return out;
    }();
    return s.c_str();
}

const char* cpu_brand() {
    static const std::string s = [] {
        std::string out;
#if STRATA_X86
        uint32_t r[4];
        cpuid(0x80000000u, 0, r);
        if (r[0] >= 0x80000004u) {
            char buf[49] = {};
            for (uint32_t leaf = 0; leaf < 3; ++leaf) {
                cpuid(0x80000002u + leaf, 0, r);
                for (int i = 0; i < 4; ++i)
                    for (int b = 0; b < 4; ++b) buf[16 * leaf + 4 * i + b] = static_cast<char>(r[i] >> (8 * b));
            }
            out = buf;
        }
#endif
        // Trim the padding some CPUs put around the name.
        const size_t a = out.find_first_not_of(' ');
        out = a == std::string::npos ? std::string() : out.substr(a, out.find_last_not_of(' ') - a + 1);
        return out.empty() ? std::string("unknown CPU") : out;
    }();
    return s.c_str();
}

}  // namespace strata::kernels::cpu
