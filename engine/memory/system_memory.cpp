#include "memory/system_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata::memory {

namespace {
std::string read_small_file(const char* path) {
    std::ifstream in(path);
    if (!in) return {};
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

// A decimal count of bytes; 0 for anything else (including "max").
uint64_t parse_count(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return 0;
    uint64_t v = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    }
    return v;
}

// The cgroup v2 directory of this process ("0::/path" in /proc/self/cgroup).
std::string own_cgroup_dir() {
    std::istringstream in(read_small_file("/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
    return {};
}
}  // namespace

uint64_t parse_meminfo_available(const std::string& meminfo) {
    std::istringstream in(meminfo);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        const uint64_t kb = parse_count(line.substr(13));
        return kb > UINT64_MAX / 1024 ? 0 : kb * 1024;
    }
    return 0;
}

uint64_t cgroup_room(const std::string& memory_max, const std::string& memory_current) {
    const uint64_t limit = parse_count(memory_max);
    if (limit == 0) return 0;  // "max": no limit
    const uint64_t used = parse_count(memory_current);
    return limit > used ? limit - used : 1;  // at the limit: (almost) nothing left, but known
}

uint64_t available_ram_bytes() {
    uint64_t avail = parse_meminfo_available(read_small_file("/proc/meminfo"));
    if (const std::string dir = own_cgroup_dir(); !dir.empty()) {
        const uint64_t room = cgroup_room(read_small_file((dir + "/memory.max").c_str()),
                                          read_small_file((dir + "/memory.current").c_str()));
        if (room > 0) avail = avail > 0 ? std::min(avail, room) : room;
    }
    return avail;
}

uint64_t default_budget_reserve(uint64_t available) {
    return std::clamp<uint64_t>(available / 10, 512ull << 20, 4ull << 30);
}

uint64_t auto_budget(uint64_t available) {
    const uint64_t reserve = default_budget_reserve(available);
    return available > reserve ? available - reserve : 0;
}

}  // namespace strata::memory
