#pragma once
// The body of every libFuzzer harness: one target of fuzz_targets.h, and a crash (abort, which
// libFuzzer records with the input) when npw's contract breaks. Build with -DNPW_FUZZ=ON (see
// tests/fuzz/CMakeLists.txt) and run with packaging/fuzz.sh.
#include "tests/fuzz/fuzz_targets.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define NPW_FUZZ_HARNESS(NAME)                                                                          \
    extern "C" int LLVMFuzzerInitialize(int*, char***) {                                              \
        npw::fuzz::initialize();                                                                      \
        return 0;                                                                                     \
    }                                                                                                 \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                         \
        static const npw::fuzz::Target& target = npw::fuzz::target(NAME);                             \
        const std::string problem =                                                                   \
            npw::fuzz::check(target, std::string_view(reinterpret_cast<const char*>(data), size));    \
        if (!problem.empty()) {                                                                       \
            std::fprintf(stderr, "npw fuzz target '%s': contract broken: %s\n", NAME, problem.c_str()); \
            std::abort();                                                                             \
        }                                                                                             \
        return 0;                                                                                     \
    }
