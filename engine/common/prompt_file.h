// Prompt files, as strata-cli (eval, trace, calibrate, routing-stats) and the
// app's calibration read them: one prompt per non-empty line, a literal \n
// is a newline, a trailing \r is dropped.
#pragma once

#include <string>
#include <vector>

namespace strata {

// Throws strata::Error for an unreadable file or one without prompts.
std::vector<std::string> read_prompt_file(const std::string& path);

}  // namespace strata
