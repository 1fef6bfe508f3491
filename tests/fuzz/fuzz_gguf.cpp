// libFuzzer target for the GGUF reader (and, on every input the reader accepts,
// the writer). Build: -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=OFF with clang; run
// with packaging/sanitize-and-fuzz.sh.
//
// Findings are: any crash or sanitizer report, any exception other than
// strata::Error, an allocation beyond -malloc_limit_mb, and a broken round trip
// (a file the reader accepted that the writer copies into something the reader
// rejects or that does not re-copy to the same bytes).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"

using namespace strata::gguf;

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
    std::fprintf(stderr, "fuzz_gguf: %s: %s\n", what, detail);
    std::abort();
}

volatile uint64_t g_sink = 0;

void exercise_getters(const File& f) {
    g_sink = g_sink + f.version() + f.alignment() + f.data_offset() + f.file_size();
    for (const auto& [key, value] : f.metadata()) {
        if (f.find(key) != &value) finding("find() does not return the entry", key.c_str());
        g_sink = g_sink + value.to_string().size() + value.is_integer() + value.is_float();
        try { g_sink = g_sink + f.get_uint_or(key, 0); } catch (const strata::Error&) {}
        try { g_sink = g_sink + static_cast<uint64_t>(f.get_int_or(key, 0)); } catch (const strata::Error&) {}
        try { g_sink = g_sink + static_cast<uint64_t>(f.get_float_or(key, 0.0) != 0.0); } catch (const strata::Error&) {}
        try { g_sink = g_sink + f.get_bool_or(key, false); } catch (const strata::Error&) {}
        try { g_sink = g_sink + f.get_string_or(key, "").size(); } catch (const strata::Error&) {}
        try {
            if (const auto* a = f.get_array(key)) g_sink = g_sink + a->size();
        } catch (const strata::Error&) {
        }
    }
    const uint8_t* begin = f.base();
    const uint8_t* end = f.base() + f.file_size();
    for (const TensorInfo& t : f.tensors()) {
        if (f.tensor(t.name) != &t) finding("tensor() does not return the entry", t.name.c_str());
        if (t.nbytes == 0 || t.data < begin || t.data + t.nbytes > end || t.data != begin + t.file_offset) {
            finding("tensor data outside the buffer", t.name.c_str());
        }
        // Touch the first and last byte so AddressSanitizer checks the bounds.
        g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1] + t.shape_string().size() +
                 static_cast<uint64_t>(t.n_elements());
    }
}

void round_trip(const File& f) {
    Writer w;
    try {
        w.copy_from(f);  // may refuse what the reader tolerates (e.g. a 64-byte tensor name)
    } catch (const strata::Error&) {
        return;
    }
    const std::vector<uint8_t> once = w.to_bytes();
    if (once.size() != w.byte_size()) finding("round trip", "byte_size() differs from to_bytes().size()");
    std::unique_ptr<File> g;
    try {
        g = File::from_memory(once.data(), once.size(), "rewritten");
    } catch (const strata::Error& e) {
        finding("the reader rejects what the writer wrote", e.what());
    }
    if (g->metadata().size() != f.metadata().size() || g->tensors().size() != f.tensors().size()) {
        finding("round trip", "entry counts differ");
    }
    for (size_t k = 0; k < f.metadata().size(); ++k) {
        if (g->metadata()[k].first != f.metadata()[k].first) finding("round trip: key differs", f.metadata()[k].first.c_str());
        if (!(g->metadata()[k].second == f.metadata()[k].second)) {
            finding("round trip: value differs", f.metadata()[k].first.c_str());
        }
    }
    for (size_t k = 0; k < f.tensors().size(); ++k) {
        const TensorInfo& a = f.tensors()[k];
        const TensorInfo& b = g->tensors()[k];
        if (a.name != b.name || a.raw_type != b.raw_type || a.nbytes != b.nbytes || a.n_dims != b.n_dims ||
            std::memcmp(a.ne, b.ne, sizeof a.ne) != 0 || std::memcmp(a.data, b.data, a.nbytes) != 0) {
            finding("round trip: tensor differs", a.name.c_str());
        }
    }
    Writer w2;
    w2.copy_from(*g);
    if (w2.to_bytes() != once) finding("round trip", "a second copy gives different bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // Copy into a buffer of exactly `size` bytes so that any read past the end is
    // caught (libFuzzer's own buffer is exact too, but keep it independent).
    std::vector<uint8_t> buf(data, data + size);
    std::unique_ptr<File> f;
    try {
        f = File::from_memory(buf.data(), buf.size(), "fuzz.gguf");
    } catch (const strata::Error& e) {
        if (std::strncmp(e.what(), "fuzz.gguf: ", 11) != 0) finding("error message does not name the file", e.what());
        return 0;
    }
    exercise_getters(*f);
    round_trip(*f);
    return 0;
}
