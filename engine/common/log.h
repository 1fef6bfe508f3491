// One spdlog logger per subsystem ("gguf", "model", "tokenizer", ...). Loggers
// are created on first use and share the default sinks, so the app can redirect
// everything to its log file by replacing the default logger's sinks.
#pragma once

#include <memory>
#include <spdlog/spdlog.h>

namespace strata {

std::shared_ptr<spdlog::logger> logger(const char* subsystem);

}  // namespace strata
