// The paged KV cache: keys and values of many sequences packed into one
// fixed pool of blocks (vLLM's PagedAttention layout, as plain data).
//
// - A block holds `block_tokens` consecutive positions of one sequence for
//   every layer, as pieces [token][head_dim] per (layer, K|V, kv head). The
//   pool groups blocks in runs of 16 and stores a run part by part, so one
//   head's pieces of consecutive blocks are adjacent: attention over a head
//   reads long contiguous stretches (kv_cache.cpp, KvCache::part_offset).
// - Each sequence has a block table (its blocks in position order) and a
//   length. Blocks come from a free list; the pool is one allocation made up
//   front and reserved in the ledger (account kv.pages), so a KV cache can
//   never exceed its budget; `used` follows the blocks in use.
// - F32, or Q8: int8 with one scale per (block, layer, K|V, head). When a
//   token's values exceed the block's current scale, the block's earlier
//   entries for that head are requantized to the larger scale (error stays
//   within one int8 step of the block's absmax).
// - Prefix sharing: once a block is full (all layers written, see
//   seal_full_blocks), it is registered under the hash of every token up to
//   its end. A new sequence whose prompt starts with the same tokens attaches
//   those blocks by reference count instead of recomputing them (requests with
//   the same system prompt share it). Shared blocks are immutable; a sequence
//   truncated into a shared block gets a private copy first. Blocks whose last
//   sequence is gone stay cached (reusable by the next request with that
//   prefix) until the free list runs dry, then the least recently released is
//   recycled.
//
// Not thread-safe: the engine thread owns it. The forward pass reads it from
// its worker threads (read-only during attention).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/aligned_buffer.h"
#include "memory/ledger.h"

namespace strata::kv {

enum class KvType { F32, Q8 };
const char* kv_type_name(KvType t);                 // "f32" / "q8"
// "f32" / "q8" (also "int8"); throws strata::Error naming the value otherwise.
KvType parse_kv_type(const std::string& s);

// The largest head size a KV cache takes (attention turns int8 rows into
// floats in a buffer of this many floats on the stack).
constexpr int64_t kMaxHeadDim = 4096;

struct KvCacheParams {
    int64_t n_layer = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;
    int64_t block_tokens = 16;
    int64_t n_blocks = 0;
    KvType type = KvType::F32;
    // false: the cache keeps the block tables, sequences and prefix sharing
    // only, and a device holds the K/V data (the CUDA backend's VRAM pool,
    // indexed by the same block ids). No host pool is allocated or put in the
    // ledger, and the data calls (write, attend, read) must not be used.
    bool host_storage = true;
    // MLA (deepseek2): each entry is one latent row that serves as both key
    // and value (attention reads the values from the keys), so no V is stored.
    bool keys_only = false;
    // A recurrent model's state (its gated delta-net layers): floats
    // each sequence keeps beside its K/V, zero at its start (0: none). Such a
    // sequence shares no prefix (a block's K/V do not give the state after
    // it) and is rewound only to its start.
    int64_t state_floats = 0;
    // Sequences whose state is reserved in the ledger (account
    // recurrent.state) when the cache is made; more reserve theirs as they
    // start, where the budget has room (else create_sequence throws the
    // ledger's message).
    int64_t state_sequences = 2;
    int64_t kinds() const { return keys_only ? 1 : 2; }  // K (and V) parts per layer and head

    // Bytes of one piece: a block's positions of one layer's K or V for one KV head.
    uint64_t piece_bytes() const { return static_cast<uint64_t>(block_tokens * head_dim) * (type == KvType::Q8 ? 1 : 4); }
    // Bytes of one block (all layers, K and V (keys_only: K), scales included).
    uint64_t block_bytes() const;
    // Of those, the K/V elements (rounded up to 4): the scales follow them.
    uint64_t data_bytes() const;
    // Blocks needed to hold `tokens` positions of one sequence.
    int64_t blocks_for(int64_t tokens) const { return (tokens + block_tokens - 1) / block_tokens; }
    // Empty when valid, else the reason.
    std::string validate() const;
};

using SeqId = int32_t;

struct KvStats {
    int64_t n_blocks = 0;
    int64_t free_blocks = 0;       // on the free list
    int64_t cached_blocks = 0;     // unreferenced but holding a reusable prefix
    int64_t used_blocks = 0;       // referenced by at least one sequence
    int64_t shared_blocks = 0;     // referenced by more than one sequence
    int64_t sequences = 0;
    uint64_t prefix_tokens_reused = 0;  // tokens attached instead of computed, since creation
};

class KvCache {
public:
    // Reserves the whole pool in `ledger` (account kv.pages, tier `tier`); throws
    // strata::Error with the ledger's message if the budget does not hold it.
    // Without a ledger the cache keeps a private, unbudgeted one.
    KvCache(const KvCacheParams& params, memory::Ledger* ledger = nullptr,
            memory::Tier tier = memory::Tier::Fast);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    const KvCacheParams& params() const { return p_; }
    uint64_t pool_bytes() const { return pool_.size(); }
    KvStats stats() const;

    // --- sequences ----------------------------------------------------------
    // `expected_tokens`: room reserved for its bookkeeping up front (0: grows
    // as needed), so appending tokens does not allocate.
    SeqId create_sequence(int64_t expected_tokens = 0);
    void free_sequence(SeqId s);                   // its blocks go back (shared ones when the last user leaves)
    bool has_sequence(SeqId s) const;
    int64_t n_tokens(SeqId s) const;
    const std::vector<int32_t>& tokens(SeqId s) const;   // the ids at positions 0..n_tokens-1
    void truncate(SeqId s, int64_t n);             // keeps positions [0, n)

    // --- recurrent state ------------------------------------------------------
    // A sequence's state lives in slots of params().state_floats floats. By
    // default it has one, updated in place, so it can be rewound only to its
    // start. With set_state_rollback(s, r) it has r + 1, used in turn: the
    // token at position p reads slot (p mod r+1) and writes slot (p+1 mod
    // r+1), so the states after each of its last r tokens stay, and
    // truncate() may rewind it by up to r tokens (speculative decoding's
    // rejected drafts) at no cost but the memory.
    struct StateStep {
        int32_t in = 0;    // the slot holding the state before the token
        int32_t out = 0;   // the slot it writes (== in: in place)
        bool zero = false; // position 0: the state starts at zero (read nothing)
    };
    // The slots the token of sequence s at position pos reads and writes.
    // Throws strata::Error when the sequence was rewound further than its
    // slots reach since (its state no longer matches its tokens: clear it).
    StateStep state_step(SeqId s, int64_t pos);
    // Host storage: floats [offset, offset + n) of a slot (one layer's part).
    float* state_slot(int32_t slot, int64_t offset, int64_t n);
    // Sets how far sequence s can be rewound (0: to its start only); only
    // while it is empty. Throws the ledger's message where the budget has no
    // room for the slots.
    void set_state_rollback(SeqId s, int64_t positions);
    int64_t state_rollback(SeqId s) const;
    // Slot ids are below this (a device sizes its state memory by it).
    int32_t state_slot_count() const { return static_cast<int32_t>(slot_live_.size()); }
    // Bytes of recurrent state the live sequences hold.
    uint64_t state_bytes() const;

    // Blocks a sequence needs to grow by n tokens (0 if it has room).
    int64_t blocks_needed(SeqId s, int64_t n_more) const;
    // Blocks that can still be handed out (free + cached-unreferenced).
    int64_t available_blocks() const { return static_cast<int64_t>(free_.size() + lru_.size()); }

    // Appends token ids (positions n_tokens .. n_tokens+size-1), taking blocks as
    // needed. Returns false, changing nothing, when not enough blocks are
    // available. K/V for the new positions are written by write() afterwards.
    bool append(SeqId s, std::span<const int32_t> ids);

    // Attaches the longest run of cached full blocks that matches the start of
    // `prompt` to the empty sequence s; returns how many tokens it covers (a
    // multiple of block_tokens, and always less than prompt.size(), so the last
    // prompt token is still computed to produce logits).
    int64_t attach_prefix(SeqId s, std::span<const int32_t> prompt);

    // Registers the sequence's full blocks for prefix sharing. Call once K/V of
    // every layer have been written for them (the forward pass does, per step).
    void seal_full_blocks(SeqId s);

    // --- K/V data -----------------------------------------------------------
    // Stores one position's keys and values for one layer ([n_head_kv*head_dim]
    // each; v is not read with keys_only).
    void write(SeqId s, int64_t layer, int64_t pos, const float* k, const float* v);

    // Where a position's K/V rows live. Throws strata::Error when pos was not
    // appended to s. Resolved once on the calling thread, a row can then be
    // written head by head from several threads (each head's rows are apart).
    struct Row {
        int32_t block;
        int64_t slot;
    };
    Row row(SeqId s, int64_t pos) const;
    // One KV head's key and value ([head_dim] each) at a resolved row; what
    // write() does for every head. Does not throw.
    void write_head(Row r, int64_t layer, int64_t head, const float* k, const float* v);

    // One attention head over positions [0, n_keys) of sequence s:
    //   out[head_dim] = softmax(q . K_j * scale) . V_j
    // where a q8 block's K_j / V_j are its int8 values times its scale, as
    // floats (ops::scale_i8); attend_group with one head.
    // `scores` is scratch of at least n_keys floats.
    void attend(SeqId s, int64_t layer, int64_t kv_head, const float* q, int64_t n_keys, float scale,
                float* scores, float* out) const;

    // attend() for n_q query heads that share kv_head (grouped-query
    // attention): q holds them one after another (head_dim apart), out
    // receives theirs the same way, scores is scratch of n_q * n_keys floats.
    // Each result is attend()'s for that head, bit for bit; K/V are visited
    // block by block for all the heads at once (one kernel call per piece,
    // or per few rows of a q8 piece), so each piece comes from memory once,
    // and the kernel calls over a piece ask for the piece two steps on, a few
    // cache lines per key (kernels/ops.h: ask). Hints only, which change no
    // result: next_kv_head >= 0, the head the caller attends with next (same
    // sequence, layer and keys), whose first pieces the last steps ask for,
    // so they are in flight when its call starts; first_asked, this head's
    // first pieces were asked for that way by the call before, so this call
    // does not ask for them all at once at its start, as it otherwise must.
    // A sliding window (gpt-oss): only positions [first_key, n_keys) are
    // attended (blocks wholly before it are not read). Sinks: per head a
    // logit in the softmax's denominator that takes weight from every key
    // (ops::softmax_sink); null: none.
    void attend_group(SeqId s, int64_t layer, int64_t kv_head, const float* q, int64_t n_q, int64_t n_keys, float scale,
                      float* scores, float* out, int64_t next_kv_head = -1, bool first_asked = false,
                      int64_t first_key = 0, const float* sinks = nullptr) const;

    // Reads one position back as floats (tests, debugging); with keys_only, v
    // receives the keys (what attention uses as values).
    void read(SeqId s, int64_t layer, int64_t pos, float* k, float* v) const;

    // A sequence's blocks in position order (its block table), for a device
    // that keeps the K/V data of those blocks itself.
    const std::vector<int32_t>& blocks(SeqId s) const;
    // Without host storage: called when the cache copies block `from` into
    // `to` (copy-on-write of a shared block), so the device copies its data.
    void set_block_copier(std::function<void(int32_t from, int32_t to)> copier) { copier_ = std::move(copier); }

private:
    struct Seq {
        bool live = false;
        std::vector<int32_t> blocks;
        std::vector<int32_t> tokens;
        int64_t sealed = 0;               // leading full blocks registered for sharing
        std::vector<uint64_t> hashes;     // chain hash at the end of each sealed block
        std::vector<int32_t> state_slots; // recurrent state: slot ids, used in turn (StateStep)
        int64_t state_first = 0;          // the earliest position whose state its slots still hold
        bool state_stale = false;         // rewound past state_first since: the state is of longer tokens
    };
    struct Block {
        int32_t refs = 0;
        bool hashed = false;
        uint64_t hash = 0;                 // chain hash of every token up to the block's end
        uint64_t parent = 0;               // chain hash before the block (collision check)
        int32_t next = -1;                 // next block in its hash bucket
        std::list<int32_t>::iterator lru;  // valid when refs == 0 && hashed
    };

    int32_t take_block();                 // from the free list, else recycle the LRU cached block
    void unref(int32_t b);
    void unregister(int32_t b);
    bool detach_last(Seq& q);             // copy-on-write of a partial shared last block
    int64_t cow_blocks(const Seq& q) const;
    Seq& seq(SeqId s);
    const Seq& seq(SeqId s) const;
    void update_ledger();

    // Addressing (kv_cache.cpp explains the layout).
    struct RunPlace {
        uint64_t base;   // the run's first byte
        int64_t blocks;  // blocks in the run
        int64_t index;   // the block's place in it
    };
    RunPlace run_place(int32_t block) const;
    uint64_t part_offset(int32_t block, int64_t layer, int which, int64_t head) const;  // which: 0 K, 1 V
    void copy_block(int32_t from, int32_t to);
    float* scale_at(int32_t block, int64_t layer, int which, int64_t head);
    float scale_at(int32_t block, int64_t layer, int which, int64_t head) const;
    void store_row(int32_t block, int64_t layer, int which, int64_t head, int64_t slot, const float* x);
    void load_row(int32_t block, int64_t layer, int which, int64_t head, int64_t slot, float* x) const;

    KvCacheParams p_;
    std::unique_ptr<memory::Ledger> own_ledger_;
    memory::Ledger* ledger_;
    memory::Tier tier_;
    memory::AlignedBuffer pool_;
    uint64_t block_bytes_ = 0;
    uint64_t data_bytes_ = 0;             // per block, before the scales
    std::vector<Block> blocks_;
    std::vector<int32_t> free_;
    std::list<int32_t> lru_;              // cached unreferenced blocks, oldest first
    // Hash index of the sealed blocks: buckets of intrusive lists (Block::next),
    // sized once, so sealing and attaching never allocate. A block's tokens
    // live in block_ids_ (block_tokens per block) for the collision check.
    std::vector<int32_t> bucket_;
    std::vector<int32_t> block_ids_;
    uint64_t bucket_mask_ = 0;
    std::list<int32_t> lru_spare_;        // list nodes reused by the LRU (no allocation per release)
    std::vector<Seq> seqs_;
    std::vector<SeqId> free_seq_ids_;
    uint64_t state_reserved_ = 0;         // bytes of recurrent.state this cache holds in the ledger
    std::vector<uint8_t> slot_live_;      // per state slot id: in use
    std::vector<std::vector<float>> slot_data_;  // host storage: each slot's floats
    std::vector<int32_t> free_slots_;
    int64_t live_slots_ = 0;
    void update_state_ledger();
    void reserve_state_slots(int64_t more);  // the ledger's room for `more` slots beyond the live ones
    int32_t take_state_slot();
    void release_state_slot(int32_t id);
    void release_state_slots(Seq& q);
    uint64_t prefix_tokens_reused_ = 0;
    std::function<void(int32_t, int32_t)> copier_;
};

}  // namespace strata::kv
