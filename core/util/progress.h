#pragma once
// Progress and cancellation for long jobs: a plain callback (no Qt). It returns false
// to ask the job to stop; the job then throws npw::Cancelled at a consistent point.
#include <functional>
#include <string>

namespace npw {

struct Progress {
    std::string stage;   // what is running, e.g. "calibrate layer 3"
    double done = 0;     // units done so far
    double total = 0;    // units in all (0 when unknown)
};

using ProgressFn = std::function<bool(const Progress&)>;

// Calls fn (if any) and throws Cancelled when it returns false.
void reportProgress(const ProgressFn& fn, const std::string& stage, double done, double total);

} // namespace npw
