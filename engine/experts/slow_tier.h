// The slow tier: where an expert's bytes live when it is not in the fast
// tier, and how they are copied into a fast-tier slot. On a CPU-only machine
// that is the GGUF file, read with O_DIRECT so the page cache does not quietly
// hold the model and the RAM budget is real. A CUDA backend plugs in here with
// pinned host memory and copies on a copy stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace strata::experts {

// One contiguous byte range of the model file, widened to the tier's
// alignment: [window_offset, window_offset + window_bytes) is read, and the
// wanted bytes start `inner` bytes into it.
struct ByteWindow {
    uint64_t window_offset = 0;
    uint64_t window_bytes = 0;
    uint64_t inner = 0;
};

class SlowTier {
public:
    virtual ~SlowTier() = default;
    virtual const char* name() const = 0;
    // Alignment of window offsets, sizes and destination addresses.
    virtual uint64_t alignment() const = 0;
    // Copies a window into dst (aligned). Thread-safe. Throws strata::Error.
    virtual void read(const ByteWindow& w, uint8_t* dst) = 0;
};

// The model file. With direct I/O (O_DIRECT) reads bypass the page cache;
// where the file system refuses O_DIRECT (tmpfs, some FUSE mounts) it falls back
// to buffered reads and drops the pages it read from the cache afterwards
// (posix_fadvise DONTNEED), and says so in the log.
class FileSlowTier final : public SlowTier {
public:
    FileSlowTier(const std::string& path, bool direct_io);
    ~FileSlowTier() override;
    const char* name() const override { return direct_ ? "file (O_DIRECT)" : "file (buffered, dropped from cache)"; }
    uint64_t alignment() const override { return 4096; }
    void read(const ByteWindow& w, uint8_t* dst) override;
    bool direct() const { return direct_; }

private:
    std::string path_;
    int fd_ = -1;
    bool direct_ = false;
    uint64_t size_ = 0;
};

// Widens [offset, offset + bytes) to `alignment`, clamped to the file.
ByteWindow make_window(uint64_t offset, uint64_t bytes, uint64_t alignment);

}  // namespace strata::experts
