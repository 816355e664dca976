#pragma once
#include "app/npw/cli_args.h"
#include "app/npw/flag_table.h"
#include "app/npw/info_command.h"  // isGgufPath, runGgufInfo
#include "app/npw/terminal_output.h"  // terminalProgress, clearProgressLine, printResult
#include "core/data/text_datasets.h"
#include "core/eval/feature_network.h"
#include "core/eval/image_eval.h"
#include "core/eval/image_generate.h"
#include "core/experiments/language_workbench.h"
#include "core/experiments/sweep.h"
#include "core/models/llama_weights.h"
#include "core/prune/baselines.h"
#include "core/prune/pruner.h"
#include "core/util/progress.h"

#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace npw::cli {

struct Command {
    std::string name;
    std::string usage;    // after "npw NAME"
    std::string summary;
    std::vector<Flag> flags;  // flagsFor(name): from the table of flags (flag_table.h)
    std::function<int(const Args&)> run;
    // Needs no tensor and so no LibTorch: the launcher starts npw-text (app/text) for it, which
    // parses the same flags (generated from this table) and runs the same code without LibTorch.
    bool withoutLibTorch = false;
};

const std::vector<Command>& allCommands();
std::string versionString();

// Each group of commands registers itself here.
void addLanguageModelCommands(std::vector<Command>& out);  // info, eval, generate, bench
void addCompareCommand(std::vector<Command>& out);         // compare
void addTrainingCommands(std::vector<Command>& out);       // train-tokenizer, train-lm
void addDemoCommand(std::vector<Command>& out);            // demo
void addPruneCommand(std::vector<Command>& out);           // prune

void addSweepCommand(std::vector<Command>& out);           // sweep
void addZeroShotCommands(std::vector<Command>& out);       // zeroshot, make-verse-task
void addImageMetricsCommands(std::vector<Command>& out);   // train-classifier, metrics
void addImageTrainingCommands(std::vector<Command>& out);  // train-vq, train-c2i
void addGgufCommand(std::vector<Command>& out);            // export-gguf
void addTokenizeCommand(std::vector<Command>& out);        // tokenize
// `npw bench --suite pruning` and `npw bench --synthetic SIZE` (commands_bench.cpp).
int runPruningBench(const Args& args);
// `npw bench --write-synthetic SIZE --out DIR`: a random checkpoint of that shape (commands_bench.cpp).
int runWriteSyntheticCheckpoint(const Args& args);
// `npw bench --write-synthetic-image SIZE --out DIR`: a random LlamaGen c2i GPT (commands_bench.cpp).
int runWriteSyntheticImageModel(const Args& args);

// `npw bench MODEL --llamacpp`: the checkpoint exported to a temporary GGUF (ggufDtype "f32",
// "f16" or "bf16") and timed in llama.cpp through tests/fixtures/llamacpp/run_gguf.mjs (commands_gguf.cpp).
// Returns prefill/decode tokens/s, threads, and whether llama.cpp's greedy ids equal npw's.
nlohmann::json benchLlamaCpp(const LlamaCheckpoint& checkpoint, int64_t promptTokens, int64_t decodeTokens, int repeats,
                             int threads, const std::string& ggufDtype = "f32");

// "bf16" or "f16" when every weight matrix of the checkpoint is stored so (a release as it ships:
// llama.cpp then reads the same two bytes a weight as npw), "f32" otherwise.
std::string storedMatrixGgufDtype(const LlamaCheckpoint& checkpoint);

// Class-conditional image models (commands_image.cpp): `npw generate` and `npw info` hand over
// to these when isImageModelRequest says so.
bool isImageModelRequest(const Args& args, const std::string& model);
int runImageInfo(const Args& args, const std::string& model);
int runImageGenerate(const Args& args, const std::string& model);
// Shared by the image commands (commands_image*.cpp).
LlamaGenCheckpoint openGpt(const Args& args, const std::string& model, int64_t downsample);
std::string vqPathFor(const Args& args, const std::string& model);          // --vq, else MODEL/vq
std::vector<std::string> classNames(const std::string& model);             // config.json "class_names"
ImageSamplingOptions samplingFromArgs(const Args& args);                    // --cfg, --top-k, --seed, --batch, ...
// `npw prune` / `npw sweep` on an image model (commands_image_prune.cpp).
int runImagePrune(const Args& args, const std::string& model, const PruneSettings& settings);
// --calib wikitext2:FILE (ptb:, c4:, …) names a data set, which --calib-ids and --calib-per-line
// cannot describe: refused before any model is loaded. Returns the data set, if it is one.
std::optional<TextDatasetRef> checkCalibDataset(const Args& args);
// --calib, --calib-ids, --calib-per-line, --nsamples, --seqlen (0 when absent: the model's
// context), --seed as the workbench's calibration request (`npw prune`, its baselines).
CalibrationRequest calibrationRequestFromArgs(const Args& args);
int runImageSweep(const Args& args, const std::string& model);
// `npw prune --method llm-pruner|slicegpt|block-influence` (commands_baselines.cpp).
int runBaselinePrune(const Args& args, const std::string& model, BaselineMethod method);
// The image-metric table rows the image commands print (FID, sFID, IS, precision, recall,
// class accuracy, tokens/s, parameters) and their JSON.
nlohmann::json evaluationJson(const ImageEvaluation& e);
void printEvaluationHeader();
void printEvaluationRow(const std::string& name, double ratio, double achieved, const ImageEvaluation& e);
// `npw metrics --model`: the images a model generates (balanced classes, seeds seed..seed+n−1).
ImageSource modelImages(const Args& args, const std::string& model, int64_t n, int64_t* numClasses = nullptr);

// "NAME (numerical ρ=0.30)" for an npw export (NAME: its folder's name; method and ratio from its
// npw-manifest.json), else the file or folder name (or "demo:lm" as given): what compared outputs
// (text and pictures) call a model.
std::string modelLabel(const std::string& model);

// `npw sweep`'s summary over seeds as a text table (app/npw/text_table.h: columns as wide as
// their content, so a perplexity of 10^9 never runs into its neighbour).
std::string sweepSummaryText(const std::vector<SweepSummaryRow>& summary);

// The launcher's texts as a C++ source (app/launcher): the usage and, per command, its --help and
// the program that runs it (npw-run, or npw-text for a command withoutLibTorch).
std::string launcherHelpSource(const std::string& usage, const std::vector<Command>& commands,
                               const std::function<std::string(const Command&)>& help);
// The flags of the commands withoutLibTorch as a C++ source for npw-text (app/text), declared as
// the table declares them (npw::Error for a flag whose check is a parser of npw-run's: a Choice).
std::string torchFreeFlagsSource(const std::vector<Command>& commands);

} // namespace npw::cli
