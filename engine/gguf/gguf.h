// GGUF reader (mmap, validated) and writer.
//
// A GGUF file is: header (magic, version, tensor count, metadata count),
// metadata key/value pairs, tensor infos (name, dims, type, offset), padding to
// general.alignment, then the tensor data section. The reader maps the file
// read-only and validates every count, length, type, dimension and offset
// against the bytes actually present before it allocates or touches anything,
// so a broken or hostile file yields a strata::Error naming the file, the field
// or tensor, what was expected and what was found -- never a crash and never an
// allocation sized by an unchecked count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quant_types.h"

namespace strata::gguf {

// Limits the reader enforces on top of "fits in the bytes that are there", so a
// corrupt count can never size a multi-gigabyte allocation even in a large file.
// The writer refuses to produce anything the reader would reject.
namespace limits {
inline constexpr uint64_t kMaxStringBytes = 1ull << 30;      // any string value
inline constexpr uint64_t kMaxKeyBytes = 65535;              // a metadata key
inline constexpr uint64_t kMaxTensorNameBytes = 65535;       // reader; the writer keeps llama.cpp's 63
inline constexpr uint64_t kMaxWrittenTensorNameBytes = 63;   // GGML_MAX_NAME - 1
inline constexpr int kMaxArrayDepth = 8;                     // arrays of arrays of ...
inline constexpr uint64_t kMaxArrayElements = 1ull << 23;    // all array elements of a file together
inline constexpr uint64_t kMaxMetadataEntries = 1ull << 20;
inline constexpr uint64_t kMaxTensors = 1ull << 20;
inline constexpr uint64_t kMaxDimension = 1ull << 40;        // one entry of ne[]
inline constexpr uint64_t kMaxElements = 1ull << 62;         // ne[0]*ne[1]*ne[2]*ne[3]
inline constexpr uint64_t kMaxAlignment = 1ull << 20;
inline constexpr uint64_t kDefaultAlignment = 32;
}  // namespace limits

enum class ValueType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

const char* value_type_name(ValueType t);

// One metadata value. Scalars use the field matching their kind; arrays hold
// their elements (of elem_type) in `array`, recursively for arrays of arrays.
struct Value {
    ValueType type = ValueType::UINT8;
    uint64_t u = 0;       // UINT8/16/32/64, BOOL
    int64_t i = 0;        // INT8/16/32/64
    double f = 0.0;       // FLOAT32/64
    std::string str;      // STRING
    ValueType elem_type = ValueType::UINT8;  // ARRAY
    std::vector<Value> array;                // ARRAY

    bool is_integer() const;
    bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
    // Human-readable, arrays abbreviated after `max_items` elements.
    std::string to_string(size_t max_items = 8) const;

    static Value make_u8(uint8_t v);
    static Value make_i8(int8_t v);
    static Value make_u16(uint16_t v);
    static Value make_i16(int16_t v);
    static Value make_u32(uint32_t v);
    static Value make_i32(int32_t v);
    static Value make_u64(uint64_t v);
    static Value make_i64(int64_t v);
    static Value make_f32(float v);
    static Value make_f64(double v);
    static Value make_bool(bool v);
    static Value make_string(std::string v);
    // Throws strata::Error when an item's type is not elem_type.
    static Value make_array(ValueType elem_type, std::vector<Value> items);
    static Value make_string_array(const std::vector<std::string>& items);
    static Value make_f32_array(const std::vector<float>& items);
    static Value make_i32_array(const std::vector<int32_t>& items);

    // Same type and same value (floats compared bit for bit, arrays element-wise).
    bool operator==(const Value& other) const;
};

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};     // ne[0] is the contiguous (row) dimension
    uint32_t raw_type = 0;            // as stored in the file
    kernels::WeightType type = kernels::WeightType::F32;  // valid when type_known
    uint64_t offset = 0;              // relative to the data section
    uint64_t file_offset = 0;         // absolute offset in the file
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr;    // into the mapping

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    // Matrices stacked in the tensor: ne[2] of a 3-D tensor (the experts), else 1.
    int64_t n_matrices() const { return n_dims >= 3 ? ne[2] : 1; }
    std::string shape_string() const;  // "[128, 256, 8]"
};

// Read-only, memory-mapped GGUF file. Movable, not copyable; the mapping lives
// as long as the object.
class File {
public:
    // Opens and validates. Throws strata::Error.
    static std::unique_ptr<File> open(const std::string& path);
    // Parses a buffer the caller keeps alive (used by tests and the fuzzer).
    static std::unique_ptr<File> from_memory(const uint8_t* data, size_t size, std::string name = "<memory>");

    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return size_; }
    const uint8_t* base() const { return base_; }

    // Metadata in file order.
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed getters. The *_or forms return `fallback` when the key is absent and
    // throw when it is present with an incompatible type; the plain forms throw
    // when absent too. Integer getters accept any integer type whose value fits.
    std::string get_string(std::string_view key) const;
    std::string get_string_or(std::string_view key, const std::string& fallback) const;
    uint64_t get_uint(std::string_view key) const;
    uint64_t get_uint_or(std::string_view key, uint64_t fallback) const;
    int64_t get_int_or(std::string_view key, int64_t fallback) const;
    double get_float(std::string_view key) const;
    double get_float_or(std::string_view key, double fallback) const;
    bool get_bool_or(std::string_view key, bool fallback) const;
    // Arrays: throw when present with the wrong element type.
    const std::vector<Value>* get_array(std::string_view key) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* tensor(std::string_view name) const;

    // Drops the mapping's resident pages (they refault on the next access).
    // Called once the weights an engine uses have been copied out, so the
    // mapping no longer counts toward the process's resident memory.
    void drop_pages() const;
    // No read-ahead on page faults: for engines that read the file through
    // other means (O_DIRECT) and touch the mapping only for small tensors, so
    // those touches do not pull megabytes around them into the page cache.
    void advise_random() const;

private:
    File() = default;
    void parse();

    std::string path_;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    bool mapped_ = false;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> kv_;
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes GGUF v3. Metadata and tensors are written in the order they were added;
// tensor data is aligned to `general.alignment` (default 32). Deterministic:
// the same calls produce the same bytes.
class Writer {
public:
    void set(const std::string& key, Value value);  // replaces an existing key in place
    // `data` must hold exactly row_bytes(type, ne[0]) * ne[1] * ne[2] * ne[3] bytes.
    void add_tensor(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                    std::vector<uint8_t> data);
    // Same, without copying: the caller keeps `data` alive until write() returns.
    void add_tensor_view(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                         const uint8_t* data, uint64_t nbytes);
    // Same, with the bytes made while write()/to_bytes() runs, in tensor order:
    // a file of any size is written with one produced tensor in memory at a
    // time. `produce` must return exactly row_bytes(type, ne[0]) * rows bytes
    // (else the write fails, naming the tensor); it is called once per
    // write()/to_bytes() (byte_size() does not call it) and may throw, which
    // leaves no file behind.
    using Producer = std::function<std::vector<uint8_t>()>;
    void add_tensor_produced(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                             uint64_t nbytes, Producer produce);
    // Copies every metadata entry (in file order) and every tensor (as a view into
    // the mapping, in file order) of `file`; `file` must outlive write()/to_bytes().
    // Reading a file this writer produced and copying it back yields the same bytes.
    void copy_from(const File& file);
    size_t metadata_count() const { return kv_.size(); }
    size_t tensor_count() const { return tensors_.size(); }
    // Size in bytes of what write()/to_bytes() produce.
    uint64_t byte_size() const;
    // Writes atomically: an unnamed file (O_TMPFILE) or a temporary name,
    // synced, then renamed into place. Throws strata::Error.
    void write(const std::string& path) const;
    // Serialises to memory (tests).
    std::vector<uint8_t> to_bytes() const;

private:
    struct PendingTensor {
        std::string name;
        kernels::WeightType type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> owned;
        const uint8_t* view = nullptr;
        Producer produce;
        uint64_t nbytes = 0;
    };
    // Checks a tensor's name, type, shape and size; throws strata::Error naming it.
    PendingTensor checked(const std::string& name, kernels::WeightType type, std::vector<int64_t> ne,
                          uint64_t nbytes) const;
    uint64_t alignment() const;
    template <class Sink> void serialise(Sink& sink) const;

    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<PendingTensor> tensors_;
    // Lookups, so that adding n tensors or keys costs n log n, not n^2.
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
    uint64_t array_elements_ = 0;  // all array elements in kv_, for limits::kMaxArrayElements
};

}  // namespace strata::gguf
