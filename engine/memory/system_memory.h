// What the machine has for the fast tier, so budgets default to it (a model
// that fits runs fully resident; one that does not gets the expert cache that
// fits) instead of to "unlimited" or to an arbitrary share.
#pragma once

#include <cstdint>
#include <string>

namespace strata::memory {

// RAM this process may still take without pushing the system into swap: the
// kernel's MemAvailable, capped by the cgroup's memory.max minus its usage
// (containers and systemd slices). 0 when neither can be read.
uint64_t available_ram_bytes();

// Parses /proc/meminfo text for MemAvailable (kB) in bytes; 0 when absent.
uint64_t parse_meminfo_available(const std::string& meminfo);
// A cgroup v2 limit: memory.max minus memory.current; 0 for "max" or unreadable values.
uint64_t cgroup_room(const std::string& memory_max, const std::string& memory_current);

// What a default budget leaves to everything else on the machine (the app,
// the desktop, the page cache the model file streams through): a tenth of
// what is available, at least 512 MiB and at most 4 GiB. The GPU uses the
// same rule on free VRAM (other programs' windows, the CUDA context's growth).
uint64_t default_budget_reserve(uint64_t available);

// The fast budget an automatic setting means for `available` bytes: available
// minus the reserve; 0 when nothing is left or available is unknown (0).
uint64_t auto_budget(uint64_t available);

}  // namespace strata::memory
