#include "core/kernel_tuning.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "platform/thread_pool.h"
#include "common/json.h"
#include "common/log.h"
#include "core/bandwidth.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "model/model.h"

namespace strata::core {

namespace {

constexpr int kCacheVersion = 1;
// Larger than the last-level caches of the machines we run on, small
// enough to fill in a few milliseconds.
constexpr uint64_t kStreamBytes = 96ull << 20;
constexpr int kRounds = 5;          // alternating rounds per stage
constexpr int kPassesPerTiming = 2; // the faster of two passes per timing

const char* type_name(kernels::WeightType t) {
    const kernels::TypeTraits* tr = kernels::type_traits(t);
    return tr ? tr->name : "?";
}

std::string cache_key(const KernelTuningReport& r) {
    return r.cpu + " | " + r.level + " | " + type_name(r.type) + " | cols " + std::to_string(r.cols) + " | threads " +
           std::to_string(r.threads);
}

uint64_t type_bit(kernels::WeightType t) { return uint64_t{1} << static_cast<int>(t); }

nlohmann::json tuning_json(const KernelTuningReport& r) {
    return {{"prefetch_bytes", r.tuning.prefetch_bytes},
            {"read_once_nta", r.tuning.read_once_nta},
            {"grain_rows", r.tuning.grain_rows},
            {"narrow", (r.tuning.narrow_types & type_bit(r.type)) != 0},
            {"gbs", r.gbs},
            {"default_gbs", r.default_gbs}};
}

nlohmann::json read_cache_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) return nlohmann::json::object();
    std::stringstream ss;
    ss << f.rdbuf();
    nlohmann::json j = json::parse(ss.str(), path);
    if (!j.is_object() || j.value("version", 0) != kCacheVersion || !j.contains("entries") || !j["entries"].is_object())
        return nlohmann::json::object();
    return j;
}

// The cached entry for the report's key into r; false when there is none.
bool read_cached(const std::string& path, KernelTuningReport& r) {
    const nlohmann::json j = read_cache_file(path);
    if (!j.contains("entries")) return false;
    const auto it = j["entries"].find(cache_key(r));
    if (it == j["entries"].end() || !it->is_object()) return false;
    const nlohmann::json& e = *it;
    r.tuning.prefetch_bytes = e.at("prefetch_bytes").get<int>();
    r.tuning.read_once_nta = e.at("read_once_nta").get<bool>();
    r.tuning.grain_rows = e.at("grain_rows").get<int>();
    r.tuning.narrow_types = e.at("narrow").get<bool>() ? type_bit(r.type) : 0;
    r.gbs = e.value("gbs", 0.0);
    r.default_gbs = e.value("default_gbs", 0.0);
    return true;
}

// Adds (or replaces) the report's entry; written to a temporary file and
// renamed, so a reader never sees half a file.
void write_cached(const std::string& path, const KernelTuningReport& r) {
    nlohmann::json j;
    try {
        j = read_cache_file(path);
    } catch (const std::exception&) {
        j = nlohmann::json::object();  // an unreadable cache is replaced
    }
    if (!j.contains("entries")) j = {{"version", kCacheVersion}, {"entries", nlohmann::json::object()}};
    j["entries"][cache_key(r)] = tuning_json(r);
    const std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << j.dump(1) << '\n';
        if (!f) throw std::runtime_error("cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path);
}

// Times tuning candidates over one stream, alternating them round by round.
class Bench {
public:
    Bench(int threads, kernels::WeightType type, int64_t cols) : stream_(type, cols, kStreamBytes), pool_(threads) {}
    bool empty() const { return stream_.empty(); }

    double time(const kernels::KernelTuning& t) {
        kernels::set_kernel_tuning(t);
        stream_.refill();  // only where the layout changed (the 512- and 256-bit kernels may repack differently)
        double best = 0.0;
        for (int p = 0; p < kPassesPerTiming; ++p)
            best = std::max(best, stream_.pass_gbs(pool_, t.read_once_nta, t.grain_rows));
        return best;
    }

    // The best of `cands` (cands[0] the incumbent): another wins only by more than min_gain.
    size_t pick(const std::vector<kernels::KernelTuning>& cands, double min_gain, std::vector<double>* rates_out = nullptr) {
        std::vector<double> rate(cands.size(), 0.0);
        for (int round = 0; round < kRounds; ++round)
            for (size_t i = 0; i < cands.size(); ++i) rate[i] = std::max(rate[i], time(cands[i]));
        size_t best = 0;
        for (size_t i = 1; i < cands.size(); ++i)
            if (rate[i] > rate[best] && rate[i] > rate[0] * (1.0 + min_gain)) best = i;
        if (rates_out) *rates_out = rate;
        return best;
    }

private:
    WeightStream stream_;
    cpu::ThreadPool pool_;
};

void measure(KernelTuningReport& r) {
    const auto t0 = std::chrono::steady_clock::now();
    Bench bench(r.threads, r.type, r.cols);
    const kernels::KernelTuning defaults;
    kernels::KernelTuning best = defaults;
    bench.time(best);  // warm-up: pages touched, clocks up
    auto stage = [&](double min_gain, auto&& vary, std::initializer_list<int> values) {
        std::vector<kernels::KernelTuning> c{best};
        for (int v : values) {
            kernels::KernelTuning t = best;
            vary(t, v);
            if (!(t == best)) c.push_back(t);
        }
        best = c[bench.pick(c, min_gain)];
    };
    if (kernels::has_narrow_choice(r.type))
        stage(kMinGainNarrow, [&](kernels::KernelTuning& t, int v) { t.narrow_types = v ? type_bit(r.type) : 0; }, {1});
    stage(kMinGain, [](kernels::KernelTuning& t, int v) { t.prefetch_bytes = v; }, {2048, 4096, 16384});
    stage(kMinGain, [](kernels::KernelTuning& t, int v) { t.read_once_nta = v != 0; }, {0});
    stage(kMinGain, [](kernels::KernelTuning& t, int v) { t.grain_rows = v; }, {16, 128});
    // The pick against the defaults, in alternating rounds of their own: it
    // stays only if it wins these too (stage by stage, noise can add up).
    std::vector<double> rates;
    const double final_gain = (best.narrow_types & type_bit(r.type)) ? kMinGainNarrow : kMinGain;
    const size_t final_pick = best == defaults ? 0 : bench.pick({defaults, best}, final_gain, &rates);
    if (best == defaults) bench.pick({defaults}, 0.0, &rates);
    r.default_gbs = rates[0];
    r.gbs = rates[final_pick];
    r.tuning = final_pick == 0 ? defaults : best;
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool parse_kernel_tuning_mode(const std::string& s, KernelTuningMode* out) {
    if (s == "auto") *out = KernelTuningMode::Auto;
    else if (s == "measure") *out = KernelTuningMode::Measure;
    else if (s == "off") *out = KernelTuningMode::Off;
    else if (s == "cached") *out = KernelTuningMode::Cached;
    else return false;
    return true;
}

int KernelTuningReport::loop_bits() const {
    return (tuning.narrow_types & type_bit(type)) == 0 && level == "avx512" ? 512 : 256;
}

std::string KernelTuningReport::to_json() const {
    std::ostringstream os;
    os << "{\"source\": \"" << source << "\", \"note\": \"" << json::escape(note) << "\", \"cpu\": \""
       << json::escape(cpu) << "\", \"level\": \"" << level << "\", \"type\": \"" << type_name(type)
       << "\", \"cols\": " << cols << ", \"threads\": " << threads << ", \"prefetch_bytes\": " << tuning.prefetch_bytes
       << ", \"read_once_nta\": " << (tuning.read_once_nta ? "true" : "false") << ", \"grain_rows\": " << tuning.grain_rows
       << ", \"loop_bits\": " << loop_bits()
       << ", \"measure_ms\": " << ms << ", \"gbs\": " << gbs << ", \"default_gbs\": " << default_gbs << "}";
    return os.str();
}

std::string KernelTuningReport::summary() const {
    std::ostringstream os;
    os << "kernel tuning (" << source << (note.empty() ? "" : ": " + note) << "): " << type_name(type) << " on " << cpu
       << ", " << level << ", " << threads << (threads == 1 ? " thread: " : " threads: ") << loop_bits()
       << "-bit loops, prefetch " << tuning.prefetch_bytes << " B ahead, read-once loops "
       << (tuning.read_once_nta ? "on" : "off") << ", " << tuning.grain_rows << " rows a chunk";
    if (gbs > 0) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " (%.1f GB/s, defaults %.1f)", gbs, default_gbs);
        os << buf;
    }
    if (ms > 0) os << ", measured in " << static_cast<int64_t>(ms) << " ms";
    return os.str();
}

KernelTuningReport tune_kernels(int threads, kernels::WeightType type, int64_t cols, KernelTuningMode mode,
                                const std::string& cache_path) {
    KernelTuningReport r;
    r.cpu = kernels::cpu::cpu_brand();
    r.level = kernels::kernel_level_name(kernels::kernel_level());
    r.type = type;
    r.cols = cols;
    r.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Other types' 256-bit choices stay as earlier loads measured them.
    const uint64_t bit = type_bit(type);
    const uint64_t others = kernels::kernel_tuning().narrow_types & ~bit;
    const auto apply = [&](kernels::KernelTuning t) {
        t.narrow_types = others | (t.narrow_types & bit);
        kernels::set_kernel_tuning(t);
    };
    apply(r.tuning);  // the defaults until something better is known
    if (mode == KernelTuningMode::Off) {
        r.note = "tuning off";
        return r;
    }
    if (kernels::kernel_level() == kernels::KernelLevel::Ref) {
        r.note = "the reference kernels have nothing to tune";
        return r;
    }
    if (type == kernels::WeightType::F32 || !kernels::has_kernels(type) || kernels::row_bytes(type, cols) <= 0) {
        r.note = std::string("no quantized kernels for ") + type_name(type);
        return r;
    }
    if ((mode == KernelTuningMode::Auto || mode == KernelTuningMode::Cached) && !cache_path.empty()) {
        try {
            if (read_cached(cache_path, r)) {
                r.source = "cached";
                apply(r.tuning);
                return r;
            }
        } catch (const std::exception& e) {
            logger("kernels")->warn("kernel tuning cache {} is unreadable ({}); measuring again", cache_path, e.what());
        }
    }
    if (mode == KernelTuningMode::Cached) {
        r.note = "not measured on this machine yet";
        return r;
    }
    measure(r);
    r.source = "measured";
    apply(r.tuning);
    if (!cache_path.empty()) {
        try {
            write_cached(cache_path, r);
        } catch (const std::exception& e) {
            logger("kernels")->warn("could not save the kernel tuning to {}: {}", cache_path, e.what());
        }
    }
    return r;
}

kernels::WeightType bulk_weight_type(const model::Model& m) {
    const auto& layers = m.weights().layers;
    const auto moe = std::find_if(layers.begin(), layers.end(), [](const model::LayerWeights& L) { return L.ffn == model::FfnKind::Moe; });
    return moe != layers.end() ? moe->expert(0).gate.type : layers.empty() ? kernels::WeightType::F32 : layers[0].wq.type;
}

uint64_t kernel_tuning_stream_bytes() { return kStreamBytes; }

int64_t tuning_cols(const model::Model& m) { return m.config().n_embd > 1024 ? 4096 : 1024; }

std::string default_kernel_tuning_cache() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/strata/kernel-tuning.json";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/strata/kernel-tuning.json";
    return {};
}

}  // namespace strata::core
