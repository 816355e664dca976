// train-vq and train-c2i: how the bundled image model demo:c2i was made (resumable, seeded).
#include "app/npw/commands.h"
#include "core/text/json_output.h"
#include "core/data/fashion_mnist.h"
#include "core/io/safetensors.h"
#include "core/models/llamagen.h"
#include "core/models/runtime.h"
#include "core/models/vq_model.h"
#include "core/train/demo_presets.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <chrono>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

void logLine(const std::string& line) { std::cerr << line << std::endl; }

fs::path workDir(const Args& args, const fs::path& out) {
    fs::path work = args.has("work") ? fs::path(args.get("work")) : fs::path(out.string() + ".train");
    fs::create_directories(work);
    return work;
}

// Codes of a whole image set, in batches (the encoder is the expensive half of the VQ).
at::Tensor encodeAll(const VqModel& vq, const at::Tensor& images, const ProgressFn& progress) {
    std::vector<at::Tensor> parts;
    const int64_t n = images.size(0), batch = 500;
    for (int64_t i = 0; i < n; i += batch) {
        parts.push_back(vq.encode(images.narrow(0, i, std::min(batch, n - i))));
        reportProgress(progress, "encode", double(std::min(i + batch, n)), double(n));
    }
    return at::cat(parts, 0);
}

int runTrainVq(const Args& args) {
    if (!args.has("out")) throw Error("--out DIR is required");
    chooseRuntime("cpu");  // all cores, or NPW_NUM_THREADS
    LabelledImages train = loadFashionMnist("train", args.get("data"));
    LabelledImages test = loadFashionMnist("test", args.get("data"));
    VqTrainOptions o = demoVqTrainOptions(static_cast<uint64_t>(args.getInt("seed")));
    if (args.has("epochs")) o.epochs = args.getInt("epochs");
    o.maxSeconds = args.getDouble("max-minutes") * 60.0;
    const fs::path out = args.get("out");
    o.checkpointPath = (workDir(args, out) / "train-checkpoint.safetensors").string();
    VqTrainStatus status;
    const auto t0 = std::chrono::steady_clock::now();
    auto params = trainVq(train.images, o, status, terminalProgress(), logLine);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json j = {{"step", status.step},       {"steps", status.steps},
                        {"loss", status.loss},       {"reconstruction_mse", status.reconstruction},
                        {"images_per_s", status.imagesPerSecond}, {"finished", status.finished},
                        {"seconds_this_run", seconds}, {"checkpoint", o.checkpointPath}};
    if (status.finished) {
        auto vq = VqModel::fromTensors(params, "", Runtime{}, o.config.normGroups, o.config.l2Norm);
        // Held-out figures: reconstruction error in [0, 1] pixels and the codes the test set uses.
        at::Tensor codes = encodeAll(*vq, test.images, terminalProgress());
        at::Tensor recon = vq->decode(codes);
        const double mse = (recon - test.images).pow(2).mean().item<double>();
        const int64_t used = std::get<0>(at::_unique(codes.reshape({-1}))).numel();
        j["test_mse"] = mse;
        j["test_psnr_db"] = 10.0 * std::log10(1.0 / mse);
        j["test_codes_used"] = used;
        vq->save(out.string());
        j["out"] = out.string();
        logLine("test set: MSE " + std::to_string(mse) + " (PSNR " + std::to_string(10.0 * std::log10(1.0 / mse)) +
                " dB), " + std::to_string(used) + " of " + std::to_string(o.config.codebookSize) + " codes used");
    }
    printResult(args, j, [&] {
        if (status.finished)
            std::cout << "trained the VQ tokenizer (" << o.config.describe() << "), wrote " << out.string() << "\n";
        else
            std::cout << "stopped at step " << status.step << "/" << status.steps << " (loss " << status.loss
                      << "); run the same command again to resume from " << o.checkpointPath << "\n";
    });
    return 0;
}

int runTrainC2i(const Args& args) {
    if (!args.has("out") || !args.has("vq")) throw Error("--vq DIR (from train-vq) and --out DIR are required");
    chooseRuntime("cpu");
    auto vq = VqModel::load(args.get("vq"));
    C2iTrainOptions o = demoC2iTrainOptions(static_cast<uint64_t>(args.getInt("seed")));
    if (args.has("epochs")) o.epochs = args.getInt("epochs");
    o.maxSeconds = args.getDouble("max-minutes") * 60.0;
    if (vq->config().codebookSize != o.config.transformer.vocab_size || vq->config().downsample() != o.config.downsample)
        throw Error("the VQ model '" + vq->source() + "' (" + vq->config().describe() +
                    ") is not the tokenizer demo:c2i is made for (codebook " +
                    std::to_string(o.config.transformer.vocab_size) + ", downsample " + std::to_string(o.config.downsample) + ")");
    const fs::path out = args.get("out");
    const fs::path work = workDir(args, out);
    o.checkpointPath = (work / "train-checkpoint.safetensors").string();

    // The training set's codes, encoded once and kept beside the checkpoint for resumed runs.
    LabelledImages train = loadFashionMnist("train", args.get("data"));
    const fs::path codesPath = work / "train-codes.safetensors";
    at::Tensor codes;
    if (fs::is_regular_file(codesPath)) {
        codes = SafeTensorsFile::open(codesPath.string())->load("codes").to(at::kLong);
    } else {
        codes = encodeAll(*vq, train.images, terminalProgress()).reshape({train.images.size(0), -1});
        writeSafeTensors(codesPath.string(), {{"codes", codes.to(at::kInt).contiguous()}}, {{"vq", vq->source()}});
    }
    if (codes.size(0) != train.labels.size(0)) throw Error("'" + codesPath.string() + "' does not match the training set; delete it");
    C2iTrainStatus status;
    const auto t0 = std::chrono::steady_clock::now();
    LlamaGenCheckpoint model = trainC2i(codes, train.labels, o, status, terminalProgress(), logLine);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json j = {{"step", status.step},         {"steps", status.steps},   {"loss", status.loss},
                        {"tokens_per_s", status.tokensPerSecond}, {"finished", status.finished},
                        {"seconds_this_run", seconds}, {"checkpoint", o.checkpointPath}};
    if (status.finished) {
        nlohmann::json extra = {{"class_names", fashionMnistClassNames()},
                                {"npw_training",
                                 {{"data", "Fashion-MNIST train (60000), VQ codes"}, {"epochs", o.epochs},
                                  {"batch", o.batchSize}, {"learning_rate", o.learningRate},
                                  {"class_dropout", o.classDropout}, {"seed", o.seed},
                                  {"final_train_loss", status.loss}}}};
        saveLlamaGenDirectory(model, out.string(), npw::json_fields::dumpJson(extra));
        vq->save((out / "vq").string());
        j["out"] = out.string();
    }
    printResult(args, j, [&] {
        if (status.finished)
            std::cout << "trained the c2i GPT (" << o.config.describe() << ") to loss " << status.loss << ", wrote "
                      << out.string() << " (with its VQ tokenizer in vq/)\n";
        else
            std::cout << "stopped at step " << status.step << "/" << status.steps << " (loss " << status.loss
                      << "); run the same command again to resume from " << o.checkpointPath << "\n";
    });
    return 0;
}

} // namespace

void addImageTrainingCommands(std::vector<Command>& out) {
    out.push_back({"train-vq", "--out DIR [--epochs E] [--seed S] [--max-minutes M]",
                   "Train demo:c2i's VQ image tokenizer on Fashion-MNIST (resumable: run again to continue).",
                   flagsFor("train-vq"), runTrainVq});
    out.push_back({"train-c2i", "--vq DIR --out DIR [--epochs E] [--seed S] [--max-minutes M]",
                   "Train demo:c2i's class-conditional GPT on the VQ codes of Fashion-MNIST (resumable).",
                   flagsFor("train-c2i"), runTrainC2i});
}

} // namespace npw::cli
