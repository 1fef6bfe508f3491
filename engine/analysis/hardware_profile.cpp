#include "analysis/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "common/error.h"

namespace strata::experts {

namespace {

constexpr double GB = 1e9;
constexpr double MB = 1e6;

HardwareProfile reference_machine() {
    HardwareProfile p;
    p.fast_bytes = 24 * GB;   // one 24 GB GPU
    p.fast_bps = 936 * GB;    // at 936 GB/s
    p.reserve_bytes = 3 * GB; // runtime
    p.kv_bytes = 6 * GB;      // KV cache
    p.link_bps = 13 * GB;     // PCIe 3.0 x16, effective, one direction
    p.slow_bytes = 128 * GB;  // host DDR4
    p.slow_bps = 100 * GB;
    // Hybrid execution, assumed (DESIGN.md §1's machine has no measured
    // figures): the CPU's expert kernels stream at the DDR4 rate at batch 1
    // (a 50 MB expert in 0.5 ms) and reach 1 TFLOP/s over many tokens (an
    // old dual-socket Xeon's int8 kernels); the GPU's at 70 TFLOP/s.
    p.cpu_bps = 100 * GB;
    p.cpu_flops = 1e12;
    p.gpu_flops = 70e12;
    return p;
}

struct Field {
    const char* key;
    const char* unit;
    std::function<double&(HardwareProfile&)> ref;
    double scale;  // value given in `unit` -> stored value
    bool integer;
};

const std::vector<Field>& fields() {
    static const std::vector<Field> f = {
        {"layers", "count", nullptr, 1, true},
        {"moe-layers", "count", nullptr, 1, true},
        {"experts", "per MoE layer", nullptr, 1, true},
        {"used", "experts routed per token", nullptr, 1, true},
        {"expert-bytes", "bytes (one expert of one layer)", [](HardwareProfile& p) -> double& { return p.expert_bytes; }, 1, false},
        {"shared-bytes", "bytes read per token besides experts", [](HardwareProfile& p) -> double& { return p.shared_bytes; }, 1, false},
        {"fast-gb", "GB, fast tier capacity", [](HardwareProfile& p) -> double& { return p.fast_bytes; }, GB, false},
        {"fast-gbs", "GB/s, fast tier bandwidth", [](HardwareProfile& p) -> double& { return p.fast_bps; }, GB, false},
        {"reserve-gb", "GB, runtime reserve in the fast tier", [](HardwareProfile& p) -> double& { return p.reserve_bytes; }, GB, false},
        {"kv-gb", "GB, KV cache in the fast tier", [](HardwareProfile& p) -> double& { return p.kv_bytes; }, GB, false},
        {"link-gbs", "GB/s, slow -> fast link", [](HardwareProfile& p) -> double& { return p.link_bps; }, GB, false},
        {"slow-gb", "GB, slow tier capacity", [](HardwareProfile& p) -> double& { return p.slow_bytes; }, GB, false},
        {"slow-gbs", "GB/s, slow tier bandwidth", [](HardwareProfile& p) -> double& { return p.slow_bps; }, GB, false},
        {"cpu-gbs", "GB/s, the CPU's expert kernels from host RAM (hybrid)", [](HardwareProfile& p) -> double& { return p.cpu_bps; }, GB, false},
        {"cpu-tflops", "TFLOP/s, the CPU's expert kernels over many tokens (hybrid)", [](HardwareProfile& p) -> double& { return p.cpu_flops; }, 1e12, false},
        {"gpu-tflops", "TFLOP/s, the GPU's expert kernels over many tokens (hybrid)", [](HardwareProfile& p) -> double& { return p.gpu_flops; }, 1e12, false},
        {"expert-params", "parameters of one expert (hybrid; 0: bytes at 4.5 bits)", [](HardwareProfile& p) -> double& { return p.expert_params; }, 1, false},
    };
    return f;
}

int64_t* int_field(HardwareProfile& p, const std::string& key) {
    if (key == "layers") return &p.n_layer;
    if (key == "moe-layers") return &p.moe_layers;
    if (key == "experts") return &p.n_expert;
    if (key == "used") return &p.n_used;
    return nullptr;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

}  // namespace

HardwareProfile hardware_profile(const std::string& name) {
    if (name == "seed-125b") {
        // DESIGN.md §1: a 125B MoE, 64 experts top-2 in the last third of 60
        // layers, INT4 group-128 experts of ~50 MB, 2.0 GB of shared weights.
        HardwareProfile p = reference_machine();
        p.name = name;
        p.description = "125B MoE (60 layers, MoE in 40-59, 64 experts top-2, INT4 experts 50 MB, 2.0 GB shared) on one "
                        "24 GB GPU at 936 GB/s behind PCIe 3.0 x16 at 13 GB/s (DESIGN.md §1)";
        p.n_layer = 60;
        p.moe_layers = 20;
        p.n_expert = 64;
        p.n_used = 2;
        p.expert_bytes = 50 * MB;
        p.expert_params = 50 * MB * 8 / 4.25;  // INT4 with a 16-bit scale per 128: 4.25 bits a weight
        p.shared_bytes = 2.0 * GB;
        return p;
    }
    if (name == "pcie3-24g") {
        HardwareProfile p = reference_machine();
        p.name = name;
        p.description = "the trace's own model on seed-125b's machine: 24 GB at 936 GB/s behind PCIe 3.0 x16 at 13 GB/s";
        return p;
    }
    if (name == "cpu-nvme") {
        HardwareProfile p;
        p.name = name;
        p.description = "no GPU (DESIGN.md §1, last paragraph): a 16 GB RAM budget at 40 GB/s as the fast tier, the model "
                        "file on an NVMe SSD at 3 GB/s as the slow tier; the trace's own model";
        p.fast_bytes = 16 * GB;
        p.fast_bps = 40 * GB;
        p.reserve_bytes = 1 * GB;
        p.kv_bytes = 1 * GB;
        p.link_bps = 3 * GB;
        p.slow_bytes = 1000 * GB;
        p.slow_bps = 3 * GB;
        return p;
    }
    std::string known;
    for (const std::string& n : hardware_profile_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown hardware profile '" + name + "' (known: " + known + ")");
}

std::vector<std::string> hardware_profile_names() { return {"seed-125b", "pcie3-24g", "cpu-nvme"}; }

void HardwareProfile::fill_model(int64_t layers, int64_t moe, int64_t experts, int64_t used, double expert_b,
                                 double shared_b) {
    if (n_layer == 0) n_layer = layers;
    if (moe_layers == 0) moe_layers = moe;
    if (n_expert == 0) n_expert = experts;
    if (n_used == 0) n_used = used;
    if (expert_bytes == 0) expert_bytes = expert_b;
    if (shared_bytes == 0) shared_bytes = shared_b;
}

double HardwareProfile::cache_bytes() const { return std::max(0.0, fast_bytes - reserve_bytes - kv_bytes - shared_bytes); }

int64_t HardwareProfile::cache_slots() const {
    if (expert_bytes <= 0) return 0;
    return std::min<int64_t>(total_experts(), static_cast<int64_t>(std::floor(cache_bytes() / expert_bytes)));
}

void HardwareProfile::set(const std::string& key, const std::string& value) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(value, &used);
    } catch (...) {
        used = 0;
    }
    if (used == 0 || used != value.size() || !std::isfinite(v) || v < 0)
        throw Error("profile figure " + key + ": '" + value + "' is not a non-negative number");
    if (int64_t* i = int_field(*this, key)) {
        if (v != std::floor(v) || v > 1e9) throw Error("profile figure " + key + ": '" + value + "' is not a count");
        *i = static_cast<int64_t>(v);
        return;
    }
    for (const Field& f : fields()) {
        if (key == f.key && f.ref) {
            f.ref(*this) = v * f.scale;
            return;
        }
    }
    std::string known;
    for (const Field& f : fields()) known += (known.empty() ? "" : ", ") + std::string(f.key);
    throw Error("unknown profile figure '" + key + "' (known: " + known + ")");
}

std::vector<std::pair<std::string, std::string>> HardwareProfile::keys() {
    std::vector<std::pair<std::string, std::string>> k;
    for (const Field& f : fields()) k.emplace_back(f.key, f.unit);
    return k;
}

void HardwareProfile::validate() const {
    const std::string who = name.empty() ? "the profile" : "profile " + name;
    if (!has_model()) throw Error(who + ": the model figures (moe-layers, experts, used, expert-bytes) are incomplete");
    if (n_used > n_expert) throw Error(who + ": more experts routed per token than there are experts");
    if (n_layer > 0 && moe_layers > n_layer) throw Error(who + ": more MoE layers than layers");
    if (!(fast_bps > 0)) throw Error(who + ": the fast tier bandwidth (fast-gbs) must be > 0");
    if (!(link_bps > 0)) throw Error(who + ": the link bandwidth (link-gbs) must be > 0");
}

std::string HardwareProfile::describe() const {
    std::string s;
    s += "model: " + std::to_string(n_layer) + " layers, " + std::to_string(moe_layers) + " MoE, " + std::to_string(n_expert) +
         " experts top-" + std::to_string(n_used) + ", expert " + fmt("%.4g MB", expert_bytes / MB) + ", shared " +
         fmt("%.4g GB", shared_bytes / GB) + "\n";
    s += "fast tier: " + fmt("%.4g GB", fast_bytes / GB) + " at " + fmt("%.4g GB/s", fast_bps / GB) + " (reserve " +
         fmt("%.4g GB", reserve_bytes / GB) + ", KV " + fmt("%.4g GB", kv_bytes / GB) + ", shared weights -> " +
         fmt("%.4g GB", cache_bytes() / GB) + " for experts = " + std::to_string(cache_slots()) + " of " +
         std::to_string(total_experts()) + " slots)\n";
    s += "link: " + fmt("%.4g GB/s", link_bps / GB) + "; slow tier: " + fmt("%.4g GB", slow_bytes / GB) + " at " +
         fmt("%.4g GB/s", slow_bps / GB) + "\n";
    if (has_hybrid())
        s += "hybrid: CPU experts at " + fmt("%.4g GB/s", cpu_bps / GB) + " and " + fmt("%.4g TFLOP/s", cpu_flops / 1e12) +
             ", GPU experts at " + fmt("%.4g TFLOP/s", gpu_flops / 1e12) + ", " + fmt("%.4g M", params_per_expert() / 1e6) +
             " parameters an expert\n";
    return s;
}

}  // namespace strata::experts
