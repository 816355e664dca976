#pragma once
// Two settings of the libraries npw-run and the studio load, which those libraries read once,
// when they are loaded, before main(): the only way to change them for a process is to set them
// in the environment and start the program again (the `npw` launcher sets them before it starts
// npw-run, so the CLI starts once).
//
// OMP_WAIT_POLICY. LibTorch's CPU kernels run on an OpenMP thread pool whose idle threads spin
// (libgomp's default) — on a machine that is also doing other work (a GUI, a second job, a
// build) the spinning threads steal the cores the work needs. Measured on 2 loaded cores,
// demo:lm, one process: decode 53 tokens/s spinning vs 155 passive, prefill 649 vs 1,700.
//
// OPENBLAS_CORETYPE. LibTorch's float32/float64 matrix products and LAPACK's factorisations on
// the CPU are OpenBLAS's. A DYNAMIC_ARCH OpenBLAS picks its kernels by the CPU's model number,
// and a CPU newer than the OpenBLAS release (Debian 12's 0.3.21 on a 2023 Xeon, model 207)
// falls back to "Prescott": SSE3 kernels without FMA, though the CPU has AVX2 and AVX-512.
// Measured on that machine, one thread, 2048² products: float32 12.5 → 57.2 GFLOP/s and float64
// 6.3 → 29.4 with SkylakeX kernels. When OpenBLAS reports a pre-AVX2 core on a CPU that has
// AVX2 and FMA, npw sets the kernels the CPU can run (SkylakeX with AVX-512 F/BW/VL/DQ/CD, else
// Haswell). A value the user set is never changed (OPENBLAS_CORETYPE=Prescott keeps it).
#include <string>

namespace npw {

// Sets what is unset: OMP_WAIT_POLICY=PASSIVE; OPENBLAS_CORETYPE when OpenBLAS (asked through
// libblas.so.3, the BLAS LibTorch links; loaded for the question when not loaded yet) chose a
// pre-AVX2 core on a CPU with AVX2 and FMA, noting the core it had chosen in
// NPW_OPENBLAS_DETECTED_CORE. Returns true when it set anything.
bool setLibraryEnvironment();

// setLibraryEnvironment(), and when it set anything re-executes /proc/self/exe with the same
// arguments (never returns then). When the re-execution fails, goes on with the libraries as
// they were loaded (slower, still correct).
void restartWithLibraryEnvironment(char** argv);

// The BLAS kernels this process runs, for benchmark output: "OpenBLAS SkylakeX (set by npw; it
// had chosen Prescott for this CPU)", "OpenBLAS Haswell", "OpenBLAS Prescott (set by the
// user)", or "" when the BLAS is not OpenBLAS.
std::string blasKernelDescription();

} // namespace npw
