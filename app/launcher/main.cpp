// npw: the command users run. It answers what needs no model — `npw`, `npw --help`,
// `npw --version`, `npw COMMAND --help`, an unknown command — from texts generated at build time,
// and otherwise replaces itself (execv: same process, same arguments) with npw-run, the program
// that does the work. Why: npw-run links LibTorch, whose loading costs every start 0.4 s of CPU
// (measured: about 37 % in LibTorch's static initialisers registering its operators, 32 % in the
// dynamic loader resolving its symbols, 11 % page faults), and 1.5-2.5 s of wall time on a busy
// machine. A command that may need no tensor (tokenize; info, which reads a llama2.c .bin's
// header, a Hugging Face folder's config and safetensors headers or a GGUF file's header:
// 1.3 s → 0.02 s measured on stories260K) goes to npw-text instead, which runs the same code
// without LibTorch (app/text) and hands npw-run what it cannot answer. And npw-run needs
// OMP_WAIT_POLICY and, on some CPUs, OPENBLAS_CORETYPE set before
// LibTorch's libraries load (core/util/library_environment.h): set here, npw-run starts once
// instead of starting and re-executing itself.
#include "app/launcher/launcher_help.h"
#include "core/util/executable_path.h"
#include "core/util/library_environment.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

// The worker (npw-run or npw-text) beside this program (the build tree), else in ../libexec/npw
// (an installed package).
std::string workerPath(const std::string& worker) {
    const std::string dir = npw::executableDirectory();
    for (const std::string& candidate : {dir + "/" + worker, dir + "/../libexec/npw/" + worker})
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    return dir + "/" + worker;
}

} // namespace

int main(int argc, char** argv) {
    using namespace npw::launcher;
    const std::string first = argc > 1 ? argv[1] : "";
    const std::string second = argc > 2 ? argv[2] : "";
    // `npw help COMMAND`: that command's help; `npw help --markdown|--man`: the whole reference,
    // which npw-run writes from its table (app/npw/help_pages.h).
    if (first == "help" && argc == 3) {
        for (std::size_t i = 0; i < kCommandCount; ++i)
            if (second == kCommands[i].name) {
                std::fputs(kCommands[i].help, stdout);
                return 0;
            }
        if (second == "--markdown" || second == "--man") {
            npw::setLibraryEnvironment();
            const std::string worker = workerPath("npw-run");
            ::execv(worker.c_str(), argv);
            std::fprintf(stderr, "npw help: error: cannot start '%s': %s\n", worker.c_str(), std::strerror(errno));
            return 1;
        }
    }
    if (first == "help" && argc > 2) {
        std::fprintf(stderr, "npw help: expected --markdown, --man or a command's name, got '%s'\n\n%s", second.c_str(), kUsage);
        return 2;
    }
    if (argc < 2 || first == "--help" || first == "-h" || first == "help") {
        std::fputs(kUsage, stdout);
        return argc < 2 ? 2 : 0;
    }
    if (first == "--version") {
        std::printf("npw %s\n", kVersion);
        return 0;
    }
    const CommandHelp* command = nullptr;
    for (std::size_t i = 0; i < kCommandCount; ++i)
        if (first == kCommands[i].name) command = &kCommands[i];
    if (!command) {
        std::fprintf(stderr, "npw: unknown command '%s'\n\n%s", first.c_str(), kUsage);
        return 2;
    }
    for (int i = 2; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs(command->help, stdout);
            return 0;
        }
    npw::setLibraryEnvironment();  // before npw-run's libraries load (core/util/library_environment.h)
    const std::string worker = workerPath(command->worker);
    ::execv(worker.c_str(), argv);
    std::fprintf(stderr, "npw %s: error: cannot start '%s': %s (%s is installed beside npw or in ../libexec/npw)\n",
                 first.c_str(), worker.c_str(), std::strerror(errno), command->worker);
    return 1;
}
