// The CUDA runtime as the engine uses it: device memory and pinned host memory
// reserved in the ledger for as long as they live, streams, events, copies,
// and every error turned into a strata::Error that names the operation. No
// CUDA header here (handles are the runtime's opaque pointers), so the rest
// of the engine compiles without the toolkit. cuda_runtime.cpp implements it
// on the CUDA runtime (built with STRATA_HAVE_CUDA, or in tests over the
// CUDA-on-CPU runtime of tests/cuda_on_cpu, so the forward pass and its
// kernels run in CI without a GPU).
// Everything the forward pass asks of the runtime goes through here.
#pragma once

#include <cstdint>
#include <string>

#include "memory/ledger.h"

struct CUstream_st;
struct CUevent_st;

namespace strata::backend::cuda {

// Throws strata::Error "CUDA <op> failed: <name> (<text>)" for a non-zero
// CUDA error code; what = the operation ("cudaMalloc of 1.50 GiB for kv.pages").
void check(int code, const std::string& what);

// The device this thread works on (cudaSetDevice).
void set_device(int index);
// Free and total VRAM of the current device (cudaMemGetInfo).
void memory_info(uint64_t* free_bytes, uint64_t* total_bytes);
// The device's name ("NVIDIA H200").
std::string device_name(int index);

// The runtime's allocators (cudaMalloc / cudaHostAlloc: on a GPU, or host
// memory under tests/cuda_on_cpu). Allocation failures throw strata::Error
// naming `what` and the size; frees never throw.
void* device_alloc(uint64_t bytes, const std::string& what);
void device_free(void* p) noexcept;
void* pinned_alloc(uint64_t bytes, const std::string& what);
void pinned_free(void* p) noexcept;

// Memory reserved in the ledger (tier, account) before it is allocated and
// released with it; `Free` is its allocator's free. Moves, never copies.
template <void (*Free)(void*) noexcept>
class LedgerMemory {
public:
    LedgerMemory() = default;
    ~LedgerMemory() { reset(); }
    LedgerMemory(LedgerMemory&& o) noexcept { take(o); }
    LedgerMemory& operator=(LedgerMemory&& o) noexcept {
        if (this != &o) {
            reset();
            take(o);
        }
        return *this;
    }
    LedgerMemory(const LedgerMemory&) = delete;
    LedgerMemory& operator=(const LedgerMemory&) = delete;

    uint64_t size() const { return size_; }
    void reset() {
        if (!data_) return;
        Free(data_);
        if (ledger_) ledger_->release(account_, tier_, size_);
        data_ = nullptr;
        size_ = 0;
    }

protected:
    LedgerMemory(memory::Ledger& ledger, memory::Account account, memory::Tier tier, uint64_t bytes,
                 void* (*alloc)(uint64_t, const std::string&))
        : ledger_(&ledger), account_(account), tier_(tier) {
        if (bytes == 0) return;
        ledger.reserve(account, tier, bytes);  // throws with the ledger's message when over budget
        try {
            data_ = alloc(bytes, memory::account_name(account));
        } catch (...) {
            ledger.release(account, tier, bytes);
            throw;
        }
        size_ = bytes;
    }
    void* data_ = nullptr;

private:
    void take(LedgerMemory& o) {
        ledger_ = o.ledger_;
        account_ = o.account_;
        tier_ = o.tier_;
        data_ = o.data_;
        size_ = o.size_;
        o.data_ = nullptr;
        o.size_ = 0;
    }
    memory::Ledger* ledger_ = nullptr;
    memory::Account account_ = memory::Account::Activations;
    memory::Tier tier_ = memory::Tier::Fast;
    uint64_t size_ = 0;
};

// VRAM.
class DeviceBuffer : public LedgerMemory<device_free> {
public:
    DeviceBuffer() = default;
    DeviceBuffer(memory::Ledger& ledger, memory::Account account, memory::Tier tier, uint64_t bytes)
        : LedgerMemory(ledger, account, tier, bytes, device_alloc) {}
    void* data() const { return data_; }
    template <class T>
    T* as() const { return static_cast<T*>(data_); }
};

// Page-locked host memory, the experts' home with a GPU: copies from it run
// at the link's full rate and asynchronously.
class PinnedBuffer : public LedgerMemory<pinned_free> {
public:
    PinnedBuffer() = default;
    PinnedBuffer(memory::Ledger& ledger, memory::Account account, memory::Tier tier, uint64_t bytes)
        : LedgerMemory(ledger, account, tier, bytes, pinned_alloc) {}
    uint8_t* data() const { return static_cast<uint8_t*>(data_); }
};

class Stream {
public:
    Stream();  // a non-blocking stream on the current device
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    CUstream_st* get() const { return s_; }
    void synchronize(const char* what) const;
    // For destructors: waits, and ignores an error (a lost device has nothing left to wait for).
    void synchronize_quietly() const noexcept;

private:
    CUstream_st* s_ = nullptr;
};

class Event {
public:
    explicit Event(bool timing = false);
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    CUevent_st* get() const { return e_; }
    void record(const Stream& s);
    // Makes `s` wait for this event (the copy stream's load before the compute that reads it).
    void wait_on(const Stream& s) const;
    bool done() const;  // cudaEventQuery
    void synchronize() const;
    // Milliseconds from `start` to this event (both recorded with timing).
    float ms_since(const Event& start) const;

private:
    CUevent_st* e_ = nullptr;
};

// Copies on a stream; host pointers should be pinned for the copy to be asynchronous.
void copy_to_device(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what);
void copy_to_host(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what);
void copy_on_device(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what);
// A synchronous host-to-device copy from any host memory (the file mapping at load).
void upload(void* dst, const void* src, uint64_t bytes, const char* what);
// Zeroes device memory on a stream.
void fill_zero(void* dst, uint64_t bytes, const Stream& s, const char* what);

// The host-to-device rate over the link: `bytes` from pinned memory, timed
// with events, best of `passes`. GB/s (1e9 bytes per second).
double measure_h2d_gbs(uint64_t bytes = 64ull << 20, int passes = 3);

}  // namespace strata::backend::cuda
