// GGUF reader and writer.
//
// The byte layout is checked against a file assembled by hand (Raw, below), not
// against the reader, so a bug shared by reader and writer cannot hide. The
// broken-file corpus is generated from that hand-built file: truncation at every
// byte, bit flips in every count/type/offset/dimension, huge counts and the
// specific corruptions the reader must name. Every case must throw strata::Error
// whose message names the file and says what was wrong -- and none may make a
// large allocation (operator new is replaced below to watch the largest one).
#include <QtTest>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "test_support.h"

// ---- allocation watch ----------------------------------------------------
// Under AddressSanitizer the runtime owns operator new; there the sanitizer
// script sets ASAN_OPTIONS=max_allocation_size_mb instead.
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_WATCH_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_WATCH_ALLOCATIONS 0
#endif
#endif
#ifndef STRATA_WATCH_ALLOCATIONS
#define STRATA_WATCH_ALLOCATIONS 1
#endif

namespace {
std::atomic<bool> g_watch{false};
std::atomic<size_t> g_largest{0};
}  // namespace

#if STRATA_WATCH_ALLOCATIONS
void* operator new(size_t n) {
    if (g_watch.load(std::memory_order_relaxed)) {
        size_t cur = g_largest.load(std::memory_order_relaxed);
        while (n > cur && !g_largest.compare_exchange_weak(cur, n)) {
        }
    }
    void* p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
    try {
        return operator new(n);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
    try {
        return operator new(n);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

using strata::Error;
using namespace strata::gguf;
using strata::kernels::WeightType;

namespace {

// ---- a GGUF file assembled by hand, with named field offsets ---------------
struct Raw {
    std::vector<uint8_t> b;
    std::map<std::string, size_t> at;

    void mark(const std::string& name) { at[name] = b.size(); }
    template <class T> void put(T v) {
        const size_t o = b.size();
        b.resize(o + sizeof v);
        std::memcpy(&b[o], &v, sizeof v);
    }
    void str(std::string_view s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
    }
    void bytes(const std::vector<uint8_t>& v) { b.insert(b.end(), v.begin(), v.end()); }
    void pad(uint64_t a) {
        while (b.size() % a) b.push_back(0);
    }
    size_t off(const std::string& name) const {
        auto it = at.find(name);
        if (it == at.end()) qFatal("no mark %s", name.c_str());
        return it->second;
    }
    template <class T> void poke(const std::string& name, T v, size_t extra = 0) {
        std::memcpy(&b[off(name) + extra], &v, sizeof v);
    }
    template <class T> T peek(const std::string& name) const {
        T v;
        std::memcpy(&v, &b[off(name)], sizeof v);
        return v;
    }
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 12345u;
    for (auto& c : v) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<uint8_t>(x >> 24);
    }
    return v;
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> fs) {
    std::vector<uint8_t> v(fs.size() * 4);
    size_t k = 0;
    for (float f : fs) std::memcpy(&v[4 * k++], &f, 4);
    return v;
}

// The small valid file every corpus case starts from: seven metadata entries
// (strings, u32, string array, array of arrays, bool, f32) and three tensors
// (F32 [4,2], Q8_0 [32], F16 [3,1,2,2]) whose data is padded to 32.
const std::vector<uint8_t> kT0 = f32_bytes({0, 1, 2, 3, 4, 5, 6, 7});
const std::vector<uint8_t> kT1 = pattern(34, 1);
const std::vector<uint8_t> kT2 = pattern(24, 2);
const std::string kDescription(203, 'd');  // leaves the infos unaligned

Raw small_raw(uint32_t version = 3) {
    Raw r;
    r.put<uint32_t>(0x46554747);
    r.mark("version");
    r.put<uint32_t>(version);
    r.mark("n_tensors");
    r.put<uint64_t>(3);
    r.mark("n_kv");
    r.put<uint64_t>(7);

    r.mark("kv0");
    r.str("general.architecture");
    r.mark("kv0.type");
    r.put<uint32_t>(8);
    r.mark("kv0.value");
    r.str("llama");

    // a long string early on, so that cuts after it are past what the header
    // counts alone could flag and the reader has to find the truncation itself
    r.mark("kvd");
    r.str("general.description");
    r.mark("kvd.type");
    r.put<uint32_t>(8);
    r.mark("kvd.value");
    r.str(kDescription);

    r.mark("kv1");
    r.str("test.count");
    r.mark("kv1.type");
    r.put<uint32_t>(4);
    r.mark("kv1.value");
    r.put<uint32_t>(7);

    r.mark("kv2");
    r.str("tokenizer.ggml.tokens");
    r.mark("kv2.type");
    r.put<uint32_t>(9);
    r.mark("kv2.elemtype");
    r.put<uint32_t>(8);
    r.mark("kv2.count");
    r.put<uint64_t>(3);
    r.mark("kv2.s0");
    r.str("<s>");
    r.mark("kv2.s1");
    r.str("a");
    r.mark("kv2.s2");
    r.str("bc");

    r.mark("kv3");
    r.str("test.nested");
    r.mark("kv3.type");
    r.put<uint32_t>(9);
    r.mark("kv3.elemtype");
    r.put<uint32_t>(9);
    r.mark("kv3.count");
    r.put<uint64_t>(2);
    r.mark("kv3.a0.elemtype");
    r.put<uint32_t>(5);
    r.mark("kv3.a0.count");
    r.put<uint64_t>(2);
    r.put<int32_t>(-1);
    r.put<int32_t>(2);
    r.mark("kv3.a1.elemtype");
    r.put<uint32_t>(0);
    r.mark("kv3.a1.count");
    r.put<uint64_t>(0);

    r.mark("kv4");
    r.str("test.flag");
    r.mark("kv4.type");
    r.put<uint32_t>(7);
    r.mark("kv4.value");
    r.put<uint8_t>(1);

    r.mark("kv5");
    r.str("test.f");
    r.mark("kv5.type");
    r.put<uint32_t>(6);
    r.mark("kv5.value");
    r.put<float>(0.5f);

    struct T {
        const char* name;
        std::vector<uint64_t> ne;
        uint32_t type;
        uint64_t offset;
    };
    const T ts[] = {{"a.weight", {4, 2}, 0, 0}, {"b.weight", {32}, 8, 32}, {"c.weight", {3, 1, 2, 2}, 1, 96}};
    for (int i = 0; i < 3; ++i) {
        const std::string p = "t" + std::to_string(i);
        r.mark(p);
        r.str(ts[i].name);
        r.mark(p + ".ndims");
        r.put<uint32_t>(static_cast<uint32_t>(ts[i].ne.size()));
        for (size_t d = 0; d < ts[i].ne.size(); ++d) {
            r.mark(p + ".dim" + std::to_string(d));
            r.put<uint64_t>(ts[i].ne[d]);
        }
        r.mark(p + ".type");
        r.put<uint32_t>(ts[i].type);
        r.mark(p + ".offset");
        r.put<uint64_t>(ts[i].offset);
    }
    r.mark("infos_end");
    r.pad(32);
    r.mark("data");
    r.bytes(kT0);
    r.pad(32);
    r.bytes(kT1);
    r.pad(32);
    r.bytes(kT2);
    r.mark("data_end");
    r.pad(32);
    return r;
}

// With `calls`: a.weight and c.weight are produced during the write (each
// call counted) instead of owned.
Writer small_writer(int* calls = nullptr) {
    Writer w;
    w.set("general.architecture", Value::make_string("llama"));
    w.set("general.description", Value::make_string(kDescription));
    w.set("test.count", Value::make_u32(7));
    w.set("tokenizer.ggml.tokens", Value::make_string_array({"<s>", "a", "bc"}));
    w.set("test.nested", Value::make_array(ValueType::ARRAY, {Value::make_i32_array({-1, 2}),
                                                               Value::make_array(ValueType::UINT8, {})}));
    w.set("test.flag", Value::make_bool(true));
    w.set("test.f", Value::make_f32(0.5f));
    if (calls) {
        w.add_tensor_produced("a.weight", WeightType::F32, {4, 2}, kT0.size(), [calls] { ++*calls; return kT0; });
        w.add_tensor("b.weight", WeightType::Q8_0, {32}, kT1);
        w.add_tensor_produced("c.weight", WeightType::F16, {3, 1, 2, 2}, kT2.size(), [calls] { ++*calls; return kT2; });
        return w;
    }
    w.add_tensor("a.weight", WeightType::F32, {4, 2}, kT0);
    w.add_tensor("b.weight", WeightType::Q8_0, {32}, kT1);
    w.add_tensor("c.weight", WeightType::F16, {3, 1, 2, 2}, kT2);
    return w;
}

// Parses `bytes` from a heap buffer of exactly their size (so AddressSanitizer
// sees any read past the end), touching the first and last byte of every tensor.
std::unique_ptr<File> parse(const std::vector<uint8_t>& bytes, const std::string& name) {
    auto f = File::from_memory(bytes.empty() ? nullptr : bytes.data(), bytes.size(), name);
    volatile uint8_t sink = 0;
    for (const TensorInfo& t : f->tensors()) {
        sink = sink + t.data[0] + t.data[t.nbytes - 1];
    }
    (void)sink;
    return f;
}

struct Outcome {
    bool threw = false;
    bool other_exception = false;
    std::string message;
    size_t largest_alloc = 0;
};

Outcome try_parse(const std::vector<uint8_t>& bytes, const std::string& name) {
    Outcome o;
    std::vector<uint8_t> exact(bytes);  // own allocation of exactly bytes.size()
    g_largest = 0;
    g_watch = true;
    try {
        parse(exact, name);
    } catch (const Error& e) {
        o.threw = true;
        o.message = e.what();
    } catch (const std::exception& e) {
        o.other_exception = true;
        o.message = e.what();
    }
    g_watch = false;
    o.largest_alloc = g_largest;
    return o;
}

// Empty when `bytes` fail with strata::Error naming `name` and containing every
// phrase, with no allocation above `alloc_limit`; otherwise what went wrong.
std::string expect_error(const std::vector<uint8_t>& bytes, const std::string& name,
                         std::initializer_list<const char*> phrases, size_t alloc_limit = 1 << 20) {
    const Outcome o = try_parse(bytes, name);
    if (o.other_exception) return name + ": threw something other than strata::Error: " + o.message;
    if (!o.threw) return name + ": parsed without error";
    if (o.message.find(name) == std::string::npos) return name + ": message does not name the file: " + o.message;
    for (const char* p : phrases)
        if (o.message.find(p) == std::string::npos) return name + ": message lacks '" + p + "': " + o.message;
    if (o.largest_alloc > alloc_limit) {
        return name + ": allocated " + std::to_string(o.largest_alloc) + " bytes at once: " + o.message;
    }
    return {};
}

#define EXPECT_ERROR(bytes, name, ...)                                  \
    do {                                                                \
        const std::string why_ = expect_error(bytes, name, __VA_ARGS__); \
        QVERIFY2(why_.empty(), why_.c_str());                           \
    } while (0)

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

#define EXPECT_THROWS_WITH(expr, phrase)                                                            \
    do {                                                                                            \
        const std::string msg_ = error_of([&] { expr; });                                           \
        QVERIFY2(msg_.find(phrase) != std::string::npos,                                            \
                 qPrintable(QStringLiteral("expected '%1' in: %2").arg(phrase, QString::fromStdString(msg_)))); \
    } while (0)

Value nested(int levels) {
    Value v = Value::make_array(ValueType::UINT8, {Value::make_u8(7)});
    for (int k = 1; k < levels; ++k) v = Value::make_array(ValueType::ARRAY, {v});
    return v;
}

// A file with one metadata entry whose value is written by `value` (type included).
std::vector<uint8_t> one_kv(const std::string& key, const std::function<void(Raw&)>& value, uint64_t n_kv = 1) {
    Raw r;
    r.put<uint32_t>(0x46554747);
    r.put<uint32_t>(3);
    r.put<uint64_t>(0);
    r.put<uint64_t>(n_kv);
    r.str(key);
    value(r);
    return r.b;
}

std::vector<uint8_t> alignment_file(const std::function<void(Raw&)>& value) {
    return one_kv("general.alignment", value);
}

void check_same_metadata(const File& a, const File& b) {
    QCOMPARE(a.metadata().size(), b.metadata().size());
    for (size_t k = 0; k < a.metadata().size(); ++k) {
        QCOMPARE(a.metadata()[k].first, b.metadata()[k].first);
        QVERIFY2(a.metadata()[k].second == b.metadata()[k].second, a.metadata()[k].first.c_str());
    }
    QCOMPARE(a.tensors().size(), b.tensors().size());
    for (size_t k = 0; k < a.tensors().size(); ++k) {
        const TensorInfo& x = a.tensors()[k];
        const TensorInfo& y = b.tensors()[k];
        QCOMPARE(x.name, y.name);
        QCOMPARE(x.n_dims, y.n_dims);
        for (int d = 0; d < 4; ++d) QCOMPARE(x.ne[d], y.ne[d]);
        QCOMPARE(x.raw_type, y.raw_type);
        QCOMPARE(x.nbytes, y.nbytes);
        QVERIFY(std::memcmp(x.data, y.data, x.nbytes) == 0);
    }
}

struct TempDir {
    QTemporaryDir dir;
    std::string path(const std::string& name) const { return dir.path().toStdString() + "/" + name; }
};

}  // namespace

class TestGguf : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // ---- values and the format ----
    void valueFactories();
    void writerMatchesHandBuiltLayout();
    void everyValueTypeRoundTrips();
    void versionsTwoAndThree();
    void alignmentOtherThan32_data();
    void alignmentOtherThan32();
    void roundTripIsByteExact();
    void writerIsDeterministicAndSetReplacesInPlace();
    void getters();
    void manyTensorsAndKeys();
    // ---- writer validation and files ----
    void writerRejectsBadInput();
    void writeFileAtomically();
    void producedTensorsStream();
    void writeFileErrors();
    void openErrors();
    // ---- broken-file corpus ----
    void truncationAtEveryByte();
    void truncationAtSectionBoundaries();
    void bitFlipsInFields();
    void bitFlipsEverywhere();
    void hugeCounts();
    void corruptHeader();
    void corruptMetadata();
    void corruptTensors();
    // ---- real files ----
    void fixtureFiles();
};

void TestGguf::valueFactories() {
    QCOMPARE(Value::make_u8(200).u, 200u);
    QCOMPARE(Value::make_i8(-100).i, -100);
    QCOMPARE(Value::make_u16(60000).u, 60000u);
    QCOMPARE(Value::make_i16(-30000).i, -30000);
    QCOMPARE(Value::make_u32(4000000000u).u, 4000000000u);
    QCOMPARE(Value::make_i32(-7).i, -7);
    QCOMPARE(Value::make_u64(UINT64_MAX).u, UINT64_MAX);
    QCOMPARE(Value::make_i64(INT64_MIN).i, INT64_MIN);
    QCOMPARE(Value::make_f32(0.25f).f, 0.25);
    QCOMPARE(Value::make_f64(1e300).f, 1e300);
    QCOMPARE(Value::make_bool(true).u, 1u);
    QCOMPARE(Value::make_bool(true).type, ValueType::BOOL);
    QCOMPARE(Value::make_string("x").str, std::string("x"));
    const Value sa = Value::make_string_array({"a", "b"});
    QCOMPARE(sa.type, ValueType::ARRAY);
    QCOMPARE(sa.elem_type, ValueType::STRING);
    QCOMPARE(sa.array.size(), size_t(2));
    QCOMPARE(Value::make_f32_array({1, 2, 3}).array[2].f, 3.0);
    QCOMPARE(Value::make_i32_array({-4}).array[0].i, -4);
    EXPECT_THROWS_WITH(Value::make_array(ValueType::INT32, {Value::make_u32(1)}), "array element 0 has type uint32");
    QVERIFY(Value::make_u32(1) == Value::make_u32(1));
    QVERIFY(!(Value::make_u32(1) == Value::make_u64(1)));
    QVERIFY(Value::make_f32(NAN) == Value::make_f32(NAN));
    QVERIFY(!(Value::make_f64(0.0) == Value::make_f64(-0.0)));
    QCOMPARE(Value::make_string_array({"x", "y"}).to_string(), std::string("string[2] [\"x\", \"y\"]"));
}

void TestGguf::writerMatchesHandBuiltLayout() {
    const Raw r = small_raw();
    const std::vector<uint8_t> w = small_writer().to_bytes();
    QCOMPARE(w.size(), r.b.size());
    QVERIFY(w == r.b);
    QCOMPARE(small_writer().byte_size(), uint64_t(r.b.size()));

    auto f = parse(r.b, "small.gguf");
    QCOMPARE(f->version(), 3u);
    QCOMPARE(f->alignment(), uint64_t(32));
    QCOMPARE(f->data_offset(), uint64_t(r.off("data")));
    QCOMPARE(f->tensors().size(), size_t(3));
    const TensorInfo* b = f->tensor("b.weight");
    QVERIFY(b);
    QCOMPARE(b->type, WeightType::Q8_0);
    QCOMPARE(b->offset, uint64_t(32));
    QCOMPARE(b->file_offset, uint64_t(r.off("data") + 32));
    QCOMPARE(b->nbytes, uint64_t(34));
    QVERIFY(std::memcmp(b->data, kT1.data(), 34) == 0);
    const TensorInfo* c = f->tensor("c.weight");
    QCOMPARE(c->n_dims, 4u);
    QCOMPARE(c->shape_string(), std::string("[3, 1, 2, 2]"));
    QCOMPARE(c->n_elements(), int64_t(12));
    QCOMPARE(c->nbytes, uint64_t(24));
    QCOMPARE(f->get_string("general.architecture"), std::string("llama"));
    const auto* nested = f->get_array("test.nested");
    QVERIFY(nested);
    QCOMPARE(nested->size(), size_t(2));
    QCOMPARE((*nested)[0].elem_type, ValueType::INT32);
    QCOMPARE((*nested)[0].array[0].i, int64_t(-1));
    QCOMPARE((*nested)[1].elem_type, ValueType::UINT8);
    QVERIFY((*nested)[1].array.empty());
}

void TestGguf::everyValueTypeRoundTrips() {
    Writer w;
    std::vector<std::pair<std::string, Value>> kv;
    auto add = [&](const std::string& k, Value v) { kv.emplace_back(k, std::move(v)); };
    add("u8", Value::make_u8(255));
    add("i8", Value::make_i8(-128));
    add("u16", Value::make_u16(65535));
    add("i16", Value::make_i16(-32768));
    add("u32", Value::make_u32(UINT32_MAX));
    add("i32", Value::make_i32(INT32_MIN));
    add("u64", Value::make_u64(UINT64_MAX));
    add("i64", Value::make_i64(INT64_MIN));
    add("f32", Value::make_f32(-1.5e-30f));
    add("f32.inf", Value::make_f32(-INFINITY));
    add("f32.nan", Value::make_f32(NAN));
    add("f32.negzero", Value::make_f32(-0.0f));
    add("f64", Value::make_f64(3.141592653589793));
    add("f64.denorm", Value::make_f64(4.9e-324));
    add("bool.t", Value::make_bool(true));
    add("bool.f", Value::make_bool(false));
    add("str.empty", Value::make_string(""));
    add("str.utf8", Value::make_string("h\xC3\xA9llo \xE2\x9C\x93 \n\t"));
    add("str.nul", Value::make_string(std::string("a\0b", 3)));
    add("str.long", Value::make_string(std::string(100000, 'x')));
    add("arr.u8", Value::make_array(ValueType::UINT8, {Value::make_u8(0), Value::make_u8(255)}));
    add("arr.i8", Value::make_array(ValueType::INT8, {Value::make_i8(-1)}));
    add("arr.u16", Value::make_array(ValueType::UINT16, {Value::make_u16(1), Value::make_u16(2)}));
    add("arr.i16", Value::make_array(ValueType::INT16, {Value::make_i16(-2)}));
    add("arr.u32", Value::make_array(ValueType::UINT32, {Value::make_u32(9)}));
    add("arr.i32", Value::make_i32_array({1, -2, 3}));
    add("arr.u64", Value::make_array(ValueType::UINT64, {Value::make_u64(1ull << 63)}));
    add("arr.i64", Value::make_array(ValueType::INT64, {Value::make_i64(-5)}));
    add("arr.f32", Value::make_f32_array({0.5f, -2.0f}));
    add("arr.f64", Value::make_array(ValueType::FLOAT64, {Value::make_f64(1e-300)}));
    add("arr.bool", Value::make_array(ValueType::BOOL, {Value::make_bool(true), Value::make_bool(false)}));
    add("arr.str", Value::make_string_array({"", "a", std::string("\0", 1), "tokens with spaces"}));
    add("arr.empty", Value::make_array(ValueType::STRING, {}));
    add("arr.arr", Value::make_array(ValueType::ARRAY,
                                     {Value::make_string_array({"x", "y"}), Value::make_f32_array({1.0f}),
                                      Value::make_array(ValueType::ARRAY, {Value::make_i32_array({7})}),
                                      Value::make_array(ValueType::BOOL, {})}));
    add("arr.deep8", nested(8));
    std::vector<std::string> many;
    for (int k = 0; k < 5000; ++k) many.push_back("tok" + std::to_string(k));
    add("arr.many", Value::make_string_array(many));
    for (const auto& [k, v] : kv) w.set(k, v);

    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = parse(bytes, "values.gguf");
    QCOMPARE(f->metadata().size(), kv.size());
    for (size_t k = 0; k < kv.size(); ++k) {
        QCOMPARE(f->metadata()[k].first, kv[k].first);
        QVERIFY2(f->metadata()[k].second == kv[k].second, kv[k].first.c_str());
        QVERIFY(f->has(kv[k].first));
    }
    QVERIFY(f->tensors().empty());
    QCOMPARE(f->get_uint("u64"), UINT64_MAX);
    QCOMPARE(f->get_int_or("i64", 0), INT64_MIN);
    QCOMPARE(f->get_float("f32"), double(-1.5e-30f));
    QVERIFY(std::isnan(f->get_float("f32.nan")));
    QVERIFY(std::signbit(f->get_float("f32.negzero")));
    QCOMPARE(f->get_string("str.nul").size(), size_t(3));
    QCOMPARE(f->get_array("arr.many")->size(), size_t(5000));
    QCOMPARE(f->get_array("arr.many")->back().str, std::string("tok4999"));
    // reader -> writer gives the same bytes again
    Writer again;
    again.copy_from(*f);
    QVERIFY(again.to_bytes() == bytes);
}

void TestGguf::versionsTwoAndThree() {
    // v2 and v3 little-endian files differ only in the version field (v1 had
    // 32-bit counts and is rejected; v3 only added the big-endian variant).
    const Raw v2 = small_raw(2);
    const Raw v3 = small_raw(3);
    auto f2 = parse(v2.b, "v2.gguf");
    auto f3 = parse(v3.b, "v3.gguf");
    QCOMPARE(f2->version(), 2u);
    QCOMPARE(f3->version(), 3u);
    check_same_metadata(*f2, *f3);
    // a v2 file re-written comes out as v3 with otherwise identical bytes
    Writer w;
    w.copy_from(*f2);
    QVERIFY(w.to_bytes() == v3.b);
}

void TestGguf::alignmentOtherThan32_data() {
    QTest::addColumn<uint32_t>("alignment");
    for (uint32_t a : {1u, 2u, 8u, 64u, 256u, 4096u}) QTest::newRow(std::to_string(a).c_str()) << a;
}

void TestGguf::alignmentOtherThan32() {
    QFETCH(uint32_t, alignment);
    Writer w;
    w.set("general.architecture", Value::make_string("x"));
    w.set("general.alignment", Value::make_u32(alignment));
    const auto a = pattern(3 * 4, 1), b = pattern(36, 2), c = pattern(4 * 2 * 3, 3);
    w.add_tensor("a", WeightType::F32, {3}, a);
    w.add_tensor("b", WeightType::Q8_1, {32}, b);
    w.add_tensor("c", WeightType::BF16, {4, 3}, c);
    const auto bytes = w.to_bytes();
    auto f = parse(bytes, "align.gguf");
    QCOMPARE(f->alignment(), uint64_t(alignment));
    QCOMPARE(f->data_offset() % alignment, uint64_t(0));
    QCOMPARE(bytes.size() % alignment, size_t(0));
    uint64_t expect = 0;
    for (const TensorInfo& t : f->tensors()) {
        QCOMPARE(t.file_offset % alignment, uint64_t(0));
        QCOMPARE(t.offset, expect);  // packed: each tensor starts at the next aligned offset
        expect = (t.offset + t.nbytes + alignment - 1) / alignment * alignment;
    }
    if (alignment == 1) {
        // no padding at all: the data starts right after the infos and the file
        // ends with the last tensor
        QCOMPARE(uint64_t(bytes.size()), f->data_offset() + 12 + 36 + 24);
    }
    QVERIFY(std::memcmp(f->tensor("b")->data, b.data(), b.size()) == 0);
    Writer again;
    again.copy_from(*f);
    QVERIFY(again.to_bytes() == bytes);
}

void TestGguf::roundTripIsByteExact() {
    // A make-model-like file: architecture keys, a tokenizer, every supported
    // weight type, 1..4 dimensions, experts stacked in ne[2].
    Writer w;
    w.set("general.architecture", Value::make_string("llama"));
    w.set("general.name", Value::make_string("round-trip"));
    w.set("llama.block_count", Value::make_u32(2));
    w.set("llama.expert_count", Value::make_u32(4));
    w.set("llama.rope.freq_base", Value::make_f32(10000.0f));
    w.set("tokenizer.ggml.model", Value::make_string("llama"));
    std::vector<std::string> toks;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int k = 0; k < 300; ++k) {
        toks.push_back("\xE2\x96\x81t" + std::to_string(k));
        scores.push_back(-float(k));
        types.push_back(k < 3 ? 3 : 1);
    }
    w.set("tokenizer.ggml.tokens", Value::make_string_array(toks));
    w.set("tokenizer.ggml.scores", Value::make_f32_array(scores));
    w.set("tokenizer.ggml.token_type", Value::make_i32_array(types));
    struct Spec {
        const char* name;
        WeightType type;
        std::vector<int64_t> ne;
    };
    const Spec specs[] = {
        {"token_embd.weight", WeightType::F32, {64, 300}},
        {"blk.0.attn_norm.weight", WeightType::F32, {64}},
        {"blk.0.attn_q.weight", WeightType::F16, {64, 64}},
        {"blk.0.attn_k.weight", WeightType::BF16, {64, 32}},
        {"blk.0.ffn_gate_exps.weight", WeightType::Q4_0, {64, 96, 4}},
        {"blk.0.ffn_up_exps.weight", WeightType::Q4_1, {64, 96, 4}},
        {"blk.0.ffn_down_exps.weight", WeightType::Q5_0, {96, 64, 4}},
        {"blk.1.q5_1", WeightType::Q5_1, {32, 3}},
        {"blk.1.q8_0", WeightType::Q8_0, {64, 5}},
        {"blk.1.q2_k", WeightType::Q2_K, {256, 2}},
        {"blk.1.q3_k", WeightType::Q3_K, {256, 2}},
        {"blk.1.q4_k", WeightType::Q4_K, {512, 2, 1, 2}},
        {"blk.1.q5_k", WeightType::Q5_K, {256, 1}},
        {"blk.1.q6_k", WeightType::Q6_K, {256, 3}},
        {"blk.1.q8_k", WeightType::Q8_K, {256}},
        {"output.weight", WeightType::Q6_K, {256, 300}},
    };
    std::vector<std::vector<uint8_t>> datas;
    uint32_t seed = 10;
    for (const Spec& s : specs) {
        int64_t rows = 1;
        for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
        datas.push_back(pattern(size_t(strata::kernels::row_bytes(s.type, s.ne[0]) * rows), seed++));
        w.add_tensor(s.name, s.type, s.ne, datas.back());
    }
    const auto bytes = w.to_bytes();
    auto f = parse(bytes, "model.gguf");
    QCOMPARE(f->tensors().size(), std::size(specs));
    for (size_t k = 0; k < std::size(specs); ++k) {
        const TensorInfo& t = f->tensors()[k];
        QCOMPARE(t.name, std::string(specs[k].name));
        QCOMPARE(t.type, specs[k].type);
        QCOMPARE(size_t(t.n_dims), specs[k].ne.size());
        QCOMPARE(t.nbytes, uint64_t(datas[k].size()));
        QVERIFY(std::memcmp(t.data, datas[k].data(), t.nbytes) == 0);
        QCOMPARE(t.file_offset % 32, uint64_t(0));
    }
    // writer -> bytes -> reader -> writer -> bytes: identical
    Writer again;
    again.copy_from(*f);
    const auto bytes2 = again.to_bytes();
    QVERIFY(bytes2 == bytes);
    auto f2 = parse(bytes2, "model2.gguf");
    check_same_metadata(*f, *f2);

    // and through a real file: write() -> File::open (mmap) -> copy_from -> write()
    TempDir tmp;
    const std::string p1 = tmp.path("m1.gguf"), p2 = tmp.path("m2.gguf");
    w.write(p1);
    QVERIFY(read_file(p1) == bytes);
    {
        auto mapped = File::open(p1);
        QCOMPARE(mapped->path(), p1);
        QCOMPARE(mapped->file_size(), uint64_t(bytes.size()));
        check_same_metadata(*mapped, *f);
        Writer third;
        third.copy_from(*mapped);
        third.write(p2);
    }
    QVERIFY(read_file(p2) == bytes);
}

void TestGguf::writerIsDeterministicAndSetReplacesInPlace() {
    QVERIFY(small_writer().to_bytes() == small_writer().to_bytes());
    Writer w;
    w.set("a", Value::make_u32(1));
    w.set("b", Value::make_u32(2));
    w.set("c", Value::make_u32(3));
    w.set("b", Value::make_string("two"));  // replaced, stays second
    QCOMPARE(w.metadata_count(), size_t(3));
    auto f = parse(w.to_bytes(), "set.gguf");
    QCOMPARE(f->metadata()[1].first, std::string("b"));
    QCOMPARE(f->get_string("b"), std::string("two"));
    QCOMPARE(f->metadata()[2].first, std::string("c"));
    // a view is written without a copy, and with the same bytes as an owned tensor
    const auto d = pattern(64, 5);
    Writer owned, view;
    owned.add_tensor("t", WeightType::F16, {32}, d);
    view.add_tensor_view("t", WeightType::F16, {32}, d.data(), d.size());
    QVERIFY(owned.to_bytes() == view.to_bytes());
    QCOMPARE(owned.tensor_count(), size_t(1));
    // an empty writer makes a valid empty file
    auto e = parse(Writer().to_bytes(), "empty.gguf");
    QVERIFY(e->metadata().empty() && e->tensors().empty());
    QCOMPARE(Writer().to_bytes().size(), size_t(24));  // without tensors, no padding (as gguf-py writes)
    Writer kv_only;
    kv_only.set("k", Value::make_u8(1));
    QCOMPARE(kv_only.to_bytes().size(), size_t(24 + 8 + 1 + 4 + 1));
}

void TestGguf::getters() {
    Writer w;
    w.set("s", Value::make_string("str"));
    w.set("neg", Value::make_i32(-3));
    w.set("big", Value::make_u64(UINT64_MAX));
    w.set("b", Value::make_bool(true));
    w.set("f", Value::make_f64(2.5));
    w.set("arr", Value::make_i32_array({1}));
    const auto bytes = w.to_bytes();
    auto f = parse(bytes, "get.gguf");
    QCOMPARE(f->get_string_or("missing", "fb"), std::string("fb"));
    QCOMPARE(f->get_uint_or("missing", 9), uint64_t(9));
    QCOMPARE(f->get_int_or("neg", 0), int64_t(-3));
    QCOMPARE(f->get_float("neg"), -3.0);
    QCOMPARE(f->get_float_or("f", 0), 2.5);
    QCOMPARE(f->get_bool_or("b", false), true);
    QCOMPARE(f->get_bool_or("missing", true), true);
    QVERIFY(f->get_array("missing") == nullptr);
    QVERIFY(f->tensor("missing") == nullptr);
    EXPECT_THROWS_WITH(f->get_string("missing"), "get.gguf: metadata 'missing' is missing");
    EXPECT_THROWS_WITH(f->get_string("neg"), "expected a string, found int32");
    EXPECT_THROWS_WITH(f->get_uint("neg"), "expected a non-negative value, found -3");
    EXPECT_THROWS_WITH(f->get_int_or("big", 0), "out of range");
    EXPECT_THROWS_WITH(f->get_uint("s"), "expected an unsigned integer, found string");
    EXPECT_THROWS_WITH(f->get_array("s"), "expected an array, found string");
    EXPECT_THROWS_WITH(f->get_bool_or("s", false), "expected a bool");
    EXPECT_THROWS_WITH(f->get_float("arr"), "expected a number");
}

void TestGguf::manyTensorsAndKeys() {
    // Tens of thousands of tensors (unmerged experts) and keys: linear-ish, not quadratic.
    QElapsedTimer timer;
    timer.start();
    Writer w;
    const auto one = pattern(4, 1);
    for (int k = 0; k < 50000; ++k) {
        w.set("k." + std::to_string(k), Value::make_u32(uint32_t(k)));
        w.add_tensor_view("blk." + std::to_string(k / 100) + ".ffn_up." + std::to_string(k % 100) + ".weight",
                          WeightType::F32, {1}, one.data(), one.size());
    }
    const auto bytes = w.to_bytes();
    auto f = parse(bytes, "many.gguf");
    QCOMPARE(f->tensors().size(), size_t(50000));
    QCOMPARE(f->metadata().size(), size_t(50000));
    QCOMPARE(f->get_uint("k.49999"), uint64_t(49999));
    QCOMPARE(f->tensor("blk.499.ffn_up.99.weight")->offset, uint64_t(49999 * 32));
    qInfo("50000 tensors and keys: %lld ms", static_cast<long long>(timer.elapsed()));
}

void TestGguf::writerRejectsBadInput() {
    const auto f32x8 = pattern(32, 1);
    auto tensor = [&](const std::string& name, WeightType t, std::vector<int64_t> ne, size_t n) {
        Writer w;
        w.add_tensor("first", WeightType::F32, {8}, f32x8);
        w.add_tensor(name, t, ne, pattern(n, 2));
    };
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {8}, 31), "tensor 'x': shape [8] of type f32 needs 32 bytes of data, found 31");
    EXPECT_THROWS_WITH(tensor("x", WeightType::Q4_0, {33}, 18), "row length 33 is not a multiple of the q4_0 block size 32");
    EXPECT_THROWS_WITH(tensor("x", WeightType::MXFP4, {40}, 17), "row length 40 is not a multiple of the mxfp4 block size 32");
    EXPECT_THROWS_WITH(tensor("first", WeightType::F32, {8}, 32), "tensor 'first': added twice");
    EXPECT_THROWS_WITH(tensor("", WeightType::F32, {8}, 32), "tensor name is empty");
    EXPECT_THROWS_WITH(tensor(std::string(64, 'n'), WeightType::F32, {8}, 32), "longer than the limit of 63");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {}, 4), "has 0 dimensions (expected 1..4)");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {1, 1, 1, 1, 1}, 4), "has 5 dimensions");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {8, 0}, 0), "dimension 1 is 0");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {-8}, 0), "dimension 0 is -8");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {int64_t(1) << 41}, 0), "expected 1..2^40");
    EXPECT_THROWS_WITH(tensor("x", WeightType::F32, {1ll << 40, 1ll << 40, 1ll << 40}, 0), "more than 2^62 elements");
    EXPECT_THROWS_WITH(tensor("x", static_cast<WeightType>(4), {8}, 32), "unknown tensor type 4");
    EXPECT_THROWS_WITH(tensor("x", WeightType::Q4_0_R4, {32}, 18), "q4_0_r4 is an in-memory layout, not a file type");
    EXPECT_THROWS_WITH(tensor("x", WeightType::Q8_0_R2, {32}, 34), "write its rows as q8_0");
    EXPECT_THROWS_WITH(Writer().add_tensor_view("x", WeightType::F32, {1}, nullptr, 4), "data pointer is null");

    auto meta = [](const std::string& key, Value v) { Writer().set(key, std::move(v)); };
    EXPECT_THROWS_WITH(meta("", Value::make_u32(1)), "metadata key is empty");
    EXPECT_THROWS_WITH(meta("general.alignment", Value::make_u32(3)), "power of two");
    EXPECT_THROWS_WITH(meta("general.alignment", Value::make_u32(0)), "power of two");
    EXPECT_THROWS_WITH(meta("general.alignment", Value::make_u64(1ull << 21)), "power of two");
    EXPECT_THROWS_WITH(meta("general.alignment", Value::make_i32(-32)), "power of two");
    EXPECT_THROWS_WITH(meta("general.alignment", Value::make_string("32")), "expected an unsigned integer");
    Value v = Value::make_u8(0);
    v.u = 300;
    EXPECT_THROWS_WITH(meta("k", v), "metadata 'k': value 300 does not fit uint8");
    v = Value::make_i16(0);
    v.i = -40000;
    EXPECT_THROWS_WITH(meta("k", v), "does not fit int16");
    v = Value::make_bool(true);
    v.u = 2;
    EXPECT_THROWS_WITH(meta("k", v), "does not fit bool");
    meta("k", Value::make_f64(1e300));  // fine as f64
    v = Value::make_f32(0);
    v.f = 1e300;
    EXPECT_THROWS_WITH(meta("k", v), "does not fit float32");
    v = Value::make_string_array({"a"});
    v.array.push_back(Value::make_u32(1));
    EXPECT_THROWS_WITH(meta("k", v), "array element 1 has type uint32, expected string");
    v.type = static_cast<ValueType>(13);
    EXPECT_THROWS_WITH(meta("k", v), "unknown value type 13");
    EXPECT_THROWS_WITH(meta("deep", nested(9)), "nested deeper than 8");
    meta("deep", nested(8));  // the deepest the reader accepts
    // a rejected set leaves the writer as it was
    Writer w;
    w.set("k", Value::make_u32(1));
    try {
        w.set("k", nested(9));
    } catch (const Error&) {
    }
    QCOMPARE(parse(w.to_bytes(), "keep.gguf")->get_uint("k"), uint64_t(1));
}

void TestGguf::writeFileAtomically() {
    TempDir tmp;
    const std::string p = tmp.path("out.gguf");
    write_raw(p, {1, 2, 3});
    small_writer().write(p);  // replaces the old file
    QVERIFY(read_file(p) == small_raw().b);
    QCOMPARE(QDir(tmp.dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 1);  // no temp left behind
    // a relative path (no directory part) writes into the working directory
    const QString old = QDir::currentPath();
    QDir::setCurrent(tmp.dir.path());
    small_writer().write("rel.gguf");
    QDir::setCurrent(old);
    QVERIFY(read_file(tmp.path("rel.gguf")) == small_raw().b);
}

// Tensors made during the write give the same bytes as owned ones; a
// producer that fails or makes the wrong size leaves no file and no temp.
void TestGguf::producedTensorsStream() {
    TempDir tmp;
    int calls = 0;
    const Writer w = small_writer(&calls);
    QCOMPARE(w.byte_size(), uint64_t(small_raw().b.size()));
    QCOMPARE(calls, 0);  // sizing makes nothing
    const std::string p = tmp.path("made.gguf");
    w.write(p);
    QCOMPARE(calls, 2);
    QVERIFY(read_file(p) == small_raw().b);

    Writer more;
    EXPECT_THROWS_WITH(more.add_tensor_produced("d.weight", WeightType::F32, {4}, 15, [] { return std::vector<uint8_t>(15); }),
                       "needs 16 bytes");
    Writer wrong;
    wrong.add_tensor_produced("short.weight", WeightType::F32, {4}, 16, [] { return std::vector<uint8_t>(12); });
    EXPECT_THROWS_WITH(wrong.write(tmp.path("wrong.gguf")), "'short.weight'");
    Writer failing;
    failing.add_tensor("first.weight", WeightType::F32, {4, 2}, kT0);
    failing.add_tensor_produced("fails.weight", WeightType::F32, {4}, 16, []() -> std::vector<uint8_t> {
        throw Error("producer failed");
    });
    EXPECT_THROWS_WITH(failing.write(tmp.path("failing.gguf")), "producer failed");
    const QStringList left = QDir(tmp.dir.path()).entryList(QDir::Files | QDir::Hidden);
    QVERIFY2(left == QStringList{"made.gguf"}, qPrintable(left.join(", ")));
}

void TestGguf::writeFileErrors() {
    TempDir tmp;
    const Writer w = small_writer();
    const std::string missing = tmp.path("no/such/dir/out.gguf");
    EXPECT_THROWS_WITH(w.write(missing), "does not exist");
    EXPECT_THROWS_WITH(w.write(tmp.dir.path().toStdString()), "is a directory");
    write_raw(tmp.path("file"), {0});
    EXPECT_THROWS_WITH(w.write(tmp.path("file/out.gguf")), "is not a directory");

    // permission: a read-only directory (root ignores permissions; skip there)
    const std::string ro = tmp.path("ro");
    QVERIFY(::mkdir(ro.c_str(), 0555) == 0);
    if (::geteuid() != 0) {
        EXPECT_THROWS_WITH(w.write(ro + "/out.gguf"), "permission denied");
    } else {
        qInfo("running as root: the permission case is not observable");
    }
    ::chmod(ro.c_str(), 0755);

    // a failing write (the file size limit stands in for a full disk): clear
    // error, the temp file is removed, an existing file is left untouched
    const std::string p = tmp.path("big.gguf");
    write_raw(p, {9, 9, 9});
    Writer big;
    const auto data = pattern(1 << 20, 7);
    big.add_tensor("t", WeightType::F32, {1 << 18}, data);
    struct rlimit old {};
    QVERIFY(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct sigaction ign {}, prev {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ign, &prev);
    struct rlimit lim = old;
    lim.rlim_cur = 64 * 1024;
    QVERIFY(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
    const std::string msg = error_of([&] { big.write(p); });
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::sigaction(SIGXFSZ, &prev, nullptr);
    QVERIFY2(msg.find(p + ": cannot write: file too large") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("of 1048") != std::string::npos, msg.c_str());  // "after N of M bytes"
    QVERIFY(read_file(p) == std::vector<uint8_t>({9, 9, 9}));
    const QStringList left = QDir(tmp.dir.path()).entryList({"big.gguf.tmp*"}, QDir::Files | QDir::Hidden);
    QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
}

void TestGguf::openErrors() {
    TempDir tmp;
    EXPECT_THROWS_WITH(File::open(tmp.path("missing.gguf")), "missing.gguf: cannot open: No such file or directory");
    EXPECT_THROWS_WITH(File::open(tmp.dir.path().toStdString()), "is a directory");
    write_raw(tmp.path("empty.gguf"), {});
    EXPECT_THROWS_WITH(File::open(tmp.path("empty.gguf")), "empty.gguf: the file is incomplete or not a GGUF model: download it again (header: file is truncated: 0 bytes");
    write_raw(tmp.path("short.gguf"), {'G', 'G', 'U', 'F', 3, 0, 0, 0});
    EXPECT_THROWS_WITH(File::open(tmp.path("short.gguf")), "too small for a GGUF header");
    const std::string text = "This is a plain text file, certainly not a model.\n";
    write_raw(tmp.path("notes.txt"), std::vector<uint8_t>(text.begin(), text.end()));
    EXPECT_THROWS_WITH(File::open(tmp.path("notes.txt")), "notes.txt: header: wrong magic");
    EXPECT_THROWS_WITH(File::open(tmp.path("notes.txt")), "this is not a GGUF file");
    const std::string fifo = tmp.path("fifo");
    QVERIFY(::mkfifo(fifo.c_str(), 0600) == 0);
    EXPECT_THROWS_WITH(File::open(fifo), "not a regular file");
    // a broken file through open(): the mapping is released and the error names the path
    auto bytes = small_raw().b;
    bytes.resize(bytes.size() - 40);
    write_raw(tmp.path("cut.gguf"), bytes);
    EXPECT_THROWS_WITH(File::open(tmp.path("cut.gguf")), "cut.gguf: the file is damaged or incomplete: download it again (tensor 'c.weight': data [96, 120) lies outside");
    // and a good one
    write_raw(tmp.path("good.gguf"), small_raw().b);
    QCOMPARE(File::open(tmp.path("good.gguf"))->tensors().size(), size_t(3));
}

void TestGguf::truncationAtEveryByte() {
    const Raw r = small_raw();
    const size_t needed = r.off("data_end");  // the trailing padding is optional
    for (size_t len = 0; len < r.b.size(); ++len) {
        const std::vector<uint8_t> cut(r.b.begin(), r.b.begin() + long(len));
        const std::string name = "cut-at-" + std::to_string(len) + ".gguf";
        if (len < needed) {
            // In plain words first (what to do), then where and what is missing.
            EXPECT_ERROR(cut, name, {"truncated", "download it again"});
        } else {
            const Outcome o = try_parse(cut, name);
            QVERIFY2(!o.threw && !o.other_exception, o.message.c_str());
        }
    }
}

void TestGguf::truncationAtSectionBoundaries() {
    // Cut exactly at (and one byte into) every field boundary of the small file;
    // the message must name the section the cut falls in.
    const Raw r = small_raw();
    const std::map<std::string, const char*> where = {
        {"version", "header (version)"},       {"n_tensors", "header (tensor count)"},
        {"n_kv", "header (metadata count)"},
        // too few bytes left for 7 entries and 3 tensor infos at all
        {"kv0", "header: metadata count 7 is absurd"},
        {"kv0.type", "header: metadata count 7 is absurd"},
        {"kvd.value", "header: metadata count 7 is absurd"},
        {"kv1", "metadata 2 key (string length)"},
        {"kv1.type", "metadata 'test.count' (type)"},
        {"kv1.value", "metadata 'test.count'"},
        {"kv2.elemtype", "metadata 'tokenizer.ggml.tokens' (array element type)"},
        {"kv2.count", "metadata 'tokenizer.ggml.tokens'"},
        {"kv2.s2", "metadata 'tokenizer.ggml.tokens' (array length): array of string elements: length 3 is absurd"},
        {"kv3.a1.count", "metadata 'test.nested' element 1 (array length)"},
        {"kv4.value", "metadata 'test.flag'"},
        {"t0", "tensor"},                       {"t1.ndims", "tensor"},
        {"t2.dim3", "tensor 'c.weight'"},       {"t2.type", "tensor 'c.weight'"},
        {"t2.offset", "tensor 'c.weight' (data offset)"},
        {"data", "tensor 'a.weight': data [0, 32) lies outside the data section of 0 bytes"},
        {"data_end", ""},
    };
    for (const auto& [mark, phrase] : where) {
        const size_t at = r.off(mark);
        const std::vector<uint8_t> cut(r.b.begin(), r.b.begin() + long(at));
        if (mark == "data_end") {
            QVERIFY(try_parse(cut, "x").threw == false);
            continue;
        }
        EXPECT_ERROR(cut, "boundary-" + mark + ".gguf", {"truncated", phrase});
    }
    // a cut in the padding between the tensor infos and the data
    QVERIFY(r.off("infos_end") < r.off("data"));
    const std::vector<uint8_t> pad(r.b.begin(), r.b.begin() + long(r.off("data") - 1));
    EXPECT_ERROR(pad, "in-padding.gguf",
                 {("data section: file is truncated: data section should start at offset " +
                   std::to_string(r.off("data")))
                      .c_str()});
    // a cut in the middle of a string
    const std::vector<uint8_t> mids(r.b.begin(), r.b.begin() + long(r.off("kvd.value") + 8 + 190));
    EXPECT_ERROR(mids, "mid-string.gguf",
                 {"metadata 'general.description' (string bytes): file is truncated: expected 203 more bytes"});
    // a cut in the middle of a tensor's data
    const std::vector<uint8_t> mid(r.b.begin(), r.b.begin() + long(r.off("data") + 40));
    EXPECT_ERROR(mid, "mid-data.gguf", {"tensor 'b.weight': data [32, 66) lies outside the data section of 40 bytes",
                                        "truncated"});
}

void TestGguf::bitFlipsInFields() {
    // Every bit of every count, type, length, dimension and offset field: the
    // result is either a file that parses (and whose tensors lie inside it) or a
    // strata::Error naming the file.
    const Raw r = small_raw();
    struct Field {
        const char* mark;
        int bytes;
    };
    const Field fields[] = {
        {"version", 4},      {"n_tensors", 8},    {"n_kv", 8},         {"kv0", 8},           {"kv0.type", 4},
        {"kv0.value", 8},    {"kv1.type", 4},     {"kv1.value", 4},    {"kv2.type", 4},      {"kv2.elemtype", 4},
        {"kv2.count", 8},    {"kv2.s0", 8},       {"kv2.s1", 8},       {"kv2.s2", 8},        {"kv3.type", 4},
        {"kv3.elemtype", 4}, {"kv3.count", 8},    {"kv3.a0.elemtype", 4}, {"kv3.a0.count", 8}, {"kv3.a1.elemtype", 4},
        {"kv3.a1.count", 8}, {"kv4.type", 4},     {"kv4.value", 1},    {"kv5.type", 4},      {"t0", 8},
        {"t0.ndims", 4},     {"t0.dim0", 8},      {"t0.dim1", 8},      {"t0.type", 4},       {"t0.offset", 8},
        {"t1", 8},           {"t1.ndims", 4},     {"t1.dim0", 8},      {"t1.type", 4},       {"t1.offset", 8},
        {"t2", 8},           {"t2.ndims", 4},     {"t2.dim0", 8},      {"t2.dim1", 8},       {"t2.dim2", 8},
        {"t2.dim3", 8},      {"t2.type", 4},      {"t2.offset", 8},
    };
    int errors = 0, parsed = 0;
    for (const Field& fd : fields) {
        for (int bit = 0; bit < fd.bytes * 8; ++bit) {
            std::vector<uint8_t> b = r.b;
            b[r.off(fd.mark) + size_t(bit / 8)] ^= uint8_t(1u << (bit % 8));
            const std::string name = std::string("flip-") + fd.mark + "-bit" + std::to_string(bit) + ".gguf";
            const Outcome o = try_parse(b, name);
            QVERIFY2(!o.other_exception, (name + ": " + o.message).c_str());
            QVERIFY2(o.largest_alloc <= (1 << 20), (name + ": large allocation: " + o.message).c_str());
            if (o.threw) {
                ++errors;
                QVERIFY2(o.message.rfind(name + ": ", 0) == 0, o.message.c_str());
            } else {
                ++parsed;
            }
        }
    }
    qInfo("field bit flips: %d rejected, %d still valid", errors, parsed);
    QVERIFY(errors > 0);
    // Specific flips with a known answer.
    auto flip = [&](const char* mark, int bit) {
        std::vector<uint8_t> b = r.b;
        b[r.off(mark) + size_t(bit / 8)] ^= uint8_t(1u << (bit % 8));
        return b;
    };
    EXPECT_ERROR(flip("n_kv", 63), "f1.gguf", {"metadata count 9223372036854775815 is absurd"});
    EXPECT_ERROR(flip("n_tensors", 40), "f2.gguf", {"tensor count", "absurd"});
    EXPECT_ERROR(flip("kv2.count", 62), "f3.gguf", {"metadata 'tokenizer.ggml.tokens'", "absurd"});
    EXPECT_ERROR(flip("kv1.type", 4), "f4.gguf", {"metadata 'test.count': unknown value type 20"});
    EXPECT_ERROR(flip("kv2.elemtype", 5), "f5.gguf", {"unknown array element type 40"});
    EXPECT_ERROR(flip("t1.type", 5), "f6.gguf", {"tensor 'b.weight': unknown tensor type 40"});
    EXPECT_ERROR(flip("t0.offset", 3), "f7.gguf", {"tensor 'a.weight': data offset 8 is not a multiple of the alignment 32"});
    EXPECT_ERROR(flip("t2.offset", 40), "f8.gguf", {"tensor 'c.weight'", "lies outside the data section"});
    EXPECT_ERROR(flip("t2.offset", 6), "f9.gguf", {"tensor 'c.weight': data at offset 32 overlaps tensor 'b.weight' [32, 66)"});
    EXPECT_ERROR(flip("t2.dim0", 39), "f10.gguf", {"tensor 'c.weight'", "more than the whole file"});
    EXPECT_ERROR(flip("kv4.value", 1), "f11.gguf", {"metadata 'test.flag': bool value is 3"});
    EXPECT_ERROR(flip("kv0.value", 62), "f12.gguf", {"metadata 'general.architecture'", "string length", "absurd"});
}

void TestGguf::bitFlipsEverywhere() {
    // Every bit of the whole small file (header, metadata, infos, padding, data).
    const Raw r = small_raw();
    int errors = 0;
    for (size_t byte = 0; byte < r.b.size(); ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<uint8_t> b = r.b;
            b[byte] ^= uint8_t(1u << bit);
            const std::string name = "flip-" + std::to_string(byte) + "." + std::to_string(bit) + ".gguf";
            const Outcome o = try_parse(b, name);
            QVERIFY2(!o.other_exception, (name + ": " + o.message).c_str());
            QVERIFY2(o.largest_alloc <= (1 << 20), (name + ": large allocation: " + o.message).c_str());
            if (o.threw) {
                ++errors;
                QVERIFY2(o.message.rfind(name + ": ", 0) == 0, o.message.c_str());
            }
        }
    }
    qInfo("whole-file bit flips: %d of %zu rejected", errors, r.b.size() * 8);
    // and some random multi-byte corruption, deterministic
    uint32_t x = 1;
    for (int k = 0; k < 3000; ++k) {
        std::vector<uint8_t> b = r.b;
        for (int j = 0; j < 4; ++j) {
            x = x * 1664525u + 1013904223u;
            const size_t at = (x >> 8) % b.size();
            x = x * 1664525u + 1013904223u;
            b[at] = uint8_t(x >> 24);
        }
        const Outcome o = try_parse(b, "rand.gguf");
        QVERIFY2(!o.other_exception, o.message.c_str());
        QVERIFY2(o.largest_alloc <= (1 << 20), o.message.c_str());
    }
}

void TestGguf::hugeCounts() {
#if STRATA_WATCH_ALLOCATIONS
    {
        // the watch itself works: a valid array of 100000 bytes becomes 100000 Values
        auto ok = one_kv("bytes", [](Raw& x) {
            x.put<uint32_t>(9);
            x.put<uint32_t>(0);
            x.put<uint64_t>(100000);
            x.b.resize(x.b.size() + 100000, 1);
        });
        const Outcome o = try_parse(ok, "watch.gguf");
        QVERIFY(!o.threw);
        QVERIFY2(o.largest_alloc >= 100000 * sizeof(Value), std::to_string(o.largest_alloc).c_str());
    }
#endif
    Raw r = small_raw();
    auto with = [&](const char* mark, uint64_t v) {
        Raw c = r;
        c.poke<uint64_t>(mark, v);
        return c.b;
    };
    EXPECT_ERROR(with("n_kv", 1ull << 63), "kv-2^63.gguf", {"header: metadata count 9223372036854775808 is absurd"});
    EXPECT_ERROR(with("n_kv", 1000), "kv-1000.gguf", {"metadata count 1000 is absurd", "truncated"});
    EXPECT_ERROR(with("n_tensors", 1ull << 60), "tensors-2^60.gguf", {"tensor count 1152921504606846976 is absurd"});
    EXPECT_ERROR(with("n_tensors", 100), "tensors-100.gguf", {"tensor count 100 is absurd"});
    EXPECT_ERROR(with("kv2.count", 1ull << 63), "strings-2^63.gguf",
                 {"metadata 'tokenizer.ggml.tokens'", "array of 9223372036854775808 string elements is absurd"});
    EXPECT_ERROR(with("kv2.count", 1ull << 62), "strings-2^62.gguf", {"absurd"});
    EXPECT_ERROR(with("kv2.count", 100000), "strings-1e5.gguf", {"array of string elements: length 100000 is absurd"});
    EXPECT_ERROR(with("kv3.count", 1ull << 62), "arrays-2^62.gguf", {"metadata 'test.nested'", "absurd"});
    EXPECT_ERROR(with("kv3.a0.count", 1ull << 62), "inner-2^62.gguf", {"metadata 'test.nested' element 0", "absurd"});
    EXPECT_ERROR(with("kv2.s1", 1ull << 63), "strlen-2^63.gguf",
                 {"metadata 'tokenizer.ggml.tokens' element 1: string length 9223372036854775808 is absurd"});
    EXPECT_ERROR(with("kv2.s1", 1000), "strlen-1000.gguf", {"element 1 (string bytes): file is truncated"});
    EXPECT_ERROR(with("kv0", 1ull << 40), "keylen-2^40.gguf", {"metadata 0 key: string length 1099511627776 is absurd"});
    EXPECT_ERROR(with("t1", 1ull << 62), "namelen.gguf", {"tensor 1 name: string length", "absurd"});

    // an array of 2^62 uint8 in a file of its own
    auto u8_array = one_kv("big", [](Raw& x) {
        x.put<uint32_t>(9);
        x.put<uint32_t>(0);
        x.put<uint64_t>(1ull << 62);
        x.put<uint64_t>(0);
    });
    EXPECT_ERROR(u8_array, "u8-2^62.gguf", {"metadata 'big'", "absurd"});
    // more array elements in total than the limit, each one actually present:
    // rejected before the values are built
    const uint64_t n = limits::kMaxArrayElements + 1;
    auto many = one_kv("many", [](Raw& x) {
        x.put<uint32_t>(9);
        x.put<uint32_t>(0);
        x.put<uint64_t>(n);
        x.b.resize(x.b.size() + n, 0);
    });
    EXPECT_ERROR(many, "many.gguf", {"elements is absurd", "8388608"}, size_t(many.size()) + (1 << 20));
    // more metadata entries than the limit
    EXPECT_ERROR(with("n_kv", limits::kMaxMetadataEntries + 1), "kv-limit.gguf", {"is absurd (limit 1048576)"});
}

void TestGguf::corruptHeader() {
    Raw r = small_raw();
    Raw m = r;
    std::memcpy(m.b.data(), "GGML", 4);
    EXPECT_ERROR(m.b, "ggml.gguf", {"header: wrong magic: expected 'GGUF' (47475546), found 47474d4c", "not a GGUF file"});
    std::vector<uint8_t> zeros(64, 0);
    EXPECT_ERROR(zeros, "zeros.gguf", {"wrong magic"});
    for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
        Raw c = r;
        c.poke<uint32_t>("version", v);
        EXPECT_ERROR(c.b, "version.gguf", {("unsupported GGUF version " + std::to_string(v)).c_str(), "expected 2 or 3"});
    }
    Raw be = r;
    be.poke<uint32_t>("version", 0x03000000u);
    EXPECT_ERROR(be.b, "be.gguf", {"big-endian"});
    Raw v1 = r;
    v1.poke<uint32_t>("version", 1);
    EXPECT_ERROR(v1.b, "v1.gguf", {"version 1 used 32-bit counts"});
    EXPECT_ERROR(std::vector<uint8_t>{}, "nothing.gguf", {"header (magic): file is truncated"});
    EXPECT_ERROR(std::vector<uint8_t>({'G', 'G', 'U', 'F'}), "four.gguf", {"header (version): file is truncated"});
}

void TestGguf::corruptMetadata() {
    Raw r = small_raw();
    auto with32 = [&](const char* mark, uint32_t v, size_t extra = 0) {
        Raw c = r;
        c.poke<uint32_t>(mark, v, extra);
        return c.b;
    };
    EXPECT_ERROR(with32("kv1.type", 13), "vt13.gguf", {"metadata 'test.count': unknown value type 13 (expected 0..12)"});
    EXPECT_ERROR(with32("kv1.type", 0xFFFFFFFFu), "vtmax.gguf", {"unknown value type 4294967295"});
    EXPECT_ERROR(with32("kv2.elemtype", 99), "et99.gguf", {"metadata 'tokenizer.ggml.tokens': unknown array element type 99"});
    EXPECT_ERROR(with32("kv3.a0.elemtype", 13), "inner-et.gguf", {"metadata 'test.nested' element 0: unknown array element type 13"});
    {
        Raw c = r;
        c.b[c.off("kv4.value")] = 2;
        EXPECT_ERROR(c.b, "bool2.gguf", {"metadata 'test.flag': bool value is 2 (expected 0 or 1)"});
    }
    // duplicate key: rename test.flag's key to test.f's... lengths differ, so
    // build a file with the same key twice
    auto dup = one_kv("k", [](Raw& x) {
        x.put<uint32_t>(4);
        x.put<uint32_t>(1);
        x.str("k");
        x.put<uint32_t>(8);
        x.str("again");
    }, 2);
    EXPECT_ERROR(dup, "dupkey.gguf", {"metadata 'k': key appears twice"});
    // general.alignment
    auto align_u32 = [](uint32_t a) {
        return alignment_file([a](Raw& x) {
            x.put<uint32_t>(4);
            x.put<uint32_t>(a);
        });
    };
    EXPECT_ERROR(align_u32(3), "al3.gguf", {"metadata 'general.alignment': expected a power of two between 1 and 1048576, found 3"});
    EXPECT_ERROR(align_u32(0), "al0.gguf", {"power of two", "found 0"});
    EXPECT_ERROR(align_u32(48), "al48.gguf", {"power of two", "found 48"});
    EXPECT_ERROR(align_u32(1u << 21), "al2m.gguf", {"power of two", "found 2097152"});
    QCOMPARE(parse(align_u32(1u << 20), "al1m.gguf")->alignment(), uint64_t(1) << 20);
    auto al_str = alignment_file([](Raw& x) {
        x.put<uint32_t>(8);
        x.str("32");
    });
    EXPECT_ERROR(al_str, "alstr.gguf", {"metadata 'general.alignment': expected an unsigned integer, found string"});
    auto al_neg = alignment_file([](Raw& x) {
        x.put<uint32_t>(5);
        x.put<int32_t>(-32);
    });
    EXPECT_ERROR(al_neg, "alneg.gguf", {"power of two", "found -32"});
    auto al_bool = alignment_file([](Raw& x) {
        x.put<uint32_t>(7);
        x.put<uint8_t>(1);
    });
    EXPECT_ERROR(al_bool, "albool.gguf", {"expected an unsigned integer, found bool"});
    // arrays nested 9 deep (8 is the limit)
    auto deep = [](int levels) {
        return one_kv("deep", [levels](Raw& x) {
            x.put<uint32_t>(9);
            for (int k = 0; k < levels; ++k) {
                x.put<uint32_t>(k + 1 < levels ? 9 : 0);
                x.put<uint64_t>(1);
            }
            x.put<uint8_t>(7);
        });
    };
    EXPECT_ERROR(deep(9), "deep9.gguf", {"metadata 'deep' element 0: arrays nested deeper than 8 levels"});
    EXPECT_ERROR(deep(1000), "deep1000.gguf", {"nested deeper"});
    QVERIFY(parse(deep(8), "deep8.gguf")->find("deep")->array[0].array[0].type == ValueType::ARRAY);
    // a key longer than the limit, and a key with unprintable bytes shown escaped
    auto longkey = one_kv(std::string(limits::kMaxKeyBytes + 1, 'k'), [](Raw& x) {
        x.put<uint32_t>(0);
        x.put<uint8_t>(0);
    });
    EXPECT_ERROR(longkey, "longkey.gguf", {"metadata 0 key: string length 65536 is absurd (limit 65535)"});
    auto oddkey = one_kv(std::string("a\x01\xff", 3), [](Raw& x) { x.put<uint32_t>(77); });
    EXPECT_ERROR(oddkey, "oddkey.gguf", {"metadata 'a\\x01\\xff': unknown value type 77"});
}

void TestGguf::corruptTensors() {
    Raw r = small_raw();
    auto with = [&](std::initializer_list<std::pair<const char*, uint64_t>> pokes64,
                    std::initializer_list<std::pair<const char*, uint32_t>> pokes32 = {}) {
        Raw c = r;
        for (auto [m, v] : pokes64) c.poke<uint64_t>(m, v);
        for (auto [m, v] : pokes32) c.poke<uint32_t>(m, v);
        return c.b;
    };
    EXPECT_ERROR(with({{"t0.offset", 1ull << 40}}), "outside.gguf",
                 {"tensor 'a.weight': data [1099511627776, 1099511627808) lies outside the data section of 128 bytes"});
    EXPECT_ERROR(with({{"t2.offset", 0xFFFFFFFFFFFFFFE0ull}}), "wrap.gguf", {"tensor 'c.weight'", "lies outside"});
    EXPECT_ERROR(with({{"t2.offset", 128}}), "pastend.gguf", {"tensor 'c.weight'", "lies outside"});
    EXPECT_ERROR(with({{"t2.offset", 32}}), "overlap.gguf", {"overlaps tensor 'b.weight'"});
    EXPECT_ERROR(with({{"t1.offset", 0}}), "same.gguf", {"overlaps tensor 'a.weight' [0, 32)"});
    EXPECT_ERROR(with({{"t1.offset", 33}}), "misaligned.gguf",
                 {"tensor 'b.weight': data offset 33 is not a multiple of the alignment 32"});
    // 62, 63: Strata's in-memory q8_0 and q4_0 layouts, never file types.
    for (uint32_t t : {4u, 5u, 31u, 36u, 62u, 63u, 1000u, 0xFFFFFFFFu}) {
        EXPECT_ERROR(with({}, {{"t1.type", t}}), "type.gguf",
                     {("tensor 'b.weight': unknown tensor type " + std::to_string(t)).c_str()});
    }
    const uint64_t e40 = 1ull << 40;
    EXPECT_ERROR(with({{"t2.dim0", e40}, {"t2.dim1", e40}, {"t2.dim2", e40}, {"t2.dim3", e40}}), "dims.gguf",
                 {"tensor 'c.weight': shape [1099511627776, 1099511627776, 1099511627776, 1099511627776] overflows"});
    EXPECT_ERROR(with({{"t2.dim0", e40}, {"t2.dim1", 1 << 23}}), "dims2.gguf", {"overflows"});
    EXPECT_ERROR(with({{"t2.dim0", e40 + 1}}), "dimbig.gguf", {"tensor 'c.weight': dimension 0 is 1099511627777 (expected 1..2^40)"});
    EXPECT_ERROR(with({{"t2.dim0", UINT64_MAX}}), "dimmax.gguf", {"dimension 0 is 18446744073709551615"});
    EXPECT_ERROR(with({{"t0.dim1", 0}}), "dimzero.gguf", {"tensor 'a.weight': dimension 1 is 0"});
    EXPECT_ERROR(with({}, {{"t0.ndims", 0}}), "ndims0.gguf", {"tensor 'a.weight': dimension count 0 (expected 1..4)"});
    EXPECT_ERROR(with({}, {{"t0.ndims", 5}}), "ndims5.gguf", {"dimension count 5"});
    EXPECT_ERROR(with({}, {{"t0.ndims", 0xFFFFFFFFu}}), "ndimsmax.gguf", {"dimension count 4294967295"});
    EXPECT_ERROR(with({{"t1.dim0", 16}}), "row.gguf", {"tensor 'b.weight': row length 16 is not a multiple of the q8_0 block size 32"});
    EXPECT_ERROR(with({{"t1.dim0", 64}}), "grown.gguf", {"tensor 'c.weight'", "overlaps tensor 'b.weight' [32, 100)"});
    EXPECT_ERROR(with({{"t0.dim1", 1 << 30}}), "huge.gguf",
                 {"tensor 'a.weight': shape [4, 1073741824] of type f32 needs 17179869184 bytes, more than the whole file"});
    // duplicate tensor name: "c.weight" renamed to "b.weight"
    {
        Raw c = r;
        c.b[c.off("t2") + 8] = 'b';
        EXPECT_ERROR(c.b, "duptensor.gguf", {"tensor 'b.weight': name appears twice"});
    }
    // tensors listed out of data order are fine as long as they do not overlap
    {
        Writer w;
        w.add_tensor("x", WeightType::F32, {8}, pattern(32, 1));
        w.add_tensor("y", WeightType::F32, {8}, pattern(32, 2));
        auto b = w.to_bytes();
        auto f = parse(b, "order.gguf");
        Raw c;
        c.b = b;
        // swap the offsets of x and y (0 and 32)
        const uint64_t ox = f->tensors()[0].offset, oy = f->tensors()[1].offset;
        const size_t info_x = 24 + 8 + 1 + 4 + 8 + 4;  // header, name "x", n_dims, ne0, type
        const size_t info_y = info_x + 8 + 8 + 1 + 4 + 8 + 4;
        std::memcpy(&c.b[info_x], &oy, 8);
        std::memcpy(&c.b[info_y], &ox, 8);
        auto g = parse(c.b, "swapped.gguf");
        QCOMPARE(g->tensor("x")->offset, uint64_t(32));
        QVERIFY(std::memcmp(g->tensor("x")->data, pattern(32, 2).data(), 32) == 0);
    }
    // a file without tensors may end right after its metadata (no padding)
    {
        auto b = one_kv("k", [](Raw& x) {
            x.put<uint32_t>(4);
            x.put<uint32_t>(5);
        });
        auto f = parse(b, "notensors.gguf");
        QCOMPARE(f->get_uint("k"), uint64_t(5));
    }
}

void TestGguf::fixtureFiles() {
    STRATA_REQUIRE_FIXTURES();
    int n = 0;
    for (const char* sub : {"models", "tokenizers"}) {
        const QDir dir(strata::test::fixtures_dir() + "/" + sub);
        for (const QString& name : dir.entryList({"*.gguf"}, QDir::Files, QDir::Name)) {
            const std::string path = dir.filePath(name).toStdString();
            std::unique_ptr<File> f;
            try {
                f = File::open(path);
            } catch (const Error& e) {
                QFAIL(e.what());
            }
            ++n;
            QVERIFY(f->version() == 2 || f->version() == 3);
            QVERIFY2(f->has("general.architecture"), path.c_str());
            const auto* toks = f->get_array("tokenizer.ggml.tokens");
            QVERIFY2(toks && !toks->empty(), path.c_str());
            QCOMPARE((*toks)[0].type, ValueType::STRING);
            if (std::strcmp(sub, "models") == 0) {
                QVERIFY2(!f->tensors().empty(), path.c_str());
                QVERIFY(f->tensor("token_embd.weight") != nullptr);
            }
            for (const TensorInfo& t : f->tensors()) {
                QCOMPARE(t.file_offset % f->alignment(), uint64_t(0));
                QVERIFY(t.file_offset + t.nbytes <= f->file_size());
            }
            // reader -> writer: the same bytes as llama.cpp wrote them
            Writer w;
            w.copy_from(*f);
            const auto bytes = w.to_bytes();
            if (f->version() == 3) {
                QCOMPARE(uint64_t(bytes.size()), f->file_size());
                QVERIFY2(std::memcmp(bytes.data(), f->base(), bytes.size()) == 0, path.c_str());
            }
            auto g = parse(bytes, path + " (rewritten)");
            check_same_metadata(*f, *g);
        }
    }
    QVERIFY(n >= 10);
}

QTEST_APPLESS_MAIN(TestGguf)
#include "test_gguf.moc"
