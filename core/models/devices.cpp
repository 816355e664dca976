#include "core/models/devices.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

namespace npw {

std::vector<std::string> availableDevices() {
    std::vector<std::string> names{"cpu"};
    // As runtime.cpp: torch::cuda::device_count is stable from LibTorch 1.13 to 2.x; a CPU-only
    // build has no CUDA hooks and reports none.
    const int gpus = at::globalContext().hasCUDA() ? static_cast<int>(torch::cuda::device_count()) : 0;
    for (int i = 0; i < gpus; ++i) names.push_back("cuda:" + std::to_string(i));
    return names;
}

} // namespace npw
