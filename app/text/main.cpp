// npw-text: the commands that need no tensor (`npw tokenize`; `npw info` of a GGUF file, a llama2.c
// .bin or a Hugging Face folder), run without LibTorch. The launcher
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
#include "core/io/zip_archive.h"
#include "core/models/checkpoint_summary.h"
#include "core/models/hf_llama_files.h"
#include "core/util/error.h"
#include "core/util/executable_path.h"
#include "core/util/output_guard.h"
#include "core/util/thread_count.h"

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

// Runtime::describe's answer (core/models/runtime.h) where it cannot differ from npw-run's: the
// CPU, float32, with npw-run's default thread count. A build whose LibTorch has CUDA may choose a
// GPU for --device auto; another device or dtype is npw-run's to choose or refuse.
std::string cpuRuntimeDescription(const cli::Args& args) {
    const std::string device = args.get("device"), dtype = args.get("dtype");
#ifdef NPW_TORCH_HAS_CUDA
    const bool cpu = device == "cpu";
#else
    const bool cpu = device == "cpu" || device == "auto";
#endif
    if (!cpu || (dtype != "auto" && dtype != "float32" && dtype != "f32")) throw NeedsNpwRun{};
    return cpuRuntimeName(defaultComputeThreads()) + " Float";  // c10::toString(at::kFloat)
}

// Whether npw-run could read FILE as a PyTorch zip checkpoint (a LlamaGen model's, which its info
// describes as an image model: commands_image.cpp): it opens the zip first, and a file that is
// no zip is none.
bool mayBeTorchCheckpoint(const std::string& path) {
    try {
        ZipArchive::open(path);
        return true;
    } catch (const std::exception&) {
        return false;  // as npw-run's isLlamaGenModel: not readable as one, so not one
    }
}

// `npw info` as npw-run answers it (commands_lm.cpp's runInfo) for a GGUF file (its header), a
// llama2.c .bin (its header) and a Hugging Face folder (config.json and safetensors headers:
// checkpoint_summary.h), with the tokenizer checks, and the refusals of what is none of the
// layouts; anything else (an image model, a SliceGPT export, Meta's release, llama2.c's ckpt.pt,
// a flag only npw-run reads, a device or dtype other than the CPU's float32) is npw-run's.
int runInfo(const cli::Args& args) {
    if (args.positional().size() != 1) throw NeedsNpwRun{};  // npw-run words the refusal
    const std::string& model = args.positional()[0];
    if (cli::isGgufPath(model)) return cli::runGgufInfo(args, model);
    for (const char* flag : {"class", "vq", "gpt-model", "image-size", "rope-scaling-factor"})
        if (args.has(flag)) throw NeedsNpwRun{};
    CheckpointLocation at;
    try {
        at = locateCheckpoint(model);
    } catch (const Error&) {
        throw NeedsNpwRun{};  // a demo name that does not exist: npw-run's readers word it
    }
    // Decided before anything is read or printed, so that npw-run starts on a clean slate.
    const std::string runtime = cli::infoNeedsRuntime(args) ? cpuRuntimeDescription(args) : std::string();
    auto summary = [&]() -> CheckpointSummary {
        using Layout = CheckpointLayout;
        if (at.layout == Layout::Missing) throw Error(modelNotFound(model, at));
        if (at.layout == Layout::NotAFileOrFolder) throw Error(modelIsNoneOfTheLayouts(model, at));
        if (at.layout == Layout::UnknownFile && !mayBeTorchCheckpoint(at.path)) throw Error(modelIsNoneOfTheLayouts(model, at));
        if (at.layout == Layout::Llama2cBin && !mayBeTorchCheckpoint(at.path)) return summarizeLlama2cCheckpoint(at.path);
        if (at.layout == Layout::HfDirectory && !isLlamaGenDirectory(at.path)) {
            try {
                return summarizeHfCheckpoint(at.path);
            } catch (const NeedsTensorValues&) {
            }
        }
        throw NeedsNpwRun{};
    };
    // NOLINTNEXTLINE(performance-no-automatic-move): a copy of the caller's string; a move would empty it
    return cli::runLlamaInfo(args, model, summary(), [&] { return runtime; });
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
