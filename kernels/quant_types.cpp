#include "kernels/quant_types.h"

#include <cctype>
#include <cstring>

namespace strata::kernels {
namespace {

struct Entry {
    uint32_t id;
    TypeTraits traits;
};

// Block sizes follow ggml's block_* structs exactly (see kernels/ref/quant_ref.h).
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4, true}},
    {1, {"f16", 1, 2, true}},
    {2, {"q4_0", 32, 18, true}},
    {3, {"q4_1", 32, 20, true}},
    {6, {"q5_0", 32, 22, true}},
    {7, {"q5_1", 32, 24, true}},
    {8, {"q8_0", 32, 34, true}},
    {9, {"q8_1", 32, 36, false}},
    {10, {"q2_k", 256, 84, true}},
    {11, {"q3_k", 256, 110, true}},
    {12, {"q4_k", 256, 144, true}},
    {13, {"q5_k", 256, 176, true}},
    {14, {"q6_k", 256, 210, true}},
    {15, {"q8_k", 256, 292, true}},
    {16, {"iq2_xxs", 256, 66, false}},
    {17, {"iq2_xs", 256, 74, false}},
    {18, {"iq3_xxs", 256, 98, false}},
    {19, {"iq1_s", 256, 50, false}},
    {20, {"iq4_nl", 32, 18, false}},
    {21, {"iq3_s", 256, 110, false}},
    {22, {"iq2_s", 256, 82, false}},
    {23, {"iq4_xs", 256, 136, false}},
    {24, {"i8", 1, 1, false}},
    {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},
    {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},
    {29, {"iq1_m", 256, 56, false}},
    {30, {"bf16", 1, 2, true}},
    {34, {"tq1_0", 256, 54, false}},
    {35, {"tq2_0", 256, 66, false}},
    {39, {"mxfp4", 32, 17, true}},
};

// In-memory layouts (kernels/ref/repack_ref.h): not file types. Each has
// the block geometry of the file type it rearranges.
struct Layout {
    WeightType id;
    WeightType file;
    TypeTraits traits;
};
constexpr Layout kLayouts[] = {
    {WeightType::Q4_0_R4, WeightType::Q4_0, {"q4_0_r4", 32, 18, true}},
    {WeightType::Q8_0_R2, WeightType::Q8_0, {"q8_0_r2", 32, 34, true}},
};

}  // namespace

const TypeTraits* type_traits(uint32_t raw_type) {
    for (const Entry& e : kTypes)
        if (e.id == raw_type) return &e.traits;
    return nullptr;
}

const TypeTraits* type_traits(WeightType t) {
    for (const Layout& l : kLayouts)
        if (l.id == t) return &l.traits;
    return type_traits(static_cast<uint32_t>(t));
}

WeightType file_type(WeightType t) {
    for (const Layout& l : kLayouts)
        if (l.id == t) return l.file;
    return t;
}

int64_t row_bytes(WeightType t, int64_t n) {
    const TypeTraits* tr = type_traits(t);
    if (!tr || n < 0 || n % tr->block_elems != 0) return -1;
    return n / tr->block_elems * tr->block_bytes;
}

bool parse_type_name(const char* name, WeightType* out) {
    char lower[16] = {};
    for (size_t i = 0; name[i] && i + 1 < sizeof lower; ++i)
        lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
    for (const Entry& e : kTypes) {
        if (std::strcmp(e.traits.name, lower) == 0) {
            *out = static_cast<WeightType>(e.id);
            return true;
        }
    }
    return false;
}

}  // namespace strata::kernels
