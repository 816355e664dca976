#pragma once
// One child process run for a benchmark, with its peak memory: the program is started without a
// shell (fork + execv), its stdout captured, its stderr left on ours (progress bars stay
// visible), and /proc/PID/status sampled every 20 ms until it exits — RssAnon (its own memory;
// pages of memory-mapped files are RssFile), RssFile and VmHWM (the kernel's peak of both), as
// tests/fixtures/eval_memory.py samples them. Used by `npw bench --suite scale`, whose steps must
// each be measured in a process of their own (a peak cannot be reset inside one).
#include <string>
#include <vector>

namespace npw {

struct ChildRun {
    int exitCode = -1;           // the child's exit status; -1 when it died of a signal
    int signal = 0;              // the signal that ended it, 0 when it exited
    std::string out;             // what it wrote on stdout
    double seconds = 0;          // wall time from start to exit
    double peakRssAnonMiB = 0, peakRssFileMiB = 0, peakVmHwmMiB = 0;
};

// Runs `program` with `args` (argv[1..]) and, added to this process's environment, `environment`
// ("NAME=VALUE" each). Throws npw::Error when the process cannot be started.
ChildRun runChildMeasured(const std::string& program, const std::vector<std::string>& args,
                          const std::vector<std::string>& environment = {});

} // namespace npw
