#include "core/util/child_process.h"

#include "core/util/error.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace npw {

namespace {

// kB fields of /proc/PID/status, as MiB; false when the process is gone.
bool sampleStatus(pid_t pid, ChildRun& run) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    if (!status) return false;
    std::string line;
    while (std::getline(status, line)) {
        auto field = [&](const char* name, double& peak) {
            const size_t n = std::strlen(name);
            if (line.compare(0, n, name) == 0) peak = std::max(peak, std::strtod(line.c_str() + n, nullptr) / 1024.0);
        };
        field("RssAnon:", run.peakRssAnonMiB);
        field("RssFile:", run.peakRssFileMiB);
        field("VmHWM:", run.peakVmHwmMiB);
    }
    return true;
}

} // namespace

ChildRun runChildMeasured(const std::string& program, const std::vector<std::string>& args,
                          const std::vector<std::string>& environment) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw Error("cannot start '" + program + "': " + std::strerror(errno));
    std::vector<std::string> argvText = {program};
    argvText.insert(argvText.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(argvText.size() + 1);
    for (std::string& a : argvText) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The child's environment built here, before fork: between fork and exec a multi-threaded
    // parent's child may call only async-signal-safe functions (setenv/putenv may allocate).
    std::vector<std::string> envText;
    auto overridden = [&](const char* entry) {
        for (const std::string& e : environment) {
            const size_t eq = e.find('=');
            if (std::strncmp(entry, e.c_str(), eq + 1) == 0) return true;
        }
        return false;
    };
    for (char** e = environ; e && *e; ++e)
        if (!overridden(*e)) envText.emplace_back(*e);
    envText.insert(envText.end(), environment.begin(), environment.end());
    std::vector<char*> envp;
    envp.reserve(envText.size() + 1);
    for (std::string& e : envText) envp.push_back(e.data());
    envp.push_back(nullptr);
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(out[0]);
        ::close(out[1]);
        throw Error("cannot start '" + program + "': " + std::strerror(errno));
    }
    if (pid == 0) {  // the child: only async-signal-safe calls until exec
        ::dup2(out[1], STDOUT_FILENO);
        ::execve(program.c_str(), argv.data(), envp.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ChildRun run;
    char buffer[65536];
    bool open = true;
    while (open) {
        pollfd p{out[0], POLLIN, 0};
        const int ready = ::poll(&p, 1, 20);
        if (ready > 0) {
            const ssize_t n = ::read(out[0], buffer, sizeof buffer);
            if (n > 0) run.out.append(buffer, static_cast<size_t>(n));
            else if (n == 0 || errno != EINTR) open = false;
        }
        sampleStatus(pid, run);
    }
    ::close(out[0]);
    int status = 0;
    // stdout closed: the child is exiting (or closed it itself); keep sampling until it is gone.
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        sampleStatus(pid, run);
        ::usleep(20000);
    }
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (WIFEXITED(status)) run.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
    if (run.exitCode == 127 && run.out.empty() && ::access(program.c_str(), X_OK) != 0)
        throw Error("cannot start '" + program + "': it is not an executable file");
    return run;
}

} // namespace npw
