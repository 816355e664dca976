#include "core/util/library_environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <dlfcn.h>
#include <unistd.h>
#include <utility>

namespace npw {

namespace {

constexpr const char* kDetectedVariable = "NPW_OPENBLAS_DETECTED_CORE";

// What OpenBLAS says it runs, or "" when libblas.so.3 is not OpenBLAS (the reference BLAS, BLIS).
std::string openBlasCoreName() {
    void* blas = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL);
    if (!blas) return "";
    std::string name;
    using CoreName = char* (*)();
    if (auto coreName = reinterpret_cast<CoreName>(::dlsym(blas, "openblas_get_corename")))
        if (const char* n = coreName()) name = n;
    ::dlclose(blas);
    return name;
}

// OpenBLAS's x86 cores without AVX2 kernels (its dynamic.c names, compared case-insensitively).
bool isPreAvx2Core(std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    static const char* const kOld[] = {"unknown", "katmai",    "coppermine", "northwood",    "prescott",
                                       "banias",  "atom",      "core2",      "penryn",       "dunnington",
                                       "nehalem", "athlon",    "opteron",    "opteron_sse3", "barcelona",
                                       "nano",    "sandybridge", "bobcat",   "bulldozer",    "piledriver"};
    return std::any_of(std::begin(kOld), std::end(kOld), [&](const char* old) { return name == old; });
}

} // namespace

namespace {

// The OpenBLAS core to set ("SkylakeX", "Haswell") and the one OpenBLAS chose, or {"", ""} when
// nothing should change: the variable is set already, the BLAS is not OpenBLAS, or OpenBLAS chose
// an AVX2 core itself.
std::pair<std::string, std::string> blasCoreChoice() {
#if defined(__x86_64__) || defined(__i386__)
    if (std::getenv("OPENBLAS_CORETYPE")) return {};
    __builtin_cpu_init();
    // libgcc's answers include the operating system's support (XCR0) for the AVX and AVX-512 state.
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!avx2) return {};
    const std::string detected = openBlasCoreName();
    if (detected.empty() || !isPreAvx2Core(detected)) return {};
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512cd");
    return {avx512 ? "SkylakeX" : "Haswell", detected};
#else
    return {};  // other architectures: OpenBLAS's own choice
#endif
}

} // namespace

bool setLibraryEnvironment() {
    bool changed = false;
    if (!std::getenv("OMP_WAIT_POLICY") && ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0) changed = true;
    const auto [core, detected] = blasCoreChoice();
    if (!core.empty() && ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0) {
        ::setenv(kDetectedVariable, detected.c_str(), 1);
        changed = true;
    }
    return changed;
}

void restartWithLibraryEnvironment(char** argv) {
    if (!setLibraryEnvironment()) return;
    ::execv("/proc/self/exe", argv);
    // Only reached when exec failed: go on with the libraries as loaded (slower, still correct).
}

std::string blasKernelDescription() {
    const std::string name = openBlasCoreName();
    if (name.empty()) return "";
    std::string text = "OpenBLAS " + name;
    const char* set = std::getenv("OPENBLAS_CORETYPE");
    const char* detected = std::getenv(kDetectedVariable);
    if (set && detected) text += std::string(" (set by npw; OpenBLAS had chosen ") + detected + " for this CPU)";
    else if (set) text += " (OPENBLAS_CORETYPE set by the user)";
    return text;
}

} // namespace npw
