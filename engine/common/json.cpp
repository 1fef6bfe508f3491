#include "common/json.h"

#include "common/error.h"

namespace strata::json {

nlohmann::json parse(std::string_view text, const std::string& what) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + ": JSON error: " + e.what());
    }
}

std::string escape(std::string_view s) {
    const std::string quoted =
        nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
}

}  // namespace strata::json
