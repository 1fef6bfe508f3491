#include <chrono>
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "model/make_model.h"

namespace strata::cli {

int cmd_make_model(int argc, char** argv) {
    Args a("make-model",
           "OUT.gguf --arch A --layers N --dim D --heads H --kv-heads K [--head-dim N] --experts E\n"
           "       --used U --expert-ff F [--dense-layers L --ff F2] [--rope-dim N] [--type T] [--vocab-from GGUF] [--seed S]\n"
           "       qwen2moe, ernie4_5-moe: [--shared-ff S]\n"
           "       deepseek2: [--q-lora R --kv-lora R --shared-experts N --gating softmax|sigmoid\n"
           "                   --weights-norm --weights-scale F --expert-groups G --groups-used K] [--yarn-factor F]\n"
           "       glm4moe: [--shared-experts N --weights-norm --weights-scale F --qk-norm] [--nextn 1]\n"
           "       llama4: [--moe-step N] (a shared expert --expert-ff wide, rope_freqs)\n"
           "       qwen35moe: [--attention-interval N --ssm-k-heads K --ssm-v-heads V --ssm-state D] [--shared-ff S]\n"
           "                  [--nextn 1]\n"
           "       gpt-oss: [--sliding-window N] [--expert-type mxfp4]",
           "Writes a random-weight model of the given shape with llama.cpp's tensor names and metadata,\n"
           "for tests and benchmarks. The same options and seed give the same file byte for byte.\n"
           "All-MoE llama/olmoe files load in llama.cpp too; --dense-layers is a Strata extension for them.\n"
           "Routers, norms and biases stay f32; every other matrix uses --type (the routed experts --expert-type\n"
           "when given). gpt-oss files have attention sinks, biases, and a sliding window on every other layer;\n"
           "glm4moe, minimax-m2 and ernie4_5-moe files have their routers' selection bias (exp_probs_b).");
    a.positional("OUT.gguf", "where to write the model");
    a.option("--arch", "", "A",
             "architecture: llama, qwen2moe, qwen3moe, olmoe, deepseek2, gpt-oss, glm4moe, minimax-m2, ernie4_5-moe, llama4, "
             "qwen35moe",
             "llama");
    a.option("--layers", "", "N", "transformer blocks", "4");
    a.option("--dim", "", "D", "embedding width", "256");
    a.option("--heads", "", "H", "attention heads", "8");
    a.option("--kv-heads", "", "K", "key/value heads (GQA)", "4");
    a.option("--head-dim", "", "N", "key/value length per head (0: dim / heads)", "0");
    a.option("--experts", "", "E", "experts per MoE layer; 0 = dense model", "8");
    a.option("--used", "", "U", "experts routed per token", "2");
    a.option("--expert-ff", "", "F", "expert FFN width", "512");
    a.option("--dense-layers", "", "L", "leading layers with a dense FFN", "0");
    a.option("--moe-step", "", "N", "llama4: every N-th layer routes experts, the others are dense (Scout 1, Maverick 2)", "1");
    a.option("--ff", "", "F2", "dense FFN width (0: 4 x dim)", "0");
    a.option("--shared-ff", "", "S", "shared expert FFN width (qwen2moe, ernie4_5-moe, qwen35moe; 0: none)", "0");
    a.option("--attention-interval", "", "N", "qwen35moe: every N-th layer attends, the others are gated delta nets", "4");
    a.option("--ssm-k-heads", "", "K", "qwen35moe: the delta nets' key heads (0: heads / 2)", "0");
    a.option("--ssm-v-heads", "", "V", "qwen35moe: the delta nets' value heads (0: heads)", "0");
    a.option("--ssm-state", "", "D", "qwen35moe: a delta-net head's dims (0: half the head dimension)", "0");
    a.option("--nextn", "", "N", "glm4moe, qwen35moe: NextN/MTP blocks after the layers (0 or 1; run by --draft mtp)", "0");
    a.option("--q-lora", "", "R", "deepseek2: query LoRA rank (0: a plain attn_q)", "0");
    a.option("--kv-lora", "", "R", "deepseek2: rank of the compressed KV (kv_lora_rank)", "64");
    a.option("--rope-dim", "", "N", "rotated dims of each head (0: half of it for deepseek2, glm4moe, minimax-m2; else all)", "0");
    a.option("--shared-experts", "", "N", "deepseek2, glm4moe: shared experts, each --expert-ff wide", "0");
    a.option("--gating", "", "G", "deepseek2: softmax (V2) or sigmoid (V3, with a selection bias exp_probs_b)", "softmax");
    a.flag("--weights-norm", "deepseek2, glm4moe: renormalise the top-k routing weights");
    a.option("--weights-scale", "", "F", "deepseek2, glm4moe: expert_weights_scale", "1");
    a.flag("--qk-norm", "glm4moe: per-head Q/K norms (GLM-4.5 has them, GLM-4.5-Air not)");
    a.option("--expert-groups", "", "G", "deepseek2: expert groups for group-limited routing (0: none)", "0");
    a.option("--groups-used", "", "K", "deepseek2: groups a token's experts come from", "0");
    a.option("--yarn-factor", "", "F", "YaRN rope scaling factor over --ctx (0: none)", "0");
    a.option("--ctx", "", "N", "context length in the metadata", "2048");
    a.option("--vocab", "", "N", "synthetic vocabulary size (without --vocab-from)", "512");
    a.option("--vocab-from", "", "GGUF", "copy the tokenizer of this GGUF file");
    a.option("--type", "", "T", "matrix type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k", "f32");
    a.option("--expert-type", "", "T", "the routed experts' type (default: --type), e.g. mxfp4");
    a.option("--sliding-window", "", "N", "gpt-oss: the sliding window of every other layer", "128");
    a.option("--seed", "", "S", "random seed", "1");
    a.option("--threads", "-t", "N", "threads (0: all cores)", "0");
    if (!a.parse(argc, argv, 2)) return 0;

    model::MakeModelSpec s;
    s.arch = a.str("--arch");
    s.layers = a.integer("--layers", 1, 1024);
    s.dim = a.integer("--dim", 2, 65536);
    s.heads = a.integer("--heads", 1, 1024);
    s.kv_heads = a.integer("--kv-heads", 1, 1024);
    s.head_dim = a.integer("--head-dim", 0, 4096);
    s.experts = a.integer("--experts", 0, 1024);
    s.used = a.integer("--used", 1, 1024);
    s.expert_ff = a.integer("--expert-ff", 1, 1 << 20);
    s.dense_layers = a.integer("--dense-layers", 0, 1024);
    s.moe_step = a.integer("--moe-step", 1, 1024);
    s.attention_interval = a.integer("--attention-interval", 1, 1024);
    s.ssm_k_heads = a.integer("--ssm-k-heads", 0, 1024);
    s.ssm_v_heads = a.integer("--ssm-v-heads", 0, 1024);
    s.ssm_state = a.integer("--ssm-state", 0, 1024);
    s.nextn = a.integer("--nextn", 0, 1);
    s.ff = a.integer("--ff", 0, 1 << 20);
    s.shared_ff = a.integer("--shared-ff", 0, 1 << 20);
    s.ctx = a.integer("--ctx", 1, 1 << 20);
    s.q_lora = a.integer("--q-lora", 0, 1 << 20);
    s.kv_lora = a.integer("--kv-lora", 1, 1 << 20);
    s.rope_dim = a.integer("--rope-dim", 0, 1 << 16);
    s.shared_experts = a.integer("--shared-experts", 0, 64);
    s.gating = a.str("--gating");
    s.weights_norm = a.has("--weights-norm");
    s.qk_norm = a.has("--qk-norm");
    s.weights_scale = static_cast<float>(a.number("--weights-scale", 1e-3, 1e3));
    s.expert_groups = a.integer("--expert-groups", 0, 1024);
    s.groups_used = a.integer("--groups-used", 0, 1024);
    s.yarn_factor = static_cast<float>(a.number("--yarn-factor", 0, 1024));
    s.vocab = a.integer("--vocab", 1, 1 << 22);
    if (a.has("--vocab-from")) s.vocab_from = a.str("--vocab-from");
    if (!kernels::parse_type_name(a.str("--type").c_str(), &s.type)) {
        throw UsageError("--type: unknown weight type '" + a.str("--type") +
                         "' (use f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k)");
    }
    if (a.has("--expert-type")) {
        if (!kernels::parse_type_name(a.str("--expert-type").c_str(), &s.expert_type))
            throw UsageError("--expert-type: unknown weight type '" + a.str("--expert-type") + "'");
        s.expert_type_set = true;
    }
    s.sliding_window = a.integer("--sliding-window", 1, 1 << 30);
    s.seed = static_cast<uint64_t>(a.integer("--seed", 0, INT64_MAX));
    s.threads = static_cast<int>(a.integer("--threads", 0, 1024));
    if (const std::string err = s.validate(); !err.empty()) throw UsageError(err);

    const auto t0 = std::chrono::steady_clock::now();
    model::make_model(s, a.pos("OUT.gguf"));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "wrote %s in %.1f s\n", a.pos("OUT.gguf").c_str(), secs);
    return 0;
}

}  // namespace strata::cli
