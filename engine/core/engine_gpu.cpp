// Engine::load on a GPU: the plan against VRAM (the fast tier) and pinned host
// RAM (the experts' home), the KV cache's tables on the host with its data in
// VRAM, the CUDA forward pass, and the self-check that keeps a GPU which
// computes something else from ever writing text. Built with STRATA_HAVE_CUDA.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/cuda/cuda_forward.h"
#include "model/plan_model.h"
#include "backend/cuda/cuda_probes.h"
#include "backend/cuda/cuda_runtime.h"
#include "backend/device.h"
#include "common/log.h"
#include "core/engine.h"
#include "memory/system_memory.h"

namespace strata::core {

namespace {

// The first tokens' logits on the GPU against the CPU's on the same file
// (the file's layout on both). The CPU multiplies quantized weights with
// 8-bit activations, the GPU with float ones, so the test is the fixtures'
// quantized tolerance: top-1 agreement and the mean difference against the
// logits' spread. Empty when they agree, else what differed.
std::string self_check(const model::Model& m, model::Context& gpu) {
    const model::ModelConfig& c = m.config();
    const int64_t V = c.n_vocab;
    std::vector<int32_t> tokens;
    if (m.vocab().bos() >= 0) tokens.push_back(m.vocab().bos());
    for (int32_t t = 0; static_cast<int64_t>(tokens.size()) < 12; ++t)
        tokens.push_back(static_cast<int32_t>((7 + 131 * t) % V));
    const int64_t n = static_cast<int64_t>(tokens.size());

    gpu.clear();
    const float* g = gpu.decode(tokens, /*all_logits=*/true);
    const std::vector<float> on_gpu(g, g + n * V);
    gpu.clear();

    model::ContextParams cp;
    cp.n_ctx = std::max<int64_t>(n, 16);
    cp.n_batch = n;
    cp.n_threads = 0;
    model::Context cpu(m, cp);
    const float* r = cpu.decode(tokens, /*all_logits=*/true);

    double sum = 0, sq = 0, diff = 0;
    int64_t agree = 0;
    for (int64_t t = 0; t < n; ++t) {
        const float* a = on_gpu.data() + t * V;
        const float* b = r + t * V;
        agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
        for (int64_t i = 0; i < V; ++i) {
            if (!std::isfinite(a[i])) return "the GPU's logits are not finite at position " + std::to_string(t);
            sum += b[i];
            sq += double(b[i]) * b[i];
            diff += std::fabs(double(a[i]) - b[i]);
        }
    }
    const double count = double(n * V);
    const double stddev = std::sqrt(std::max(0.0, sq / count - (sum / count) * (sum / count)));
    const double mean_diff = diff / count;
    const double top1 = double(agree) / double(n);
    logger("cuda")->info("self-check over {} tokens: top-1 agreement {:.3f}, mean |difference| {:.3g} ({:.3g} of the "
                         "logits' spread)",
                         n, top1, mean_diff, stddev > 0 ? mean_diff / stddev : 0.0);
    if (top1 >= 0.75 && mean_diff <= 0.05 * stddev) return {};
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "its logits differ from the CPU's on the first %lld tokens (top-1 agreement %.2f, mean |difference| "
                  "%.3g, %.3g of the logits' spread; allowed: 0.75 and 0.05)",
                  static_cast<long long>(n), top1, mean_diff, stddev > 0 ? mean_diff / stddev : 0.0);
    return buf;
}

// The rates the hybrid cost model needs from the GPU side: the link as it is
// now (a GPU in an x8 slot, or behind a busy switch, reads far below its
// nominal rate), and the GPU's expert kernels for the experts' type over one
// token (bytes/s) and over many (flop/s), measured on rows of the experts'
// width. The CPU's rates are measured by the forward pass on the experts.
experts::HybridRates gpu_rates(const model::Model& m, int device, double link_gbs) {
    namespace bc = backend::cuda;
    experts::HybridRates r;
    r.link_bps = link_gbs * 1e9;
    for (const model::LayerWeights& L : m.weights().layers) {
        if (L.ffn != model::FfnKind::Moe || L.n_experts() == 0) continue;
        const model::Matrix& gate = L.expert(0).gate;
        const auto type = static_cast<uint32_t>(gate.type);
        r.gpu_bps = bc::device_gemm_gbs(device, type, gate.cols, 256ull << 20) * 1e9;
        r.gpu_flops = bc::device_gemm_flops(device, type, gate.cols);
        break;
    }
    return r;
}

}  // namespace

void Engine::load_on_gpu(Engine& eng, const std::string& path, const std::vector<experts::ExpertKey>& pinned, int device,
                         const Report& report, std::string* mismatch) {
    namespace bc = backend::cuda;
    const EngineSettings& settings = eng.settings_;
    const model::Model& m = *eng.model_;
    const model::ModelConfig& c = m.config();
    if (const std::string bad = bc::cuda_unsupported_tensor(m); !bad.empty()) throw Error(path + ": " + bad);
    if (settings.kv_type != "f32")
        throw Error("the KV cache type " + settings.kv_type + " is not supported on the GPU: use f32, or --device cpu");
    bc::set_device(device);
    const std::string gpu_name = bc::device_name(device);
    uint64_t free_vram = 0, total_vram = 0;
    bc::memory_info(&free_vram, &total_vram);

    report("planning", 0.02);
    memory::PlanSettings ps = plan_settings(settings, static_cast<int64_t>(pinned.size()));
    // VRAM is the fast tier: an automatic budget is the free VRAM minus the reserve.
    ps.fast_available = settings.fast_budget == 0 ? free_vram : 0;
    ps.numa = "off";  // host placement does not apply to VRAM
    ps.cpu_moe_layers = settings.cpu_moe_layers;
    ps.gpu = true;
    // Host RAM holds the experts VRAM lacks: without a slow budget, what is
    // available now minus a reserve, so a model larger than RAM gets a host
    // cache over the file (three tiers) rather than swapping.
    if (ps.slow_budget == 0) ps.slow_budget = memory::auto_budget(memory::available_ram_bytes());
    eng.plan_ = memory::make_plan(model::plan_model(m), ps);
    if (!eng.plan_.fits) throw Error(path + ": " + eng.plan_.reason + " (fast tier: VRAM of " + gpu_name + ")");
    report("weights", 0.05);

    memory::Ledger& ledger = eng.ledger_;
    memory::apply_budgets(eng.plan_, ledger);
    ledger.set_description(memory::Tier::Fast, "VRAM (" + gpu_name + ")");
    ledger.set_description(memory::Tier::Slow, "pinned host RAM");
    if (eng.plan_.host_slots > 0) {
        experts::ExpertStoreSettings hs;
        hs.slots = eng.plan_.host_slots;
        hs.policy = settings.policy == "pinned" ? "lru" : settings.policy;
        // No pins here: a layer takes all its missing experts at once, and
        // pinned slots of other layers would leave too few for it.
        hs.direct_io = settings.direct_io;
        hs.io_threads = settings.io_threads;
        hs.repack = false;  // the GPU reads the file's layout
        eng.host_cache_ = std::make_unique<experts::ExpertStore>(m, ledger, memory::Tier::Slow, hs);
        ledger.set_description(memory::Tier::Slow, "host RAM: a cache of " + std::to_string(eng.plan_.host_slots) + " of " +
                                                       std::to_string(eng.plan_.host_experts) + " experts over the " +
                                                       eng.host_cache_->source_name());
    }
    ledger.reserve(memory::Account::RuntimeReserve, memory::Tier::Fast, eng.plan_.bytes(memory::Account::RuntimeReserve));
    if (!pinned.empty()) logger("cuda")->warn("pinned experts apply to the expert cache in RAM; the GPU's ranks every slot by its policy");

    kv::KvCacheParams kp = model::kv_cache_params(c, eng.plan_.kv_blocks, eng.plan_.kv_block_tokens, kv::KvType::F32);
    kp.host_storage = false;  // the block tables here, the K/V data in VRAM
    eng.kv_ = std::make_unique<kv::KvCache>(kp, &ledger, memory::Tier::Fast);

    // The link as it is now: the figure the app and bench show, and the cost model's.
    const double link = bc::measure_h2d_gbs();
    logger("cuda")->info("host-to-device {:.1f} GB/s (pinned, 64 MiB copies)", link);

    bc::CudaForwardOptions o;
    o.device = device;
    o.n_batch = eng.plan_.n_batch;
    o.expert_slots = eng.plan_.expert_slots < eng.plan_.experts_total ? eng.plan_.expert_slots : -1;
    o.policy = settings.policy;
    o.cpu_moe_layers = settings.cpu_moe_layers;
    o.cpu_threads = settings.threads;
    o.placement = settings.placement;
    o.host_cache = eng.host_cache_.get();
    if (o.placement == "auto" && o.expert_slots >= 0) o.rates = gpu_rates(m, device, link);
    auto forward = bc::make_cuda_forward(m, *eng.kv_, ledger, o);
    report("experts", 0.9);

    model::ContextParams cp;
    cp.n_ctx = settings.n_ctx;
    cp.n_batch = settings.n_batch;
    cp.n_threads = 1;  // the host only orchestrates
    eng.ctx_ = std::make_unique<model::Context>(m, cp, &m.weights(), nullptr, eng.kv_.get(), std::move(forward));
    eng.cache_ = bc::vram_expert_cache(eng.ctx_->device());
    *mismatch = self_check(m, *eng.ctx_);
    eng.gpu_index_ = device;
    char buf[64];
    std::snprintf(buf, sizeof buf, "; host-to-device %.1f GB/s measured at load", link);
    eng.device_ += buf;
    eng.plan_.device_ops = eng.ctx_->device()->cpu_ops();
    if (!eng.plan_.device_ops.empty()) eng.device_ += "; " + eng.plan_.device_ops;
}

}  // namespace strata::core
