// JSON for the engine's own files (calibration pin lists, counts) and the
// CLI's reports, on nlohmann-json: parsing with errors that name the file,
// and string escaping for hand-assembled output.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace strata::json {

// Throws strata::Error("<what>: JSON error: <nlohmann's message with the byte offset>").
nlohmann::json parse(std::string_view text, const std::string& what);

// Escapes a string for a JSON string literal (without the quotes); invalid
// UTF-8 becomes U+FFFD rather than an exception.
std::string escape(std::string_view s);

}  // namespace strata::json
