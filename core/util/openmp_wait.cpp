#include "core/util/openmp_wait.h"

#include <cstdlib>
#include <unistd.h>

namespace npw {

void restartWithPassiveOpenMpWaits(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY")) return;
    if (::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
    ::execv("/proc/self/exe", argv);
    // Only reached when exec failed: go on with the spinning policy (slower, still correct).
}

} // namespace npw
