#include "memory/aligned_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fstream>

#include "platform/numa.h"
#include "common/error.h"
#include "common/log.h"

namespace strata::memory {

namespace {
constexpr uint64_t kPageSize = AlignedBuffer::kAlignment;
uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

[[noreturn]] void alloc_failed(Account a, Tier t, uint64_t bytes, const char* how, int err) {
    throw Error(std::string("cannot allocate ") + format_bytes(bytes) + " for " + account_name(a) + " in the " +
                tier_name(t) + " tier: " + how + ": " + std::strerror(err) +
                " (the system has less free memory than the budget allows; lower the budget or free memory)");
}

// Applies the tier's NUMA placement to a fresh, untouched mapping. A refusal
// is logged, not fatal: the memory works wherever it lands.
void place(const Placement& where, void* p, uint64_t bytes, Account a) {
    if (where.kind == Placement::Default) return;
    const std::string err = cpu::numa_place_memory(p, bytes, where.kind == Placement::Interleave, where.node);
    if (!err.empty())
        logger("memory")->warn("NUMA placement of {} for {}: {}", format_bytes(bytes), account_name(a), err);
}

// An anonymous mapping of `bytes` aligned to `align` (4096 or 2 MiB).
uint8_t* map_aligned(uint64_t bytes, uint64_t align, int* err) {
    const uint64_t span = bytes + (align > kPageSize ? align : 0);
    void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *err = errno;
        return nullptr;
    }
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = static_cast<uintptr_t>(round_up(base, align));
    if (start > base) munmap(p, start - base);
    const uintptr_t end = start + bytes;
    if (base + span > end) munmap(reinterpret_cast<void*>(end), base + span - end);
    return reinterpret_cast<uint8_t*>(start);
}
}  // namespace

uint8_t* map_pages(Ledger& ledger, Tier tier, uint64_t bytes, Account account, bool huge) {
    const uint64_t align = huge ? AlignedBuffer::kHugePage : kPageSize;
    const uint64_t size = round_up(bytes, align);
    int err = 0;
    uint8_t* p = map_aligned(size, align, &err);
    if (!p) alloc_failed(account, tier, size, "mmap", err);
    place(ledger.placement(tier), p, size, account);
    if (huge && madvise(p, size, MADV_HUGEPAGE) != 0)
        logger("memory")->debug("madvise(MADV_HUGEPAGE) for {} of {}: {}", format_bytes(size), account_name(account),
                                std::strerror(errno));
    return p;
}

void unmap_pages(uint8_t* p, uint64_t bytes, bool huge) {
    if (p) munmap(p, round_up(bytes, huge ? AlignedBuffer::kHugePage : kPageSize));
}

void discard_pages(uint8_t* p, uint64_t bytes) {
    if (p && bytes) madvise(p, bytes, MADV_DONTNEED);
}

std::string transparent_huge_pages() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!in || !std::getline(in, line)) return "unavailable";
    // "always [madvise] never": the bracketed word is in force.
    const size_t a = line.find('['), b = line.find(']');
    if (a == std::string::npos || b == std::string::npos || b < a) return line;
    return line.substr(a + 1, b - a - 1);
}

AlignedBuffer::AlignedBuffer(Ledger& ledger, Account account, Tier tier, uint64_t bytes, bool huge_pages, bool zero)
    : account_(account), tier_(tier) {
    if (bytes == 0) return;
    if (bytes > UINT64_MAX - kHugePage) alloc_failed(account, tier, bytes, "size", EOVERFLOW);
    const bool huge = huge_pages && bytes >= kHugePage;
    const uint64_t footprint = round_up(bytes, huge ? kHugePage : kAlignment);
    ledger.reserve(account, tier, footprint);  // throws before anything is allocated
    const Placement where = ledger.placement(tier);
    if (huge || where.kind != Placement::Default) {
        // An anonymous mapping (zero already): 2 MiB-aligned and advised for
        // huge pages, or 4096-aligned so mbind can place it before first touch.
        int err = 0;
        uint8_t* p = map_aligned(footprint, huge ? kHugePage : kAlignment, &err);
        if (!p) {
            ledger.release(account, tier, footprint);
            alloc_failed(account, tier, bytes, "mmap", err);
        }
        place(where, p, footprint, account);
        if (huge && madvise(p, footprint, MADV_HUGEPAGE) != 0)
            logger("memory")->debug("madvise(MADV_HUGEPAGE) for {} of {}: {}", format_bytes(footprint),
                                    account_name(account), std::strerror(errno));
        data_ = p;
        mapped_ = true;
        huge_ = huge;
    } else {
        void* p = nullptr;
        const int err = posix_memalign(&p, kAlignment, footprint);
        if (err != 0) {
            ledger.release(account, tier, footprint);
            alloc_failed(account, tier, bytes, "posix_memalign", err);
        }
        data_ = static_cast<uint8_t*>(p);
        if (zero) std::memset(data_, 0, footprint);
    }
    ledger_ = &ledger;
    size_ = bytes;
    reserved_ = footprint;
}

AlignedBuffer::~AlignedBuffer() { reset(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : ledger_(std::exchange(o.ledger_, nullptr)),
      account_(o.account_),
      tier_(o.tier_),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      reserved_(std::exchange(o.reserved_, 0)),
      mapped_(std::exchange(o.mapped_, false)),
      huge_(std::exchange(o.huge_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
        reset();
        ledger_ = std::exchange(o.ledger_, nullptr);
        account_ = o.account_;
        tier_ = o.tier_;
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        reserved_ = std::exchange(o.reserved_, 0);
        mapped_ = std::exchange(o.mapped_, false);
        huge_ = std::exchange(o.huge_, false);
    }
    return *this;
}

void AlignedBuffer::fill_zero() {
    if (data_) std::memset(data_, 0, reserved_);
}

void AlignedBuffer::reset() {
    if (data_) {
        if (mapped_) munmap(data_, reserved_);
        else std::free(data_);
    }
    if (ledger_ && reserved_) {
        try {
            ledger_->release(account_, tier_, reserved_);
        } catch (const Error& e) {
            // Only a bookkeeping bug elsewhere can get here; never throw from a destructor.
            logger("memory")->error("{}", e.what());
        }
    }
    ledger_ = nullptr;
    data_ = nullptr;
    size_ = 0;
    reserved_ = 0;
    mapped_ = false;
    huge_ = false;
}

}  // namespace strata::memory
