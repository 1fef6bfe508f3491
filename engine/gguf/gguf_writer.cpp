// GGUF v3 writer. Layout (all little-endian):
//
//   u32 magic "GGUF", u32 version 3, u64 tensor count, u64 metadata count
//   metadata: { string key, u32 type, value }...       (insertion order)
//   tensor infos: { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }...
//   zero padding to the alignment (none when there are no tensors)
//   tensor data, each tensor followed by zero padding to the alignment
//
// where a string is { u64 length, bytes } and an array { u32 element type, u64
// count, elements }. The padding after every tensor, the last included, is what
// ggml's and gguf-py's writers do, so a file written by llama.cpp and copied
// through File + Writer::copy_from comes out byte for byte the same.
//
// Everything the reader would reject is rejected here first, with a message
// that names the key or tensor, so the engine never writes a file it cannot load.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/error.h"
#include "gguf/gguf.h"

namespace strata::gguf {
namespace {

using namespace limits;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;

[[noreturn]] void fail_key(const std::string& key, const std::string& what) {
    throw Error("gguf writer: metadata '" + key + "': " + what);
}

[[noreturn]] void fail_tensor(const std::string& name, const std::string& what) {
    throw Error("gguf writer: tensor '" + name + "': " + what);
}

bool valid_value_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Checks one value against what its type can hold and what the reader accepts;
// returns the number of array elements it contains (nested arrays included),
// which count toward limits::kMaxArrayElements.
uint64_t validate_value(const std::string& key, const Value& v, int depth) {
    auto range = [&](bool ok, auto shown) {
        if (!ok) {
            fail_key(key, "value " + std::to_string(shown) + " does not fit " + value_type_name(v.type));
        }
    };
    switch (v.type) {
        case ValueType::UINT8: range(v.u <= UINT8_MAX, v.u); return 0;
        case ValueType::UINT16: range(v.u <= UINT16_MAX, v.u); return 0;
        case ValueType::UINT32: range(v.u <= UINT32_MAX, v.u); return 0;
        case ValueType::UINT64: return 0;
        case ValueType::INT8: range(v.i >= INT8_MIN && v.i <= INT8_MAX, v.i); return 0;
        case ValueType::INT16: range(v.i >= INT16_MIN && v.i <= INT16_MAX, v.i); return 0;
        case ValueType::INT32: range(v.i >= INT32_MIN && v.i <= INT32_MAX, v.i); return 0;
        case ValueType::INT64: return 0;
        case ValueType::BOOL: range(v.u <= 1, v.u); return 0;
        case ValueType::FLOAT32:
            // Converting a finite double beyond float's range is undefined behaviour.
            range(!std::isfinite(v.f) || std::fabs(v.f) <= FLT_MAX, v.f);
            return 0;
        case ValueType::FLOAT64: return 0;
        case ValueType::STRING:
            if (v.str.size() > kMaxStringBytes) {
                fail_key(key, "string of " + std::to_string(v.str.size()) + " bytes is longer than the limit of " +
                                  std::to_string(kMaxStringBytes));
            }
            return 0;
        case ValueType::ARRAY: {
            if (depth >= kMaxArrayDepth) {
                fail_key(key, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
            }
            if (!valid_value_type(v.elem_type)) {
                fail_key(key, "unknown array element type " + std::to_string(static_cast<uint32_t>(v.elem_type)));
            }
            uint64_t n = v.array.size();
            for (size_t k = 0; k < v.array.size(); ++k) {
                if (v.array[k].type != v.elem_type) {
                    fail_key(key, "array element " + std::to_string(k) + " has type " +
                                      value_type_name(v.array[k].type) + ", expected " +
                                      value_type_name(v.elem_type));
                }
                n += validate_value(key, v.array[k], depth + 1);
                if (n > kMaxArrayElements) break;
            }
            return n;
        }
    }
    fail_key(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

uint64_t count_elements(const Value& v) {
    if (v.type != ValueType::ARRAY) return 0;
    uint64_t n = v.array.size();
    for (const Value& e : v.array) n += count_elements(e);
    return n;
}

uint64_t alignment_of(const std::string& key, const Value& v) {
    bool ok = false;
    uint64_t al = 0;
    switch (v.type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
            ok = true;
            al = v.u;
            break;
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            ok = v.i > 0;
            al = ok ? static_cast<uint64_t>(v.i) : 0;
            break;
        default:
            fail_key(key, std::string("expected an unsigned integer (uint32), found ") + value_type_name(v.type));
    }
    if (!ok || al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment) {
        fail_key(key, "expected a power of two between 1 and " + std::to_string(kMaxAlignment) + ", found " +
                          (v.type == ValueType::INT8 || v.type == ValueType::INT16 || v.type == ValueType::INT32 ||
                                   v.type == ValueType::INT64
                               ? std::to_string(v.i)
                               : std::to_string(v.u)));
    }
    return al;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// ---- sinks ---------------------------------------------------------------

struct CountingSink {
    uint64_t n = 0;
    void write(const void*, size_t len) { n += len; }
};

// Forwards to another sink and counts, for the padding.
template <class Sink> struct PosSink {
    Sink& s;
    uint64_t n = 0;
    void write(const void* p, size_t len) {
        s.write(p, len);
        n += len;
    }
};

struct VectorSink {
    std::vector<uint8_t>* out;
    void write(const void* p, size_t len) {
        const auto* b = static_cast<const uint8_t*>(p);
        out->insert(out->end(), b, b + len);
    }
};

std::string dir_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

// What went wrong with a write, in words a user can act on.
std::string describe_errno(int err, const std::string& path) {
    switch (err) {
        case ENOSPC: return "disk full (no space left on the device holding " + dir_of(path) + ")";
        case EDQUOT: return "disk quota exceeded on the device holding " + dir_of(path);
        case EFBIG: return "file too large for this file system or the process's file size limit";
        case EROFS: return "the file system holding " + dir_of(path) + " is read-only";
        case EACCES: case EPERM: return "permission denied in directory " + dir_of(path);
        case ENOENT: return "directory " + dir_of(path) + " does not exist";
        case ENOTDIR: return "a component of " + dir_of(path) + " is not a directory";
        default: return std::strerror(err);
    }
}

// Buffered writes to a file descriptor; large blocks go straight through.
class FdSink {
public:
    FdSink(int fd, const std::string& path, uint64_t total) : fd_(fd), path_(path), total_(total) {
        buf_.reserve(kBuf);
    }
    void write(const void* p, size_t len) {
        if (buf_.size() + len > kBuf) flush();
        if (len >= kBuf) {
            put(static_cast<const uint8_t*>(p), len);
        } else {
            const auto* b = static_cast<const uint8_t*>(p);
            buf_.insert(buf_.end(), b, b + len);
        }
    }
    void flush() {
        if (!buf_.empty()) put(buf_.data(), buf_.size());
        buf_.clear();
    }

private:
    static constexpr size_t kBuf = 1 << 20;
    void put(const uint8_t* p, size_t len) {
        while (len > 0) {
            const ssize_t w = ::write(fd_, p, std::min<size_t>(len, 1u << 30));
            if (w < 0) {
                if (errno == EINTR) continue;
                const int err = errno;
                throw Error(path_ + ": cannot write: " + describe_errno(err, path_) + " after " +
                            std::to_string(written_) + " of " + std::to_string(total_) + " bytes");
            }
            if (w == 0) {
                throw Error(path_ + ": cannot write: the device accepted no more bytes after " +
                            std::to_string(written_) + " of " + std::to_string(total_) + " bytes");
            }
            p += w;
            len -= static_cast<size_t>(w);
            written_ += static_cast<uint64_t>(w);
        }
    }
    int fd_;
    const std::string& path_;
    uint64_t total_;
    uint64_t written_ = 0;
    std::vector<uint8_t> buf_;
};

template <class Sink> void put_u32(Sink& s, uint32_t v) { s.write(&v, 4); }
template <class Sink> void put_u64(Sink& s, uint64_t v) { s.write(&v, 8); }
template <class Sink> void put_string(Sink& s, const std::string& str) {
    put_u64(s, str.size());
    if (!str.empty()) s.write(str.data(), str.size());
}

template <class Sink> void put_value(Sink& s, const Value& v) {
    switch (v.type) {
        case ValueType::UINT8: { const auto x = static_cast<uint8_t>(v.u); s.write(&x, 1); break; }
        case ValueType::INT8: { const auto x = static_cast<int8_t>(v.i); s.write(&x, 1); break; }
        case ValueType::UINT16: { const auto x = static_cast<uint16_t>(v.u); s.write(&x, 2); break; }
        case ValueType::INT16: { const auto x = static_cast<int16_t>(v.i); s.write(&x, 2); break; }
        case ValueType::UINT32: { const auto x = static_cast<uint32_t>(v.u); s.write(&x, 4); break; }
        case ValueType::INT32: { const auto x = static_cast<int32_t>(v.i); s.write(&x, 4); break; }
        case ValueType::UINT64: { const uint64_t x = v.u; s.write(&x, 8); break; }
        case ValueType::INT64: { const int64_t x = v.i; s.write(&x, 8); break; }
        case ValueType::FLOAT32: { const auto x = static_cast<float>(v.f); s.write(&x, 4); break; }
        case ValueType::FLOAT64: { const double x = v.f; s.write(&x, 8); break; }
        case ValueType::BOOL: { const uint8_t x = v.u ? 1 : 0; s.write(&x, 1); break; }
        case ValueType::STRING: put_string(s, v.str); break;
        case ValueType::ARRAY:
            put_u32(s, static_cast<uint32_t>(v.elem_type));
            put_u64(s, v.array.size());
            for (const Value& e : v.array) put_value(s, e);
            break;
    }
}

template <class Sink> void put_zeros(Sink& s, uint64_t n) {
    static const uint8_t zeros[64] = {};
    while (n > 0) {
        const uint64_t k = std::min<uint64_t>(n, sizeof zeros);
        s.write(zeros, k);
        n -= k;
    }
}

}  // namespace

// ---- Writer --------------------------------------------------------------

void Writer::set(const std::string& key, Value value) {
    if (key.empty()) throw Error("gguf writer: metadata key is empty");
    if (key.size() > kMaxKeyBytes) {
        throw Error("gguf writer: metadata key of " + std::to_string(key.size()) + " bytes is longer than the limit of " +
                    std::to_string(kMaxKeyBytes));
    }
    const uint64_t n = validate_value(key, value, 0);
    if (key == "general.alignment") alignment_of(key, value);

    const auto it = kv_index_.find(key);
    const uint64_t replaced = it == kv_index_.end() ? 0 : count_elements(kv_[it->second].second);
    const uint64_t others = array_elements_ - replaced;
    if (n > kMaxArrayElements || others + n > kMaxArrayElements) {
        fail_key(key, "arrays would hold " + std::to_string(others + n) + " elements together, more than the limit of " +
                          std::to_string(kMaxArrayElements));
    }
    if (it != kv_index_.end()) {
        kv_[it->second].second = std::move(value);
    } else {
        if (kv_.size() >= kMaxMetadataEntries) {
            fail_key(key, "more than " + std::to_string(kMaxMetadataEntries) + " metadata entries");
        }
        kv_index_.emplace(key, kv_.size());
        kv_.emplace_back(key, std::move(value));
    }
    array_elements_ = others + n;
}

void Writer::add_tensor(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                        std::vector<uint8_t> data) {
    const uint64_t nbytes = data.size();
    add_tensor_view(name, type, std::move(ne), data.data(), nbytes);
    PendingTensor& t = tensors_.back();
    t.owned = std::move(data);  // serialise() reads `owned` when set, so copies of a Writer stay valid
    t.view = t.owned.data();
}

void Writer::add_tensor_view(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                             const uint8_t* data, uint64_t nbytes) {
    PendingTensor t = checked(name, type, std::move(ne), nbytes);
    if (!data) fail_tensor(name, "data pointer is null");
    t.view = data;
    tensor_index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(t));
}

void Writer::add_tensor_produced(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                                 uint64_t nbytes, Producer produce) {
    PendingTensor t = checked(name, type, std::move(ne), nbytes);
    if (!produce) fail_tensor(name, "no producer for its bytes");
    t.produce = std::move(produce);
    tensor_index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(t));
}

Writer::PendingTensor Writer::checked(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                                      uint64_t nbytes) const {
    if (name.empty()) throw Error("gguf writer: tensor name is empty");
    if (name.size() > kMaxWrittenTensorNameBytes) {
        fail_tensor(name, "name is " + std::to_string(name.size()) + " bytes, longer than the limit of " +
                              std::to_string(kMaxWrittenTensorNameBytes) + " (GGML_MAX_NAME)");
    }
    if (tensor_index_.count(name)) fail_tensor(name, "added twice (tensor names must be unique)");
    if (tensors_.size() >= kMaxTensors) fail_tensor(name, "more than " + std::to_string(kMaxTensors) + " tensors");
    const kernels::TypeTraits* tr = kernels::type_traits(type);
    if (!tr) fail_tensor(name, "unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
    if (kernels::file_type(type) != type) {
        fail_tensor(name, std::string(tr->name) + " is an in-memory layout, not a file type: write its rows as " +
                              kernels::type_traits(kernels::file_type(type))->name);
    }
    if (ne.empty() || ne.size() > 4) {
        fail_tensor(name, "has " + std::to_string(ne.size()) + " dimensions (expected 1..4)");
    }
    std::string shape = "[";
    for (size_t d = 0; d < ne.size(); ++d) shape += (d ? ", " : "") + std::to_string(ne[d]);
    shape += "]";
    for (size_t d = 0; d < ne.size(); ++d) {
        if (ne[d] < 1 || static_cast<uint64_t>(ne[d]) > kMaxDimension) {
            fail_tensor(name, "shape " + shape + ": dimension " + std::to_string(d) + " is " + std::to_string(ne[d]) +
                                  " (expected 1..2^40)");
        }
    }
    if (ne[0] % tr->block_elems != 0) {
        fail_tensor(name, "row length " + std::to_string(ne[0]) + " is not a multiple of the " + tr->name +
                              " block size " + std::to_string(tr->block_elems));
    }
    unsigned __int128 elems = 1;
    for (int64_t x : ne) {
        elems *= static_cast<uint64_t>(x);
        if (elems > kMaxElements) fail_tensor(name, "shape " + shape + " has more than 2^62 elements");
    }
    const uint64_t expected = static_cast<uint64_t>(elems / tr->block_elems * tr->block_bytes);
    if (nbytes != expected) {
        fail_tensor(name, "shape " + shape + " of type " + tr->name + " needs " + std::to_string(expected) +
                              " bytes of data, found " + std::to_string(nbytes));
    }
    PendingTensor t;
    t.name = name;
    t.type = type;
    t.ne = std::move(ne);
    t.nbytes = nbytes;
    return t;
}

void Writer::copy_from(const File& file) {
    for (const auto& [key, value] : file.metadata()) set(key, value);
    for (const TensorInfo& ti : file.tensors()) {
        add_tensor_view(ti.name, ti.type, std::vector<int64_t>(ti.ne, ti.ne + ti.n_dims), ti.data, ti.nbytes);
    }
}

uint64_t Writer::alignment() const {
    const auto it = kv_index_.find("general.alignment");
    return it == kv_index_.end() ? kDefaultAlignment : alignment_of(it->first, kv_[it->second].second);
}

template <class Sink> void Writer::serialise(Sink& sink) const {
    const uint64_t align = alignment();
    PosSink<Sink> out{sink};
    put_u32(out, kMagic);
    put_u32(out, kVersion);
    put_u64(out, tensors_.size());
    put_u64(out, kv_.size());
    for (const auto& [key, value] : kv_) {
        put_string(out, key);
        put_u32(out, static_cast<uint32_t>(value.type));
        put_value(out, value);
    }
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
        put_string(out, t.name);
        put_u32(out, static_cast<uint32_t>(t.ne.size()));
        for (int64_t x : t.ne) put_u64(out, static_cast<uint64_t>(x));
        put_u32(out, static_cast<uint32_t>(t.type));
        put_u64(out, offset);
        offset = align_up(offset + t.nbytes, align);
    }
    // gguf-py writes no padding when there are no tensors (vocab-only files);
    // ggml does. The reader accepts both; follow gguf-py so those round-trip too.
    if (!tensors_.empty()) put_zeros(out, align_up(out.n, align) - out.n);
    for (const PendingTensor& t : tensors_) {
        if (!t.produce) {
            out.write(t.owned.empty() ? t.view : t.owned.data(), t.nbytes);
        } else if constexpr (std::is_same_v<Sink, CountingSink>) {
            out.write(nullptr, t.nbytes);  // counting only: nothing is produced
        } else {
            const std::vector<uint8_t> bytes = t.produce();
            if (bytes.size() != t.nbytes)
                fail_tensor(t.name, "its producer made " + std::to_string(bytes.size()) + " bytes, not the " +
                                        std::to_string(t.nbytes) + " its shape and type need");
            out.write(bytes.data(), t.nbytes);
        }
        put_zeros(out, align_up(t.nbytes, align) - t.nbytes);
    }
}

uint64_t Writer::byte_size() const {
    CountingSink c;
    serialise(c);
    return c.n;
}

std::vector<uint8_t> Writer::to_bytes() const {
    std::vector<uint8_t> out;
    out.reserve(byte_size());
    VectorSink s{&out};
    serialise(s);
    return out;
}

void Writer::write(const std::string& path) const {
    if (path.empty()) throw Error("gguf writer: output path is empty");
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        throw Error(path + ": cannot write: is a directory");
    }
    const std::string dir = dir_of(path);
    if (::stat(dir.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT) throw Error(path + ": cannot write: directory " + dir + " does not exist");
        throw Error(path + ": cannot write: " + dir + ": " + describe_errno(err, path));
    }
    if (!S_ISDIR(st.st_mode)) throw Error(path + ": cannot write: " + dir + " is not a directory");

    const uint64_t total = byte_size();
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    // The file is written unnamed (O_TMPFILE) where the file system allows and
    // /proc can name it afterwards: a process killed mid-write (SIGKILL, the
    // OOM killer; a long quantization streams through here) leaves nothing
    // behind. Elsewhere a temporary name, removed on every failure we see.
    int fd = ::access("/proc/self/fd", X_OK) == 0 ? ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
    const bool unnamed = fd >= 0;
    if (!unnamed) fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int err = errno;
        throw Error(path + ": cannot create " + tmp + ": " + describe_errno(err, path));
    }
    struct Guard {
        int fd;
        const std::string& tmp;
        bool named;  // tmp exists on disk
        bool done = false;
        ~Guard() {
            if (done) return;
            if (fd >= 0) ::close(fd);
            if (named) ::unlink(tmp.c_str());
        }
    } guard{fd, tmp, !unnamed};

    FdSink sink(fd, path, total);
    serialise(sink);
    sink.flush();
    if (::fsync(fd) != 0) {
        const int err = errno;
        throw Error(path + ": cannot write: " + describe_errno(err, path) + " (while syncing " +
                    std::to_string(total) + " bytes to disk)");
    }
    if (unnamed) {
        // Named only now that it is whole, then renamed over `path` (linkat
        // cannot replace a file).
        const std::string self = "/proc/self/fd/" + std::to_string(fd);
        if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
            const int err = errno;
            throw Error(path + ": cannot name the written file " + tmp + ": " + describe_errno(err, path));
        }
        guard.named = true;
    }
    const int rc = ::close(fd);
    guard.fd = -1;
    if (rc != 0) {
        const int err = errno;
        throw Error(path + ": cannot write: " + describe_errno(err, path) + " (on close)");
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        throw Error(path + ": cannot rename " + tmp + " into place: " + describe_errno(err, path));
    }
    guard.done = true;
}

}  // namespace strata::gguf
