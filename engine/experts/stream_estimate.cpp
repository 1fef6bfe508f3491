#include "experts/stream_estimate.h"
#include "model/plan_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "experts/slow_tier.h"
#include "memory/ledger.h"
#include "plan/plan.h"
#include "model/model.h"

namespace strata::experts {

namespace {

using clock_type = std::chrono::steady_clock;

struct FileKey {
    std::string path;
    int64_t size = 0, mtime_ns = 0;
    bool operator<(const FileKey& o) const {
        return std::tie(path, size, mtime_ns) < std::tie(o.path, o.size, o.mtime_ns);
    }
};

std::mutex g_mu;
std::map<FileKey, ReadRate> g_rates;

std::string gbs(double bps) {
    char b[32];
    std::snprintf(b, sizeof b, bps >= 10e9 ? "%.0f" : "%.1f", bps / 1e9);
    return b;
}

std::string gb(double bytes) {
    char b[32];
    if (bytes >= 1e9) std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
    else std::snprintf(b, sizeof b, "%.0f MB", bytes / 1e6);
    return b;
}

std::string tok_s(double v) {
    char b[32];
    std::snprintf(b, sizeof b, v >= 10 ? "%.0f" : v >= 1 ? "%.1f" : "%.2f", v);
    return b;
}

}  // namespace

ReadRate measure_expert_read_rate(const model::Model& m, double max_seconds, uint64_t max_bytes) {
    const std::string& path = m.file().path();
    FileKey key{path};
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        key.size = static_cast<int64_t>(st.st_size);
        key.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    }
    {
        std::lock_guard<std::mutex> lock(g_mu);
        if (auto it = g_rates.find(key); it != g_rates.end()) {
            ReadRate r = it->second;
            r.cached = true;
            return r;
        }
    }

    // Every routed expert's three windows, as the expert store reads them.
    struct Expert {
        ByteWindow win[3];
        int n = 0;
        uint64_t bytes = 0;
    };
    std::vector<Expert> all;
    uint64_t largest = 0;
    for (const model::LayerWeights& L : m.weights().layers) {
        if (L.ffn != model::FfnKind::Moe) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            const model::FfnMatrices x = L.expert(e);
            Expert ex;
            for (const model::Matrix* mat : {&x.gate, &x.up, &x.down}) {
                if (!*mat) continue;
                ex.win[ex.n] = make_window(mat->file_offset, mat->slab_bytes() * static_cast<uint64_t>(mat->slabs), 4096);
                ex.bytes += ex.win[ex.n].window_bytes;
                ++ex.n;
            }
            largest = std::max(largest, ex.win[0].window_bytes + ex.win[1].window_bytes + ex.win[2].window_bytes);
            all.push_back(ex);
        }
    }
    ReadRate r;
    if (all.empty() || largest == 0) return r;

    FileSlowTier file(path, /*direct_io=*/true);
    r.direct = file.direct();
    std::unique_ptr<uint8_t, decltype(&std::free)> buf(
        static_cast<uint8_t*>(std::aligned_alloc(4096, (largest + 4095) / 4096 * 4096)), &std::free);
    if (!buf) throw Error(path + ": no memory for a " + memory::format_bytes(largest) + " read buffer to measure the disk");
    // Random experts, as cache misses are: a fixed order, so two runs read alike.
    std::mt19937_64 rng(0x5eed);
    std::shuffle(all.begin(), all.end(), rng);

    // Batches of about 1/8 of the budget (at least one expert each): the
    // slowest and the fastest give the range.
    const uint64_t batch_bytes = std::max<uint64_t>(max_bytes / 8, 1);
    const auto t0 = clock_type::now();
    double total_s = 0;
    uint64_t total = 0;
    size_t next = 0;
    while (next < all.size()) {
        const auto b0 = clock_type::now();
        uint64_t got = 0;
        while (next < all.size() && got < batch_bytes) {
            const Expert& ex = all[next++];
            uint64_t at = 0;
            for (int k = 0; k < ex.n; ++k) {
                file.read(ex.win[k], buf.get());  // each window to the buffer's start: the rate, not the bytes, matters
                at += ex.win[k].window_bytes;
            }
            got += at;
        }
        const double s = std::chrono::duration<double>(clock_type::now() - b0).count();
        total += got;
        total_s += s;
        // A batch too small to time (a tiny model) still counts in the mean.
        if (s > 1e-4 && got >= batch_bytes / 2) {
            const double bps = static_cast<double>(got) / s;
            r.low_bps = r.low_bps > 0 ? std::min(r.low_bps, bps) : bps;
            r.high_bps = std::max(r.high_bps, bps);
        }
        if (total >= max_bytes || std::chrono::duration<double>(clock_type::now() - t0).count() >= max_seconds) break;
    }
    r.bytes = total;
    r.mean_bps = total_s > 0 ? static_cast<double>(total) / total_s : 0;
    if (r.low_bps == 0) r.low_bps = r.high_bps = r.mean_bps;
    logger("experts")->info("{}: expert reads at {}-{} GB/s ({} in {:.2f} s, {})", path, gbs(r.low_bps), gbs(r.high_bps),
                            memory::format_bytes(total), total_s, r.direct ? "O_DIRECT" : "buffered");
    std::lock_guard<std::mutex> lock(g_mu);
    g_rates[key] = r;
    return r;
}

StreamEstimate estimate_stream(const memory::Plan& p, const model::Model& m, const ReadRate& rate) {
    StreamEstimate e;
    e.rate = rate;
    if (p.experts_total <= 0 || p.expert_slots >= p.experts_total) return e;
    e.streams = true;
    double per_token = 0;
    const int64_t used = std::max<int64_t>(m.config().n_expert_used, 1);
    for (const model::LayerWeights& L : m.weights().layers) {
        if (L.ffn != model::FfnKind::Moe || L.n_experts() == 0) continue;
        double layer = 0;
        for (int64_t x = 0; x < L.n_experts(); ++x) layer += static_cast<double>(model::expert_slot_bytes(L.expert(x)));
        per_token += layer / static_cast<double>(L.n_experts()) * static_cast<double>(std::min(used, L.n_experts()));
    }
    e.expert_bytes_per_token = per_token;
    e.miss_share = std::clamp(1.0 - p.cache_fraction, 0.0, 1.0);
    e.disk_bytes_per_token = per_token * e.miss_share;
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%", e.miss_share * 100.0);
    const std::string basis = gb(e.disk_bytes_per_token) + " of experts per token from disk (the " + pct +
                              " of each token's " + gb(per_token) +
                              " of experts without a slot: the hit rate taken as the cache's share of experts, "
                              "which skewed routing beats)";
    if (rate.mean_bps <= 0 || e.disk_bytes_per_token <= 0) {
        e.text = "Experts stream from disk: " + basis + "; the disk's read rate is unknown";
        return e;
    }
    e.low_tok_s = rate.low_bps / e.disk_bytes_per_token;
    e.high_tok_s = rate.high_bps / e.disk_bytes_per_token;
    const bool one = e.high_tok_s < e.low_tok_s * 1.15;
    const std::string speed = one ? tok_s((e.low_tok_s + e.high_tok_s) / 2) : tok_s(e.low_tok_s) + "–" + tok_s(e.high_tok_s);
    const std::string at = one ? gbs(rate.mean_bps) : gbs(rate.low_bps) + "–" + gbs(rate.high_bps);
    e.text = "Expected speed where experts stream from disk: ≈ " + speed + " tok/s at most: " + basis + " at " + at +
             " GB/s, the rate measured reading this file's experts" + (rate.direct ? "" : " (buffered: no O_DIRECT here)") +
             "; compute comes on top";
    return e;
}

}  // namespace strata::experts
