// npw-text: the commands that need no tensor (`npw tokenize`, `npw info` of a llama2.c .bin), run without LibTorch. The launcher
// (app/launcher) starts it for the commands npw-run's table marks withoutLibTorch; loading
// LibTorch would cost each start about 0.45 s of CPU, where reading a tokenizer takes milliseconds.
// It runs the same code as npw-run (app/npw/tokenize_command.cpp) with the same flags (generated
// from npw-run's table while building) and the same messages. Where an answer needs what only
// npw-run reads (a model's tensors' shapes), or for anything else (--help run directly, another
// command), it hands the same command line to npw-run.
#include "app/npw/flag_table.h"
#include "app/npw/info_command.h"
#include "app/npw/terminal_output.h"
#include "app/npw/tokenize_command.h"
#include "app/text/torch_free_commands.h"
#include "core/models/checkpoint_summary.h"
#include "core/util/error.h"
#include "core/util/executable_path.h"
#include "core/util/output_guard.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace npw;

namespace {

// Thrown where the answer needs npw-run's readers: the command line goes to npw-run.
struct NeedsNpwRun {};

[[noreturn]] void handOverToNpwRun(char** argv) {
    const std::string worker = executableDirectory() + "/npw-run";  // installed side by side (build tree: app/; libexec/npw)
    ::execv(worker.c_str(), argv);
    std::fprintf(stderr, "npw: error: cannot start '%s': %s (npw-run is installed beside npw-text)\n", worker.c_str(),
                 std::strerror(errno));
    std::exit(1);
}

// `npw info` of a llama2.c .bin, from its header (checkpoint_summary.h), with the tokenizer
// checks; anything else (another format, GGUF, an image model, a SliceGPT export, a flag that
// needs the runtime or reads a Meta release) is npw-run's.
int runInfo(const cli::Args& args) {
    if (args.positional().size() != 1) throw NeedsNpwRun{};  // npw-run words the refusal
    for (const char* flag : {"gpt-model", "image-size", "rope-scaling-factor"})
        if (args.has(flag)) throw NeedsNpwRun{};
    if (cli::infoNeedsRuntime(args)) throw NeedsNpwRun{};
    const std::string& model = args.positional()[0];
    CheckpointLocation at;
    try {
        at = locateCheckpoint(model);
    } catch (const Error&) {
        throw NeedsNpwRun{};  // a demo name that does not exist: npw-run's readers word it
    }
    // A missing file is refused as the loader refuses it (a .gguf by npw-run's GGUF reader).
    const bool gguf = model.size() > 5 && model.compare(model.size() - 5, 5, ".gguf") == 0;
    if (at.layout == CheckpointLayout::Missing && !gguf) throw Error(modelNotFound(model, at));
    if (at.layout != CheckpointLayout::Llama2cBin) throw NeedsNpwRun{};
    return cli::runLlamaInfo(args, model, summarizeLlama2cCheckpoint(at.path), []() -> std::string { throw NeedsNpwRun{}; });
}

int run(const std::string& name, const cli::Args& args) {
    if (name == "tokenize")
        return cli::runTokenize(args, [](const std::string&) -> int64_t { throw NeedsNpwRun{}; });
    if (name == "info") return runInfo(args);
    throw NeedsNpwRun{};  // marked in npw-run's table, but not run here
}

} // namespace

int main(int argc, char** argv) {
    const std::string name = argc > 1 ? argv[1] : "";
    const cli::TorchFreeCommand* command = nullptr;
    for (const cli::TorchFreeCommand& c : cli::torchFreeCommands())
        if (c.name == name) command = &c;
    std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
    for (const std::string& a : rest)
        if (a == "--help" || a == "-h") command = nullptr;  // npw-run prints the help (the launcher does too)
    if (!command) handOverToNpwRun(argv);
    try {
        const cli::Args parsed = cli::parseArgs(command->flags, rest, name);
        // As npw-run does (app/npw/main.cpp): no output may be an input of the run.
        runOutputGuard() = cli::outputGuardFromArgs(command->flags, parsed);
        return run(name, parsed);
    } catch (const NeedsNpwRun&) {
        std::cout.flush();
        handOverToNpwRun(argv);
    } catch (const Error& e) {
        cli::clearProgressLine();
        std::cerr << "npw " << name << ": error: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        cli::clearProgressLine();
        std::cerr << "npw " << name << ": internal error: " << e.what() << "\n";
        return 3;
    }
}
