// The engine's one error type. Every failure a user can cause (bad file, bad
// setting, bad prompt) is thrown as strata::Error with a message that says what
// was wrong and, where it helps, what to do. Callers at the edge (CLI, app)
// catch it and show the message; nothing inside the engine prints errors itself.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when the caller asked to stop a long operation (loading, calibration)
// through its progress callback; nothing is left half-made.
class Cancelled : public Error {
public:
    explicit Cancelled(const std::string& what) : Error(what) {}
};

}  // namespace strata
