#include "core/models/runtime.h"
#include "core/models/compute_threads.h"
#include "core/models/torch_compat.h"
#include "core/util/thread_count.h"
#include "core/util/error.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <thread>

namespace npw {

namespace {

// torch::cuda::device_count is the one spelling stable from LibTorch 1.13 to 2.x
// (the CUDA hooks' method was renamed); it returns 0 on a CPU-only build.
int cudaDeviceCount() {
    if (!at::globalContext().hasCUDA()) return 0;
    return static_cast<int>(torch::cuda::device_count());
}

c10::ScalarType parseDtype(const std::string& name, bool onCuda) {
    if (name == "auto") return onCuda ? c10::kBFloat16 : c10::kFloat;
    if (name == "float32" || name == "f32") return c10::kFloat;
    if (name == "float16" || name == "f16") return c10::kHalf;
    if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
    throw Error("unknown dtype '" + name + "' (expected auto, float32, float16 or bfloat16)");
}

// NPW_CUDA_MEMORY_FRACTION=F (0 < F <= 1): the share of the GPU's memory npw's allocations may
// take (PyTorch's per-process memory fraction), for sharing a GPU, and for testing what npw says
// when the GPU runs out of memory (packaging/gpu-check.sh).
void limitCudaMemory(int device) {
    const char* env = std::getenv("NPW_CUDA_MEMORY_FRACTION");
    if (!env || !*env) return;
    char* end = nullptr;
    const double fraction = std::strtod(env, &end);
    if (*end != '\0' || !(fraction > 0.0 && fraction <= 1.0))
        throw Error(std::string("NPW_CUDA_MEMORY_FRACTION is '") + env + "'; expected a number in (0, 1]");
#ifdef NPW_WITH_CUDA
    torch_compat::setCudaMemoryFraction(fraction, device);
#else
    (void)device;  // no CUDA device can have been chosen in a build without CUDA
#endif
}

} // namespace

std::string Runtime::describe() const {
    std::string name = device.is_cuda() ? "cuda:" + std::to_string(device.index() < 0 ? 0 : device.index())
                                        : cpuRuntimeName(at::get_num_threads());
    return name + " " + c10::toString(dtype);
}

void setComputeThreads(int threads) {
    threads = std::max(1, threads);
    at::set_num_threads(threads);
    // OpenBLAS keeps a pthread pool of its own, which LibTorch's thread count does not reach:
    // without this, at::linear's GEMMs (evaluation, prefill, calibration's statistics) ran on one
    // core whatever the thread count. The pools used to be kept apart (OpenBLAS at 1: demo:lm's
    // perplexity was once measured 2.5x slower with both at 2); measured again on today's forward
    // (2 cores, idle): 110m evaluation 409 → 679 tokens/s and prefill 361 → 642 with both at 2,
    // decode level (52 / 54), demo:lm perplexity and `npw prune demo:lm` as fast or faster, the
    // pruned model byte-identical. Found at run time, so builds against other BLAS libraries are
    // unaffected; OPENBLAS_NUM_THREADS, when set, wins.
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
        if (!std::getenv("OPENBLAS_NUM_THREADS")) set(threads);
}

int64_t deviceMemoryBytes(const Runtime& runtime) {
    if (!runtime.device.is_cuda()) return 0;
    if (const char* env = std::getenv("NPW_DEVICE_MEMORY_BYTES"); env && *env) {
        char* end = nullptr;
        const long long bytes = std::strtoll(env, &end, 10);
        if (*end != '\0' || bytes <= 0)
            throw Error(std::string("NPW_DEVICE_MEMORY_BYTES is '") + env + "'; expected a positive number of bytes");
        return bytes;
    }
#ifdef NPW_WITH_CUDA
    return torch_compat::cudaTotalMemoryBytes(runtime.device.index() < 0 ? 0 : runtime.device.index());
#else
    return 0;  // no CUDA device can have been chosen in a build without CUDA
#endif
}

ScopedComputeThreads::ScopedComputeThreads(int threads) : previous_(at::get_num_threads()) {
    setComputeThreads(threads);
}

ScopedComputeThreads::~ScopedComputeThreads() { setComputeThreads(previous_); }

Runtime chooseRuntime(const std::string& preference, const std::string& dtype) {
    // LibTorch reports 1 thread on small machines; use every core (notes/environment.md), or
    // NPW_NUM_THREADS (core/util/thread_count.h).
    static bool threadsSet = false;
    if (!threadsSet) {
        setComputeThreads(defaultComputeThreads());
        threadsSet = true;
    }
    const int gpus = cudaDeviceCount();
    Runtime rt;
    if (preference == "auto") {
        if (gpus > 0) rt.device = c10::Device(c10::kCUDA, 0);
    } else if (preference == "cpu") {
        rt.device = c10::Device(c10::kCPU);
    } else if (preference.rfind("cuda", 0) == 0) {
        int index = 0;
        if (preference.size() > 4) {
            const std::string digits = preference.substr(5);
            if (preference[4] != ':' || digits.empty() || digits.size() > 3 ||
                digits.find_first_not_of("0123456789") != std::string::npos)
                throw Error("unknown device '" + preference + "' (expected auto, cpu, cuda or cuda:N)");
            index = std::stoi(digits);
        }
        if (gpus == 0)
            throw Error("device '" + preference + "' asked for, but " +
                        (at::globalContext().hasCUDA() ? std::string("no CUDA GPU is present")
                                                       : std::string("this LibTorch was built without CUDA")));
        if (index < 0 || index >= gpus)
            throw Error("device '" + preference + "' does not exist (" + std::to_string(gpus) + " CUDA devices)");
        rt.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    } else {
        throw Error("unknown device '" + preference + "' (expected auto, cpu, cuda or cuda:N)");
    }
    if (rt.device.is_cuda()) limitCudaMemory(rt.device.index());
    rt.dtype = parseDtype(dtype, rt.device.is_cuda());
    if (!rt.device.is_cuda() && rt.dtype != c10::kFloat)
        throw Error("dtype " + dtype + " is only supported on CUDA; the CPU runs float32");
    return rt;
}

} // namespace npw
