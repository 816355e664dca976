// train-classifier (the demo feature classifier) and metrics (FID, sFID, IS, precision, recall).
#include "app/npw/commands.h"
#include "core/data/fashion_mnist.h"
#include "core/models/image_classifier.h"
#include "core/models/runtime.h"
#include "core/train/classifier_trainer.h"
#include "core/util/error.h"

#include <chrono>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

int runTrainClassifier(const Args& args) {
    if (!args.has("out")) throw Error("--out DIR is required");
    chooseRuntime("cpu");  // all cores, or NPW_NUM_THREADS
    const std::string dataDir = args.get("data");
    LabelledImages train = loadFashionMnist("train", dataDir);
    LabelledImages test = loadFashionMnist("test", dataDir);
    ClassifierTrainOptions o;
    o.config.classNames = fashionMnistClassNames();
    o.epochs = args.getInt("epochs");
    o.seed = static_cast<uint64_t>(args.getInt("seed"));
    o.maxSeconds = args.getDouble("max-minutes") * 60.0;
    if (o.epochs < 1) throw Error("--epochs must be at least 1");
    const fs::path out = args.get("out");
    const fs::path work = args.has("work") ? fs::path(args.get("work")) : fs::path(out.string() + ".train");
    fs::create_directories(work);
    o.checkpointPath = (work / "train-checkpoint.safetensors").string();
    ClassifierTrainStatus status;
    const auto t0 = std::chrono::steady_clock::now();
    ImageClassifier model;
    model.config = o.config;
    model.weights = trainClassifier(train.images, train.labels, o, status, terminalProgress(),
                                    [](const std::string& line) { std::cerr << line << std::endl; });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json j = {{"step", status.step},         {"steps", status.steps},   {"loss", status.loss},
                        {"images_per_s", status.imagesPerSecond}, {"finished", status.finished},
                        {"seconds_this_run", seconds}, {"checkpoint", o.checkpointPath}};
    if (status.finished) {
        const double testAccuracy = classifierAccuracy(model, test.images, test.labels);
        j["test_accuracy"] = testAccuracy;
        nlohmann::json recipe = {{"data", "Fashion-MNIST train (60000)"}, {"epochs", o.epochs},
                                 {"batch", o.batchSize},                  {"learning_rate", o.learningRate},
                                 {"weight_decay", o.weightDecay},         {"seed", o.seed},
                                 {"final_train_loss", status.loss},       {"test_accuracy", testAccuracy}};
        saveImageClassifier(model, out.string(), recipe.dump());
        j["out"] = out.string();
    }
    emit(args, j, [&] {
        if (status.finished)
            std::cout << "trained the classifier for " << o.epochs << " epochs (loss " << status.loss
                      << "); test accuracy " << j["test_accuracy"].get<double>() << "; wrote " << out.string() << "\n";
        else
            std::cout << "stopped at step " << status.step << "/" << status.steps << " (loss " << status.loss
                      << "); run the same command again to resume from " << o.checkpointPath << "\n";
    });
    return 0;
}

} // namespace

void addImageMetricsCommands(std::vector<Command>& out) {
    out.push_back({"train-classifier", "--out DIR [--epochs E] [--seed S] [--max-minutes M]",
                   "Train the demo feature classifier on Fashion-MNIST (resumable: run again to continue).",
                   {{"out", "DIR", "", "model folder written when training finishes (config.json, model.safetensors)"},
                    {"work", "DIR", "", "checkpoint folder (default DIR.train)"},
                    {"data", "DIR", "", "folder of the Fashion-MNIST IDX files (default: Debian's, or $NPW_FASHION_MNIST)"},
                    {"epochs", "E", "8", "passes over the 60 000 training images"},
                    {"seed", "S", "1", "seed of initialisation and data order"},
                    {"max-minutes", "M", "0", "stop (after a checkpoint) after M minutes; 0 = run to the end"},
                    jsonFlag()},
                   runTrainClassifier});
}

} // namespace npw::cli
