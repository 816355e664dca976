// Linked into every suite: the suite's process runs with the libraries set up as npw's own
// programs run them (core/util/library_environment.h: OMP_WAIT_POLICY, and OpenBLAS's kernels on a
// CPU its release does not know). Without it a suite computes in-process with other BLAS kernels
// than the `npw` it starts, and a comparison of the two (the studio against the CLI, at 1e-9)
// measures the kernels' rounding instead of npw. Those variables are read when the libraries
// load, before main(), so the suite restarts itself once, as npw-run and the studio do.
#include "core/util/library_environment.h"

#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

__attribute__((constructor)) void restartWithNpwLibraryEnvironment() {
    if (!npw::setLibraryEnvironment()) return;
    std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (size_t at = 0; at < all.size();) {
        const size_t end = all.find('\0', at);
        args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
        if (end == std::string::npos) break;
        at = end + 1;
    }
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (!args.empty()) ::execv("/proc/self/exe", argv.data());
    // exec failed: go on with the libraries as loaded (a comparison with the CLI may then differ)
}

} // namespace
