// Memory whose bytes are reserved in the Ledger for as long as it lives.
//
// - Aligned to 4096 bytes, so O_DIRECT reads can target it directly.
// - The reservation is the allocation's real footprint: the size rounded up to
//   4096 bytes (to 2 MiB for a huge-page buffer).
// - Huge pages (optional, for large buffers): the memory is an anonymous
//   mapping aligned to 2 MiB and advised MADV_HUGEPAGE; where transparent huge
//   pages are off the advice is ignored and the buffer still works.
// - NUMA: when the ledger's tier has a placement (bind to a node, interleave),
//   the buffer is an anonymous mapping placed with mbind before first touch
//   (same 4096-byte footprint, so the ledger is unchanged).
// - Moves, never copies; destruction frees the memory and releases the
//   reservation. The Ledger must outlive every buffer reserved in it.
//
// Failures are strata::Error: a budget that would be exceeded (the ledger's
// message), or an allocation the system refuses (naming account and size).
#pragma once

#include <cstdint>
#include <string>

#include "memory/ledger.h"

namespace strata::memory {

class AlignedBuffer {
public:
    static constexpr uint64_t kAlignment = 4096;
    static constexpr uint64_t kHugePage = 2ull << 20;

    AlignedBuffer() = default;
    // huge_pages applies only to buffers of at least one huge page (2 MiB);
    // smaller ones are ordinary aligned allocations. The contents are
    // undefined unless zero is true.
    AlignedBuffer(Ledger& ledger, Account account, Tier tier, uint64_t bytes, bool huge_pages = false,
                  bool zero = false);
    ~AlignedBuffer();

    AlignedBuffer(AlignedBuffer&& o) noexcept;
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;

    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }                  // bytes asked for
    uint64_t reserved_bytes() const { return reserved_; }    // bytes held in the ledger
    bool huge_pages() const { return huge_; }              // a 2 MiB-aligned mapping advised MADV_HUGEPAGE
    Account account() const { return account_; }
    Tier tier() const { return tier_; }
    bool empty() const { return size_ == 0; }
    explicit operator bool() const { return data_ != nullptr; }

    // Zero-fills the whole buffer.
    void fill_zero();
    // Frees the memory and releases the reservation now (the buffer becomes empty).
    void reset();

private:
    Ledger* ledger_ = nullptr;
    Account account_ = Account::RuntimeReserve;
    Tier tier_ = Tier::Fast;
    uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
    uint64_t reserved_ = 0;
    bool mapped_ = false;  // mmap'd (munmap to free) vs posix_memalign (free)
    bool huge_ = false;    // advised MADV_HUGEPAGE
};

// An anonymous mapping of `bytes` placed as the ledger says for `tier` (NUMA):
// with `huge`, rounded up to and aligned to 2 MiB and advised MADV_HUGEPAGE;
// else 4096-granular. It is not reserved in the ledger: the caller reserves
// what it will touch. Throws strata::Error naming the account and the size
// when the system refuses.
uint8_t* map_pages(Ledger& ledger, Tier tier, uint64_t bytes, Account account, bool huge);
void unmap_pages(uint8_t* p, uint64_t bytes, bool huge);
// Gives the pages of [p, p + bytes) back to the system (MADV_DONTNEED); the
// range stays mapped and reads as zeros when touched again.
void discard_pages(uint8_t* p, uint64_t bytes);

// Transparent huge pages as the kernel reports them
// (/sys/kernel/mm/transparent_hugepage/enabled): "always", "madvise", "never",
// or "unavailable" (no such file).
std::string transparent_huge_pages();

}  // namespace strata::memory
