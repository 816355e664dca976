// train-tokenizer, train-lm: how the bundled demo models were made (resumable, seeded).
#include "app/npw/commands.h"
#include "core/text/json_output.h"
#include "core/models/model_loader.h"
#include "core/models/runtime.h"
#include "core/text/bpe_trainer.h"
#include "core/text/tokenizer.h"
#include "core/train/demo_presets.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <filesystem>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

std::vector<std::string> splitLines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}

int runTrainTokenizer(const Args& args) {
    if (!args.has("corpus") || !args.has("out")) throw Error("--corpus FILE and --out FILE are required");
    const std::string text = readTextInput(args.get("corpus"), "corpus");
    std::vector<std::string> lines = splitLines(text);
    if (lines.empty()) throw Error("corpus '" + args.get("corpus") + "' has no text");
    BpeTrainOptions o;
    o.vocabSize = static_cast<int32_t>(args.getInt("vocab"));
    const std::string json = trainSentencePieceBpe(lines, o);
    writeTextAtomically(args.get("out"), json);
    auto tok = Tokenizer::fromJson(json, args.get("out"));
    const size_t tokens = tok->encode(text, false).size();
    nlohmann::json j = {{"out", args.get("out")}, {"vocab", tok->vocabSize()}, {"corpus_bytes", text.size()},
                        {"corpus_tokens", tokens}, {"bytes_per_token", double(text.size()) / double(tokens)}};
    printResult(args, j, [&] {
        std::cout << "wrote " << args.get("out") << ": " << tok->vocabSize() << " tokens, "
                  << double(text.size()) / double(tokens) << " bytes/token on the corpus\n";
    });
    return 0;
}

int runTrainLm(const Args& args) {
    for (const char* required : {"corpus", "tokenizer", "out"})
        if (!args.has(required)) throw Error(std::string("--") + required + " is required");
    const std::string preset = args.get("preset");
    chooseRuntime("cpu");  // the trainer runs on the CPU, all cores (or NPW_NUM_THREADS)
    auto tokenizer = Tokenizer::fromFile(args.get("tokenizer"));
    LmTrainOptions o = demoLmTrainOptions(preset, tokenizer->vocabSize(), static_cast<uint64_t>(args.getInt("seed")));
    if (args.has("steps")) o.steps = args.getInt("steps");
    o.maxSeconds = args.getDouble("max-minutes") * 60.0;
    const fs::path out = args.get("out");
    const fs::path work = args.has("work") ? fs::path(args.get("work")) : fs::path(out.string() + ".train");
    fs::create_directories(work);
    o.checkpointPath = (work / "train-checkpoint.safetensors").string();

    const std::string text = readTextInput(args.get("corpus"), "corpus");
    std::vector<int32_t> corpus = tokenizer->encode(text, /*addBos=*/true);
    std::cerr << "corpus: " << text.size() << " bytes, " << corpus.size() << " tokens; model "
              << o.config.parameterCount() << " parameters\n";
    LmTrainStatus status;
    LlamaWeights weights = trainLlama(corpus, o, status, nullptr,
                                      [](const std::string& line) { std::cerr << line << std::endl; });
    nlohmann::json j = {{"step", status.step}, {"steps", o.steps}, {"loss", status.loss},
                        {"tokens_per_s", status.tokensPerSecond}, {"finished", status.finished},
                        {"checkpoint", o.checkpointPath}};
    if (status.finished) {
        LlamaCheckpoint ckpt;
        ckpt.config = o.config;
        ckpt.weights = weights;
        ckpt.tokenizerPath = args.get("tokenizer");
        nlohmann::json recipe = {{"npw_training",
                                  {{"preset", preset}, {"corpus", fs::path(args.get("corpus")).filename().string()},
                                   {"corpus_tokens", corpus.size()}, {"seqlen", o.seqlen}, {"batch", o.batchSize},
                                   {"steps", o.steps}, {"learning_rate", o.learningRate}, {"seed", o.seed},
                                   {"final_train_loss", status.loss}}}};
        saveHfLlamaDirectory(ckpt, out.string(), npw::json_fields::dumpJson(recipe));
        j["out"] = out.string();
    }
    printResult(args, j, [&] {
        if (status.finished)
            std::cout << "trained " << preset << " to step " << status.step << " (loss " << status.loss << "), wrote "
                      << out.string() << "\n";
        else
            std::cout << "stopped at step " << status.step << "/" << o.steps << " (loss " << status.loss
                      << "); run the same command again to resume from " << o.checkpointPath << "\n";
    });
    return 0;
}

} // namespace

void addTrainingCommands(std::vector<Command>& out) {
    out.push_back({"train-tokenizer", "--corpus FILE --vocab N --out tokenizer.json",
                   "Train a byte-fallback BPE tokenizer (SentencePiece style) and write tokenizer.json.",
                   flagsFor("train-tokenizer"), runTrainTokenizer});
    out.push_back({"train-lm", "--preset lm|lm-gqa --corpus FILE --tokenizer FILE --out DIR [--max-minutes M]",
                   "Train a demo LLaMA from scratch (resumable: run again to continue).", flagsFor("train-lm"),
                   runTrainLm});
}

} // namespace npw::cli
