#include "core/util/number_text.h"

#include <sstream>

namespace npw {

std::string shortNumber(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

} // namespace npw
