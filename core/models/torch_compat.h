#pragma once
// The LibTorch API that differs between the versions npw builds against: Debian 12's LibTorch
// 1.13, Debian 13's 2.6 (CPU and CUDA) and the 2.x inside PyTorch wheels. Everything that needs a
// version test lives here, each entry saying which versions differ and how; the rest of the tree
// uses one spelling. <torch/version.h> is small (macros only) and exists in all of them.
// (Headers that moved are not listed: include what you use, e.g. <ATen/core/grad_mode.h> for
// at::NoGradGuard, which 1.13's <ATen/ATen.h> brought along and 2.x's does not.)
#include <torch/version.h>

#define NPW_TORCH_AT_LEAST(major, minor) \
    (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#ifdef NPW_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <cstdint>

namespace npw::torch_compat {

// The CUDA caching allocator's peak of allocated bytes on `device` (all pools), in MiB.
// StatType (which pool a statistic counts) moved from c10::cuda::CUDACachingAllocator to
// c10::CachingDeviceAllocator in PyTorch 2.5, when the allocator statistics became
// device-generic; later versions keep that spelling valid (a using-directive there).
inline double cudaPeakAllocatedMiB(c10::DeviceIndex device) {
#if NPW_TORCH_AT_LEAST(2, 5)
    using c10::CachingDeviceAllocator::StatType;
#else
    using c10::cuda::CUDACachingAllocator::StatType;
#endif
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    return static_cast<double>(stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].peak) / (1024.0 * 1024.0);
}

// Caps the caching allocator's share of `device`'s memory (same spelling in 1.13 and 2.x).
inline void setCudaMemoryFraction(double fraction, int device) {
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device));
}

// The memory `device` has in all (bytes; 0 when the driver does not say). CUDA's runtime API,
// the same in every version: LibTorch itself has no stable spelling for it before 2.x.
inline int64_t cudaTotalMemoryBytes(int device) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) return 0;
    return static_cast<int64_t>(totalBytes);
}

} // namespace npw::torch_compat
#endif
