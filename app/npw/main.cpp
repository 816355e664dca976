// npw-run: the command line of the Numerical Pruning Workbench. Thin: parses flags, calls core,
// prints a table (or one JSON object with --json). Progress goes to stderr. Users start it as
// `npw` (app/launcher/main.cpp), which answers --help, --version and unknown commands without
// loading LibTorch, and starts this program, once, for everything else.
#include "app/npw/cli_args.h"
#include "app/npw/commands.h"
#include "app/npw/help_pages.h"
#include "core/models/torch_llama.h"
#include "core/util/error.h"
#include "core/util/output_guard.h"
#include "core/util/library_environment.h"

#include <c10/util/Exception.h>

#include "core/util/atomic_file.h"

#include <iostream>
#include <malloc.h>
#include <string>
#include <vector>

using namespace npw;

int main(int argc, char** argv) {
    restartWithLibraryEnvironment(argv);  // why: core/util/library_environment.h
    // LibTorch allocates and frees activation-sized blocks on every step; with glibc's
    // defaults each one is a fresh mmap and page faults dominate (measured: ~40% system
    // time while training). Keep freed memory in the heap instead.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    std::vector<std::string> args(argv + 1, argv + argc);
    const auto& commands = cli::allCommands();
    auto printUsage = [&](std::ostream& out) { out << cli::usageText(commands); };
    // The build's own step (app/CMakeLists.txt): these texts as C++ for the launcher, which
    // prints them without this program's libraries.
    if (args.size() == 2 && args[0] == "--write-launcher-help") {
        writeTextAtomically(args[1], cli::launcherHelpSource(cli::usageText(commands), commands, cli::commandHelpText));
        return 0;
    }
    // And the flags of the commands npw-text runs without LibTorch (app/text), from the same table.
    if (args.size() == 2 && args[0] == "--write-torch-free-flags") {
        try {
            writeTextAtomically(args[1], cli::torchFreeFlagsSource(commands));
        } catch (const Error& e) {
            std::cerr << "npw-run --write-torch-free-flags: error: " << e.what() << "\n";
            return 1;
        }
        return 0;
    }
    // The whole reference, from the same table (help_pages.h): `npw help --markdown` (the manual's
    // cli-reference.md), `npw help --man` (npw.1, which the build generates and installs).
    if (args.size() == 2 && args[0] == "help" && (args[1] == "--markdown" || args[1] == "--man")) {
        std::cout << (args[1] == "--markdown" ? cli::markdownReference(commands)
                                              : cli::manPage(commands, cli::versionString()));
        return std::cout.flush() ? 0 : 1;
    }
    if (args.size() == 2 && args[0] == "help")
        for (const auto& c : commands)
            if (c.name == args[1]) {
                std::cout << cli::commandHelpText(c);
                return 0;
            }
    if (args.size() >= 2 && args[0] == "help") {
        std::cerr << "npw help: expected --markdown, --man or a command's name, got '" << args[1] << "'\n\n";
        printUsage(std::cerr);
        return 2;
    }
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        printUsage(std::cout);
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
        std::cout << "npw " << cli::versionString() << "\n";
        return 0;
    }
    for (const auto& c : commands) {
        if (c.name != args[0]) continue;
        std::vector<std::string> rest(args.begin() + 1, args.end());
        for (const auto& a : rest)
            if (a == "--help" || a == "-h") {
                std::cout << cli::commandHelpText(c);
                return 0;
            }
        try {
            const cli::Args parsed = cli::parseArgs(c.flags, rest, c.name);
            // No output may be an input of the run, or another output: checked here for every
            // flag the table marks, and by core's writers on every write (output_guard.h).
            runOutputGuard() = cli::outputGuardFromArgs(c.flags, parsed);
            // Read by the Meta-checkpoint loader wherever a command opens one (core/models/torch_llama.h).
            if (parsed.has("rope-scaling-factor")) setMetaRopeScalingFactor(parsed.getDouble("rope-scaling-factor"));
            return c.run(parsed);
        } catch (const Cancelled&) {
            cli::clearProgressLine();
            std::cerr << "npw " << c.name << ": cancelled\n";
            return 130;
        } catch (const Error& e) {
            cli::clearProgressLine();
            std::cerr << "npw " << c.name << ": error: " << e.what() << "\n";
            return 1;
        } catch (const c10::OutOfMemoryError& e) {
            cli::clearProgressLine();
            // LibTorch's first line names the device and the size it tried to allocate ("CUDA out
            // of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of ..."); the rest
            // is a C++ backtrace.
            std::string what = e.what_without_backtrace();
            std::cerr << "npw " << c.name << ": error: out of memory: " << what.substr(0, what.find('\n'))
                      << "\n(a smaller --batch or --seqlen, a smaller model, --layerwise for evaluation, or another device)\n";
            return 1;
        } catch (const std::exception& e) {
            cli::clearProgressLine();
            std::cerr << "npw " << c.name << ": internal error: " << e.what() << "\n";
            return 3;
        }
    }
    std::cerr << "npw: unknown command '" << args[0] << "'\n\n";
    printUsage(std::cerr);
    return 2;
}
