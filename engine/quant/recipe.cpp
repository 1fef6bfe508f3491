#include "quant/recipe.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/json.h"
#include "gguf/gguf.h"

namespace strata::quant {
namespace {

using kernels::WeightType;

struct ClassName {
    TensorClass c;
    const char* name;
};
constexpr ClassName kClassNames[] = {
    {TensorClass::Router, "router"},           {TensorClass::AttnQ, "attn_q"},
    {TensorClass::AttnK, "attn_k"},            {TensorClass::AttnV, "attn_v"},
    {TensorClass::AttnOutput, "attn_output"},  {TensorClass::SharedExpert, "shared_expert"},
    {TensorClass::RoutedExpert, "routed_expert"}, {TensorClass::DenseFfn, "dense_ffn"},
    {TensorClass::Embedding, "embedding"},     {TensorClass::OutputHead, "output"},
    {TensorClass::Other, "other"},
};

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Recipe builtin(const std::string& name) {
    Recipe r;
    r.name = name;
    auto& t = r.types;
    if (name == "q8") {
        t = {{TensorClass::Router, WeightType::F32},        {TensorClass::AttnQ, WeightType::Q8_0},
             {TensorClass::AttnK, WeightType::Q8_0},        {TensorClass::AttnV, WeightType::Q8_0},
             {TensorClass::AttnOutput, WeightType::Q8_0},   {TensorClass::SharedExpert, WeightType::Q8_0},
             {TensorClass::RoutedExpert, WeightType::Q8_0}, {TensorClass::DenseFfn, WeightType::Q8_0},
             {TensorClass::Embedding, WeightType::Q8_0},    {TensorClass::OutputHead, WeightType::Q8_0}};
        r.file_type = 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    } else if (name == "q4-experts" || name == "q2-experts" || name == "q4-experts-small") {
        t = {{TensorClass::Router, WeightType::F32},      {TensorClass::AttnQ, WeightType::Q8_0},
             {TensorClass::AttnK, WeightType::Q8_0},      {TensorClass::AttnV, WeightType::Q8_0},
             {TensorClass::AttnOutput, WeightType::Q8_0}, {TensorClass::SharedExpert, WeightType::Q8_0},
             {TensorClass::DenseFfn, WeightType::Q8_0},   {TensorClass::Embedding, WeightType::Q6_K},
             {TensorClass::OutputHead, WeightType::Q6_K}};
        t[TensorClass::RoutedExpert] = name != "q2-experts" ? WeightType::Q4_K : WeightType::Q2_K;
        r.file_type = name != "q2-experts" ? 15 : 10;  // MOSTLY_Q4_K_M, MOSTLY_Q2_K
        // At 2 bits the down projections get 3: they carry the most error, as
        // in llama.cpp's Q2_K mixes, which also give ffn_down more bits.
        if (name == "q2-experts") r.expert_down = WeightType::Q3_K;
        // Attention, shared experts and dense FFN at 6 bits instead of 8: a
        // file about llama.cpp's Q4_K_M size where the vocabulary is a large
        // share of the model (Q4_K_M itself keeps attention mostly at 4 bits).
        if (name == "q4-experts-small")
            for (const TensorClass c : {TensorClass::AttnQ, TensorClass::AttnK, TensorClass::AttnV, TensorClass::AttnOutput,
                                        TensorClass::SharedExpert, TensorClass::DenseFfn})
                t[c] = WeightType::Q6_K;
    } else if (name == "demo") {
        t = {{TensorClass::Router, WeightType::F32},      {TensorClass::AttnQ, WeightType::F32},
             {TensorClass::AttnK, WeightType::F32},       {TensorClass::AttnV, WeightType::F32},
             {TensorClass::AttnOutput, WeightType::F32},  {TensorClass::SharedExpert, WeightType::F32},
             {TensorClass::RoutedExpert, WeightType::Q8_0}, {TensorClass::DenseFfn, WeightType::F32},
             {TensorClass::Embedding, WeightType::F16},   {TensorClass::OutputHead, WeightType::F32}};
        r.file_type = 7;
    } else {
        throw Error("unknown recipe '" + name + "'");
    }
    return r;
}

WeightType type_named(const std::string& s, const std::string& where) {
    WeightType t;
    if (!kernels::parse_type_name(s.c_str(), &t) || !kernels::type_traits(t) || !kernels::type_traits(t)->supported ||
        t == WeightType::Q8_K || t == WeightType::Q8_1) {
        throw Error(where + ": '" + s + "' is not a weight type Strata writes (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
                            "q8_0, q2_k, q3_k, q4_k, q5_k, q6_k)");
    }
    return t;
}

}  // namespace

std::vector<ClassTypes> file_recipe(const gguf::File& f) {
    std::map<TensorClass, std::map<kernels::WeightType, uint64_t>> by;
    std::map<TensorClass, int64_t> count;
    for (const gguf::TensorInfo& t : f.tensors()) {
        const TensorClass c = classify(t.name);
        if (c == TensorClass::Other) continue;
        by[c][t.type] += t.nbytes;
        ++count[c];
    }
    std::vector<ClassTypes> out;
    for (const auto& [c, types] : by) {
        ClassTypes ct;
        ct.cls = c;
        ct.tensors = count[c];
        for (const auto& [t, b] : types) {
            ct.types.emplace_back(t, b);
            ct.bytes += b;
        }
        std::stable_sort(ct.types.begin(), ct.types.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        out.push_back(std::move(ct));
    }
    return out;
}

std::string describe_types(const ClassTypes& c) {
    std::string s;
    for (const auto& [t, b] : c.types) {
        if (!s.empty()) s += ", ";
        s += kernels::type_traits(t) ? kernels::type_traits(t)->name : "?";
        if (c.types.size() > 1) s += " " + std::to_string(c.bytes ? (b * 100 + c.bytes / 2) / c.bytes : 0) + "%";
    }
    return s;
}

namespace {
// llama.cpp's LLAMA_FTYPE values and names (llama.h).
struct FtypeName {
    int64_t id;
    const char* name;
};
constexpr FtypeName kFtypes[] = {
    {0, "F32"},      {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},     {8, "Q5_0"},
    {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"},
    {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},  {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"},  {22, "IQ3_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},  {26, "IQ3_S"},
    {27, "IQ3_M"},   {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"},
};
}  // namespace

std::string file_type_label(const gguf::File& f) {
    const int64_t ft = f.get_int_or("general.file_type", -1);
    for (const FtypeName& n : kFtypes)
        if (n.id == ft) return n.name;
    // No (or an unknown) file type: the dominant type of the routed experts, else of every matrix.
    std::map<kernels::WeightType, uint64_t> experts, all;
    for (const ClassTypes& c : file_recipe(f))
        for (const auto& [t, b] : c.types) {
            all[t] += b;
            if (c.cls == TensorClass::RoutedExpert) experts[t] += b;
        }
    const auto& bytes = experts.empty() ? all : experts;
    if (bytes.empty()) return {};
    const auto top = std::max_element(bytes.begin(), bytes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    std::string name = kernels::type_traits(top->first) ? kernels::type_traits(top->first)->name : "?";
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return name;
}

const char* class_name(TensorClass c) {
    for (const ClassName& n : kClassNames)
        if (n.c == c) return n.name;
    return "other";
}

std::optional<TensorClass> parse_class(const std::string& name) {
    for (const ClassName& n : kClassNames)
        if (name == n.name) return n.c;
    return std::nullopt;
}

TensorClass classify(const std::string& tensor_name, int64_t* layer) {
    if (layer) *layer = -1;
    if (tensor_name == "token_embd.weight") return TensorClass::Embedding;
    if (tensor_name == "output.weight") return TensorClass::OutputHead;
    if (tensor_name.rfind("blk.", 0) != 0) return TensorClass::Other;
    const size_t dot = tensor_name.find('.', 4);
    if (dot == std::string::npos) return TensorClass::Other;
    if (layer) *layer = std::stoll(tensor_name.substr(4, dot - 4));
    const std::string rest = tensor_name.substr(dot + 1);
    if (!ends_with(rest, ".weight")) return TensorClass::Other;  // biases stay as they are
    const std::string base = rest.substr(0, rest.size() - 7);
    if (base == "ffn_gate_inp") return TensorClass::Router;
    if (base == "ffn_gate_exps" || base == "ffn_up_exps" || base == "ffn_down_exps") return TensorClass::RoutedExpert;
    if (base == "ffn_gate_shexp" || base == "ffn_up_shexp" || base == "ffn_down_shexp") return TensorClass::SharedExpert;
    if (base == "ffn_gate" || base == "ffn_up" || base == "ffn_down") return TensorClass::DenseFfn;
    if (base == "attn_q" || base == "attn_q_a" || base == "attn_q_b" || base == "attn_qkv") return TensorClass::AttnQ;
    if (base == "attn_k" || base == "attn_kv_a_mqa") return TensorClass::AttnK;
    if (base == "attn_v" || base == "attn_kv_b") return TensorClass::AttnV;
    if (base == "attn_output") return TensorClass::AttnOutput;
    return TensorClass::Other;  // norms, the shared expert's gate vector, ...
}

WeightType Recipe::type_for(TensorClass c, int64_t layer, bool down, WeightType source) const {
    if (const auto l = layers.find(layer); l != layers.end()) {
        if (c == TensorClass::RoutedExpert && down && l->second.expert_down) return *l->second.expert_down;
        if (const auto t = l->second.types.find(c); t != l->second.types.end()) return t->second;
    }
    if (c == TensorClass::RoutedExpert) {
        if (auto it = expert_layers.find(layer); it != expert_layers.end()) return it->second;
        if (down && expert_down) return *expert_down;
    }
    auto it = types.find(c);
    return it == types.end() ? source : it->second;
}

std::vector<std::string> builtin_recipe_names() { return {"q8", "q4-experts", "q4-experts-small", "q2-experts", "demo"}; }

Recipe load_recipe(const std::string& name_or_path) {
    for (const std::string& n : builtin_recipe_names())
        if (n == name_or_path) return builtin(n);
    std::ifstream in(name_or_path);
    if (!in) {
        std::string names;
        for (const std::string& n : builtin_recipe_names()) names += (names.empty() ? "" : ", ") + n;
        throw Error("recipe '" + name_or_path + "' is neither a built-in recipe (" + names + ") nor a readable file");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json j = json::parse(ss.str(), name_or_path);
    if (!j.is_object()) throw Error(name_or_path + ": a recipe is a JSON object");
    Recipe r;
    r.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : name_or_path;
    for (const auto& [key, value] : j.items()) {
        if (key != "name" && key != "types" && key != "expert_layers" && key != "expert_down" && key != "layers" &&
            key != "file_type")
            throw Error(name_or_path + ": unknown key '" + key +
                        "' (name, types, expert_layers, expert_down, layers, file_type)");
    }
    if (!j.contains("types") || !j["types"].is_object()) throw Error(name_or_path + ": 'types' (an object) is missing");
    for (const auto& [key, value] : j["types"].items()) {
        const auto c = parse_class(key);
        if (!c) {
            std::string names;
            for (const ClassName& n : kClassNames) names += (names.empty() ? "" : ", ") + std::string(n.name);
            throw Error(name_or_path + ": unknown tensor class '" + key + "' (" + names + ")");
        }
        if (!value.is_string()) throw Error(name_or_path + ": the type of '" + key + "' must be a string");
        r.types[*c] = type_named(value.get<std::string>(), name_or_path + ": types." + key);
    }
    const auto layer_number = [&](const std::string& key, const std::string& where) {
        int64_t layer = -1;
        try {
            size_t used = 0;
            layer = std::stoll(key, &used);
            if (used != key.size()) layer = -1;
        } catch (const std::exception&) {
        }
        if (layer < 0) throw Error(name_or_path + ": " + where + " key '" + key + "' is not a layer number");
        return layer;
    };
    if (j.contains("expert_layers")) {
        if (!j["expert_layers"].is_object()) throw Error(name_or_path + ": 'expert_layers' must be an object");
        for (const auto& [key, value] : j["expert_layers"].items()) {
            const int64_t layer = layer_number(key, "expert_layers");
            if (!value.is_string()) throw Error(name_or_path + ": expert_layers." + key + " must be a type name");
            r.expert_layers[layer] = type_named(value.get<std::string>(), name_or_path + ": expert_layers." + key);
        }
    }
    if (j.contains("layers")) {
        if (!j["layers"].is_object()) throw Error(name_or_path + ": 'layers' must be an object (layer -> {class: type})");
        for (const auto& [key, value] : j["layers"].items()) {
            const int64_t layer = layer_number(key, "layers");
            if (!value.is_object()) throw Error(name_or_path + ": layers." + key + " must be an object ({class: type})");
            Recipe::LayerTypes& lt = r.layers[layer];
            for (const auto& [cls, type] : value.items()) {
                const std::string where = name_or_path + ": layers." + key + "." + cls;
                if (!type.is_string()) throw Error(where + " must be a type name");
                if (cls == "expert_down") {
                    lt.expert_down = type_named(type.get<std::string>(), where);
                    continue;
                }
                const std::optional<TensorClass> c = parse_class(cls);
                if (!c) throw Error(where + ": unknown tensor class (the classes of 'types', or expert_down)");
                lt.types[*c] = type_named(type.get<std::string>(), where);
            }
        }
    }
    if (j.contains("expert_down")) {
        if (!j["expert_down"].is_string()) throw Error(name_or_path + ": 'expert_down' must be a type name");
        r.expert_down = type_named(j["expert_down"].get<std::string>(), name_or_path + ": expert_down");
    }
    if (j.contains("file_type")) {
        if (!j["file_type"].is_number_integer()) throw Error(name_or_path + ": 'file_type' must be an integer");
        r.file_type = j["file_type"].get<int64_t>();
    }
    return r;
}

}  // namespace strata::quant
