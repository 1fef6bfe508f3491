// Weight formats known to the kernels: ids, block geometry and byte sizes.
//
// The numeric ids are GGML's (they are what a GGUF file stores in its tensor
// table), so a file's type field maps onto this enum without translation.
// This header is plain data: no engine headers, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels {

enum class WeightType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    BF16 = 30,
    MXFP4 = 39,  // OCP microscaling FP4: 32 E2M1 values, one E8M0 scale (gpt-oss's experts)

    // In-memory layouts, never in a file: a file type's blocks rearranged for
    // the SIMD kernels of this CPU (kernels/ref/repack_ref.h describes each).
    // type_traits(uint32_t) (a file's raw id) does not know them, so a file
    // that claims one is rejected as an unknown type.
    Q4_0_R4 = 63,
    Q8_0_R2 = 62,
};

// Super-block size of the k-quants.
inline constexpr int64_t QK_K = 256;

struct TypeTraits {
    const char* name;      // "q4_k", as llama.cpp prints it (lower case)
    int64_t block_elems;   // elements per block (1 for float types)
    int64_t block_bytes;   // bytes per block
    bool supported;        // has dequantize + dot kernels in this build
};

// Traits for a raw type id read from a file. Unknown ids (and the in-memory
// layouts) return nullptr, so a caller can report "unknown tensor type 42"
// instead of guessing.
const TypeTraits* type_traits(uint32_t raw_type);
// Traits of any WeightType, the in-memory layouts included (same block
// geometry and bytes per row as the file type they rearrange).
const TypeTraits* type_traits(WeightType t);

// The file type an in-memory layout rearranges (Q4_0_R4 -> Q4_0, Q8_0_R2 ->
// Q8_0); any other type is returned unchanged.
WeightType file_type(WeightType t);

// Bytes of one row of n elements; -1 when n is not a multiple of the block size
// or the type is unknown.
int64_t row_bytes(WeightType t, int64_t n);

// Parses "q4_k", "Q4_K", "f16"... Returns false for unknown names.
bool parse_type_name(const char* name, WeightType* out);

}  // namespace strata::kernels
