// Where the embedded demo model is: the model a fresh install opens with.
#pragma once

#include <string>

namespace strata::core {

// The file name of the demo model under resources/models (and share/strata/models).
inline constexpr const char* kDemoModelFile = "strata-demo-moe.gguf";

// First that exists: $STRATA_MODEL; <prefix>/share/strata/models/<demo> next to
// the running executable's bin/; the source tree's resources/models/<demo>.
// Returns "" when none exists.
std::string default_model_path();

}  // namespace strata::core
