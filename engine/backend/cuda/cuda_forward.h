// The forward pass on an NVIDIA GPU (model::DeviceForward): VRAM is the fast
// tier. The shared weights, routers and KV pool live in VRAM, every allocation
// reserved in the ledger under the same accounts as on the CPU. Routed experts
// are either all in VRAM, or in a VRAM expert cache of `expert_slots` slots
// (the same replacement policies as the CPU's expert store) filled on a copy
// stream from their home in pinned host RAM (the slow tier), each load ahead
// of the compute that reads it by an event. A miss may instead be computed on
// the CPU where its bytes are, overlapping the GPU (placement "auto"). Where
// host RAM cannot hold every expert, it holds a cache of them over the model
// file (three tiers: VRAM, host RAM, file).
//
// Per layer it runs what model::Context runs on the CPU, kernel by kernel
// (kernels/cuda): RMSNorm, Q/K/V (+bias, Q/K norm), RoPE, the K/V store and
// paged attention, the output projection, then the dense FFN or the router,
// the grouped expert GEMMs and the weighted combine in router-rank order,
// plus the shared expert. The router's choices come back to the host once
// per MoE layer (the observers, the expert cache and the grouping need them).
//
// Weights are read in the file's layout (the CPU's repacked layouts are never
// uploaded). Built only with STRATA_HAVE_CUDA; no CUDA type in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experts/hybrid_cost.h"
#include "kv/kv_cache.h"
#include "memory/ledger.h"
#include "model/backend.h"
#include "model/device_forward.h"

namespace strata::model {
class Model;
}
namespace strata::experts {
class ExpertStore;
class ExpertCache;
}

namespace strata::backend::cuda {

struct CudaForwardOptions {
    int device = 0;
    int64_t n_batch = 256;       // the largest chunk the context hands over
    int64_t expert_slots = -1;   // VRAM slots for routed experts; < 0 or >= all experts: all resident
    std::string policy = "lru";  // the VRAM expert cache's replacement policy (lru, lfu, arc)
    // The experts of the first N MoE layers (-1: all) computed on the CPU from
    // a copy in host RAM while everything else runs on the GPU (llama.cpp's
    // --n-cpu-moe / --cpu-moe): their bytes never cross the link.
    int64_t cpu_moe_layers = 0;
    int cpu_threads = 0;         // their compute threads (0: all cores)
    // A routed expert missing from the VRAM cache:
    //   "auto"     the hybrid cost model (experts/hybrid_cost.h) decides per
    //              expert and step: computed on the CPU from its home in host
    //              RAM while the GPU computes the layer's other experts,
    //              copied over the link (the GPU waits), or both (the CPU
    //              computes it now and a background copy serves the uses
    //              expected soon);
    //   "transfer" every miss is copied over the link.
    std::string placement = "auto";
    // The cost model's rates. link_bps, gpu_bps and gpu_flops are measured by
    // the caller (the engine at load); cpu_bps and cpu_flops, when 0, here at
    // load on the experts themselves. While running, the CPU's are rescaled by
    // each step's measured CPU expert time and the link's by the copies' timings.
    experts::HybridRates rates;
    bool refresh_rates = true;   // false: the rates stay as given (tests with hand-built rates)
    // Three tiers: the experts' host RAM tier (L2) is this budgeted cache over
    // the model file (L3, read with O_DIRECT by its transfer threads) instead
    // of a copy of every expert. Built without repacking (the GPU reads the
    // file's layout), with at least n_expert slots (one MoE layer's experts).
    // Null: every expert has a copy in pinned host RAM. Must outlive the pass.
    experts::ExpertStore* host_cache = nullptr;
    // Ops the GPU leaves to the CPU although it computes them (model/op_fallback.h;
    // a diagnosis and test setting): ops it lacks go there anyway.
    std::vector<model::Op> cpu_ops;
};

// Uploads the model and sizes the device's scratch for `kv`'s block geometry
// (its tables stay on the host; `kv` must have host_storage = false and
// outlive the forward pass, which hooks its copy-on-write). Throws
// strata::Error naming the tensor or the CUDA operation that failed, with
// every device allocation already given back.
std::unique_ptr<model::DeviceForward> make_cuda_forward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger,
                                                        const CudaForwardOptions& options);

// The VRAM expert cache of a pass make_cuda_forward made (null for a model
// without routed experts): what the engine sees of any expert cache.
experts::ExpertCache* vram_expert_cache(model::DeviceForward* pass);

// The ops of the model the CUDA backend leaves to the CPU and what they cost
// per token (model::CpuOpsCost::describe; empty: it computes every op), or
// why it cannot run the model (an op it lacks that cannot fall back).
std::string cuda_cpu_ops(const model::Model& m);

// Whether every matrix of the model has a CUDA kernel (its type is known to
// kernels/cuda); empty when it has, else the first tensor that has not.
std::string cuda_unsupported_tensor(const model::Model& m);

}  // namespace strata::backend::cuda
