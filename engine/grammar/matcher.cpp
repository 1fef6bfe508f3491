#include "grammar/matcher.h"

#include <algorithm>

namespace strata::grammar {

namespace {

constexpr uint32_t kEmptySlot = UINT32_MAX;
constexpr int kMaxExpandDepth = 4000;

inline uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

}  // namespace

TokenTable::TokenTable(std::vector<std::string> pieces) : storage_(std::move(pieces)) {
    views_.assign(storage_.begin(), storage_.end());
    for (size_t id = 0; id < views_.size(); ++id)
        if (!views_[id].empty()) sorted_.push_back(int32_t(id));
    std::sort(sorted_.begin(), sorted_.end(), [this](int32_t a, int32_t b) { return views_[size_t(a)] < views_[size_t(b)]; });
    for (int32_t id : sorted_) max_len_ = std::max(max_len_, views_[size_t(id)].size());
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
    for (uint32_t a : g_->alternatives(g_->root())) expand(a, kNone, heads_, 0);
    std::sort(heads_.begin(), heads_.end());
    heads_.erase(std::unique(heads_.begin(), heads_.end()), heads_.end());
    live_after_compact_ = frames_.size();
}

uint32_t Matcher::intern(uint32_t pos, uint32_t parent) {
    if ((used_ + 1) * 2 > keys_.size()) {
        // Rehash into a table twice the live frames' size; stale slots are dropped.
        const size_t cap = std::max<size_t>(1024, size_t(1) << (64 - __builtin_clzll(frames_.size() * 4 + 1)));
        keys_.assign(cap, 0);
        vals_.assign(cap, kEmptySlot);
        used_ = 0;
        for (uint32_t id = 0; id < frames_.size(); ++id) {
            const uint64_t key = (uint64_t(frames_[id].pos) << 32) | frames_[id].parent;
            size_t h = mix(key) & (cap - 1);
            while (vals_[h] != kEmptySlot) h = (h + 1) & (cap - 1);
            keys_[h] = key;
            vals_[h] = id;
            ++used_;
        }
    }
    const uint64_t key = (uint64_t(pos) << 32) | parent;
    const size_t mask = keys_.size() - 1;
    for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
        const uint32_t v = vals_[h];
        if (v == kEmptySlot) {
            ++used_;
        } else if (keys_[h] != key) {
            continue;
        } else if (v < frames_.size() && frames_[v].pos == pos && frames_[v].parent == parent) {
            return v;
        }
        // An empty slot, or this key's slot left stale by a rollback.
        const auto id = uint32_t(frames_.size());
        frames_.push_back(Frame{pos, parent});
        keys_[h] = key;
        vals_[h] = id;
        return id;
    }
}

void Matcher::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth) {
    if (depth > kMaxExpandDepth)
        throw GrammarError("grammar: rules nest more than " + std::to_string(kMaxExpandDepth) +
                           " deep without matching a character");
    const auto& el = g_->elements();
    const Element& e = el[pos];
    switch (e.kind) {
        case Element::Kind::Bytes:
            out.push_back(intern(pos, parent));
            break;
        case Element::Kind::End:
            if (parent == kNone) {
                out.push_back(kAccept);
            } else {
                const Frame f = frames_[parent];
                expand(f.pos, f.parent, out, depth + 1);
            }
            break;
        case Element::Kind::Rule: {
            // A reference in tail position returns straight to our parent, so
            // right recursion (every repetition) does not deepen the stack.
            const uint32_t ret = el[pos + 1].kind == Element::Kind::End ? parent : intern(pos + 1, parent);
            for (uint32_t a : g_->alternatives(e.value)) expand(a, ret, out, depth + 1);
            break;
        }
    }
    if (out.size() > kMaxStacks)
        throw GrammarError("grammar: more than " + std::to_string(kMaxStacks) +
                           " ways to read the text so far: the grammar is too ambiguous to follow");
}

void Matcher::advance(const std::vector<uint32_t>& heads, uint8_t byte, std::vector<uint32_t>& out) {
    out.clear();
    const auto& el = g_->elements();
    for (uint32_t h : heads) {
        if (h == kAccept) continue;
        const Frame f = frames_[h];
        if (g_->set(el[f.pos].value).test(byte)) expand(f.pos + 1, f.parent, out, 0);
    }
    if (out.size() > 1) {
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
    }
}

ByteSet Matcher::next_bytes(const std::vector<uint32_t>& heads) const {
    ByteSet u;
    const auto& el = g_->elements();
    for (uint32_t h : heads)
        if (h != kAccept) u |= g_->set(el[frames_[h].pos].value);
    return u;
}

bool Matcher::allows(std::string_view bytes) {
    const size_t mark = frames_.size();
    std::vector<uint32_t> cur = heads_, next;
    bool ok = true;
    for (const char c : bytes) {
        advance(cur, uint8_t(c), next);
        if (next.empty()) {
            ok = false;
            break;
        }
        cur.swap(next);
    }
    rollback(mark);
    return ok;
}

bool Matcher::accept(std::string_view bytes) {
    const size_t mark = frames_.size();
    std::vector<uint32_t> cur = heads_, next;
    for (const char c : bytes) {
        advance(cur, uint8_t(c), next);
        if (next.empty()) {
            rollback(mark);
            return false;
        }
        cur.swap(next);
    }
    heads_.swap(cur);
    if (frames_.size() > 4 * live_after_compact_ + 65536) compact();
    return true;
}

void Matcher::walk(const TokenIndex& index, const std::vector<uint32_t>& heads, size_t lo, size_t hi, size_t depth,
                   std::vector<uint8_t>& allowed) {
    const auto& ids = index.sorted;
    const auto& pieces = index.pieces;
    size_t i = lo;
    for (; i < hi && pieces[size_t(ids[i])].size() == depth; ++i) allowed[size_t(ids[i])] = 1;
    if (i == hi) return;
    const ByteSet can = next_bytes(heads);
    std::vector<uint32_t>& next = scratch_[depth];
    while (i < hi) {
        const auto b = uint8_t(pieces[size_t(ids[i])][depth]);
        const size_t j = size_t(std::partition_point(ids.begin() + std::ptrdiff_t(i), ids.begin() + std::ptrdiff_t(hi),
                                                     [&](int32_t id) { return uint8_t(pieces[size_t(id)][depth]) <= b; }) -
                                ids.begin());
        if (can.test(b)) {
            advance(heads, b, next);
            if (!next.empty()) walk(index, next, i, j, depth + 1, allowed);
        }
        i = j;
    }
}

void Matcher::allowed_tokens(const TokenIndex& index, std::vector<uint8_t>& allowed) {
    allowed.assign(index.pieces.size(), 0);
    if (scratch_.size() < index.max_len + 1) scratch_.resize(index.max_len + 1);
    const size_t mark = frames_.size();
    walk(index, heads_, 0, index.sorted.size(), 0, allowed);
    rollback(mark);
}

// Keeps only the frames the live stacks reach. A frame's parent is always
// older than the frame, so ascending ids keep that order after renumbering.
void Matcher::compact() {
    std::vector<uint32_t> live;
    std::vector<uint8_t> seen(frames_.size(), 0);
    for (uint32_t h : heads_)
        for (uint32_t f = h; f != kNone && f != kAccept && !seen[f]; f = frames_[f].parent) {
            seen[f] = 1;
            live.push_back(f);
        }
    std::sort(live.begin(), live.end());
    std::vector<uint32_t> remap(frames_.size(), kNone);
    std::vector<Frame> kept;
    kept.reserve(live.size());
    for (uint32_t f : live) {
        remap[f] = uint32_t(kept.size());
        const uint32_t p = frames_[f].parent;
        kept.push_back(Frame{frames_[f].pos, p == kNone ? kNone : remap[p]});
    }
    for (uint32_t& h : heads_)
        if (h != kAccept) h = remap[h];
    frames_ = std::move(kept);
    keys_.clear();
    vals_.clear();
    used_ = 0;  // the next intern() rebuilds the table
    live_after_compact_ = frames_.size();
    std::sort(heads_.begin(), heads_.end());
}

}  // namespace strata::grammar
