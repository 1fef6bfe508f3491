#include "core/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace strata::core {

std::string default_model_path() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("STRATA_MODEL"); env && *env) return env;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path installed = exe.parent_path().parent_path() / "share" / "strata" / "models" / kDemoModelFile;
        if (fs::exists(installed, ec)) return installed.string();
    }
    const fs::path source = fs::path(STRATA_RESOURCE_DIR) / "models" / kDemoModelFile;
    if (fs::exists(source, ec)) return source.string();
    return "";
}

}  // namespace strata::core
