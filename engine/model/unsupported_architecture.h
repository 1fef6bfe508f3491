// The error a GGUF file gives when it is a good file of an architecture this
// engine does not run (mamba, phi3, ...), as against a bad file: callers that
// list models (the app's models folder) say "unsupported architecture 'x'"
// instead of calling the file unreadable. Thrown by ModelConfig::from_gguf.
#pragma once

#include <string>

#include "common/error.h"

namespace strata::model {

class UnsupportedArchitecture : public Error {
public:
    UnsupportedArchitecture(const std::string& what, std::string arch, std::string supported)
        : Error(what), arch_(std::move(arch)), supported_(std::move(supported)) {}
    const std::string& arch() const { return arch_; }            // general.architecture of the file
    const std::string& supported() const { return supported_; }  // "llama, qwen2moe, ..."

private:
    std::string arch_, supported_;
};

}  // namespace strata::model
