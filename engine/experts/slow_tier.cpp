#include "experts/slow_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace strata::experts {

ByteWindow make_window(uint64_t offset, uint64_t bytes, uint64_t alignment) {
    ByteWindow w;
    w.window_offset = offset / alignment * alignment;
    const uint64_t end = (offset + bytes + alignment - 1) / alignment * alignment;
    w.window_bytes = end - w.window_offset;
    w.inner = offset - w.window_offset;
    return w;
}

FileSlowTier::FileSlowTier(const std::string& path, bool direct_io) : path_(path) {
    if (direct_io) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        direct_ = fd_ >= 0;
        if (!direct_) {
            logger("experts")->warn("{}: O_DIRECT is not available here ({}); reading through the page cache and "
                                    "dropping what was read",
                                    path, std::strerror(errno));
        }
    }
    if (fd_ < 0) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(path + ": cannot open for expert reads: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) == 0) size_ = static_cast<uint64_t>(st.st_size);
}

FileSlowTier::~FileSlowTier() {
    if (fd_ >= 0) ::close(fd_);
}

void FileSlowTier::read(const ByteWindow& w, uint8_t* dst) {
    uint64_t done = 0;
    while (done < w.window_bytes) {
        const ssize_t n = ::pread(fd_, dst + done, w.window_bytes - done, static_cast<off_t>(w.window_offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(path_ + ": expert read at offset " + std::to_string(w.window_offset + done) +
                        " failed: " + std::strerror(errno));
        }
        if (n == 0) {
            // The last window may run past the end of the file: zero the rest.
            if (w.window_offset + done >= size_) {
                std::memset(dst + done, 0, w.window_bytes - done);
                break;
            }
            throw Error(path_ + ": unexpected end of file at offset " + std::to_string(w.window_offset + done) +
                        "; was the model file truncated while in use?");
        }
        done += static_cast<uint64_t>(n);
    }
    if (!direct_) {
        ::posix_fadvise(fd_, static_cast<off_t>(w.window_offset), static_cast<off_t>(w.window_bytes),
                        POSIX_FADV_DONTNEED);
    }
}

}  // namespace strata::experts
