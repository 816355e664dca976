#pragma once
// How many threads npw computes with unless a command says otherwise, and how the runtime names
// the CPU it computes on: what chooseRuntime and Runtime::describe (core/models/runtime.h) use,
// without LibTorch, so that npw-text (app/text) names the runtime as npw-run does.
#include <string>

namespace npw {

// Every core (LibTorch reports 1 thread on small machines), or NPW_NUM_THREADS when it is a
// positive number (e.g. two trainings side by side, one core each).
int defaultComputeThreads();

// "cpu (2 threads)", "cpu (1 thread)".
std::string cpuRuntimeName(int threads);

} // namespace npw
