#include "common/log.h"

#include <mutex>

namespace strata {

std::shared_ptr<spdlog::logger> logger(const char* subsystem) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto existing = spdlog::get(subsystem)) return existing;
    auto base = spdlog::default_logger();
    auto created = std::make_shared<spdlog::logger>(subsystem, base->sinks().begin(), base->sinks().end());
    created->set_level(base->level());
    spdlog::register_logger(created);
    return created;
}

}  // namespace strata
