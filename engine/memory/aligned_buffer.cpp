#include "memory/aligned_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "common/log.h"

namespace strata::memory {

namespace {
uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

[[noreturn]] void alloc_failed(Account a, Tier t, uint64_t bytes, const char* how, int err) {
    throw Error(std::string("cannot allocate ") + format_bytes(bytes) + " for " + account_name(a) + " in the " +
                tier_name(t) + " tier: " + how + ": " + std::strerror(err) +
                " (the system has less free memory than the budget allows; lower the budget or free memory)");
}
}  // namespace

AlignedBuffer::AlignedBuffer(Ledger& ledger, Account account, Tier tier, uint64_t bytes, bool huge_pages, bool zero)
    : account_(account), tier_(tier) {
    if (bytes == 0) return;
    if (bytes > UINT64_MAX - kHugePage) alloc_failed(account, tier, bytes, "size", EOVERFLOW);
    const bool huge = huge_pages && bytes >= kHugePage;
    const uint64_t footprint = round_up(bytes, huge ? kHugePage : kAlignment);
    ledger.reserve(account, tier, footprint);  // throws before anything is allocated
    if (huge) {
        // Map one huge page more than needed, then trim to a 2 MiB-aligned window.
        const uint64_t span = footprint + kHugePage;
        void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ledger.release(account, tier, footprint);
            alloc_failed(account, tier, bytes, "mmap", err);
        }
        const uintptr_t base = reinterpret_cast<uintptr_t>(p);
        const uintptr_t start = static_cast<uintptr_t>(round_up(base, kHugePage));
        if (start > base) munmap(p, start - base);
        const uintptr_t end = start + footprint;
        if (base + span > end) munmap(reinterpret_cast<void*>(end), base + span - end);
        if (madvise(reinterpret_cast<void*>(start), footprint, MADV_HUGEPAGE) != 0)
            logger("memory")->debug("madvise(MADV_HUGEPAGE) for {} of {}: {}", format_bytes(footprint),
                                    account_name(account), std::strerror(errno));
        data_ = reinterpret_cast<uint8_t*>(start);
        mapped_ = true;  // anonymous mappings are zero already
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
      mapped_(std::exchange(o.mapped_, false)) {}

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
}

}  // namespace strata::memory
