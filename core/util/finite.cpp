#include "core/util/finite.h"

#include "core/util/error.h"

#include <cmath>

namespace npw {

const char* const kNonFiniteHint =
    " (the model overflows: weights too large for float32 arithmetic, or a broken checkpoint)";

const char* nonFiniteName(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    return "finite";
}

void requireFinite(double value, const std::string& what, const std::string& hint) {
    if (std::isfinite(value)) return;
    throw Error(what + " became non-finite (" + nonFiniteName(value) + ")" + hint);
}

} // namespace npw
