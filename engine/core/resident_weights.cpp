#include "core/resident_weights.h"

#include <map>

#include "common/error.h"

namespace strata::core {

namespace {

// Collects the matrices of one kind, lays their aligned windows out in one
// buffer, reads them and repoints the matrices.
class Packer {
public:
    void add(model::Matrix* m) {
        if (m && *m) items_.push_back(m);
    }
    uint64_t bytes(uint64_t align) const {
        uint64_t total = 0;
        for (const model::Matrix* m : items_) total += experts::make_window(m->file_offset, m->slab_bytes() * m->slabs, align).window_bytes;
        return total;
    }
    // Calls on_read(bytes) after each read; it returns false to stop. Each
    // matrix is repacked into the CPU kernels' layout as it lands; returns
    // the bytes repacked.
    template <class F>
    uint64_t load(memory::AlignedBuffer& buf, experts::SlowTier& src, F&& on_read) {
        uint64_t at = 0, repacked = 0;
        std::vector<uint8_t> scratch;
        std::map<uint64_t, model::Matrix> done;  // tied output shares the embedding's copy
        for (model::Matrix* m : items_) {
            if (auto it = done.find(m->file_offset); it != done.end()) {
                m->data = it->second.data;
                m->type = it->second.type;
                continue;
            }
            const experts::ByteWindow w = experts::make_window(m->file_offset, m->slab_bytes() * m->slabs, src.alignment());
            src.read(w, buf.data() + at);
            m->data = buf.data() + at + w.inner;
            repacked += model::repack_for_kernels(*m, buf.data() + at + w.inner, scratch);
            done[m->file_offset] = *m;
            at += w.window_bytes;
            if (!on_read(w.window_bytes)) throw Cancelled("loading was cancelled");
        }
        return repacked;
    }

private:
    std::vector<model::Matrix*> items_;
};

}  // namespace

ResidentWeights::ResidentWeights(const model::Model& m, memory::Ledger& ledger, memory::Tier tier,
                                 experts::SlowTier& source, const Progress& progress)
    : weights_(m.weights()), tier_(tier) {
    Packer shared, router;
    shared.add(&weights_.tok_embd);
    if (!weights_.output_tied) shared.add(&weights_.output);
    for (model::LayerWeights& L : weights_.layers) {
        for (model::Matrix* x : L.attention_matrices()) shared.add(x);
        if (L.ffn == model::FfnKind::Dense) {
            for (model::Matrix* x : {&L.dense.gate, &L.dense.up, &L.dense.down}) shared.add(x);
        } else {
            router.add(&L.router);
            for (model::Matrix* x : {&L.shared.gate, &L.shared.up, &L.shared.down}) shared.add(x);
        }
    }
    const uint64_t align = source.alignment();
    // From 2 MiB up on huge pages, as the expert slots and the KV pool: decode
    // streams the attention matrices every token, and on 4 KiB pages each
    // 4 KiB of them is a TLB miss (and a boundary the hardware prefetcher
    // stops at). The plan reserves the same (plan/plan.cpp).
    const auto huge = [](uint64_t bytes) { return bytes >= memory::AlignedBuffer::kHugePage; };
    shared_ = memory::AlignedBuffer(ledger, memory::Account::WeightsShared, tier, shared.bytes(align), huge(shared.bytes(align)));
    router_ = memory::AlignedBuffer(ledger, memory::Account::WeightsRouter, tier, std::max<uint64_t>(router.bytes(align), 1),
                                    huge(router.bytes(align)));
    const uint64_t total = shared.bytes(align) + router.bytes(align);
    uint64_t done = 0;
    auto on_read = [&](uint64_t bytes) {
        done += bytes;
        return !progress || progress(done, total);
    };
    repacked_ = shared.load(shared_, source, on_read);
    repacked_ += router.load(router_, source, on_read);
    if (weights_.output_tied) weights_.output = weights_.tok_embd;
    derived_ = weights_.derived_bytes();
    if (derived_ > 0) {
        ledger.reserve(memory::Account::WeightsShared, tier, derived_);  // throws when the budget does not hold them
        ledger_ = &ledger;
    }
    ledger.set_used(memory::Account::WeightsShared, tier, shared_.size() + derived_);
    ledger.set_used(memory::Account::WeightsRouter, tier, router_.size());
}

ResidentWeights::~ResidentWeights() {
    if (ledger_) ledger_->release(memory::Account::WeightsShared, tier_, derived_);
}

}  // namespace strata::core
