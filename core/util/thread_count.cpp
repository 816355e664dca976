#include "core/util/thread_count.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace npw {

int defaultComputeThreads() {
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("NPW_NUM_THREADS"); env && std::atoi(env) > 0) threads = std::atoi(env);
    return threads;
}

std::string cpuRuntimeName(int threads) {
    return "cpu (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
}

} // namespace npw
