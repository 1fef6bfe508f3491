#include "quant/importance.h"

#include <cmath>
#include <cstdint>
#include <fstream>

#include "common/error.h"

namespace strata::quant {

namespace {

class Reader {
public:
    explicit Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
        if (!in_) throw Error(path + ": cannot open the importance matrix file");
    }
    int32_t i32(const char* what) {
        int32_t v = 0;
        in_.read(reinterpret_cast<char*>(&v), sizeof v);
        if (!in_) fail(std::string("the file ends before ") + what);
        return v;
    }
    void bytes(void* dst, size_t n, const char* what) {
        in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
        if (!in_) fail(std::string("the file ends inside ") + what);
    }
    bool at_end() { return in_.peek() == std::char_traits<char>::eof(); }
    [[noreturn]] void fail(const std::string& why) const {
        throw Error(path_ + ": not a llama.cpp importance matrix (llama-imatrix's .dat file): " + why);
    }

private:
    std::string path_;
    std::ifstream in_;
};

}  // namespace

ImportanceMatrix read_llama_imatrix(const std::string& path) {
    Reader r(path);
    ImportanceMatrix m;
    const int32_t n_entries = r.i32("the entry count");
    if (n_entries < 1 || n_entries > 1000000) r.fail("entry count " + std::to_string(n_entries) + " is out of range");
    for (int32_t i = 0; i < n_entries; ++i) {
        const int32_t len = r.i32("an entry's name length");
        if (len < 1 || len > 4096) r.fail("entry " + std::to_string(i) + ": name length " + std::to_string(len) + " is out of range");
        std::string name(static_cast<size_t>(len), '\0');
        r.bytes(name.data(), name.size(), "an entry's name");
        const int32_t ncall = r.i32("an entry's call count");
        const int32_t nval = r.i32("an entry's value count");
        if (nval < 1 || nval > (1 << 28)) r.fail("'" + name + "': value count " + std::to_string(nval) + " is out of range");
        std::vector<float> v(static_cast<size_t>(nval));
        r.bytes(v.data(), v.size() * sizeof(float), "an entry's values");
        for (float& x : v) {
            if (!std::isfinite(x) || x < 0) r.fail("'" + name + "' has a value that is negative or not finite");
            if (ncall > 0) x /= static_cast<float>(ncall);
        }
        m.values[name] = std::move(v);
    }
    // Newer files end with the chunk count and the dataset's name.
    if (!r.at_end()) {
        m.chunks = r.i32("the chunk count");
        const int32_t len = r.i32("the dataset name's length");
        if (len < 0 || len > 65536) r.fail("dataset name length " + std::to_string(len) + " is out of range");
        m.dataset.resize(static_cast<size_t>(len));
        if (len > 0) r.bytes(m.dataset.data(), m.dataset.size(), "the dataset name");
    }
    return m;
}

}  // namespace strata::quant
