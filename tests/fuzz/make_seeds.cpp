// Writes the fuzzer's seed corpus: small valid GGUF files made by the Writer
// (nothing is copied from elsewhere). Usage: gguf_make_seeds OUT_DIR
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"

using namespace strata::gguf;
using strata::kernels::WeightType;

namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(seed + k * 31);
    return v;
}

void save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& b) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "gguf_make_seeds: cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    try {
        // A model-like file: strings, counts, a tokenizer, nested arrays, tensors of several types.
        Writer model;
        model.set("general.architecture", Value::make_string("llama"));
        model.set("llama.block_count", Value::make_u32(1));
        model.set("llama.expert_count", Value::make_u32(2));
        model.set("llama.rope.freq_base", Value::make_f32(10000.0f));
        model.set("tokenizer.ggml.tokens", Value::make_string_array({"<unk>", "<s>", "</s>", "a", "b"}));
        model.set("tokenizer.ggml.scores", Value::make_f32_array({0, 0, 0, -1, -2}));
        model.set("tokenizer.ggml.token_type", Value::make_i32_array({2, 3, 3, 1, 1}));
        model.set("test.nested", Value::make_array(ValueType::ARRAY, {Value::make_i32_array({1, -1}),
                                                                       Value::make_string_array({"x"})}));
        model.add_tensor("token_embd.weight", WeightType::F32, {4, 5}, bytes(80, 1));
        model.add_tensor("blk.0.ffn_gate_exps.weight", WeightType::Q4_0, {32, 2, 2}, bytes(72, 2));
        model.add_tensor("blk.0.attn_q.weight", WeightType::F16, {4, 4}, bytes(32, 3));
        model.add_tensor("output.weight", WeightType::Q8_0, {32, 1}, bytes(34, 4));
        model.add_tensor("blk.0.q4_k", WeightType::Q4_K, {256}, bytes(144, 5));
        save(dir, "model.gguf", model.to_bytes());

        // The same as version 2 (the only difference in the bytes is the version field).
        std::vector<uint8_t> v2 = model.to_bytes();
        v2[4] = 2;
        save(dir, "model-v2.gguf", v2);

        // Every scalar type, and alignments other than 32.
        for (uint32_t align : {1u, 64u}) {
            Writer w;
            w.set("general.alignment", Value::make_u32(align));
            w.set("u8", Value::make_u8(1));
            w.set("i8", Value::make_i8(-1));
            w.set("u16", Value::make_u16(2));
            w.set("i16", Value::make_i16(-2));
            w.set("u32", Value::make_u32(3));
            w.set("i32", Value::make_i32(-3));
            w.set("u64", Value::make_u64(4));
            w.set("i64", Value::make_i64(-4));
            w.set("f32", Value::make_f32(0.5f));
            w.set("f64", Value::make_f64(0.25));
            w.set("bool", Value::make_bool(true));
            w.set("str", Value::make_string("s"));
            w.set("arr.bool", Value::make_array(ValueType::BOOL, {Value::make_bool(false)}));
            w.set("arr.empty", Value::make_array(ValueType::UINT64, {}));
            w.add_tensor("a", WeightType::F32, {3}, bytes(12, 6));
            w.add_tensor("b", WeightType::BF16, {2, 1, 1, 2}, bytes(8, 7));
            save(dir, "types-align" + std::to_string(align) + ".gguf", w.to_bytes());
        }

        // Metadata only, and nothing at all.
        Writer vocab;
        vocab.set("general.architecture", Value::make_string("llama"));
        vocab.set("tokenizer.ggml.model", Value::make_string("gpt2"));
        vocab.set("tokenizer.ggml.merges", Value::make_string_array({"a b", "ab c"}));
        save(dir, "vocab.gguf", vocab.to_bytes());
        save(dir, "empty.gguf", Writer().to_bytes());
    } catch (const strata::Error& e) {
        std::fprintf(stderr, "gguf_make_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
