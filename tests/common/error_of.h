// For suites that link the engine: the message of the strata::Error a call throws.
#pragma once

#include <QString>

#include "common/error.h"

namespace strata::test {

// Runs f and returns the message of the strata::Error it throws ("" if none).
template <class F>
QString error_of(F&& f) {
    try {
        f();
    } catch (const strata::Error& e) {
        return QString::fromStdString(e.what());
    }
    return QString();
}

}  // namespace strata::test
