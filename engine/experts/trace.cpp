#include "experts/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <unordered_map>

#include "common/error.h"
#include "model/model.h"

namespace strata::experts {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kVersion = 1;
// Sanity bounds: far above any real model, low enough that a corrupt header
// cannot make the reader allocate absurd amounts.
constexpr int64_t kMaxLayers = 1 << 16;
constexpr int64_t kMaxExperts = 1 << 16;
constexpr uint32_t kMaxName = 1 << 16;

}  // namespace

int64_t TraceHeader::moe_index(int64_t layer) const {
    auto it = std::lower_bound(moe_layers.begin(), moe_layers.end(), layer);
    return it != moe_layers.end() && *it == layer ? it - moe_layers.begin() : -1;
}

std::string TraceHeader::validate() const {
    if (n_layer <= 0 || n_layer > kMaxLayers) return "layer count " + std::to_string(n_layer) + " is out of range";
    if (n_expert <= 0 || n_expert > kMaxExperts) return "expert count " + std::to_string(n_expert) + " is out of range";
    if (n_used <= 0 || n_used > n_expert)
        return "experts per token " + std::to_string(n_used) + " is out of range (1.." + std::to_string(n_expert) + ")";
    if (moe_layers.empty()) return "no MoE layer";
    if (n_moe() > n_layer) return "more MoE layers than layers";
    for (size_t i = 0; i < moe_layers.size(); ++i) {
        if (moe_layers[i] < 0 || moe_layers[i] >= n_layer)
            return "MoE layer " + std::to_string(moe_layers[i]) + " is out of range (0.." + std::to_string(n_layer - 1) + ")";
        if (i > 0 && moe_layers[i] <= moe_layers[i - 1]) return "MoE layers are not strictly increasing";
    }
    if (model_name.size() > kMaxName) return "model name too long";
    return {};
}

TraceHeader TraceHeader::for_model(const model::Model& m) {
    const model::ModelConfig& c = m.config();
    if (c.n_expert == 0) throw Error("not a mixture-of-experts model (no expert_count): nothing to trace");
    TraceHeader h;
    h.model_name = c.name.empty() ? c.arch_name : c.name;
    h.n_layer = c.n_layer;
    h.n_expert = c.n_expert;
    h.n_used = c.n_expert_used;
    for (const model::LayerWeights& L : m.weights().layers)
        if (L.ffn == model::FfnKind::Moe) h.moe_layers.push_back(L.index);
    const model::Model::Sizes s = m.sizes();
    h.expert_bytes = s.bytes_per_expert;
    // bytes_active counts n_used experts per MoE layer; the rest is shared.
    const uint64_t routed = static_cast<uint64_t>(h.n_moe() * h.n_used) * s.bytes_per_expert;
    h.shared_bytes = s.bytes_active > routed ? s.bytes_active - routed : 0;
    if (const std::string err = h.validate(); !err.empty()) throw Error("cannot trace this model: " + err);
    return h;
}

int64_t Trace::n_sequences() const {
    int64_t n = 0, last = -1;
    for (const TraceToken& t : tokens)
        if (t.sequence != last) {
            ++n;
            last = t.sequence;
        }
    return n;
}

int64_t Trace::n_decode_tokens() const {
    return std::count_if(tokens.begin(), tokens.end(), [](const TraceToken& t) { return t.decode; });
}

int64_t Trace::n_moe_with_lookahead() const {
    if (lookahead.empty() || tokens.empty()) return 0;
    int64_t n = 0;
    for (int64_t m = 0; m < header.n_moe(); ++m) {
        bool all = true;
        for (int64_t t = 0; t < n_tokens() && all; ++t) all = has_lookahead[static_cast<size_t>(t * header.n_moe() + m)];
        n += all;
    }
    return n;
}

std::vector<int64_t> Trace::expert_counts() const {
    std::vector<int64_t> counts(static_cast<size_t>(header.n_layer * header.n_expert), 0);
    for (int64_t t = 0; t < n_tokens(); ++t)
        for (int64_t m = 0; m < header.n_moe(); ++m)
            for (int32_t e : experts_of(t, m)) ++counts[static_cast<size_t>(header.moe_layers[m] * header.n_expert + e)];
    return counts;
}

// ---------------------------------------------------------------- writer

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header) : path_(path), header_(header) {
    if (const std::string err = header_.validate(); !err.empty()) throw Error(path + ": invalid trace header: " + err);
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw Error(path + ": cannot create the trace file");
    put(kMagic, sizeof kMagic);
    put_u32(kVersion);
    const uint32_t header_bytes = static_cast<uint32_t>(4 * 4 + 8 * 2 + 4 + header_.model_name.size() + 4 * header_.moe_layers.size());
    put_u32(header_bytes);
    put_u32(static_cast<uint32_t>(header_.n_layer));
    put_u32(static_cast<uint32_t>(header_.n_expert));
    put_u32(static_cast<uint32_t>(header_.n_used));
    put_u32(static_cast<uint32_t>(header_.n_moe()));
    put_u64(header_.expert_bytes);
    put_u64(header_.shared_bytes);
    put_u32(static_cast<uint32_t>(header_.model_name.size()));
    put(header_.model_name.data(), header_.model_name.size());
    for (int64_t l : header_.moe_layers) put_u32(static_cast<uint32_t>(l));
}

TraceWriter::~TraceWriter() {
    if (f_) std::fclose(f_);
}

void TraceWriter::put(const void* p, size_t n) {
    if (!f_ || n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) failed_ = true;
    bytes_ += n;
}

void TraceWriter::put_u32(uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    put(b, 4);
}

void TraceWriter::put_u64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    put(b, 8);
}

void TraceWriter::put_f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    put_u32(u);
}

void TraceWriter::attach(model::Context& ctx) {
    ctx.set_routing_observer([this](const model::RoutingEvent& e) { on_route(e); });
    ctx.set_lookahead_observer([this](const model::LookaheadEvent& e) { on_lookahead(e); });
}

void TraceWriter::begin_sequence() {
    ++sequence_;
    const uint8_t tag = 'Q';
    put(&tag, 1);
    put_u32(static_cast<uint32_t>(sequence_));
}

void TraceWriter::begin_step(int64_t n_tokens) {
    // A step without events still gets its record; token ids given since
    // belong to the new step.
    write_step_record();
    pending_step_ = std::max<int64_t>(0, n_tokens);
}

void TraceWriter::tokens(int64_t first_pos, std::span<const int32_t> ids) {
    for (size_t i = 0; i < ids.size(); ++i) pending_tokens_.emplace_back(first_pos + static_cast<int64_t>(i), ids[i]);
}

void TraceWriter::write_step_record() {
    if (pending_step_ < 0) return;
    if (sequence_ < 0) begin_sequence();
    ++step_;
    const uint8_t tag = 'P';
    put(&tag, 1);
    put_u32(static_cast<uint32_t>(step_));
    put_u32(static_cast<uint32_t>(pending_step_));
    pending_step_ = -1;
}

void TraceWriter::ensure_step() {
    if (step_ < 0 && pending_step_ < 0 && pending_tokens_.empty()) pending_step_ = 0;  // events before any step
    flush_step();
}

void TraceWriter::flush_step() {
    // Token ids before any step begin one of their count; later ones belong
    // to the step under way.
    if (pending_step_ < 0 && step_ < 0 && !pending_tokens_.empty()) pending_step_ = static_cast<int64_t>(pending_tokens_.size());
    write_step_record();
    for (const auto& [pos, id] : pending_tokens_) {
        const uint8_t t = 'T';
        put(&t, 1);
        put_u32(static_cast<uint32_t>(pos));
        put_u32(static_cast<uint32_t>(id));
    }
    pending_tokens_.clear();
}

void TraceWriter::on_route(const model::RoutingEvent& e) {
    if (header_.moe_index(e.layer) < 0) throw Error("trace: routing event for layer " + std::to_string(e.layer) + ", not a MoE layer");
    if (e.n_used != header_.n_used)
        throw Error("trace: routing event with " + std::to_string(e.n_used) + " experts, the header says " +
                    std::to_string(header_.n_used));
    ensure_step();
    const uint8_t tag = 'R';
    put(&tag, 1);
    put_u32(static_cast<uint32_t>(e.layer));
    put_u32(static_cast<uint32_t>(e.pos));
    for (int64_t k = 0; k < e.n_used; ++k) put_u32(static_cast<uint32_t>(e.experts[k]));
    for (int64_t k = 0; k < e.n_used; ++k) put_f32(e.weights ? e.weights[k] : 0.0f);
    ++routes_;
}

void TraceWriter::on_lookahead(const model::LookaheadEvent& e) {
    if (header_.moe_index(e.layer) < 0) throw Error("trace: lookahead event for layer " + std::to_string(e.layer) + ", not a MoE layer");
    if (e.n_expert != header_.n_expert)
        throw Error("trace: lookahead event over " + std::to_string(e.n_expert) + " experts, the header says " +
                    std::to_string(header_.n_expert));
    ensure_step();
    const uint8_t tag = 'L';
    put(&tag, 1);
    put_u32(static_cast<uint32_t>(e.layer));
    put_u32(static_cast<uint32_t>(e.pos));
    for (int64_t k = 0; k < e.n_expert; ++k) put_f32(e.probs[k]);
    ++lookaheads_;
}

void TraceWriter::finish() {
    if (!f_) return;
    flush_step();
    const uint8_t tag = 'E';
    put(&tag, 1);
    put_u64(static_cast<uint64_t>(routes_));
    put_u64(static_cast<uint64_t>(lookaheads_));
    const bool close_failed = std::fclose(f_) != 0;
    f_ = nullptr;
    if (failed_ || close_failed) throw Error(path_ + ": write failed (disk full?)");
}

// ---------------------------------------------------------------- reader

namespace {

class Cursor {
public:
    Cursor(std::span<const uint8_t> b, const std::string& name) : b_(b), name_(name) {}
    size_t offset() const { return off_; }
    bool at_end() const { return off_ == b_.size(); }
    [[noreturn]] void fail(const std::string& what, size_t at) const {
        throw Error(name_ + ": bad trace at byte " + std::to_string(at) + ": " + what);
    }
    [[noreturn]] void fail(const std::string& what) const { fail(what, off_); }
    void need(size_t n, const char* what) const {
        if (b_.size() - off_ < n) fail(std::string("truncated in ") + what + " (the file ends early)");
    }
    uint8_t u8(const char* what) {
        need(1, what);
        return b_[off_++];
    }
    uint32_t u32(const char* what) {
        need(4, what);
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b_[off_ + i]) << (8 * i);
        off_ += 4;
        return v;
    }
    uint64_t u64(const char* what) {
        need(8, what);
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b_[off_ + i]) << (8 * i);
        off_ += 8;
        return v;
    }
    float f32(const char* what) {
        const uint32_t u = u32(what);
        float v;
        std::memcpy(&v, &u, 4);
        return v;
    }
    std::string bytes(size_t n, const char* what) {
        need(n, what);
        std::string s(reinterpret_cast<const char*>(b_.data() + off_), n);
        off_ += n;
        return s;
    }
    void skip(size_t n, const char* what) {
        need(n, what);
        off_ += n;
    }

private:
    std::span<const uint8_t> b_;
    const std::string& name_;
    size_t off_ = 0;
};

}  // namespace

Trace parse_trace(std::span<const uint8_t> bytes, const std::string& name) {
    Cursor c(bytes, name);
    if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        throw Error(name + ": not a routing trace (no STRTRACE magic; record one with 'strata-cli trace')");
    c.skip(sizeof kMagic, "magic");
    const uint32_t version = c.u32("version");
    if (version != kVersion)
        throw Error(name + ": trace version " + std::to_string(version) + " is not supported (this build reads version " +
                    std::to_string(kVersion) + ")");
    const uint32_t header_bytes = c.u32("header size");
    const size_t header_start = c.offset();
    Trace t;
    TraceHeader& h = t.header;
    h.n_layer = c.u32("header");
    h.n_expert = c.u32("header");
    h.n_used = c.u32("header");
    const uint32_t n_moe = c.u32("header");
    h.expert_bytes = c.u64("header");
    h.shared_bytes = c.u64("header");
    const uint32_t name_len = c.u32("header");
    if (name_len > kMaxName) c.fail("model name length " + std::to_string(name_len) + " is implausible", c.offset() - 4);
    h.model_name = c.bytes(name_len, "model name");
    if (n_moe > kMaxLayers) c.fail("MoE layer count " + std::to_string(n_moe) + " is implausible");
    for (uint32_t i = 0; i < n_moe; ++i) h.moe_layers.push_back(c.u32("MoE layer list"));
    if (c.offset() - header_start > header_bytes) c.fail("header is longer than its declared " + std::to_string(header_bytes) + " bytes");
    c.skip(header_bytes - (c.offset() - header_start), "header");
    if (const std::string err = h.validate(); !err.empty()) c.fail("invalid header: " + err, header_start);

    const int64_t M = h.n_moe(), U = h.n_used, E = h.n_expert;
    std::unordered_map<uint64_t, int64_t> token_of;  // (sequence << 32 | pos) -> token index
    std::vector<uint8_t> routed;                     // [token][moe]
    int64_t sequence = -1, step = -1, step_tokens = 0;
    uint64_t n_routes = 0, n_looks = 0;
    bool ended = false;
    std::vector<int32_t> ids(static_cast<size_t>(U));

    auto token_index = [&](uint32_t pos, size_t at) -> int64_t {
        if (sequence < 0) c.fail("record before the first sequence record", at);
        const uint64_t key = (static_cast<uint64_t>(sequence) << 32) | pos;
        auto [it, fresh] = token_of.try_emplace(key, t.n_tokens());
        if (fresh) {
            t.tokens.push_back({sequence, step, pos, -1, step_tokens == 1});
            routed.resize(routed.size() + static_cast<size_t>(M), 0);
            t.has_lookahead.resize(t.has_lookahead.size() + static_cast<size_t>(M), 0);
            t.experts.resize(t.experts.size() + static_cast<size_t>(M * U), 0);
            t.weights.resize(t.weights.size() + static_cast<size_t>(M * U), 0.0f);
            if (!t.lookahead.empty()) t.lookahead.resize(t.lookahead.size() + static_cast<size_t>(M * E), 0.0f);
        }
        return it->second;
    };
    auto moe_of = [&](uint32_t layer, size_t at) -> int64_t {
        const int64_t m = h.moe_index(layer);
        if (m < 0) c.fail("layer " + std::to_string(layer) + " is not a MoE layer of this trace", at);
        return m;
    };

    while (!c.at_end()) {
        const size_t at = c.offset();
        if (ended) c.fail("data after the end record");
        const uint8_t tag = c.u8("record tag");
        switch (tag) {
            case 'Q': {
                const uint32_t s = c.u32("sequence record");
                if (static_cast<int64_t>(s) <= sequence) c.fail("sequence numbers do not increase", at);
                sequence = s;
                step_tokens = 0;
                break;
            }
            case 'P': {
                const uint32_t s = c.u32("step record");
                step_tokens = c.u32("step record");
                if (static_cast<int64_t>(s) <= step) c.fail("step numbers do not increase", at);
                step = s;
                break;
            }
            case 'T': {
                const uint32_t pos = c.u32("token record");
                const uint32_t id = c.u32("token record");
                if (id > 0x7fffffffu) c.fail("token id " + std::to_string(id) + " is out of range", at);
                const int64_t tok = token_index(pos, at);
                if (t.tokens[tok].token >= 0) c.fail("second token record for position " + std::to_string(pos), at);
                t.tokens[tok].token = static_cast<int32_t>(id);
                break;
            }
            case 'R': {
                const uint32_t layer = c.u32("routing record");
                const uint32_t pos = c.u32("routing record");
                const int64_t m = moe_of(layer, at);
                for (int64_t k = 0; k < U; ++k) {
                    const uint32_t e = c.u32("routing record");
                    if (e >= static_cast<uint32_t>(E))
                        c.fail("expert " + std::to_string(e) + " is out of range (" + std::to_string(E) + " experts)", at);
                    ids[k] = static_cast<int32_t>(e);
                    for (int64_t j = 0; j < k; ++j)
                        if (ids[j] == ids[k]) c.fail("expert " + std::to_string(e) + " routed twice for one token", at);
                }
                float w[256];
                std::vector<float> wv;
                float* wp = U <= 256 ? w : (wv.resize(static_cast<size_t>(U)), wv.data());
                for (int64_t k = 0; k < U; ++k) {
                    wp[k] = c.f32("routing record");
                    if (!std::isfinite(wp[k])) c.fail("a combine weight is not finite", at);
                }
                const int64_t tok = token_index(pos, at);
                uint8_t& done = routed[static_cast<size_t>(tok * M + m)];
                if (done)
                    c.fail("second routing record for layer " + std::to_string(layer) + " of sequence " +
                               std::to_string(sequence) + " position " + std::to_string(pos),
                           at);
                done = 1;
                std::copy(ids.begin(), ids.end(), t.experts.begin() + (tok * M + m) * U);
                std::copy(wp, wp + U, t.weights.begin() + (tok * M + m) * U);
                ++n_routes;
                break;
            }
            case 'L': {
                const uint32_t layer = c.u32("lookahead record");
                const uint32_t pos = c.u32("lookahead record");
                const int64_t m = moe_of(layer, at);
                c.need(static_cast<size_t>(4 * E), "lookahead record");
                const int64_t tok = token_index(pos, at);
                if (t.lookahead.size() < t.tokens.size() * static_cast<size_t>(M * E))
                    t.lookahead.resize(t.tokens.size() * static_cast<size_t>(M * E), 0.0f);
                uint8_t& has = t.has_lookahead[static_cast<size_t>(tok * M + m)];
                if (has)
                    c.fail("second lookahead record for layer " + std::to_string(layer) + " of sequence " +
                               std::to_string(sequence) + " position " + std::to_string(pos),
                           at);
                has = 1;
                float* p = t.lookahead.data() + (tok * M + m) * E;
                for (int64_t e = 0; e < E; ++e) {
                    p[e] = c.f32("lookahead record");
                    if (!std::isfinite(p[e]) || p[e] < 0.0f) c.fail("a lookahead probability is negative or not finite", at);
                }
                ++n_looks;
                break;
            }
            case 'E': {
                const uint64_t r = c.u64("end record");
                const uint64_t l = c.u64("end record");
                if (r != n_routes || l != n_looks)
                    c.fail("the end record counts " + std::to_string(r) + " routing and " + std::to_string(l) +
                               " lookahead records, the file has " + std::to_string(n_routes) + " and " +
                               std::to_string(n_looks),
                           at);
                ended = true;
                break;
            }
            default: {
                char buf[8];
                std::snprintf(buf, sizeof buf, "0x%02x", tag);
                c.fail(std::string("unknown record tag ") + buf, at);
            }
        }
    }
    if (!ended) throw Error(name + ": truncated trace (no end record; was the recording interrupted?)");
    if (t.tokens.empty()) throw Error(name + ": the trace has no tokens");
    for (int64_t tok = 0; tok < t.n_tokens(); ++tok)
        for (int64_t m = 0; m < M; ++m)
            if (!routed[static_cast<size_t>(tok * M + m)])
                throw Error(name + ": incomplete trace: sequence " + std::to_string(t.tokens[tok].sequence) + " position " +
                            std::to_string(t.tokens[tok].pos) + " has no routing for layer " +
                            std::to_string(h.moe_layers[m]));

    // Replay order: by sequence, then position.
    std::vector<int64_t> order(t.tokens.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const TraceToken &x = t.tokens[a], &y = t.tokens[b];
        return x.sequence != y.sequence ? x.sequence < y.sequence : x.pos < y.pos;
    });
    if (!std::is_sorted(order.begin(), order.end())) {
        Trace s;
        s.header = t.header;
        const bool look = !t.lookahead.empty();
        for (int64_t i : order) {
            s.tokens.push_back(t.tokens[i]);
            s.experts.insert(s.experts.end(), t.experts.begin() + i * M * U, t.experts.begin() + (i + 1) * M * U);
            s.weights.insert(s.weights.end(), t.weights.begin() + i * M * U, t.weights.begin() + (i + 1) * M * U);
            s.has_lookahead.insert(s.has_lookahead.end(), t.has_lookahead.begin() + i * M, t.has_lookahead.begin() + (i + 1) * M);
            if (look) s.lookahead.insert(s.lookahead.end(), t.lookahead.begin() + i * M * E, t.lookahead.begin() + (i + 1) * M * E);
        }
        return s;
    }
    return t;
}

Trace read_trace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the trace file");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(path + ": read failed");
    return parse_trace(bytes, path);
}

bool is_trace_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char m[sizeof kMagic];
    return in && in.read(m, sizeof m) && std::memcmp(m, kMagic, sizeof m) == 0;
}

void write_trace(const Trace& t, const std::string& path) {
    TraceWriter w(path, t.header);
    const int64_t M = t.header.n_moe();
    int64_t seq = -1, step = -1;
    for (int64_t i = 0; i < t.n_tokens(); ++i) {
        const TraceToken& tok = t.tokens[i];
        if (tok.sequence != seq) {
            w.begin_sequence();
            seq = tok.sequence;
            step = -1;
        }
        if (tok.step != step) {
            int64_t n = 0;
            for (int64_t j = i; j < t.n_tokens() && t.tokens[j].step == tok.step && t.tokens[j].sequence == seq; ++j) ++n;
            w.begin_step(n);
            step = tok.step;
        }
        if (tok.token >= 0) w.tokens(tok.pos, {&tok.token, 1});
        for (int64_t m = 0; m < M; ++m) {
            const int64_t layer = t.header.moe_layers[m];
            if (const float* p = t.lookahead_of(i, m)) w.on_lookahead({layer, tok.pos, p, t.header.n_expert});
            const auto ids = t.experts_of(i, m);
            const auto wts = t.weights_of(i, m);
            w.on_route({layer, tok.pos, ids.data(), wts.data(), t.header.n_used, nullptr, t.header.n_expert});
        }
    }
    w.finish();
}

}  // namespace strata::experts
