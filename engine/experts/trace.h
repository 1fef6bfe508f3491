// Routing traces: what the router chose, per token and MoE layer, and what the
// cross-layer lookahead predicted one layer earlier, recorded from a Context
// and replayed by the simulator (simulator.h) without the model.
//
// File format (little-endian, version 1):
//
//   header
//     char[8]  magic "STRTRACE"
//     u32      version (1)
//     u32      header_bytes: bytes of the header fields that follow (lets later
//              versions append fields; a reader skips what it does not know)
//     u32      n_layer, n_expert, n_used, n_moe
//     u64      expert_bytes   one expert (gate + up + down) of one layer, mean
//     u64      shared_bytes   weight bytes a token reads besides routed experts
//     u32      name_len, then name_len bytes of model name (UTF-8)
//     u32[n_moe]  the MoE layers, strictly increasing, < n_layer
//   records, each one tag byte then its fields:
//     'Q'  sequence begin:  u32 sequence        (Context cleared; positions restart)
//     'P'  step begin:      u32 step, u32 n_tokens   (one Context::decode call;
//                                                     n_tokens 1 = a decode step)
//     'T'  token id:        u32 pos, i32 token  (optional, before its routing)
//     'R'  routing:         u32 layer, u32 pos, i32[n_used] experts (best first),
//                           f32[n_used] combine weights
//     'L'  lookahead:       u32 layer, u32 pos, f32[n_expert] predicted router
//                           probabilities for MoE layer `layer`, computed one
//                           layer earlier (model/device_forward.h LookaheadEvent)
//     'E'  end:             u64 routing records, u64 lookahead records
//   nothing may follow 'E'.
//
// A token is (sequence, pos); each token must have exactly one 'R' per MoE
// layer, and at most one 'L' per MoE layer. The reader checks all of this and
// every id and number, and throws strata::Error naming the file, the byte
// offset and what is wrong.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "runner/context.h"

namespace strata::model {
class Model;
}

namespace strata::experts {

struct TraceHeader {
    std::string model_name;
    int64_t n_layer = 0;
    int64_t n_expert = 0;
    int64_t n_used = 0;
    uint64_t expert_bytes = 0;
    uint64_t shared_bytes = 0;
    std::vector<int64_t> moe_layers;

    int64_t n_moe() const { return static_cast<int64_t>(moe_layers.size()); }
    // Index of `layer` in moe_layers, -1 when it is not a MoE layer.
    int64_t moe_index(int64_t layer) const;
    // Empty when consistent, else what is wrong.
    std::string validate() const;
    // The header for a loaded MoE model (throws strata::Error for a dense one).
    static TraceHeader for_model(const model::Model& m);
};

struct TraceToken {
    int64_t sequence = 0;
    int64_t step = 0;
    int64_t pos = 0;
    int32_t token = -1;   // vocabulary id, -1 when not recorded
    bool decode = false;  // its step ran one token (what decode routing looks like)
};

// A trace in memory, tokens in replay order (sequence, then position).
struct Trace {
    TraceHeader header;
    std::vector<TraceToken> tokens;
    std::vector<int32_t> experts;        // [token][moe][n_used]
    std::vector<float> weights;          // [token][moe][n_used]
    std::vector<uint8_t> has_lookahead;  // [token][moe]
    std::vector<float> lookahead;        // [token][moe][n_expert]; empty when none was recorded

    int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
    int64_t n_sequences() const;
    int64_t n_decode_tokens() const;
    std::span<const int32_t> experts_of(int64_t token, int64_t moe) const {
        return {experts.data() + (token * header.n_moe() + moe) * header.n_used, static_cast<size_t>(header.n_used)};
    }
    std::span<const float> weights_of(int64_t token, int64_t moe) const {
        return {weights.data() + (token * header.n_moe() + moe) * header.n_used, static_cast<size_t>(header.n_used)};
    }
    // Predicted probabilities for this token's MoE layer, nullptr when none.
    const float* lookahead_of(int64_t token, int64_t moe) const {
        if (lookahead.empty() || !has_lookahead[static_cast<size_t>(token * header.n_moe() + moe)]) return nullptr;
        return lookahead.data() + (token * header.n_moe() + moe) * header.n_expert;
    }
    // MoE layers (indices into moe_layers) with a lookahead for every token.
    int64_t n_moe_with_lookahead() const;
    // Uses per (layer, expert), key = layer * n_expert + expert (calibration for pinning).
    std::vector<int64_t> expert_counts() const;
};

// Streams a trace to a file as a Context runs. Attach it (or feed it events),
// call begin_sequence() when the Context is cleared and begin_step() before
// each Context::decode, then finish(). A trace without finish() has no end
// record and is rejected as truncated.
class TraceWriter {
public:
    TraceWriter(const std::string& path, const TraceHeader& header);  // throws strata::Error
    ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    // Sets the context's routing and lookahead observers to this writer.
    void attach(model::Context& ctx);
    // The step record and token ids are written with the step's first routing
    // or lookahead record, so a begin_sequence() that comes after
    // begin_step() (the engine notices a restarted sequence only at its first
    // event) still lands before the step it starts.
    void begin_sequence();
    void begin_step(int64_t n_tokens);
    // Optional: the token ids at positions first_pos, first_pos + 1, ... (of
    // the step begun or about to begin).
    void tokens(int64_t first_pos, std::span<const int32_t> ids);
    void on_route(const model::RoutingEvent& e);
    void on_lookahead(const model::LookaheadEvent& e);
    // Writes the end record and closes; throws strata::Error when any write failed.
    void finish();

    int64_t routes() const { return routes_; }
    int64_t lookaheads() const { return lookaheads_; }
    uint64_t bytes() const { return bytes_; }

private:
    void put(const void* p, size_t n);
    void put_u32(uint32_t v);
    void put_u64(uint64_t v);
    void put_f32(float v);
    void write_step_record();  // the pending step's record, if one is pending
    void flush_step();   // writes the pending step record and token ids
    void ensure_step();  // before a routing or lookahead record
    std::string path_;
    TraceHeader header_;
    FILE* f_ = nullptr;
    bool failed_ = false;
    int64_t sequence_ = -1, step_ = -1;
    int64_t pending_step_ = -1;  // n_tokens of a step begun but not written yet
    std::vector<std::pair<int64_t, int32_t>> pending_tokens_;  // (pos, id)
    int64_t routes_ = 0, lookaheads_ = 0;
    uint64_t bytes_ = 0;
};

// Reads and validates a trace file (throws strata::Error).
Trace read_trace(const std::string& path);
// The same from bytes in memory; `name` is used in messages.
Trace parse_trace(std::span<const uint8_t> bytes, const std::string& name);
// Writes an in-memory trace (tests, tools): sequences and steps as recorded.
void write_trace(const Trace& trace, const std::string& path);
// True when the file starts with the trace magic.
bool is_trace_file(const std::string& path);

}  // namespace strata::experts
