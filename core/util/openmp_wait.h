#pragma once
// LibTorch's CPU kernels run on an OpenMP thread pool whose idle threads spin (libgomp's
// default OMP_WAIT_POLICY) — on a machine that is also doing other work (a GUI, a second job,
// a build) the spinning threads steal the cores the work needs. Measured on 2 loaded cores,
// demo:lm, one process: decode 53 tokens/s spinning vs 155 passive, prefill 649 vs 1,700.
// libgomp reads the policy when it is loaded, before main(), so the only way to change it for
// this process is to set it and start the program again.
namespace npw {

// When OMP_WAIT_POLICY is unset: sets it to PASSIVE and re-executes /proc/self/exe with the
// same arguments (never returns then). Does nothing when the variable is set (a user's
// choice, or the second start) or when the re-execution fails.
void restartWithPassiveOpenMpWaits(char** argv);

} // namespace npw
