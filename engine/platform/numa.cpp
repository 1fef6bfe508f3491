#include "platform/numa.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#ifdef STRATA_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

namespace strata::cpu {

namespace {

std::string gib(uint64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
    return s;
}

// One node holding every online CPU and all memory: the machine as seen
// without NUMA support.
NumaNode whole_machine() {
    NumaNode n;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < online; ++c) n.cpus.push_back(static_cast<int>(c));
    const long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) n.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(psz);
    if (avail > 0 && psz > 0) n.free_bytes = static_cast<uint64_t>(avail) * static_cast<uint64_t>(psz);
    return n;
}

}  // namespace

NumaTopology numa_topology() {
    NumaTopology t;
#ifdef STRATA_HAVE_NUMA
    t.built = true;
    t.available = numa_available() >= 0;
    if (t.available) {
        const int max_node = numa_max_node();
        const int max_cpu = numa_num_configured_cpus();
        bitmask* cpus = numa_allocate_cpumask();
        for (int n = 0; n <= max_node; ++n) {
            if (!numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(n))) continue;
            NumaNode node;
            node.id = n;
            long long free_b = 0;
            const long long size = numa_node_size64(n, &free_b);
            node.memory_bytes = size > 0 ? static_cast<uint64_t>(size) : 0;
            node.free_bytes = free_b > 0 ? static_cast<uint64_t>(free_b) : 0;
            if (numa_node_to_cpus(n, cpus) == 0) {
                for (int c = 0; c < max_cpu; ++c)
                    if (numa_bitmask_isbitset(cpus, static_cast<unsigned>(c)) &&
                        numa_bitmask_isbitset(numa_all_cpus_ptr, static_cast<unsigned>(c)))
                        node.cpus.push_back(c);
            }
            if (node.cpus.empty() && node.memory_bytes == 0) continue;  // an offline node
            t.nodes.push_back(std::move(node));
        }
        numa_free_cpumask(cpus);
    }
#endif
    if (t.nodes.empty()) t.nodes.push_back(whole_machine());
    for (const NumaNode& n : t.nodes) {
        t.cpus += static_cast<int>(n.cpus.size());
        t.memory_bytes += n.memory_bytes;
    }
    return t;
}

const char* numa_mode_name(NumaMode m) {
    switch (m) {
        case NumaMode::Auto: return "auto";
        case NumaMode::Off: return "off";
        case NumaMode::Bind: return "bind";
        case NumaMode::Interleave: return "interleave";
    }
    return "?";
}

std::string parse_numa_policy(const std::string& text, NumaPolicy* out) {
    NumaPolicy p;
    if (text == "auto") p.mode = NumaMode::Auto;
    else if (text == "off") p.mode = NumaMode::Off;
    else if (text == "interleave") p.mode = NumaMode::Interleave;
    else if (text == "bind") p.mode = NumaMode::Bind;
    else if (text.rfind("bind:", 0) == 0) {
        const std::string n = text.substr(5);
        bool digits = !n.empty() && n.size() <= 4;
        for (char c : n) digits = digits && c >= '0' && c <= '9';
        if (!digits) return "numa '" + text + "': the node after 'bind:' must be a number (e.g. bind:0)";
        p.mode = NumaMode::Bind;
        p.node = std::stoi(n);
    } else {
        return "numa '" + text + "' is unknown (use auto, off, bind, bind:N or interleave)";
    }
    if (out) *out = p;
    return "";
}

NumaDecision decide_numa(const NumaPolicy& policy, const NumaTopology& topo, uint64_t fast_bytes) {
    NumaDecision d;
    const size_t n = topo.nodes.size();
    NumaMode mode = policy.mode;
    if (mode == NumaMode::Auto) {
        if (n <= 1) {
            d.why = "no placement needed";
            return d;
        }
        mode = fast_bytes <= topo.nodes.front().memory_bytes ? NumaMode::Bind : NumaMode::Interleave;
    }
    if (mode == NumaMode::Off) {
        d.why = n <= 1 ? "no placement needed" : "placement off (first touch)";
        return d;
    }
    if (!topo.built) {
        d.error = std::string("numa ") + numa_mode_name(mode) + ": this build has no NUMA support (libnuma was not found when it was built)";
        return d;
    }
    if (!topo.available) {
        d.error = std::string("numa ") + numa_mode_name(mode) + ": the kernel reports no NUMA support on this machine";
        return d;
    }
    d.mode = mode;
    if (mode == NumaMode::Bind) {
        const NumaNode* node = policy.node < 0 ? &topo.nodes.front() : nullptr;
        for (const NumaNode& x : topo.nodes)
            if (x.id == policy.node) node = &x;
        if (!node) {
            std::string ids;
            for (const NumaNode& x : topo.nodes) ids += (ids.empty() ? "" : ", ") + std::to_string(x.id);
            d.error = "numa bind:" + std::to_string(policy.node) + ": no such node (this machine has node" +
                      (n == 1 ? " " : "s ") + ids + ")";
            return d;
        }
        if (node->cpus.empty()) {
            d.error = "numa bind:" + std::to_string(node->id) + ": the node has no CPUs to run on";
            return d;
        }
        d.node = node->id;
        d.cpus = node->cpus;
        d.why = "policy bind to node " + std::to_string(node->id) + " (" + std::to_string(node->cpus.size()) + " CPUs, " +
                gib(node->memory_bytes) + (fast_bytes > node->memory_bytes ? ", less than the plan's fast tier" : "") +
                ")";
    } else {
        d.why = "policy interleave over " + std::to_string(n) + " node" + (n == 1 ? "" : "s") +
                (policy.mode == NumaMode::Auto ? " (the fast tier does not fit one node)" : "");
    }
    return d;
}

std::string numa_summary(const NumaTopology& topo, const NumaDecision& d) {
    const size_t n = topo.nodes.size();
    std::string s = "NUMA: ";
    if (!topo.built) s += "not built, ";
    s += std::to_string(n) + " node" + (n == 1 ? "" : "s") + ", " + gib(topo.memory_bytes) + ", " +
         std::to_string(topo.cpus) + " CPU" + (topo.cpus == 1 ? "" : "s");
    if (n > 1) {
        s += " (";
        for (size_t i = 0; i < n; ++i)
            s += (i ? "; " : "") + std::string("node ") + std::to_string(topo.nodes[i].id) + ": " +
                 std::to_string(topo.nodes[i].cpus.size()) + " CPUs, " + gib(topo.nodes[i].memory_bytes);
        s += ")";
    }
    s += ": " + (d.error.empty() ? d.why : d.error);
    return s;
}

std::string numa_place_memory(void* p, uint64_t bytes, bool interleave, int node) {
#ifdef STRATA_HAVE_NUMA
    if (numa_available() < 0) return "the kernel reports no NUMA support";
    const int max_node = numa_max_node();
    std::vector<unsigned long> mask(static_cast<size_t>(max_node / (8 * sizeof(unsigned long)) + 1), 0);
    auto set = [&](int n) { mask[static_cast<size_t>(n) / (8 * sizeof(unsigned long))] |= 1ul << (n % (8 * sizeof(unsigned long))); };
    if (interleave) {
        for (int n = 0; n <= max_node; ++n)
            if (numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(n))) set(n);
    } else {
        if (node < 0 || node > max_node) return "node " + std::to_string(node) + " does not exist";
        set(node);
    }
    if (mbind(p, bytes, interleave ? MPOL_INTERLEAVE : MPOL_BIND, mask.data(),
              static_cast<unsigned long>(mask.size() * 8 * sizeof(unsigned long)), 0) != 0)
        return std::string("mbind: ") + std::strerror(errno);
    return "";
#else
    (void)p;
    (void)bytes;
    (void)interleave;
    (void)node;
    return "this build has no NUMA support";
#endif
}

std::string set_current_thread_cpus(const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpus.empty()) {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &set);
    } else {
        for (int c : cpus)
            if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
    const int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return err == 0 ? std::string() : std::string("pthread_setaffinity_np: ") + std::strerror(err);
}

std::vector<int> current_thread_cpus() {
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

}  // namespace strata::cpu
