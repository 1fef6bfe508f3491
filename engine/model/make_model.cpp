#include "model/make_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "platform/thread_pool.h"
#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/config.h"

namespace strata::model {

namespace {

using kernels::WeightType;

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1).
float uniform(uint64_t& s) { return static_cast<float>(static_cast<double>(splitmix(s) >> 11) * 0x1.0p-52 - 1.0); }

uint64_t hash_name(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

class Builder {
public:
    Builder(const MakeModelSpec& spec, gguf::Writer& w, cpu::ThreadPool& pool) : spec_(spec), w_(w), pool_(pool) {}

    // A matrix of `rows` x `cols` (x slabs), uniform with unit-variance outputs
    // for unit-variance inputs, stored in `type`.
    void matrix(const std::string& name, int64_t cols, int64_t rows, int64_t slabs, WeightType type, float gain = 1.0f) {
        const int64_t rb = kernels::row_bytes(type, cols);
        const int64_t n_rows = rows * slabs;
        std::vector<uint8_t> data(static_cast<size_t>(rb * n_rows));
        const float a = gain * std::sqrt(3.0f / static_cast<float>(cols));
        const uint64_t base = spec_.seed * 0x9e3779b97f4a7c15ull ^ hash_name(name);
        pool_.parallel_for(n_rows, 16, [&](int64_t r0, int64_t r1, int) {
            std::vector<float> row(static_cast<size_t>(cols));
            for (int64_t r = r0; r < r1; ++r) {
                uint64_t s = base + static_cast<uint64_t>(r) * 0x632be59bd9b4e019ull;
                for (float& v : row) v = a * uniform(s);
                kernels::quantize_row(type, row.data(), data.data() + r * rb, cols);
            }
        });
        std::vector<int64_t> ne = {cols, rows};
        // Stacked expert weights are 3-D even with one expert; their biases (gpt-oss) are 2-D.
        if (slabs > 1 || (name.find("_exps") != std::string::npos && name.find(".bias") == std::string::npos))
            ne.push_back(slabs);
        w_.add_tensor(name, type, ne, std::move(data));
    }

    // A 1-D float vector around `center` with a little noise.
    void vector(const std::string& name, int64_t n, float center, float noise) {
        std::vector<float> v(static_cast<size_t>(n));
        uint64_t s = spec_.seed ^ hash_name(name);
        for (float& x : v) x = center + noise * uniform(s);
        std::vector<uint8_t> bytes(v.size() * 4);
        std::memcpy(bytes.data(), v.data(), bytes.size());
        w_.add_tensor(name, WeightType::F32, {n}, std::move(bytes));
    }

private:
    const MakeModelSpec& spec_;
    gguf::Writer& w_;
    cpu::ThreadPool& pool_;
};

// A small SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces made of
// frequent English letters (with and without the word-start marker).
void synthetic_vocab(int64_t n, gguf::Writer& w) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens.push_back(buf);
        scores.push_back(0);
        types.push_back(6);
    }
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
    const std::string marker = "\xe2\x96\x81";  // U+2581, SPM's word start
    std::vector<std::string> pieces = {marker};
    for (char c : letters) pieces.push_back(std::string(1, c));
    for (char c : letters) pieces.push_back(marker + c);
    for (char a : letters)
        for (char b : letters) pieces.push_back(std::string(1, a) + b);
    for (char a : letters)
        for (char b : letters) pieces.push_back(marker + a + b);
    // Larger vocabularies (a realistic output head for benchmarks): three-letter pieces.
    for (const std::string& start : {std::string(), marker})
        for (char a : letters)
            for (char b : letters)
                for (char c : letters) {
                    if (static_cast<int64_t>(tokens.size() + pieces.size()) >= n) break;
                    pieces.push_back(start + a + b + c);
                }
    for (size_t i = 0; static_cast<int64_t>(tokens.size()) < n && i < pieces.size(); ++i) {
        tokens.push_back(pieces[i]);
        scores.push_back(-static_cast<float>(i));
        types.push_back(1);
    }
    w.set("tokenizer.ggml.model", gguf::Value::make_string("llama"));
    w.set("tokenizer.ggml.tokens", gguf::Value::make_string_array(tokens));
    w.set("tokenizer.ggml.scores", gguf::Value::make_f32_array(scores));
    w.set("tokenizer.ggml.token_type", gguf::Value::make_i32_array(types));
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::make_u32(1));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::make_u32(2));
    w.set("tokenizer.ggml.unknown_token_id", gguf::Value::make_u32(0));
    w.set("tokenizer.ggml.add_bos_token", gguf::Value::make_bool(true));
}

int64_t copy_vocab(const std::string& path, gguf::Writer& w) {
    auto f = gguf::File::open(path);
    int64_t n = 0;
    for (const auto& [key, value] : f->metadata()) {
        if (key.rfind("tokenizer.", 0) != 0) continue;
        w.set(key, value);
        if (key == "tokenizer.ggml.tokens") n = static_cast<int64_t>(value.array.size());
    }
    if (n == 0) throw Error(path + ": --vocab-from file has no tokenizer.ggml.tokens");
    return n;
}

// What the architecture's files hold beyond the common decoder, as
// llama.cpp's loader for it expects them.
struct Layout {
    bool mla = false;          // deepseek2: latent attention
    bool oss = false;          // gpt-oss: sinks, biases everywhere, a sliding window
    int64_t head_dim = 0;      // key and value length per head
    int64_t rot = 0;           // rotated dims of each head
    bool key_length = false;   // the file states attention.key_length/value_length
    bool qkv_bias = false;     // qwen2moe, glm4moe
    QkNorm qk_norm = QkNorm::None;
    bool select_bias = false;  // a router selection bias (exp_probs_b)
    bool sigmoid = false;      // expert_gating_func 2
    bool weights_keys = false; // expert_weights_norm and _scale stated (deepseek2, glm4moe)
    int64_t shared_width = 0;  // the shared expert's width (0: none)
    bool shared_gate = false;  // qwen2moe: its sigmoid gate
    const char* ffn_norm = "ffn_norm.weight";
    bool llama4 = false;       // MoE every moe_step layers, rope_freqs
    bool qwen35 = false;       // gated delta nets between the attention layers
    int64_t ssm_k = 0, ssm_v = 0, ssm_d = 0;
    // The NextN blocks (il >= spec.layers) attend.
    bool delta_net(const MakeModelSpec& spec, int64_t il) const {
        return qwen35 && il < spec.layers && (il + 1) % spec.attention_interval != 0;
    }
    bool routes_experts(const MakeModelSpec& spec, int64_t il) const {
        if (spec.experts == 0) return false;
        return llama4 ? (il + 1) % spec.moe_step == 0 : il >= spec.dense_layers;
    }
};

// Architectures whose RoPE covers part of each head by default (half).
bool partial_rope(const std::string& arch) { return arch == "glm4moe" || arch == "minimax-m2" || arch == "qwen35moe"; }

Layout layout_of(const MakeModelSpec& spec) {
    const ArchTraits* traits = find_arch(spec.arch);
    const std::string& a = spec.arch;
    Layout l;
    l.mla = a == "deepseek2";
    l.oss = a == "gpt-oss";
    l.head_dim = spec.head_dim > 0 ? spec.head_dim : spec.dim / spec.heads;
    l.rot = spec.rope_dim > 0 ? spec.rope_dim : (l.mla || partial_rope(a)) ? l.head_dim / 2 : l.head_dim;
    l.key_length = l.oss || l.mla || l.head_dim != spec.dim / spec.heads;
    l.qkv_bias = a == "qwen2moe" || a == "glm4moe";
    l.qk_norm = traits->qk_norm_optional && !spec.qk_norm ? QkNorm::None : traits->qk_norm;
    l.sigmoid = (l.mla && spec.gating == "sigmoid") || a == "glm4moe" || a == "minimax-m2";
    l.select_bias = l.sigmoid || a == "ernie4_5-moe";
    l.weights_keys = l.mla || a == "glm4moe";
    if (l.mla || a == "glm4moe") l.shared_width = spec.shared_experts * spec.expert_ff;
    if (a == "qwen2moe" || a == "ernie4_5-moe") l.shared_width = spec.shared_ff;
    l.shared_gate = a == "qwen2moe";
    l.llama4 = a == "llama4";
    l.qwen35 = a == "qwen35moe";
    if (l.qwen35) {
        l.ssm_k = spec.ssm_k_heads > 0 ? spec.ssm_k_heads : std::max<int64_t>(1, spec.heads / 2);
        l.ssm_v = spec.ssm_v_heads > 0 ? spec.ssm_v_heads : spec.heads;
        l.ssm_d = spec.ssm_state > 0 ? spec.ssm_state : l.head_dim / 2;
        l.shared_width = spec.shared_ff;
        l.shared_gate = true;
        l.key_length = true;
    }
    if (l.llama4) l.shared_width = spec.expert_ff;
    l.ffn_norm = traits->ffn_norm_tensor;
    return l;
}

}  // namespace

std::string MakeModelSpec::validate() const {
    const ArchTraits* t = find_arch(arch);
    if (!t) return "unknown architecture '" + arch + "' (supported: " + supported_arch_names() + ")";
    const kernels::TypeTraits* tr = kernels::type_traits(type);
    if (!tr || !kernels::has_kernels(type)) return "weight type is not supported";
    auto pos = [](int64_t v, const char* what, int64_t max) -> std::string {
        if (v < 1 || v > max) return std::string(what) + " must be between 1 and " + std::to_string(max) + ", got " + std::to_string(v);
        return "";
    };
    for (const std::string& e : {pos(layers, "--layers", 1024), pos(dim, "--dim", 65536), pos(heads, "--heads", 1024),
                                 pos(kv_heads, "--kv-heads", 1024), pos(ctx, "--ctx", 1 << 20)})
        if (!e.empty()) return e;
    if (head_dim < 0 || head_dim > 4096) return "--head-dim must be between 0 and 4096";
    if (head_dim == 0 && dim % heads != 0)
        return "--dim " + std::to_string(dim) + " is not a multiple of --heads " + std::to_string(heads) + " (or give --head-dim)";
    if (heads % kv_heads != 0) return "--heads " + std::to_string(heads) + " is not a multiple of --kv-heads " + std::to_string(kv_heads);
    const int64_t hd = head_dim > 0 ? head_dim : dim / heads;
    if (hd % 2 != 0) return "head dimension " + std::to_string(hd) + " must be even (RoPE rotates pairs)";
    if (head_dim > 0 && (arch == "deepseek2" || arch == "gpt-oss"))
        return "--head-dim is for per-head attention other than deepseek2's and gpt-oss's";
    if (experts < 0 || experts > 1024) return "--experts must be between 0 and 1024";
    if (experts > 0 && (used < 1 || used > experts)) return "--used must be between 1 and --experts (" + std::to_string(experts) + ")";
    if (experts > 0 && expert_ff < 1) return "--expert-ff must be positive";
    if (experts == 0 && arch != "llama") return "a dense model (--experts 0) needs --arch llama";
    if (dense_layers < 0 || dense_layers > layers) return "--dense-layers must be between 0 and --layers";
    if (shared_ff < 0) return "--shared-ff must not be negative";
    if (shared_ff > 0 && arch != "qwen2moe" && arch != "ernie4_5-moe" && arch != "qwen35moe")
        return "--shared-ff (a shared expert) needs --arch qwen2moe, ernie4_5-moe or qwen35moe";
    if ((arch == "gpt-oss" || arch == "minimax-m2") && (experts == 0 || dense_layers > 0))
        return "a " + arch + " model has experts in every layer (--experts, no --dense-layers)";
    if (arch == "gpt-oss" && sliding_window < 1) return "--sliding-window must be positive";
    if (arch == "llama4") {
        if (experts == 0 || dense_layers > 0 || moe_step < 1 || moe_step > layers)
            return "a llama4 model routes experts on every --moe-step-th layer (1..--layers; no --dense-layers)";
        if (rope_dim > 0 && rope_dim != (head_dim > 0 ? head_dim : dim / heads)) return "llama4 rotates whole heads (no --rope-dim)";
    } else if (moe_step != 1) {
        return "--moe-step needs --arch llama4";
    }
    if (arch == "qwen35moe") {
        if (experts == 0 || dense_layers > 0) return "a qwen35moe model has experts in every layer (--experts, no --dense-layers)";
        if (attention_interval < 1 || attention_interval > layers)
            return "--attention-interval must be between 1 and --layers";
        const int64_t kh = ssm_k_heads > 0 ? ssm_k_heads : std::max<int64_t>(1, heads / 2);
        const int64_t vh = ssm_v_heads > 0 ? ssm_v_heads : heads;
        if (vh % kh != 0) return "--ssm-v-heads must be a multiple of --ssm-k-heads";
        if (ssm_state < 0 || ssm_state > 1024) return "--ssm-state must be between 0 and 1024";
    } else if (attention_interval != 4 || ssm_k_heads > 0 || ssm_v_heads > 0 || ssm_state > 0) {
        return "--attention-interval and --ssm-* need --arch qwen35moe";
    }
    if (nextn < 0 || nextn > 1) return "--nextn must be 0 or 1 (llama.cpp runs one MTP block)";
    if (nextn > 0 && arch != "glm4moe" && arch != "qwen35moe") return "--nextn (an MTP block) needs --arch glm4moe or qwen35moe";
    if (arch == "minimax-m2" && ff > 0 && ff != expert_ff)
        return "a minimax-m2 model's experts are feed_forward_length wide: give --expert-ff alone";
    if (qk_norm && !t->qk_norm_optional) return "--qk-norm is for glm4moe (the others have their Q/K norms or none)";
    if (expert_type_set) {
        const kernels::TypeTraits* et = kernels::type_traits(expert_type);
        if (!et || !kernels::has_kernels(expert_type)) return "--expert-type is not supported";
        if (dim % et->block_elems != 0 || expert_ff % et->block_elems != 0)
            return std::string("--dim and --expert-ff must be multiples of ") + std::to_string(et->block_elems) +
                   ", the block size of the expert type " + et->name;
    }
    const bool deepseek = arch == "deepseek2", glm = arch == "glm4moe";
    if (rope_dim > 0 && (rope_dim % 2 != 0 || rope_dim > hd || (deepseek && rope_dim >= hd)))
        return "--rope-dim " + std::to_string(rope_dim) + " must be even and " + (deepseek ? "below" : "at most") +
               " the head dimension " + std::to_string(hd);
    if (arch == "ernie4_5-moe" && rope_dim > 0 && rope_dim != hd) return "ernie4_5-moe rotates whole heads (no --rope-dim)";
    if ((deepseek || glm) && experts == 0) return "a " + arch + " model needs experts (--experts)";
    if (deepseek) {
        if (kv_lora < 1 || q_lora < 0) return "--kv-lora must be positive and --q-lora not negative";
        if (gating != "softmax" && gating != "sigmoid") return "--gating must be softmax or sigmoid";
        if (expert_groups > 1 && (experts % expert_groups != 0 || groups_used < 1 || groups_used > expert_groups ||
                                  groups_used * (experts / expert_groups) < used))
            return "--expert-groups must divide --experts, and --groups-used groups must hold the --used experts";
    } else if (q_lora > 0 || gating != "softmax" || expert_groups > 0) {
        return "--q-lora, --gating and --expert-groups need --arch deepseek2";
    }
    if (shared_experts > 0 && !deepseek && !glm) return "--shared-experts needs --arch deepseek2 or glm4moe";
    if ((weights_norm || weights_scale != 1.0f) && !deepseek && !glm)
        return "--weights-norm and --weights-scale need --arch deepseek2 or glm4moe";
    if (yarn_factor != 0.0f && !(yarn_factor > 1.0f)) return "--yarn-factor must be above 1 (or 0: none)";
    if (vocab_from.empty() && (vocab < 260 || vocab > kMaxSyntheticVocab))
        return "--vocab must be between 260 and " + std::to_string(kMaxSyntheticVocab) +
               " (the synthetic vocabulary has no more distinct pieces; --vocab-from copies a larger one)";
    const int64_t be = tr->block_elems;
    const int64_t eff_ff = ff > 0 ? ff : 4 * dim;
    const int64_t q_dim = heads * hd;
    for (auto [v, what] : {std::pair<int64_t, const char*>{dim, "--dim"}, {eff_ff, "--ff"},
                           {experts > 0 ? expert_ff : be, "--expert-ff"}, {shared_ff > 0 ? shared_ff : be, "--shared-ff"},
                           {deepseek ? kv_lora : be, "--kv-lora"}, {deepseek && q_lora > 0 ? q_lora : be, "--q-lora"},
                           {q_dim, "--heads x --head-dim"}}) {
        if (v % be != 0) {
            return std::string(what) + " " + std::to_string(v) + " is not a multiple of " + std::to_string(be) +
                   ", the block size of " + tr->name + " (rows of each matrix must hold whole blocks)";
        }
    }
    return "";
}

void make_model(const MakeModelSpec& spec, const std::string& path) {
    if (const std::string err = spec.validate(); !err.empty()) throw Error("make-model: " + err);
    const int threads = spec.threads > 0 ? spec.threads : static_cast<int>(std::thread::hardware_concurrency());
    cpu::ThreadPool pool(std::max(1, threads));
    gguf::Writer w;
    const std::string a = spec.arch + ".";
    const Layout l = layout_of(spec);
    const int64_t head_dim = l.head_dim;
    const int64_t ff = spec.ff > 0 ? spec.ff : 4 * spec.dim;
    const bool moe = spec.experts > 0;
    const bool mla = l.mla, oss = l.oss;

    w.set("general.architecture", gguf::Value::make_string(spec.arch));
    w.set("general.name", gguf::Value::make_string("strata-random-" + spec.arch));
    w.set("general.alignment", gguf::Value::make_u32(32));
    w.set(a + "context_length", gguf::Value::make_u32(static_cast<uint32_t>(spec.ctx)));
    w.set(a + "embedding_length", gguf::Value::make_u32(static_cast<uint32_t>(spec.dim)));
    w.set(a + "block_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.layers + spec.nextn)));
    if (spec.nextn > 0) w.set(a + "nextn_predict_layers", gguf::Value::make_u32(static_cast<uint32_t>(spec.nextn)));
    // llama.cpp sizes llama (Mixtral), olmoe and minimax-m2 experts by
    // feed_forward_length, so all-MoE models of those architectures state the
    // expert width there; models that mix dense and MoE layers (a Strata
    // extension for llama and olmoe) state the dense width.
    const bool ff_is_expert_width = moe && spec.dense_layers == 0 &&
                                    (spec.arch == "llama" || spec.arch == "olmoe" || spec.arch == "minimax-m2");
    w.set(a + "feed_forward_length", gguf::Value::make_u32(static_cast<uint32_t>(ff_is_expert_width ? spec.expert_ff : ff)));
    w.set(a + "attention.head_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.heads)));
    // deepseek2 states every head as a KV head (MLA has no KV heads of its own).
    w.set(a + "attention.head_count_kv", gguf::Value::make_u32(static_cast<uint32_t>(mla ? spec.heads : spec.kv_heads)));
    w.set(a + "attention.layer_norm_rms_epsilon", gguf::Value::make_f32(1e-5f));
    w.set(a + "rope.freq_base", gguf::Value::make_f32(10000.0f));
    const int64_t rot = l.rot;
    w.set(a + "rope.dimension_count", gguf::Value::make_u32(static_cast<uint32_t>(rot)));
    if (spec.yarn_factor > 0.0f) {
        w.set(a + "rope.scaling.type", gguf::Value::make_string("yarn"));
        w.set(a + "rope.scaling.factor", gguf::Value::make_f32(spec.yarn_factor));
        w.set(a + "rope.scaling.original_context_length", gguf::Value::make_u32(static_cast<uint32_t>(spec.ctx)));
    }
    // llama.cpp reads deepseek2's multiplier whether or not the file scales RoPE.
    if (mla) w.set(a + "rope.scaling.yarn_log_multiplier", gguf::Value::make_f32(spec.yarn_log_mul));
    if (l.key_length) {
        // deepseek2 (V2's layout): keys of head_dim (rot of them rotated), values of head_dim.
        w.set(a + "attention.key_length", gguf::Value::make_u32(static_cast<uint32_t>(head_dim)));
        w.set(a + "attention.value_length", gguf::Value::make_u32(static_cast<uint32_t>(head_dim)));
    }
    if (mla) {
        w.set(a + "attention.kv_lora_rank", gguf::Value::make_u32(static_cast<uint32_t>(spec.kv_lora)));
        if (spec.q_lora > 0) w.set(a + "attention.q_lora_rank", gguf::Value::make_u32(static_cast<uint32_t>(spec.q_lora)));
    }
    if (mla || spec.arch == "glm4moe")
        w.set(a + "expert_shared_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.shared_experts)));
    if (mla || l.sigmoid) w.set(a + "expert_gating_func", gguf::Value::make_u32(l.sigmoid ? 2 : 1));
    if (l.weights_keys) {
        w.set(a + "expert_weights_norm", gguf::Value::make_bool(spec.weights_norm));
        w.set(a + "expert_weights_scale", gguf::Value::make_f32(spec.weights_scale));
    }
    if (mla && spec.expert_groups > 1) {
        w.set(a + "expert_group_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.expert_groups)));
        w.set(a + "expert_group_used_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.groups_used)));
    }
    // llama.cpp's gpt-oss reads the window; every other layer slides.
    if (oss) w.set(a + "attention.sliding_window", gguf::Value::make_u32(static_cast<uint32_t>(spec.sliding_window)));
    if (l.qwen35) {
        w.set(a + "ssm.conv_kernel", gguf::Value::make_u32(4));
        w.set(a + "ssm.state_size", gguf::Value::make_u32(static_cast<uint32_t>(l.ssm_d)));
        w.set(a + "ssm.group_count", gguf::Value::make_u32(static_cast<uint32_t>(l.ssm_k)));
        w.set(a + "ssm.time_step_rank", gguf::Value::make_u32(static_cast<uint32_t>(l.ssm_v)));
        w.set(a + "ssm.inner_size", gguf::Value::make_u32(static_cast<uint32_t>(l.ssm_v * l.ssm_d)));
        w.set(a + "full_attention_interval", gguf::Value::make_u32(static_cast<uint32_t>(spec.attention_interval)));
        // Text positions (p, p, p, 0): the first three sections cover every rotated pair.
        const int32_t pairs = static_cast<int32_t>(rot / 2);
        w.set(a + "rope.dimension_sections",
              gguf::Value::make_i32_array({pairs - 2 * (pairs / 3), pairs / 3, pairs / 3, 0}));
    }
    if (spec.arch == "ernie4_5-moe" || l.llama4)
        w.set(a + "interleave_moe_layer_step", gguf::Value::make_u32(static_cast<uint32_t>(l.llama4 ? spec.moe_step : 1)));
    if (moe) {
        w.set(a + "expert_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.experts)));
        w.set(a + "expert_used_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.used)));
        w.set(a + "expert_feed_forward_length", gguf::Value::make_u32(static_cast<uint32_t>(spec.expert_ff)));
        if (spec.shared_ff > 0)
            w.set(a + "expert_shared_feed_forward_length", gguf::Value::make_u32(static_cast<uint32_t>(spec.shared_ff)));
        if (spec.dense_layers > 0 || spec.arch == "glm4moe" || spec.arch == "ernie4_5-moe")
            w.set(a + "leading_dense_block_count", gguf::Value::make_u32(static_cast<uint32_t>(spec.dense_layers)));
    }
    const int64_t n_vocab = spec.vocab_from.empty() ? spec.vocab : copy_vocab(spec.vocab_from, w);
    if (spec.vocab_from.empty()) synthetic_vocab(spec.vocab, w);

    Builder b(spec, w, pool);
    const WeightType t = spec.type;
    b.matrix("token_embd.weight", spec.dim, n_vocab, 1, t);
    b.vector("output_norm.weight", spec.dim, 1.0f, 0.1f);
    b.matrix("output.weight", spec.dim, n_vocab, 1, t);
    // Llama 4's per-pair RoPE divisors (1 for the fast pairs up to 8 for the slow, in the real files).
    if (l.llama4) b.vector("rope_freqs.weight", rot / 2, 2.0f, 1.0f);
    const int64_t q_dim = spec.heads * head_dim;
    const int64_t kv_dim = spec.kv_heads * head_dim;
    for (int64_t i = 0; i < spec.layers + spec.nextn; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        b.vector(p + "attn_norm.weight", spec.dim, 1.0f, 0.1f);
        if (i >= spec.layers) {
            b.matrix(p + "nextn.eh_proj.weight", 2 * spec.dim, spec.dim, 1, t);
            b.vector(p + "nextn.enorm.weight", spec.dim, 1.0f, 0.1f);
            b.vector(p + "nextn.hnorm.weight", spec.dim, 1.0f, 0.1f);
            b.vector(p + "nextn.shared_head_norm.weight", spec.dim, 1.0f, 0.1f);
        }
        if (oss) {
            b.vector(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
            b.vector(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
            b.vector(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
            b.vector(p + "attn_output.bias", spec.dim, 0.0f, 0.1f);
            b.vector(p + "attn_sinks.weight", spec.heads, 0.0f, 2.0f);
        }
        if (l.delta_net(spec, i)) {
            const int64_t C = (2 * l.ssm_k + l.ssm_v) * l.ssm_d, V = l.ssm_v * l.ssm_d;
            b.matrix(p + "attn_qkv.weight", spec.dim, C, 1, t);
            b.matrix(p + "attn_gate.weight", spec.dim, V, 1, t);
            b.matrix(p + "ssm_conv1d.weight", 4, C, 1, WeightType::F32);
            b.vector(p + "ssm_dt.bias", l.ssm_v, 0.0f, 1.0f);
            b.vector(p + "ssm_a", l.ssm_v, -1.0f, 0.5f);  // -exp(A_log): negative, a decay
            b.matrix(p + "ssm_beta.weight", spec.dim, l.ssm_v, 1, WeightType::F32);
            b.matrix(p + "ssm_alpha.weight", spec.dim, l.ssm_v, 1, WeightType::F32);
            b.vector(p + "ssm_norm.weight", l.ssm_d, 1.0f, 0.1f);
            b.matrix(p + "ssm_out.weight", V, spec.dim, 1, t);
        } else if (mla) {
            const int64_t nope = head_dim - rot;
            if (spec.q_lora > 0) {
                b.matrix(p + "attn_q_a.weight", spec.dim, spec.q_lora, 1, t);
                b.vector(p + "attn_q_a_norm.weight", spec.q_lora, 1.0f, 0.1f);
                b.matrix(p + "attn_q_b.weight", spec.q_lora, spec.heads * head_dim, 1, t);
            } else {
                b.matrix(p + "attn_q.weight", spec.dim, spec.heads * head_dim, 1, t);
            }
            b.matrix(p + "attn_kv_a_mqa.weight", spec.dim, spec.kv_lora + rot, 1, t);
            b.vector(p + "attn_kv_a_norm.weight", spec.kv_lora, 1.0f, 0.1f);
            b.matrix(p + "attn_kv_b.weight", spec.kv_lora, spec.heads * (nope + head_dim), 1, t);
            b.matrix(p + "attn_output.weight", spec.heads * head_dim, spec.dim, 1, t);
        } else {
            // qwen35moe: each head's query rows, then its output gate's.
            b.matrix(p + "attn_q.weight", spec.dim, l.qwen35 ? 2 * q_dim : q_dim, 1, t);
            b.matrix(p + "attn_k.weight", spec.dim, kv_dim, 1, t);
            b.matrix(p + "attn_v.weight", spec.dim, kv_dim, 1, t);
        }
        if (l.qkv_bias) {
            b.vector(p + "attn_q.bias", q_dim, 0.0f, 0.1f);
            b.vector(p + "attn_k.bias", kv_dim, 0.0f, 0.1f);
            b.vector(p + "attn_v.bias", kv_dim, 0.0f, 0.1f);
        }
        const bool attends = !l.delta_net(spec, i);
        if (attends && l.qk_norm == QkNorm::PerHead) {
            b.vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
            b.vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
        } else if (attends && l.qk_norm == QkNorm::WholeProjection) {
            b.vector(p + "attn_q_norm.weight", q_dim, 1.0f, 0.1f);
            b.vector(p + "attn_k_norm.weight", kv_dim, 1.0f, 0.1f);
        }
        if (!mla && attends) b.matrix(p + "attn_output.weight", q_dim, spec.dim, 1, t);
        b.vector(p + l.ffn_norm, spec.dim, 1.0f, 0.1f);
        if (!l.routes_experts(spec, i)) {
            b.matrix(p + "ffn_gate.weight", spec.dim, ff, 1, t);
            b.matrix(p + "ffn_up.weight", spec.dim, ff, 1, t);
            b.matrix(p + "ffn_down.weight", ff, spec.dim, 1, t);
            continue;
        }
        // The router stays F32: routing is where quantization error hurts most.
        b.matrix(p + "ffn_gate_inp.weight", spec.dim, spec.experts, 1, WeightType::F32, 4.0f);
        const WeightType et = spec.experts_type();
        // gpt-oss: gate and up three times wider than elsewhere, so some
        // values reach the clamped SwiGLU's limit of 7; biases everywhere.
        const float wide = oss ? 3.0f : 1.0f;
        b.matrix(p + "ffn_gate_exps.weight", spec.dim, spec.expert_ff, spec.experts, et, wide);
        b.matrix(p + "ffn_up_exps.weight", spec.dim, spec.expert_ff, spec.experts, et, wide);
        b.matrix(p + "ffn_down_exps.weight", spec.expert_ff, spec.dim, spec.experts, et);
        if (oss) {
            b.vector(p + "ffn_gate_inp.bias", spec.experts, 0.0f, 0.5f);
            b.matrix(p + "ffn_gate_exps.bias", spec.expert_ff, spec.experts, 1, WeightType::F32, 0.5f);
            b.matrix(p + "ffn_up_exps.bias", spec.expert_ff, spec.experts, 1, WeightType::F32, 0.5f);
            b.matrix(p + "ffn_down_exps.bias", spec.dim, spec.experts, 1, WeightType::F32, 0.5f);
        }
        if (l.select_bias) b.vector(p + "exp_probs_b.bias", spec.experts, 0.0f, 0.05f);
        if (l.shared_width > 0) {
            if (l.shared_gate) b.vector(p + "ffn_gate_inp_shexp.weight", spec.dim, 0.0f, 0.1f);
            b.matrix(p + "ffn_gate_shexp.weight", spec.dim, l.shared_width, 1, t);
            b.matrix(p + "ffn_up_shexp.weight", spec.dim, l.shared_width, 1, t);
            b.matrix(p + "ffn_down_shexp.weight", l.shared_width, spec.dim, 1, t);
        }
    }
    w.write(path);
    logger("model")->info("make-model: wrote {}", path);
}

}  // namespace strata::model
