#pragma once
// Where and in which precision models run: CUDA when this LibTorch has it and a GPU is
// present (half precision there), else the CPU with all cores (float32).
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <cstdint>
#include <string>

namespace npw {

struct Runtime {
    c10::Device device{c10::kCPU};
    c10::ScalarType dtype = c10::kFloat;
    std::string describe() const;  // e.g. "cpu float32 (2 threads)", "cuda:0 bfloat16 (NVIDIA H100)"
};

// preference: "auto", "cpu", "cuda", "cuda:N"; dtype: "auto", "float32", "float16", "bfloat16".
// Throws npw::Error when CUDA is asked for and not available. Also sets the CPU thread count.
Runtime chooseRuntime(const std::string& preference = "auto", const std::string& dtype = "auto");
// The CPU threads of LibTorch's pool and of OpenBLAS's own (its GEMMs and LAPACK calls), together.
void setComputeThreads(int threads);
// The memory of the runtime's GPU in bytes (its total, as the driver reports it); 0 on the CPU,
// where physicalMemoryBytes() (core/util/system_memory.h) is the bound. NPW_DEVICE_MEMORY_BYTES=N
// pretends the GPU has N bytes (as NPW_PHYSICAL_MEMORY_BYTES does for RAM).
int64_t deviceMemoryBytes(const Runtime& runtime);

} // namespace npw
