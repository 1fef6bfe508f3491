#include <cstdio>

#include "chat/chat_template.h"
#include "commands.h"
#include "model/arch/arch.h"
#include "model/plan_model.h"
#include "backend/device.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_forward.h"
#endif
#include "common.h"
#include "gguf/gguf.h"
#include "memory/aligned_buffer.h"
#include "plan/plan.h"
#include "quant/recipe.h"

namespace strata::cli {

namespace {

void print_range(const char* what, const model::Matrix& m) {
    std::printf(" %s [%llu, %llu)", what, static_cast<unsigned long long>(m.file_offset),
                static_cast<unsigned long long>(m.file_offset + m.slab_bytes()));
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
    Args a("inspect", "MODEL", "Shows a model's architecture, hyper-parameters, tensor table (type, shape, bytes),\n"
                               "each expert's bytes and file ranges, and total and active parameters and bytes per token.");
    a.positional("MODEL", "a GGUF model file");
    a.flag("--metadata", "also print every metadata key");
    a.flag("--no-tensors", "omit the tensor table");
    a.flag("--no-experts", "omit the per-expert file ranges");
    if (!a.parse(argc, argv, 2)) return 0;

    auto m = model::Model::load(a.pos("MODEL"));
    const model::ModelConfig& c = m->config();
    const gguf::File& f = m->file();
    const model::Model::Sizes s = m->sizes();

    std::printf("model         %s\n", f.path().c_str());
    std::printf("file          GGUF v%u, %s, %zu tensors, %zu metadata keys, alignment %llu\n", f.version(),
                human_bytes(f.file_size()).c_str(), f.tensors().size(), f.metadata().size(),
                static_cast<unsigned long long>(f.alignment()));
    std::printf("architecture  %s%s%s\n", c.arch_name.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
    std::printf("tokenizer     %s, %lld tokens (bos %d, eos %d)\n",
                m->vocab().model() == tok::Vocab::Model::SPM ? "SPM (llama)" : "byte-level BPE (gpt2)",
                static_cast<long long>(c.n_vocab), m->vocab().bos(), m->vocab().eos());
    {
        const tok::Vocab& v = m->vocab();
        const auto text = [&](int32_t id) { return id >= 0 && id < v.n_tokens() ? v.token_text(id) : std::string(); };
        const chat::ChatTemplate t =
            chat::ChatTemplate::load(f.get_string_or("tokenizer.chat_template", ""), text(v.bos()), text(v.eos()));
        std::printf("chat template %s\n", t.describe().c_str());
    }
    std::printf("\nhyper-parameters\n");
    std::printf("  layers %lld, embedding %lld, heads %lld (kv %lld), head dim %lld, context %lld\n",
                static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd), static_cast<long long>(c.n_head),
                static_cast<long long>(c.n_head_kv), static_cast<long long>(c.head_dim),
                static_cast<long long>(c.n_ctx_train));
    std::printf("  rope %s, %lld dims, base %g, scale %g%s; rms eps %g\n",
                c.traits.rope == model::RopeType::NeoX ? "neox" : "normal", static_cast<long long>(c.n_rot),
                c.rope_freq_base, c.rope_freq_scale, c.rope_freq_factors.empty() ? "" : ", per-pair frequency divisors",
                c.norm_eps);
    if (c.ssm) {
        const uint64_t per_seq = static_cast<uint64_t>(c.recurrent_state_floats()) * sizeof(float);
        std::printf("  gated delta nets: %lld of %lld layers (%lld key / %lld value heads of %lld, conv %lld); "
                    "recurrent state %s per sequence\n",
                    static_cast<long long>(c.n_recurrent_layers()), static_cast<long long>(c.n_layer),
                    static_cast<long long>(c.ssm.n_k_heads), static_cast<long long>(c.ssm.n_v_heads),
                    static_cast<long long>(c.ssm.d_state), static_cast<long long>(c.ssm.conv_kernel),
                    memory::format_bytes(per_seq).c_str());
    }
    if (c.n_nextn > 0) {
        if (m->nextn())
            std::printf("  %lld NextN/MTP block(s) after the layers: a speculative draft (run --draft mtp)\n",
                        static_cast<long long>(c.n_nextn));
        else
            std::printf("  %lld NextN/MTP block(s) stated, their tensors absent (a trunk-only file): no MTP draft\n",
                        static_cast<long long>(c.n_nextn));
    }
    int64_t n_moe = 0;
    for (const auto& L : m->weights().layers) n_moe += L.ffn == model::FfnKind::Moe;
    if (n_moe < c.n_layer) {
        std::printf("  layers: %lld dense FFN (width %lld), %lld MoE\n", static_cast<long long>(c.n_layer - n_moe),
                    static_cast<long long>(c.n_ff), static_cast<long long>(n_moe));
    } else {
        std::printf("  layers: all %lld MoE\n", static_cast<long long>(n_moe));
    }
    if (n_moe > 0) {
        std::printf("  experts %lld, top-%lld, expert FFN %lld, shared expert FFN %lld, renormalise %s, scale %g\n",
                    static_cast<long long>(c.n_expert), static_cast<long long>(c.n_expert_used),
                    static_cast<long long>(c.n_ff_expert), static_cast<long long>(c.n_ff_shared),
                    c.expert_weights_norm ? "yes" : "no", c.expert_weights_scale);
    }
    std::printf("  output %s\n", m->weights().output_tied ? "tied to token_embd" : "separate");
    {
        // The ops its architecture composes (engine/model/arch): the CPU computes them all; a
        // GPU leaves those it lacks to the CPU (model/op_fallback.h), or cannot run the model.
        std::string ops;
        for (const model::Op op : model::arch::ops_used(c, m->weights())) ops += (ops.empty() ? "" : ", ") + std::string(model::op_name(op));
        std::printf("  ops: %s\n", ops.c_str());
#ifdef STRATA_HAVE_CUDA
        const std::string gpu = backend::cuda::cuda_cpu_ops(*m);
        std::printf("  on the CUDA backend: %s\n", gpu.empty() ? "every op on the GPU" : gpu.c_str());
#endif
    }

    std::printf("\nsizes\n");
    std::printf("  parameters     %s total, %s active per token\n", human_count(s.params_total).c_str(),
                human_count(s.params_active).c_str());
    std::printf("  weight bytes   %s total, %s read per token\n", human_bytes(s.bytes_total).c_str(),
                human_bytes(s.bytes_active).c_str());
    if (n_moe > 0) {
        std::printf("  experts        %s in %lld experts x %lld layers, %s per expert (mean)\n",
                    human_bytes(s.bytes_experts).c_str(), static_cast<long long>(c.n_expert),
                    static_cast<long long>(n_moe), human_bytes(s.bytes_per_expert).c_str());
        std::printf("  resident part  %s (everything but the routed experts)\n",
                    human_bytes(s.bytes_total - s.bytes_experts).c_str());
    }

    {
        // The recipe the file was quantized with, per tensor class (quant/recipe.h).
        std::printf("\nrecipe (types per tensor class)\n");
        for (const quant::ClassTypes& c : quant::file_recipe(f))
            std::printf("  %-14s %-24s %4lld tensors, %s\n", quant::class_name(c.cls), quant::describe_types(c).c_str(),
                        static_cast<long long>(c.tensors), human_bytes(c.bytes).c_str());
    }

    {
        // The machine: NUMA and huge pages, for the model fully resident.
        memory::PlanSettings ps;
        const memory::Plan p = memory::make_plan(model::plan_model(*m), ps);
        std::printf("\nmachine\n  %s\n  huge pages: %s (fully resident: %s fast)\n",
                    cpu::numa_summary(p.numa_topology, p.numa).c_str(), p.huge_pages.c_str(),
                    human_bytes(p.fast_total).c_str());
        const backend::DeviceProbe& probe = backend::probe_devices();
        std::printf("  %s\n", backend::describe_probe(probe).c_str());
        for (const backend::GpuInfo& g : probe.gpus)
            std::printf("  cuda:%d host-to-device %.1f GB/s (pinned, measured now)\n", g.index,
                        backend::measure_link_gbs(g.index));
        std::printf("  %s\n", backend::choose_device({}, probe, backend::cuda_forward_built()).reason.c_str());
    }

    if (a.flag_set("--metadata")) {
        std::printf("\nmetadata\n");
        for (const auto& [k, v] : f.metadata()) std::printf("  %-44s %s\n", k.c_str(), v.to_string().c_str());
    }
    if (!a.flag_set("--no-tensors")) {
        std::printf("\ntensors\n  %-36s %-7s %-22s %12s %14s\n", "name", "type", "shape", "bytes", "offset");
        for (const gguf::TensorInfo& t : f.tensors()) {
            const kernels::TypeTraits* tr = kernels::type_traits(t.raw_type);
            std::printf("  %-36s %-7s %-22s %12llu %14llu\n", t.name.c_str(), tr ? tr->name : "?",
                        t.shape_string().c_str(), static_cast<unsigned long long>(t.nbytes),
                        static_cast<unsigned long long>(t.file_offset));
        }
    }
    if (n_moe > 0 && !a.flag_set("--no-experts")) {
        std::printf("\nexperts (file byte ranges of gate, up, down)\n");
        for (const auto& L : m->weights().layers) {
            if (L.ffn != model::FfnKind::Moe) continue;
            for (int64_t e = 0; e < L.n_experts(); ++e) {
                const model::FfnMatrices x = L.expert(e);
                const uint64_t bytes = x.gate.slab_bytes() + x.up.slab_bytes() + x.down.slab_bytes();
                std::printf("  layer %3lld expert %3lld  %10llu bytes ", static_cast<long long>(L.index),
                            static_cast<long long>(e), static_cast<unsigned long long>(bytes));
                print_range("gate", x.gate);
                print_range("up", x.up);
                print_range("down", x.down);
                std::printf("\n");
            }
        }
    }
    return 0;
}

}  // namespace strata::cli
