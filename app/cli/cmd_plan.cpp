#include <cmath>
#include <cstdio>
#include <limits>

#include "backend/device.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_forward.h"
#endif
#include "model/plan_model.h"
#include "commands.h"
#include "common/json.h"
#include "common.h"
#include "common/error.h"
#include "core/kernel_tuning.h"
#include "experts/stream_estimate.h"
#include "plan/plan.h"
#include "memory/system_memory.h"

namespace strata::cli {

namespace {
// Free VRAM of GPU `index` as probed (cuda:N names the runtime's device N).
uint64_t gpu_free_bytes(int index) {
    for (const backend::GpuInfo& g : backend::probe_devices().gpus)
        if (g.index == index) return g.free_bytes;
    return 0;
}
}  // namespace

int cmd_plan(int argc, char** argv) {
    Args a("plan", "MODEL [--fast-budget SIZE] [--slow-budget SIZE] [--expert-cache-fraction F | --slots N] [--json]",
           "Plans the memory a model needs before loading it: every ledger account (shared weights, routers,\n"
           "expert cache slots, KV cache, activations, transfer buffers, runtime reserve) in its tier, the\n"
           "totals against the budgets, and whether and why it fits. The fast tier is the RAM the engine may\n"
           "hold (VRAM with a GPU); the slow tier is where the experts live (the model file; pinned host RAM\n"
           "with a GPU). Without --expert-cache-fraction or --slots the expert cache gets every slot that fits\n"
           "the fast budget (all experts with --fast-budget none). Exits 0 whether or not the model fits.");
    a.positional("MODEL", "a GGUF model");
    a.option("--device", "", "D", "plan for auto (a GPU when there is one), cpu, cuda or cuda:N", "auto");
    a.flag("--cpu-moe", "on a GPU: every MoE layer's experts on the CPU (no expert slots in VRAM)");
    a.option("--n-cpu-moe", "", "N", "on a GPU: the experts of the first N MoE layers on the CPU", "0");
    a.option("--fast-budget", "", "SIZE", "fast-tier budget (RAM; VRAM on a GPU), e.g. 8G; auto: what is available\n"
             "now minus a reserve (a tenth, 512M..4G); none: no budget", "auto");
    a.option("--slow-budget", "", "SIZE", "slow-tier budget for the experts' home (default: no budget); on a GPU, host\n"
             "RAM: below every expert it holds a cache of them over the model file (three tiers)");
    a.option("--expert-cache-fraction", "", "F", "share of all routed experts that get a cache slot, in (0, 1]");
    a.option("--slots", "", "N", "expert cache slots, pinned included (overrides the fraction)");
    a.option("--pinned", "", "N", "experts pinned in the cache (from calibration)", "0");
    a.option("--transfer-buffers", "", "N", "staging slots for in-flight expert loads while prefetching", "2");
    a.flag("--no-prefetch", "plan without prefetch (no transfer buffers)");
    a.option("--runtime-reserve", "", "SIZE", "fast bytes kept for the runtime (allocator slack, stacks)", "64M");
    a.option("--kv-tokens", "", "N", "paged KV cache size in tokens over all sequences (0: one context)", "0");
    a.option("--kv-block", "", "N", "KV block size in tokens", "16");
    a.option("--kv-type", "", "T", "KV element type: f32 or q8", "f32");
    a.option("--numa", "", "P", "NUMA placement: auto, off, bind, bind:N, interleave", "auto");
    a.flag("--json", "print one JSON object instead of the table");
    add_context_options(a);
    if (!a.parse(argc, argv, 2)) return 0;

    memory::PlanSettings s;
    auto budget = [&](const char* name) -> uint64_t {
        if (!a.has(name)) return 0;
        const uint64_t b = parse_size(a.str(name), std::string("option ") + name);
        if (b == 0) throw UsageError(std::string("option ") + name + ": a zero budget holds nothing (leave the option out for no budget)");
        return b;
    };
    s.fast_budget = parse_fast_budget(a.str("--fast-budget"), "option --fast-budget");
    backend::DeviceRequest request;
    if (const std::string err = backend::parse_device(a.str("--device"), &request); !err.empty())
        throw UsageError("option --device: " + err);
    const backend::DeviceChoice choice =
        backend::choose_device(request, backend::probe_devices(), backend::cuda_forward_built());
    if (!choice.error.empty()) throw UsageError("option --device: " + choice.error);
    // The fast tier is VRAM on a GPU (its free memory as probed), RAM elsewhere.
    const bool on_gpu = choice.kind == backend::DeviceMode::Cuda;
    if (s.fast_budget == 0)
        s.fast_available = on_gpu ? gpu_free_bytes(choice.index) : memory::available_ram_bytes();
    s.slow_budget = budget("--slow-budget");
    if (a.has("--expert-cache-fraction")) {
        const double inf = std::numeric_limits<double>::infinity();
        const double f = a.number("--expert-cache-fraction", -inf, inf);
        if (!(f > 0 && f <= 1))
            throw UsageError("option --expert-cache-fraction: " + a.str("--expert-cache-fraction") +
                             " is outside (0, 1] (the share of all routed experts that get a slot, e.g. 0.25)");
        s.expert_cache_fraction = f;
    }
    if (a.has("--slots")) {
        const int64_t n = a.integer("--slots", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
        if (n == 0) throw UsageError("option --slots: zero slots leave no room to compute a MoE layer (use at least the experts one token uses per layer)");
        if (n < 0) throw UsageError("option --slots: " + a.str("--slots") + " is negative");
        s.expert_slots = n;
    }
    s.pinned_experts = a.integer("--pinned", 0, std::numeric_limits<int32_t>::max());
    s.transfer_buffers = a.integer("--transfer-buffers", 0, 1 << 16);
    if (on_gpu) {
        s.gpu = true;
        s.transfer_buffers = 0;  // the GPU's expert cache copies straight into its slots
        s.cpu_moe_layers = cpu_moe_layers(a);
    }
    s.prefetch = !a.flag_set("--no-prefetch");
    s.runtime_reserve = parse_size(a.str("--runtime-reserve"), "option --runtime-reserve");
    const model::ContextParams cp = context_params(a);
    s.n_ctx = cp.n_ctx;
    s.n_batch = cp.n_batch;
    s.threads = cp.n_threads;
    s.kv_tokens = a.integer("--kv-tokens", 0, int64_t{1} << 30);
    s.kv_block_tokens = a.integer("--kv-block", 1, 4096);
    try {
        s.kv_type = kv::parse_kv_type(a.str("--kv-type"));
    } catch (const Error& e) {
        throw UsageError(std::string("option --kv-type: ") + e.what());
    }

    s.numa = a.str("--numa");
    if (const std::string err = cpu::parse_numa_policy(s.numa, nullptr); !err.empty()) throw UsageError("option --numa: " + err);

    auto m = model::Model::load(a.pos("MODEL"));
    // The layouts the kernels repack to depend on the kernel tuning a load
    // would apply: the cached one for this machine (plan never measures).
    if (!on_gpu) (void)core::tune_kernels(s.threads, core::bulk_weight_type(*m), core::tuning_cols(*m), core::KernelTuningMode::Cached,
                                          core::default_kernel_tuning_cache());
    memory::Plan p;
    try {
        p = memory::make_plan(model::plan_model(*m), s);
    } catch (const Error& e) {
        throw UsageError(e.what());  // the model loaded, so what is wrong is a setting
    }
#ifdef STRATA_HAVE_CUDA
    if (on_gpu) p.device_ops = backend::cuda::cuda_cpu_ops(*m);
#endif
    const backend::DeviceProbe& probe = backend::probe_devices();
    const std::string device = choice.reason;
    // On the CPU with fewer slots than experts, misses stream from the model
    // file: the disk bounds the speed (a short read of the file's experts says how fast).
    experts::StreamEstimate speed;
    if (!on_gpu && p.fits && p.expert_slots < p.experts_total)
        speed = experts::estimate_stream(p, *m, experts::measure_expert_read_rate(*m));
    if (a.flag_set("--json")) {
        std::string j = p.to_json();
        j.pop_back();  // the closing brace: the device joins the plan's object
        auto quoted = [](const std::string& t) { return std::string(1, '"').append(json::escape(t)).append(1, '"'); };
        if (speed.streams) {
            j.append(",\"stream\":{\"expert_bytes_per_token\":").append(std::to_string(speed.expert_bytes_per_token));
            j.append(",\"disk_bytes_per_token\":").append(std::to_string(speed.disk_bytes_per_token));
            j.append(",\"read_bps_low\":").append(std::to_string(speed.rate.low_bps));
            j.append(",\"read_bps_high\":").append(std::to_string(speed.rate.high_bps));
            j.append(",\"tok_s_low\":").append(std::to_string(speed.low_tok_s));
            j.append(",\"tok_s_high\":").append(std::to_string(speed.high_tok_s));
            j.append(",\"text\":").append(quoted(speed.text)).append("}");
        }
        j.append(",\"device\":").append(quoted(device)).append(",\"gpus\":[");
        for (size_t i = 0; i < probe.gpus.size(); ++i) {
            const backend::GpuInfo& g = probe.gpus[i];
            j.append(i ? ",{" : "{").append("\"index\":").append(std::to_string(g.index));
            j.append(",\"name\":").append(quoted(g.name));
            j.append(",\"vram_bytes\":").append(std::to_string(g.total_bytes));
            j.append(",\"vram_free_bytes\":").append(std::to_string(g.free_bytes));
            j.append(",\"compute_capability\":\"").append(std::to_string(g.cc_major)).append(".");
            j.append(std::to_string(g.cc_minor)).append("\"}");
        }
        j += "]}\n";
        std::fputs(j.c_str(), stdout);
    } else {
        std::fputs((p.to_table() + (speed.text.empty() ? std::string() : speed.text + "\n") + "\n" +
                    backend::describe_probe(probe) + "\n" + device + "\n")
                       .c_str(),
                   stdout);
    }
    return 0;
}

}  // namespace strata::cli
