#pragma once
// setComputeThreads (runtime.h) for a scope: a benchmark's --threads, the pools as they were after.
#include "core/models/runtime.h"

namespace npw {

class ScopedComputeThreads {
public:
    explicit ScopedComputeThreads(int threads);
    ~ScopedComputeThreads();
    ScopedComputeThreads(const ScopedComputeThreads&) = delete;
    ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

private:
    int previous_;
};

} // namespace npw
