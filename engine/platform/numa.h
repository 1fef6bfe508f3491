// NUMA awareness (libnuma). On a machine with several memory nodes a CPU
// reads its own node's memory at full bandwidth and another node's at a
// fraction of it; the engine is memory-bandwidth bound, so where its fast-tier
// buffers live and where its compute threads run decide its speed.
//
// Policy (EngineSettings::numa, strata-cli --numa):
//   auto        one node: nothing to do (off). Several: bind to the first node
//               when the plan's fast-tier bytes fit its memory, else interleave.
//   off         no placement: the kernel's first-touch default.
//   bind[:N]    compute threads run on node N's CPUs (default the first node)
//               and the fast-tier buffers (shared weights, expert slots, KV
//               pool) are allocated on node N (mbind MPOL_BIND).
//   interleave  the fast-tier buffers are spread page by page over all nodes
//               (MPOL_INTERLEAVE); threads stay unpinned.
// The placement reaches every AlignedBuffer through the ledger's tier
// placement (memory/ledger.h), so KV, weights and slots need no NUMA code.
//
// Built without libnuma (STRATA_HAVE_NUMA undefined) the topology reads
// /sys only for the CPU count and memory, reports "not built", and every
// policy but off/auto is refused at load with that reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::cpu {

struct NumaNode {
    int id = 0;
    std::vector<int> cpus;       // online CPUs of the node
    uint64_t memory_bytes = 0;   // total memory of the node
    uint64_t free_bytes = 0;
};

struct NumaTopology {
    bool built = false;          // compiled with libnuma
    bool available = false;      // the kernel supports NUMA (numa_available() == 0)
    std::vector<NumaNode> nodes; // one node (all CPUs, all memory) when unavailable
    int cpus = 0;                // CPUs over all nodes
    uint64_t memory_bytes = 0;   // memory over all nodes
};

// Reads the machine's topology (cheap: a few /sys reads). Never throws.
NumaTopology numa_topology();

enum class NumaMode { Auto, Off, Bind, Interleave };

struct NumaPolicy {
    NumaMode mode = NumaMode::Auto;
    int node = -1;               // bind: the node; -1 = the first node
};

const char* numa_mode_name(NumaMode m);  // "auto", "off", "bind", "interleave"
// Parses "auto", "off", "bind", "bind:N", "interleave". Returns "" and sets
// *out, or one line saying what is wrong and what is allowed.
std::string parse_numa_policy(const std::string& text, NumaPolicy* out);

// What a policy means on a machine for a plan of `fast_bytes` fast-tier bytes.
struct NumaDecision {
    NumaMode mode = NumaMode::Off;  // Off, Bind or Interleave (never Auto)
    int node = -1;                  // bind: the node
    std::vector<int> cpus;          // bind: the CPUs threads run on; empty otherwise
    std::string why;                // "no placement needed", "bind to node 0 (...)", ...
    std::string error;              // non-empty: the policy cannot be applied here (and why)
};
NumaDecision decide_numa(const NumaPolicy& policy, const NumaTopology& topo, uint64_t fast_bytes);

// One line for inspect and plan: "NUMA: 1 node, 24.0 GiB, 2 CPUs: no placement needed".
std::string numa_summary(const NumaTopology& topo, const NumaDecision& d);

// Places [p, p + bytes) (page-aligned, not yet touched): bind to `node`, or
// interleave over every node (node < 0). Returns "" or the reason it failed.
std::string numa_place_memory(void* p, uint64_t bytes, bool interleave, int node);

// Pins the calling thread to `cpus` (empty: every online CPU). Returns "" or the reason.
std::string set_current_thread_cpus(const std::vector<int>& cpus);
// The CPUs the calling thread may run on.
std::vector<int> current_thread_cpus();

}  // namespace strata::cpu
