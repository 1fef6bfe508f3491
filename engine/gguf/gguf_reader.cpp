// GGUF reader. Every read goes through Cursor, which checks bounds first; every
// count is checked against the bytes that could possibly back it before any
// container is sized by it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "gguf/gguf.h"

namespace strata::gguf {
namespace {

using namespace limits;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
// Smallest possible encodings, used to reject counts the remaining bytes cannot back.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;        // key length, type, one byte of value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;   // name length, n_dims, ne[0], type, offset

std::string format_bytes_hex(const uint8_t* p, size_t n) {
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += hex[p[i] >> 4];
        s += hex[p[i] & 15];
    }
    return s;
}

// A name from the file, fit for an error message: quoted, non-printable bytes
// escaped, cut after 64 bytes.
std::string quoted(std::string_view name) {
    static const char* hex = "0123456789abcdef";
    std::string s = "'";
    const size_t n = std::min<size_t>(name.size(), 64);
    for (size_t i = 0; i < n; ++i) {
        const auto ch = static_cast<unsigned char>(name[i]);
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            s += static_cast<char>(ch);
        } else {
            s += "\\x";
            s += hex[ch >> 4];
            s += hex[ch & 15];
        }
    }
    if (name.size() > n) s += "...";
    return s + "'";
}

std::string u128_to_string(unsigned __int128 v) {
    if (v == 0) return "0";
    std::string s;
    while (v) {
        s += static_cast<char>('0' + static_cast<int>(v % 10));
        v /= 10;
    }
    return std::string(s.rbegin(), s.rend());
}

// Bytes a value of this scalar type occupies, 0 for STRING/ARRAY/unknown.
uint64_t scalar_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        default: return 0;
    }
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Where in the file a read happens, formatted only when something fails (the
// tokenizer arrays hold hundreds of thousands of strings; building a message
// per element would cost more than reading them).
struct Loc {
    const char* section;              // "header", "metadata", "tensor"
    const std::string* name = nullptr;  // key or tensor name once known
    uint64_t index = 0;               // entry index while the name is not known yet
    int64_t element = -1;             // array element, -1 when not in an array
    const char* field = nullptr;      // "key", "(type)", ...
    const char* detail = nullptr;     // "(string length)", ...

    Loc with_field(const char* f) const {
        Loc l = *this;
        l.field = f;
        return l;
    }
    Loc with_detail(const char* d) const {
        Loc l = *this;
        l.detail = d;
        return l;
    }
    std::string str() const {
        std::string s = section;
        if (name) s += " " + quoted(*name);
        else if (std::strcmp(section, "header") != 0 && std::strcmp(section, "data section") != 0)
            s += " " + std::to_string(index);
        if (element >= 0) s += " element " + std::to_string(element);
        if (field) s += std::string(" ") + field;
        if (detail) s += std::string(" ") + detail;
        return s;
    }
};

class Cursor {
public:
    Cursor(const std::string& file, const uint8_t* base, uint64_t size) : file_(file), base_(base), size_(size) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    uint64_t size() const { return size_; }

    // A file that ends early is said in plain words first (what the user
    // does about it), then exactly where and what was missing.
    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        const std::string detail = where + ": " + what;
        if (what.rfind("file is truncated", 0) == 0)
            throw Error(file_ + ": the file is incomplete: download it again (" + detail + ")");
        if (what.find("file is truncated") != std::string::npos)
            throw Error(file_ + ": the file is damaged or incomplete: download it again (" + detail + ")");
        throw Error(file_ + ": " + detail);
    }
    [[noreturn]] void fail(const Loc& loc, const std::string& what) const { fail(loc.str(), what); }

    void need(uint64_t n, const Loc& loc) const {
        if (n > remaining()) {
            std::ostringstream os;
            os << "file is truncated: expected " << n << " more bytes at offset " << pos_ << ", found "
               << remaining() << " (file size " << size_ << ")";
            fail(loc, os.str());
        }
    }

    template <class T> T read(const Loc& loc) {
        need(sizeof(T), loc);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    // A length-prefixed string of at most `limit` bytes.
    std::string read_string(const Loc& loc, uint64_t limit) {
        const uint64_t n = read<uint64_t>(loc.with_detail("(string length)"));
        if (n > limit) {
            std::ostringstream os;
            os << "string length " << n << " is absurd (limit " << limit << ")";
            if (n > remaining()) os << "; only " << remaining() << " bytes remain";
            fail(loc, os.str());
        }
        need(n, loc.with_detail("(string bytes)"));
        std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
        pos_ += n;
        return s;
    }

    // Rejects `count` items of at least `min_bytes` each when the remaining bytes
    // cannot hold them.
    void check_count(uint64_t count, uint64_t min_bytes, const Loc& loc, const std::string& what) const {
        if (count > remaining() / min_bytes) {
            std::ostringstream os;
            os << what << " " << count << " is absurd: that many need at least "
               << u128_to_string(static_cast<unsigned __int128>(count) * min_bytes) << " bytes"
               << " but only " << remaining() << " remain at offset " << pos_
               << " (the count is corrupt or the file is truncated)";
            fail(loc, os.str());
        }
    }

    uint64_t array_elements = 0;  // all array elements read so far

private:
    const std::string& file_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

Value read_value(Cursor& c, ValueType type, const Loc& loc, int depth);

Value read_array(Cursor& c, const Loc& loc, int depth) {
    if (depth >= kMaxArrayDepth) {
        c.fail(loc, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    }
    const uint32_t raw_elem = c.read<uint32_t>(loc.with_field("(array element type)"));
    if (!valid_value_type(raw_elem)) {
        c.fail(loc, "unknown array element type " + std::to_string(raw_elem) + " (expected 0..12)");
    }
    const auto elem = static_cast<ValueType>(raw_elem);
    const uint64_t n = c.read<uint64_t>(loc.with_field("(array length)"));
    // Each element needs at least this many bytes in the file, so a count the
    // file cannot back is rejected before anything is allocated.
    uint64_t min_elem = scalar_size(elem);
    if (elem == ValueType::STRING) min_elem = 8;
    if (elem == ValueType::ARRAY) min_elem = 12;
    if (n > kMaxArrayElements - c.array_elements) {
        c.fail(loc, "array of " + std::to_string(n) + " " + value_type_name(elem) +
                        " elements is absurd: the file's arrays would hold more than " +
                        std::to_string(kMaxArrayElements) + " elements together");
    }
    c.check_count(n, min_elem, loc.with_field("(array length)"),
                  std::string("array of ") + value_type_name(elem) + " elements: length");
    c.array_elements += n;
    Value v;
    v.type = ValueType::ARRAY;
    v.elem_type = elem;
    v.array.reserve(n);
    Loc el = loc;
    el.field = nullptr;
    for (uint64_t i = 0; i < n; ++i) {
        el.element = static_cast<int64_t>(i);
        v.array.push_back(read_value(c, elem, el, depth + 1));
    }
    return v;
}

Value read_value(Cursor& c, ValueType type, const Loc& loc, int depth) {
    Value v;
    v.type = type;
    switch (type) {
        case ValueType::UINT8: v.u = c.read<uint8_t>(loc); break;
        case ValueType::INT8: v.i = c.read<int8_t>(loc); break;
        case ValueType::UINT16: v.u = c.read<uint16_t>(loc); break;
        case ValueType::INT16: v.i = c.read<int16_t>(loc); break;
        case ValueType::UINT32: v.u = c.read<uint32_t>(loc); break;
        case ValueType::INT32: v.i = c.read<int32_t>(loc); break;
        case ValueType::UINT64: v.u = c.read<uint64_t>(loc); break;
        case ValueType::INT64: v.i = c.read<int64_t>(loc); break;
        case ValueType::FLOAT32: v.f = c.read<float>(loc); break;
        case ValueType::FLOAT64: v.f = c.read<double>(loc); break;
        case ValueType::BOOL: {
            const uint8_t b = c.read<uint8_t>(loc);
            if (b > 1) c.fail(loc, "bool value is " + std::to_string(b) + " (expected 0 or 1)");
            v.u = b;
            break;
        }
        case ValueType::STRING: v.str = c.read_string(loc, kMaxStringBytes); break;
        case ValueType::ARRAY: return read_array(c, loc, depth);
    }
    return v;
}

}  // namespace

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "uint8";
        case ValueType::INT8: return "int8";
        case ValueType::UINT16: return "uint16";
        case ValueType::INT16: return "int16";
        case ValueType::UINT32: return "uint32";
        case ValueType::INT32: return "int32";
        case ValueType::FLOAT32: return "float32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "uint64";
        case ValueType::INT64: return "int64";
        case ValueType::FLOAT64: return "float64";
    }
    return "unknown";
}

std::unique_ptr<File> File::open(const std::string& path) {
    // O_NONBLOCK: opening a FIFO must not hang; it is rejected as not a regular file below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int err = errno;
        throw Error(path + ": cannot open: " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": is a directory, expected a GGUF file");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file, expected a GGUF file");
    }
    if (st.st_size < 24) {
        ::close(fd);
        throw Error(path + ": the file is incomplete or not a GGUF model: download it again (header: file is truncated: " +
                    std::to_string(st.st_size) + " bytes, too small for a GGUF header of 24 bytes)");
    }
    void* mem = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    const int map_err = errno;
    ::close(fd);
    if (mem == MAP_FAILED) throw Error(path + ": cannot map file: " + std::strerror(map_err));

    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->base_ = static_cast<const uint8_t*>(mem);
    f->size_ = static_cast<uint64_t>(st.st_size);
    f->mapped_ = true;
    f->parse();  // on a throw, ~File unmaps
    return f;
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size, std::string name) {
    std::unique_ptr<File> f(new File());
    f->path_ = std::move(name);
    f->base_ = data;
    f->size_ = data ? size : 0;
    f->parse();
    return f;
}

void File::advise_random() const {
    if (mapped_ && base_) ::madvise(const_cast<uint8_t*>(base_), size_, MADV_RANDOM);
}

void File::drop_pages() const {
    if (mapped_ && base_) ::madvise(const_cast<uint8_t*>(base_), size_, MADV_DONTNEED);
}

File::~File() {
    if (mapped_ && base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

void File::parse() {
    Cursor c(path_, base_, size_);
    const Loc header{"header"};
    const uint32_t magic = c.read<uint32_t>(header.with_field("(magic)"));
    if (magic != kMagic) {
        c.fail("header", "wrong magic: expected 'GGUF' (47475546), found " + format_bytes_hex(base_, 4) +
                             "; this is not a GGUF file");
    }
    version_ = c.read<uint32_t>(header.with_field("(version)"));
    if (version_ != 2 && version_ != 3) {
        std::string hint;
        if (version_ == 1) hint = "; version 1 used 32-bit counts, convert the file with a current llama.cpp";
        if (version_ == 0x02000000u || version_ == 0x03000000u) hint = "; this looks like a big-endian GGUF file";
        c.fail("header", "unsupported GGUF version " + std::to_string(version_) + " (expected 2 or 3)" + hint);
    }
    const uint64_t n_tensors = c.read<uint64_t>(header.with_field("(tensor count)"));
    const uint64_t n_kv = c.read<uint64_t>(header.with_field("(metadata count)"));
    if (n_kv > kMaxMetadataEntries) {
        c.fail("header", "metadata count " + std::to_string(n_kv) + " is absurd (limit " +
                             std::to_string(kMaxMetadataEntries) + ")");
    }
    if (n_tensors > kMaxTensors) {
        c.fail("header", "tensor count " + std::to_string(n_tensors) + " is absurd (limit " +
                             std::to_string(kMaxTensors) + ")");
    }
    c.check_count(n_kv, kMinMetadataEntryBytes, header, "metadata count");
    c.check_count(n_tensors, kMinTensorInfoBytes, header, "tensor count");
    if (n_kv * kMinMetadataEntryBytes + n_tensors * kMinTensorInfoBytes > c.remaining()) {
        c.fail("header", "metadata count " + std::to_string(n_kv) + " and tensor count " + std::to_string(n_tensors) +
                             " together are absurd: they need at least " +
                             std::to_string(n_kv * kMinMetadataEntryBytes + n_tensors * kMinTensorInfoBytes) +
                             " bytes but only " + std::to_string(c.remaining()) +
                             " remain (a count is corrupt or the file is truncated)");
    }

    // Reserve only what a plausible file has; a corrupt count grows the vector
    // no further than the entries that actually parse.
    kv_.reserve(std::min<uint64_t>(n_kv, 4096));
    for (uint64_t k = 0; k < n_kv; ++k) {
        Loc loc{"metadata"};
        loc.index = k;
        std::string key = c.read_string(loc.with_field("key"), kMaxKeyBytes);
        loc.name = &key;
        const uint32_t raw_type = c.read<uint32_t>(loc.with_field("(type)"));
        if (!valid_value_type(raw_type)) {
            c.fail(loc, "unknown value type " + std::to_string(raw_type) + " (expected 0..12)");
        }
        Value v = read_value(c, static_cast<ValueType>(raw_type), loc, 0);
        if (kv_index_.count(key)) c.fail(loc, "key appears twice");
        kv_index_.emplace(key, kv_.size());
        kv_.emplace_back(std::move(key), std::move(v));
    }

    if (const Value* a = find("general.alignment")) {
        if (!a->is_integer() || a->type == ValueType::BOOL) {
            c.fail("metadata 'general.alignment'", std::string("expected an unsigned integer, found ") +
                                                       value_type_name(a->type));
        }
        const bool is_signed = a->type == ValueType::INT8 || a->type == ValueType::INT16 ||
                               a->type == ValueType::INT32 || a->type == ValueType::INT64;
        if (is_signed && a->i < 0) {
            c.fail("metadata 'general.alignment'",
                   "expected a power of two between 1 and " + std::to_string(kMaxAlignment) + ", found " +
                       std::to_string(a->i));
        }
        const uint64_t al = is_signed ? static_cast<uint64_t>(a->i) : a->u;
        if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment) {
            c.fail("metadata 'general.alignment'", "expected a power of two between 1 and " +
                                                       std::to_string(kMaxAlignment) + ", found " +
                                                       std::to_string(al));
        }
        alignment_ = al;
    }

    c.check_count(n_tensors, kMinTensorInfoBytes, Loc{"tensor"}.with_field("infos"), "tensor count");
    tensors_.reserve(std::min<uint64_t>(n_tensors, 4096));
    for (uint64_t t = 0; t < n_tensors; ++t) {
        TensorInfo ti;
        Loc loc{"tensor"};
        loc.index = t;
        ti.name = c.read_string(loc.with_field("name"), kMaxTensorNameBytes);
        loc.name = &ti.name;
        ti.n_dims = c.read<uint32_t>(loc.with_field("(dimension count)"));
        if (ti.n_dims == 0 || ti.n_dims > 4) {
            c.fail(loc, "dimension count " + std::to_string(ti.n_dims) + " (expected 1..4)");
        }
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t ne = c.read<uint64_t>(loc.with_field("(dimension)"));
            if (ne == 0 || ne > kMaxDimension) {
                c.fail(loc, "dimension " + std::to_string(d) + " is " + std::to_string(ne) +
                                " (expected 1..2^40)");
            }
            ti.ne[d] = static_cast<int64_t>(ne);
        }
        ti.raw_type = c.read<uint32_t>(loc.with_field("(type)"));
        ti.offset = c.read<uint64_t>(loc.with_field("(data offset)"));
        const kernels::TypeTraits* tr = kernels::type_traits(ti.raw_type);
        if (!tr) c.fail(loc, "unknown tensor type " + std::to_string(ti.raw_type));
        ti.type = static_cast<kernels::WeightType>(ti.raw_type);
        if (ti.ne[0] % tr->block_elems != 0) {
            c.fail(loc, "row length " + std::to_string(ti.ne[0]) + " is not a multiple of the " + tr->name +
                            " block size " + std::to_string(tr->block_elems));
        }
        // Element count and byte size, checked for overflow step by step (each
        // dimension is at most 2^40, so one step from at most 2^62 stays below 2^102).
        unsigned __int128 elems = 1;
        for (int d = 0; d < 4; ++d) {
            elems *= static_cast<uint64_t>(ti.ne[d]);
            if (elems > kMaxElements) {
                c.fail(loc, "shape " + ti.shape_string() + " overflows: more than 2^62 elements");
            }
        }
        const unsigned __int128 bytes = elems / tr->block_elems * tr->block_bytes;
        if (bytes > size_) {
            c.fail(loc, "shape " + ti.shape_string() + " of type " + tr->name + " needs " + u128_to_string(bytes) +
                            " bytes, more than the whole file (" + std::to_string(size_) +
                            " bytes): the shape is corrupt or the file is truncated");
        }
        ti.nbytes = static_cast<uint64_t>(bytes);
        if (ti.offset % alignment_ != 0) {
            c.fail(loc, "data offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                            std::to_string(alignment_));
        }
        if (tensor_index_.count(ti.name)) c.fail(loc, "name appears twice");
        tensor_index_.emplace(ti.name, tensors_.size());
        tensors_.push_back(std::move(ti));
    }

    data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (n_tensors > 0 && data_offset_ > size_) {
        c.fail("data section", "file is truncated: data section should start at offset " +
                                   std::to_string(data_offset_) + ", file size is " + std::to_string(size_));
    }

    // Every tensor lies inside the file and no two overlap.
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return tensors_[a].offset != tensors_[b].offset ? tensors_[a].offset < tensors_[b].offset : a < b;
    });
    const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
    for (size_t k = 0; k < order.size(); ++k) {
        TensorInfo& ti = tensors_[order[k]];
        if (ti.offset > data_size || ti.nbytes > data_size - ti.offset) {
            c.fail("tensor " + quoted(ti.name),
                   "data [" + std::to_string(ti.offset) + ", " +
                       u128_to_string(static_cast<unsigned __int128>(ti.offset) + ti.nbytes) +
                       ") lies outside the data section of " + std::to_string(data_size) +
                       " bytes; the file is truncated or the offset is corrupt");
        }
        if (k > 0) {
            const TensorInfo& prev = tensors_[order[k - 1]];
            if (prev.offset + prev.nbytes > ti.offset) {
                c.fail("tensor " + quoted(ti.name), "data at offset " + std::to_string(ti.offset) +
                                                        " overlaps tensor " + quoted(prev.name) + " [" +
                                                        std::to_string(prev.offset) + ", " +
                                                        std::to_string(prev.offset + prev.nbytes) + ")");
            }
        }
        ti.file_offset = data_offset_ + ti.offset;
        ti.data = base_ + ti.file_offset;
    }
    logger("gguf")->debug("{}: GGUF v{}, {} metadata entries, {} tensors, data at {}", path_, version_, kv_.size(),
                          tensors_.size(), data_offset_);
}

const Value* File::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void type_mismatch(const std::string& path, std::string_view key, const char* expected, const Value& v) {
    throw Error(path + ": metadata '" + std::string(key) + "': expected " + expected + ", found " +
                value_type_name(v.type));
}
}  // namespace

std::string File::get_string(std::string_view key) const {
    const Value* v = find(key);
    if (!v) throw Error(path_ + ": metadata '" + std::string(key) + "' is missing");
    if (v->type != ValueType::STRING) type_mismatch(path_, key, "a string", *v);
    return v->str;
}

std::string File::get_string_or(std::string_view key, const std::string& fallback) const {
    return has(key) ? get_string(key) : fallback;
}

uint64_t File::get_uint(std::string_view key) const {
    const Value* v = find(key);
    if (!v) throw Error(path_ + ": metadata '" + std::string(key) + "' is missing");
    if (!v->is_integer()) type_mismatch(path_, key, "an unsigned integer", *v);
    switch (v->type) {
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            if (v->i < 0) {
                throw Error(path_ + ": metadata '" + std::string(key) + "': expected a non-negative value, found " +
                            std::to_string(v->i));
            }
            return static_cast<uint64_t>(v->i);
        default: return v->u;
    }
}

uint64_t File::get_uint_or(std::string_view key, uint64_t fallback) const {
    return has(key) ? get_uint(key) : fallback;
}

int64_t File::get_int_or(std::string_view key, int64_t fallback) const {
    const Value* v = find(key);
    if (!v) return fallback;
    if (!v->is_integer()) type_mismatch(path_, key, "an integer", *v);
    switch (v->type) {
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return v->i;
        default:
            if (v->u > static_cast<uint64_t>(INT64_MAX)) {
                throw Error(path_ + ": metadata '" + std::string(key) + "': value " + std::to_string(v->u) +
                            " is out of range");
            }
            return static_cast<int64_t>(v->u);
    }
}

double File::get_float(std::string_view key) const {
    const Value* v = find(key);
    if (!v) throw Error(path_ + ": metadata '" + std::string(key) + "' is missing");
    if (v->is_float()) return v->f;
    if (v->is_integer()) return static_cast<double>(get_int_or(key, 0));
    type_mismatch(path_, key, "a number", *v);
}

double File::get_float_or(std::string_view key, double fallback) const {
    return has(key) ? get_float(key) : fallback;
}

bool File::get_bool_or(std::string_view key, bool fallback) const {
    const Value* v = find(key);
    if (!v) return fallback;
    if (v->type == ValueType::BOOL) return v->u != 0;
    if (v->is_integer()) return get_int_or(key, 0) != 0;
    type_mismatch(path_, key, "a bool", *v);
}

const std::vector<Value>* File::get_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return nullptr;
    if (v->type != ValueType::ARRAY) type_mismatch(path_, key, "an array", *v);
    return &v->array;
}

bool Value::is_integer() const {
    switch (type) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
        case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
        case ValueType::BOOL:
            return true;
        default: return false;
    }
}

std::string Value::to_string(size_t max_items) const {
    std::ostringstream os;
    switch (type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64: os << u; break;
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: os << i; break;
        case ValueType::FLOAT32: case ValueType::FLOAT64: os << f; break;
        case ValueType::BOOL: os << (u ? "true" : "false"); break;
        case ValueType::STRING: {
            std::string s = str.size() > 80 ? str.substr(0, 77) + "..." : str;
            for (char& ch : s)
                if (ch == '\n') ch = ' ';
            os << '"' << s << '"';
            break;
        }
        case ValueType::ARRAY: {
            os << value_type_name(elem_type) << "[" << array.size() << "] [";
            for (size_t k = 0; k < array.size() && k < max_items; ++k) os << (k ? ", " : "") << array[k].to_string(3);
            if (array.size() > max_items) os << ", ...";
            os << "]";
            break;
        }
    }
    return os.str();
}

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
    return s + "]";
}

}  // namespace strata::gguf
