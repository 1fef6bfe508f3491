#include "kv/kv_cache.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/ops.h"

namespace strata::kv {

namespace ops = kernels::ops;

const char* kv_type_name(KvType t) { return t == KvType::Q8 ? "q8" : "f32"; }

KvType parse_kv_type(const std::string& s) {
    if (s == "f32") return KvType::F32;
    if (s == "q8" || s == "int8") return KvType::Q8;
    throw Error("KV cache type '" + s + "' is unknown (use f32 or q8)");
}

namespace {

constexpr uint64_t kBlockAlign = 64;

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Chain hash: the hash of a block covers every token before it too, so equal
// hashes mean equal prefixes (up to 64-bit collisions, which are checked).
uint64_t chain_hash(uint64_t parent, const int32_t* ids, int64_t n) {
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; ++i) {
        h ^= static_cast<uint32_t>(ids[i]);
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h * 0xbf58476d1ce4e5b9ull;
}

}  // namespace

uint64_t KvCacheParams::data_bytes() const {
    return round_up(static_cast<uint64_t>(n_layer * kinds() * n_head_kv) * piece_bytes(), 4);
}

uint64_t KvCacheParams::block_bytes() const {
    const uint64_t scales = type == KvType::Q8 ? static_cast<uint64_t>(n_layer * kinds() * n_head_kv) * 4 : 0;
    return round_up(data_bytes() + scales, kBlockAlign);
}

std::string KvCacheParams::validate() const {
    if (n_layer <= 0 || n_head_kv <= 0 || head_dim <= 0) return "the KV cache needs a model shape (layers, KV heads, head size)";
    if (head_dim > kMaxHeadDim)
        return "KV head size " + std::to_string(head_dim) + " is out of range (1.." + std::to_string(kMaxHeadDim) + ")";
    if (block_tokens < 1 || block_tokens > 4096)
        return "KV block size " + std::to_string(block_tokens) + " is out of range (1..4096 tokens)";
    if (n_blocks < 1) return "the KV cache needs at least one block (got " + std::to_string(n_blocks) + ")";
    if (n_blocks > (int64_t{1} << 30)) return "the KV cache has too many blocks (" + std::to_string(n_blocks) + ")";
    return "";
}

KvCache::KvCache(const KvCacheParams& params, memory::Ledger* ledger, memory::Tier tier) : p_(params), tier_(tier) {
    if (const std::string err = p_.validate(); !err.empty()) throw Error(err);
    if (!ledger) {
        own_ledger_ = std::make_unique<memory::Ledger>();
        ledger = own_ledger_.get();
    }
    ledger_ = ledger;
    block_bytes_ = p_.block_bytes();
    data_bytes_ = p_.data_bytes();
    // One mapping for the whole pool; from 2 MiB up it is huge-page advised
    // (the plan rounds kv.pages the same way: reserved_bytes in plan/plan.cpp).
    if (p_.host_storage) {
        pool_ = memory::AlignedBuffer(*ledger_, memory::Account::KvPages, tier_, block_bytes_ * p_.n_blocks,
                                      /*huge_pages=*/true, /*zero=*/true);
        // Commit every page now, as llama.cpp clears its KV buffer at load. A
        // block's pieces lie in 2 x layers x KV heads different pages, so where
        // the kernel hands out 4 KiB pages a new block cost ~100 page faults in
        // the decode step that first wrote it: up to 3% of the 1.2B Q4_0 model's
        // decode time over 160 tokens (measured with cycle counters).
        pool_.fill_zero();
    }
    blocks_.resize(static_cast<size_t>(p_.n_blocks));
    uint64_t nb = 1;
    while (nb < static_cast<uint64_t>(p_.n_blocks) * 2) nb <<= 1;
    bucket_.assign(nb, -1);
    bucket_mask_ = nb - 1;
    block_ids_.assign(static_cast<size_t>(p_.n_blocks * p_.block_tokens), 0);
    lru_spare_.resize(blocks_.size());
    free_.reserve(blocks_.size());
    for (int64_t b = p_.n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
    update_ledger();
    if (p_.state_floats > 0 && p_.host_storage) {
        // The recurrent state of the sequences the plan expects, reserved up front.
        state_reserved_ = static_cast<uint64_t>(std::max<int64_t>(p_.state_sequences, 0)) *
                          static_cast<uint64_t>(p_.state_floats) * sizeof(float);
        ledger_->reserve(memory::Account::RecurrentState, tier_, state_reserved_);
    }
}

KvCache::~KvCache() {
    if (ledger_ && p_.host_storage) ledger_->set_used(memory::Account::KvPages, tier_, 0);
    if (ledger_ && state_reserved_ > 0) ledger_->release(memory::Account::RecurrentState, tier_, state_reserved_);
}

// recurrent.state's used bytes: the live sequences' states.
void KvCache::update_state_ledger() {
    if (p_.state_floats > 0 && p_.host_storage) ledger_->set_used(memory::Account::RecurrentState, tier_, state_bytes());
}

KvStats KvCache::stats() const {
    KvStats st;
    st.n_blocks = p_.n_blocks;
    st.free_blocks = static_cast<int64_t>(free_.size());
    st.cached_blocks = static_cast<int64_t>(lru_.size());
    for (const Block& b : blocks_) {
        st.used_blocks += b.refs > 0;
        st.shared_blocks += b.refs > 1;
    }
    for (const Seq& q : seqs_) st.sequences += q.live;
    st.prefix_tokens_reused = prefix_tokens_reused_;
    return st;
}

void KvCache::update_ledger() {
    if (!p_.host_storage) return;  // the device that holds the data accounts for it
    const uint64_t in_use = static_cast<uint64_t>(p_.n_blocks - static_cast<int64_t>(free_.size()));
    ledger_->set_used(memory::Account::KvPages, tier_, std::min(in_use * block_bytes_, pool_.reserved_bytes()));
}

// --- sequences ---------------------------------------------------------------

// Beyond the sequences reserved up front, each reserves its state as it
// starts (the ledger's message when the budget has no room; then nothing has
// changed).
void KvCache::reserve_state_slots(int64_t more) {
    if (p_.state_floats <= 0 || !p_.host_storage || more <= 0) return;
    const uint64_t one = static_cast<uint64_t>(p_.state_floats) * sizeof(float);
    const uint64_t want = state_bytes() + static_cast<uint64_t>(more) * one;
    if (want > state_reserved_) {
        ledger_->reserve(memory::Account::RecurrentState, tier_, want - state_reserved_);
        state_reserved_ = want;
    }
}

int32_t KvCache::take_state_slot() {
    int32_t id;
    if (!free_slots_.empty()) {
        id = free_slots_.back();
        free_slots_.pop_back();
    } else {
        id = static_cast<int32_t>(slot_live_.size());
        slot_live_.push_back(0);
        slot_data_.emplace_back();
    }
    slot_live_[static_cast<size_t>(id)] = 1;
    if (p_.host_storage) slot_data_[static_cast<size_t>(id)].assign(static_cast<size_t>(p_.state_floats), 0.0f);
    ++live_slots_;
    return id;
}

void KvCache::release_state_slot(int32_t id) {
    slot_live_[static_cast<size_t>(id)] = 0;
    slot_data_[static_cast<size_t>(id)] = {};
    free_slots_.push_back(id);
    --live_slots_;
}

void KvCache::release_state_slots(Seq& q) {
    for (int32_t id : q.state_slots) release_state_slot(id);
    q.state_slots.clear();
}

SeqId KvCache::create_sequence(int64_t expected_tokens) {
    if (p_.state_floats > 0) reserve_state_slots(1);
    SeqId id;
    if (!free_seq_ids_.empty()) {
        id = free_seq_ids_.back();
        free_seq_ids_.pop_back();
    } else {
        id = static_cast<SeqId>(seqs_.size());
        seqs_.emplace_back();
    }
    Seq& q = seqs_[static_cast<size_t>(id)];
    q = Seq{};
    q.live = true;
    if (p_.state_floats > 0) q.state_slots.push_back(take_state_slot());  // a device holds the data of its own
    update_state_ledger();
    if (expected_tokens > 0) {
        const int64_t blocks = std::min(p_.blocks_for(expected_tokens), p_.n_blocks);
        q.tokens.reserve(static_cast<size_t>(blocks * p_.block_tokens));
        q.blocks.reserve(static_cast<size_t>(blocks));
        q.hashes.reserve(static_cast<size_t>(blocks));
    }
    return id;
}

bool KvCache::has_sequence(SeqId s) const {
    return s >= 0 && static_cast<size_t>(s) < seqs_.size() && seqs_[static_cast<size_t>(s)].live;
}

KvCache::Seq& KvCache::seq(SeqId s) {
    if (!has_sequence(s)) throw Error("KV cache: sequence " + std::to_string(s) + " does not exist");
    return seqs_[static_cast<size_t>(s)];
}

const KvCache::Seq& KvCache::seq(SeqId s) const {
    if (!has_sequence(s)) throw Error("KV cache: sequence " + std::to_string(s) + " does not exist");
    return seqs_[static_cast<size_t>(s)];
}

void KvCache::free_sequence(SeqId s) {
    Seq& q = seq(s);
    for (int32_t b : q.blocks) unref(b);
    release_state_slots(q);
    q = Seq{};
    free_seq_ids_.push_back(s);
    update_ledger();
    update_state_ledger();
}

int64_t KvCache::n_tokens(SeqId s) const { return static_cast<int64_t>(seq(s).tokens.size()); }

const std::vector<int32_t>& KvCache::tokens(SeqId s) const { return seq(s).tokens; }

KvCache::StateStep KvCache::state_step(SeqId s, int64_t pos) {
    Seq& q = seq(s);
    if (q.state_slots.empty()) throw Error("internal: the KV cache keeps no recurrent state (state_floats is 0)");
    if (pos == 0) {
        q.state_stale = false;
    } else if (q.state_stale) {
        throw Error("sequence " + std::to_string(s) + " was rewound further than its recurrent state reaches (" +
                    std::to_string(q.state_slots.size() - 1) +
                    " tokens back), and a recurrent model's state cannot be: clear it and compute it again from its "
                    "first token");
    }
    const int64_t m = static_cast<int64_t>(q.state_slots.size());
    StateStep st;
    st.in = q.state_slots[static_cast<size_t>(pos % m)];
    st.out = q.state_slots[static_cast<size_t>((pos + 1) % m)];
    st.zero = pos == 0;
    return st;
}

float* KvCache::state_slot(int32_t slot, int64_t offset, int64_t n) {
    if (!p_.host_storage || slot < 0 || slot >= state_slot_count() || !slot_live_[static_cast<size_t>(slot)] ||
        offset < 0 || n < 0 || offset + n > p_.state_floats)
        throw Error("internal: recurrent state slot " + std::to_string(slot) + " [" + std::to_string(offset) + ", +" +
                    std::to_string(n) + ") of " + std::to_string(p_.state_floats) + " floats" +
                    (p_.host_storage ? "" : " without host storage"));
    return slot_data_[static_cast<size_t>(slot)].data() + offset;
}

void KvCache::set_state_rollback(SeqId s, int64_t positions) {
    Seq& q = seq(s);
    if (p_.state_floats <= 0) return;  // nothing recurrent: K/V rewind anyway
    if (positions < 0 || positions > 1024)
        throw Error("a recurrent state rollback of " + std::to_string(positions) + " tokens is out of range (0..1024)");
    if (!q.tokens.empty())
        throw Error("internal: a sequence's recurrent state rollback is set while it is empty (it holds " +
                    std::to_string(q.tokens.size()) + " tokens)");
    const int64_t want = positions + 1, have = static_cast<int64_t>(q.state_slots.size());
    if (want > have) reserve_state_slots(want - have);
    while (static_cast<int64_t>(q.state_slots.size()) < want) q.state_slots.push_back(take_state_slot());
    while (static_cast<int64_t>(q.state_slots.size()) > want) {
        release_state_slot(q.state_slots.back());
        q.state_slots.pop_back();
    }
    q.state_first = 0;
    q.state_stale = false;
    update_state_ledger();
}

int64_t KvCache::state_rollback(SeqId s) const {
    const Seq& q = seq(s);
    return q.state_slots.empty() ? 0 : static_cast<int64_t>(q.state_slots.size()) - 1;
}

uint64_t KvCache::state_bytes() const {
    return p_.host_storage ? static_cast<uint64_t>(live_slots_) * static_cast<uint64_t>(p_.state_floats) * sizeof(float)
                           : 0;
}

void KvCache::truncate(SeqId s, int64_t n) {
    Seq& q = seq(s);
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (n < 0 || n > len)
        throw Error("cannot truncate the sequence to " + std::to_string(n) + " tokens: it holds " + std::to_string(len));
    const size_t keep = static_cast<size_t>(p_.blocks_for(n));
    while (q.blocks.size() > keep) {
        unref(q.blocks.back());
        q.blocks.pop_back();
    }
    // Back to the start: zeroed when position 0 comes; within the slots' reach: the state after n tokens is kept.
    if (p_.state_floats > 0 && n < len) {
        if (n == 0) q.state_first = 0;
        q.state_stale = n > 0 && (q.state_stale || n < q.state_first);
    }
    q.tokens.resize(static_cast<size_t>(n));
    q.sealed = std::min<int64_t>(q.sealed, n / p_.block_tokens);
    q.hashes.resize(static_cast<size_t>(q.sealed));
    update_ledger();
}

int64_t KvCache::cow_blocks(const Seq& q) const {
    // A partial last block that is shared or registered must be copied (or
    // unregistered) before it is written.
    if (q.blocks.empty() || q.tokens.size() % static_cast<size_t>(p_.block_tokens) == 0) return 0;
    return blocks_[static_cast<size_t>(q.blocks.back())].refs > 1 ? 1 : 0;
}

int64_t KvCache::blocks_needed(SeqId s, int64_t n_more) const {
    const Seq& q = seq(s);
    const int64_t want = p_.blocks_for(static_cast<int64_t>(q.tokens.size()) + n_more);
    return std::max<int64_t>(0, want - static_cast<int64_t>(q.blocks.size())) + (n_more > 0 ? cow_blocks(q) : 0);
}

bool KvCache::detach_last(Seq& q) {
    const int32_t old = q.blocks.back();
    Block& ob = blocks_[static_cast<size_t>(old)];
    if (ob.refs > 1) {
        const int32_t nb = take_block();
        if (nb < 0) return false;
        copy_block(old, nb);
        blocks_[static_cast<size_t>(nb)].refs = 1;
        unref(old);
        q.blocks.back() = nb;
    } else if (ob.hashed) {
        unregister(old);  // ours alone: it stops being a shareable prefix
    }
    return true;
}

bool KvCache::append(SeqId s, std::span<const int32_t> ids) {
    Seq& q = seq(s);
    if (ids.empty()) return true;
    if (blocks_needed(s, static_cast<int64_t>(ids.size())) > available_blocks()) return false;
    if (q.tokens.size() % static_cast<size_t>(p_.block_tokens) != 0 && !q.blocks.empty() && !detach_last(q)) return false;
    const int64_t want = p_.blocks_for(static_cast<int64_t>(q.tokens.size() + ids.size()));
    while (static_cast<int64_t>(q.blocks.size()) < want) {
        const int32_t b = take_block();
        blocks_[static_cast<size_t>(b)].refs = 1;
        q.blocks.push_back(b);
    }
    q.tokens.insert(q.tokens.end(), ids.begin(), ids.end());
    if (!q.state_slots.empty()) {
        // Computing them overwrites the slots of the states before the last r + 1 positions.
        const int64_t len = static_cast<int64_t>(q.tokens.size()), r = static_cast<int64_t>(q.state_slots.size()) - 1;
        q.state_first = std::max(q.state_first, len - r);
    }
    update_ledger();
    return true;
}

int32_t KvCache::take_block() {
    if (!free_.empty()) {
        const int32_t b = free_.back();
        free_.pop_back();
        return b;
    }
    if (lru_.empty()) return -1;
    const int32_t b = lru_.front();
    unregister(b);
    return b;
}

void KvCache::unregister(int32_t b) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (!blk.hashed) return;
    int32_t* link = &bucket_[blk.hash & bucket_mask_];
    while (*link != b) link = &blocks_[static_cast<size_t>(*link)].next;
    *link = blk.next;
    blk.next = -1;
    if (blk.refs == 0) lru_spare_.splice(lru_spare_.end(), lru_, blk.lru);
    blk.hashed = false;
}

void KvCache::unref(int32_t b) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (--blk.refs > 0) return;
    if (blk.hashed) {
        // A spare list node, not a new one: releasing never allocates.
        lru_.splice(lru_.end(), lru_spare_, lru_spare_.begin());
        blk.lru = std::prev(lru_.end());
        *blk.lru = b;
    } else {
        free_.push_back(b);
    }
}

void KvCache::seal_full_blocks(SeqId s) {
    Seq& q = seq(s);
    const int64_t full = static_cast<int64_t>(q.tokens.size()) / p_.block_tokens;
    const int64_t bt = p_.block_tokens;
    while (q.sealed < full) {
        const int64_t i = q.sealed;
        const uint64_t parent = i > 0 ? q.hashes[static_cast<size_t>(i - 1)] : 0;
        const int32_t* ids = q.tokens.data() + i * bt;
        const uint64_t h = chain_hash(parent, ids, bt);
        const int32_t b = q.blocks[static_cast<size_t>(i)];
        Block& blk = blocks_[static_cast<size_t>(b)];
        if (!blk.hashed) {
            blk.hashed = true;
            blk.hash = h;
            blk.parent = parent;
            std::copy(ids, ids + bt, block_ids_.begin() + static_cast<std::ptrdiff_t>(b) * bt);
            int32_t& head = bucket_[h & bucket_mask_];
            blk.next = head;
            head = b;
        }
        q.hashes.push_back(h);
        ++q.sealed;
    }
}

int64_t KvCache::attach_prefix(SeqId s, std::span<const int32_t> prompt) {
    Seq& q = seq(s);
    if (!q.tokens.empty()) throw Error("KV cache: a prefix can only be attached to an empty sequence");
    // A recurrent model's state after a prefix is not in its blocks: the
    // prompt is computed whole (KvCacheParams::state_floats).
    if (p_.state_floats > 0) return 0;
    const int64_t bt = p_.block_tokens;
    const int64_t max_blocks = prompt.empty() ? 0 : (static_cast<int64_t>(prompt.size()) - 1) / bt;
    uint64_t parent = 0;
    for (int64_t i = 0; i < max_blocks; ++i) {
        const int32_t* ids = prompt.data() + i * bt;
        const uint64_t h = chain_hash(parent, ids, bt);
        int32_t found = -1;
        for (int32_t c = bucket_[h & bucket_mask_]; c >= 0 && found < 0; c = blocks_[static_cast<size_t>(c)].next) {
            const Block& blk = blocks_[static_cast<size_t>(c)];
            const int32_t* stored = block_ids_.data() + static_cast<std::ptrdiff_t>(c) * bt;
            if (blk.hash == h && blk.parent == parent && std::equal(stored, stored + bt, ids)) found = c;
        }
        if (found < 0) break;
        Block& blk = blocks_[static_cast<size_t>(found)];
        if (blk.refs++ == 0) lru_spare_.splice(lru_spare_.end(), lru_, blk.lru);
        q.blocks.push_back(found);
        q.tokens.insert(q.tokens.end(), ids, ids + bt);
        q.hashes.push_back(h);
        ++q.sealed;
        parent = h;
    }
    const int64_t reused = static_cast<int64_t>(q.tokens.size());
    prefix_tokens_reused_ += static_cast<uint64_t>(reused);
    update_ledger();
    return reused;
}

// --- K/V data ----------------------------------------------------------------

const std::vector<int32_t>& KvCache::blocks(SeqId s) const { return seq(s).blocks; }

void KvCache::copy_block(int32_t from, int32_t to) {
    if (!p_.host_storage) {
        if (copier_) copier_(from, to);
        return;
    }
    const uint64_t piece = p_.piece_bytes();
    for (int64_t layer = 0; layer < p_.n_layer; ++layer)
        for (int which = 0; which < p_.kinds(); ++which)
            for (int64_t h = 0; h < p_.n_head_kv; ++h) {
                std::memcpy(pool_.data() + part_offset(to, layer, which, h), pool_.data() + part_offset(from, layer, which, h),
                            piece);
                if (p_.type == KvType::Q8) *scale_at(to, layer, which, h) = *scale_at(from, layer, which, h);
            }
}

// The pool is cut into runs of kRunBlocks consecutive blocks (the last run
// may be shorter), each (blocks in it) * block_bytes_ long, so the pool's
// size is n_blocks * block_bytes_ as before. Inside a run the data is
// part-major: a part (one layer's K or V of one KV head) has its blocks'
// pieces next to one another, then come the run's scales (q8), block by
// block. A sequence's blocks are mostly consecutive (the free list hands them
// out in order), so attention over one head reads one contiguous stretch per
// run instead of a 4 KiB piece every block_bytes_ (1.2B Q4_0 model, 2
// threads: decode +4% on average over 8 alternating pairs at 200 and 600
// tokens of context); a new sequence touches one run's pages, not the pool's.
namespace {
constexpr int64_t kRunBlocks = 16;
}

KvCache::RunPlace KvCache::run_place(int32_t block) const {
    const int64_t run = block / kRunBlocks;
    const int64_t first = run * kRunBlocks;
    return {static_cast<uint64_t>(first) * block_bytes_, std::min<int64_t>(kRunBlocks, p_.n_blocks - first), block - first};
}

uint64_t KvCache::part_offset(int32_t block, int64_t layer, int which, int64_t head) const {
    const uint64_t piece = p_.piece_bytes();
    // keys_only: the values are the keys (which 1 reads part 0).
    const int kinds = p_.kinds();
    const auto part = static_cast<uint64_t>((layer * kinds + (which < kinds ? which : 0)) * p_.n_head_kv + head);
    const RunPlace r = run_place(block);
    return r.base + (part * static_cast<uint64_t>(r.blocks) + static_cast<uint64_t>(r.index)) * piece;
}

float* KvCache::scale_at(int32_t block, int64_t layer, int which, int64_t head) {
    const RunPlace r = run_place(block);
    const int kinds = p_.kinds();
    const auto parts = static_cast<uint64_t>(p_.n_layer * kinds * p_.n_head_kv);
    uint8_t* scales = pool_.data() + r.base + static_cast<uint64_t>(r.blocks) * data_bytes_;
    return reinterpret_cast<float*>(scales) + static_cast<uint64_t>(r.index) * parts +
           (layer * kinds + (which < kinds ? which : 0)) * p_.n_head_kv + head;
}

float KvCache::scale_at(int32_t block, int64_t layer, int which, int64_t head) const {
    return *const_cast<KvCache*>(this)->scale_at(block, layer, which, head);
}

void KvCache::store_row(int32_t block, int64_t layer, int which, int64_t head, int64_t slot, const float* x) {
    const int64_t hd = p_.head_dim;
    uint8_t* base = pool_.data() + part_offset(block, layer, which, head);
    if (p_.type == KvType::F32) {
        std::memcpy(reinterpret_cast<float*>(base) + slot * hd, x, static_cast<size_t>(hd) * sizeof(float));
        return;
    }
    int8_t* q = reinterpret_cast<int8_t*>(base);
    float* scale = scale_at(block, layer, which, head);
    float amax = 0.0f;
    for (int64_t i = 0; i < hd; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (slot == 0) *scale = 0.0f;  // a fresh block (positions are written in order)
    if (amax > *scale * 127.0f) {
        // Grow the block's scale; earlier rows are requantized to it.
        const float old = *scale;
        const float next = amax / 127.0f;
        if (old > 0.0f) {
            const float r = old / next;
            for (int64_t i = 0; i < slot * hd; ++i) q[i] = static_cast<int8_t>(std::lrintf(q[i] * r));
        }
        *scale = next;
    }
    const float inv = *scale > 0.0f ? 1.0f / *scale : 0.0f;
    int8_t* row = q + slot * hd;
    for (int64_t i = 0; i < hd; ++i) row[i] = static_cast<int8_t>(std::clamp(std::lrintf(x[i] * inv), -127L, 127L));
}

void KvCache::load_row(int32_t block, int64_t layer, int which, int64_t head, int64_t slot, float* x) const {
    const int64_t hd = p_.head_dim;
    const uint8_t* base = pool_.data() + part_offset(block, layer, which, head);
    if (p_.type == KvType::F32) {
        std::memcpy(x, reinterpret_cast<const float*>(base) + slot * hd, static_cast<size_t>(hd) * sizeof(float));
        return;
    }
    const int8_t* row = reinterpret_cast<const int8_t*>(base) + slot * hd;
    const float scale = scale_at(block, layer, which, head);
    for (int64_t i = 0; i < hd; ++i) x[i] = row[i] * scale;
}

KvCache::Row KvCache::row(SeqId s, int64_t pos) const {
    const Seq& q = seq(s);
    if (pos < 0 || pos >= static_cast<int64_t>(q.tokens.size()))
        throw Error("KV cache: position " + std::to_string(pos) + " was not appended");
    return {q.blocks[static_cast<size_t>(pos / p_.block_tokens)], pos % p_.block_tokens};
}

void KvCache::write_head(Row r, int64_t layer, int64_t head, const float* k, const float* v) {
    store_row(r.block, layer, 0, head, r.slot, k);
    if (!p_.keys_only) store_row(r.block, layer, 1, head, r.slot, v);
}

void KvCache::write(SeqId s, int64_t layer, int64_t pos, const float* k, const float* v) {
    if (!p_.host_storage) throw Error("this KV cache keeps no K/V data on the host (a device holds it)");
    const Row r = row(s, pos);
    for (int64_t h = 0; h < p_.n_head_kv; ++h) write_head(r, layer, h, k + h * p_.head_dim, v + h * p_.head_dim);
}

void KvCache::read(SeqId s, int64_t layer, int64_t pos, float* k, float* v) const {
    if (!p_.host_storage) throw Error("this KV cache keeps no K/V data on the host (a device holds it)");
    const Seq& q = seq(s);
    const int32_t block = q.blocks[static_cast<size_t>(pos / p_.block_tokens)];
    const int64_t slot = pos % p_.block_tokens;
    for (int64_t h = 0; h < p_.n_head_kv; ++h) {
        load_row(block, layer, 0, h, slot, k + h * p_.head_dim);
        load_row(block, layer, 1, h, slot, v + h * p_.head_dim);
    }
}

void KvCache::attend_group(SeqId s, int64_t layer, int64_t kv_head, const float* qv, int64_t n_q, int64_t n_keys,
                           float scale, float* scores, float* out, int64_t next_kv_head, bool first_asked,
                           int64_t first_key, const float* sinks) const {
    const int64_t hd = p_.head_dim;
    // Per block, keys in order, all n_q heads in one kernel call: each head's
    // scores and sums are attend()'s bits (the kernels' contract), and the
    // block comes from memory once for the group. Q8 blocks are turned into
    // floats a few rows at a time (their int8 values times the block's
    // scale, scale_i8) and go through the same kernels: the attention over
    // those float rows, a quarter of f32's bytes from memory.
    const bool q8 = p_.type == KvType::Q8;
    alignas(64) float rows_f32[kMaxHeadDim];
    const int64_t per_pass = std::max<int64_t>(1, kMaxHeadDim / hd);  // q8 rows in rows_f32 at a time
    const Seq& q = seqs_[static_cast<size_t>(s)];
    const int64_t bt = p_.block_tokens;
    const int64_t n_blocks = (n_keys + bt - 1) / bt;
    // The pieces are read in the order K[0..n), V[0..n) (steps 0..2n).
    // Attention computes little per byte and its few KiB per head come from
    // a cold cache, so it has to ask for pieces before it reads them. Each
    // piece's kernel calls ask for the piece kAskAhead steps on, spread over
    // its keys (ops.h: ask): on the 1.2B Q4_0 model at ~1.5k keys, one
    // thread, f32 attention took ~40% less time than when each piece asked
    // for the next whole piece at once at its start (which had taken 27-33%
    // less than the hardware prefetcher alone). In a harness, one step ahead
    // was not far enough to hide the latency, three or four no better than two.
    constexpr int64_t kAskAhead = 2;
    const uint64_t piece = p_.piece_bytes();
    // Steps 2n + k are the next head's step k (its K pieces), when the caller
    // names one; only its first kAskAhead are ever asked for.
    auto piece_at = [&](int64_t step) -> const uint8_t* {
        if (step >= 2 * n_blocks) {
            const int64_t k = step - 2 * n_blocks;
            if (next_kv_head < 0 || k >= n_blocks) return nullptr;
            return pool_.data() + part_offset(q.blocks[static_cast<size_t>(k)], layer, 0, next_kv_head);
        }
        const int which = step < n_blocks ? 0 : 1;
        return pool_.data() + part_offset(q.blocks[static_cast<size_t>(step % n_blocks)], layer, which, kv_head);
    };
    auto ask_whole = [&](int64_t step) {
        if (const uint8_t* p = piece_at(step))
            for (uint64_t o = 0; o < piece; o += 64) __builtin_prefetch(p + o, 0, 3);
    };
    // fn(rows, count, first, ask, ask_bytes) over step's piece (block
    // step % n, K before V) as float rows: an f32 piece as it lies, a q8
    // piece per_pass rows at a time. ask: what the kernel call is to ask for
    // meanwhile (null at the end): the whole piece ahead, or for a q8 call
    // its rows' share of it (the last call the rest).
    auto for_rows = [&](int64_t step, auto&& fn) {
        const int64_t bi = step % n_blocks;
        const int which = step < n_blocks ? 0 : 1;
        const int32_t b = q.blocks[static_cast<size_t>(bi)];
        const uint8_t* at = piece_at(step);
        const uint8_t* ask = piece_at(step + kAskAhead);
        const int64_t m = std::min(bt, n_keys - bi * bt);
        const auto whole = static_cast<int64_t>(piece);
        if (!q8) return fn(reinterpret_cast<const float*>(at), m, int64_t{0}, ask, whole);
        const float sc = scale_at(b, layer, which, kv_head);
        for (int64_t j = 0; j < m; j += per_pass) {
            const int64_t r = std::min(per_pass, m - j);
            ops::scale_i8(reinterpret_cast<const int8_t*>(at) + j * hd, sc, rows_f32, r * hd);
            const int64_t from = j * hd, to = j + r < m ? (j + r) * hd : whole;
            fn(rows_f32, r, j, ask ? ask + from : nullptr, to - from);
        }
    };
    // A window starts at block b0; keys of that block before first_key get no weight.
    first_key = std::clamp<int64_t>(first_key, 0, n_keys - 1);
    const int64_t b0 = first_key / bt;
    if (!first_asked || b0 > 0)
        for (int64_t step = b0; step < b0 + kAskAhead; ++step) ask_whole(step);  // nothing is in flight yet
    for (int64_t bi = b0; bi < n_blocks; ++bi)
        for_rows(bi, [&](const float* K, int64_t r, int64_t j, const uint8_t* ask, int64_t ask_bytes) {
            ops::attn_scores(qv, n_q, K, r, hd, scale, scores + bi * bt + j, n_keys, ask, ask_bytes);
        });
    for (int64_t h = 0; h < n_q; ++h) {
        float* row = scores + h * n_keys + b0 * bt;
        const int64_t n = n_keys - b0 * bt;
        std::fill(row, row + (first_key - b0 * bt), -std::numeric_limits<float>::infinity());
        // Masked keys (-inf) go through the scalar softmax (std::exp), as do sinks.
        if (sinks || first_key > b0 * bt) ops::softmax_sink(row, n, sinks ? sinks[h] : -std::numeric_limits<float>::infinity());
        else ops::softmax(row, n);
    }
    std::fill(out, out + n_q * hd, 0.0f);
    for (int64_t bi = b0; bi < n_blocks; ++bi)
        for_rows(n_blocks + bi, [&](const float* V, int64_t r, int64_t j, const uint8_t* ask, int64_t ask_bytes) {
            ops::attn_accumulate(scores + bi * bt + j, n_keys, n_q, V, r, hd, out, ask, ask_bytes);
        });
}

void KvCache::attend(SeqId s, int64_t layer, int64_t kv_head, const float* qv, int64_t n_keys, float scale,
                     float* scores, float* out) const {
    attend_group(s, layer, kv_head, qv, 1, n_keys, scale, scores, out);
}

}  // namespace strata::kv
