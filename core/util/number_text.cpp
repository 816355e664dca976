#include "core/util/number_text.h"

#include <iomanip>
#include <sstream>

namespace npw {

std::string shortNumber(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

std::string byteSizeText(int64_t bytes) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(1);
    if (bytes >= (int64_t(1) << 30)) out << static_cast<double>(bytes) / 1073741824.0 << " GiB";
    else out << static_cast<double>(bytes) / 1048576.0 << " MiB";
    return out.str();
}

} // namespace npw
