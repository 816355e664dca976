// train-classifier (the demo feature classifier) and metrics (FID, sFID, IS, precision, recall).
#include "app/npw/commands.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/util/atomic_file.h"
#include "core/util/paths.h"
#include "core/data/fashion_mnist.h"
#include "core/eval/metrics_run.h"
#include "core/models/image_classifier.h"
#include "core/models/runtime.h"
#include "core/train/classifier_trainer.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <chrono>
#include <cmath>
#include <limits>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;

namespace npw::cli {

namespace {

std::string fixedText(double x) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(2) << x;
    return out.str();
}

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
        saveImageClassifier(model, out.string(), npw::json_fields::dumpJson(recipe));
        j["out"] = out.string();
    }
    printResult(args, j, [&] {
        if (status.finished)
            std::cout << "trained the classifier for " << o.epochs << " epochs (loss " << status.loss
                      << "); test accuracy " << j["test_accuracy"].get<double>() << "; wrote " << out.string() << "\n";
        else
            std::cout << "stopped at step " << status.step << "/" << status.steps << " (loss " << status.loss
                      << "); run the same command again to resume from " << o.checkpointPath << "\n";
    });
    return 0;
}

// The images to score: a folder, an IDX file, or images a LlamaGen model generates now.
ImageSource generatedImages(const Args& args, int64_t* modelClasses) {
    int given = int(args.has("generated")) + int(args.has("images-idx")) + int(args.has("model"));
    if (given != 1) throw Error("give exactly one of --generated DIR, --images-idx FILE or --model MODEL");
    if (args.has("model")) return modelImages(args, args.get("model"), args.getInt("n"), modelClasses);
    if (args.has("generated")) {
        if (!fs::is_directory(args.get("generated")))
            throw Error("--generated '" + args.get("generated") + "' is not a folder of images");
        return imageSourceFromFolder(args.get("generated"));
    }
    return imageSourceFromSpec(args.get("images-idx"));
}

int runMetrics(const Args& args) {
    const auto t0 = std::chrono::steady_clock::now();
    Runtime rt = chooseRuntime(args.get("device"), "float32");
    int64_t modelClasses = 0;  // --model: sample i asked for class i mod modelClasses
    ImageSource samples = generatedImages(args, &modelClasses);
    samples = limitImages(samples, args.getInt("limit"));
    samples = degradeImages(samples, args.get("degrade"), static_cast<uint64_t>(args.getInt("seed")));
    const int64_t batch = args.getInt("batch");
    auto network = loadFeatureNetwork(args.get("features"), rt.device);
    const std::string cacheDir = args.flag("no-cache") ? "" : (args.has("cache-dir") ? args.get("cache-dir") : defaultCacheDir());
    ProgressFn progress = terminalProgress();
    ResolvedReference ref = resolveReference(args.get("reference"), *network, cacheDir, batch, progress);
    // --save-reference against --features, --model and the other inputs: main's output guard.
    if (args.has("save-reference")) saveReferenceStats(ref.stats, args.get("save-reference"));
    FeatureSet features = extractFeatures(*network, samples, batch, progress);
    // How often the feature network's classifier names the requested class (when its classes are
    // the model's: the demo classifier and demo:c2i).
    double classAccuracy = std::numeric_limits<double>::quiet_NaN();
    if (modelClasses > 0 && features.logits.size(1) == modelClasses && args.getInt("limit") == 0 &&
        args.get("degrade") == "none") {
        const at::Tensor wanted = at::arange(features.logits.size(0), at::kLong).remainder(modelClasses);
        classAccuracy = features.logits.argmax(1).eq(wanted).to(at::kDouble).mean().item<double>();
    }
    ImageMetrics m = computeImageMetrics(ref.stats, features, args.getInt("is-splits"), progress);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json j = {{"fid", m.fid},
                        {"sfid", m.sfid},
                        {"is", m.is.mean},
                        {"is_std", m.is.std},
                        {"is_splits", m.is.splits},
                        {"precision", m.precision},
                        {"recall", m.recall},
                        {"samples", m.samples},
                        {"images", samples.description},
                        {"reference", {{"images", ref.description},
                                       {"count", m.referenceCount},
                                       {"statistics", ref.cachePath},
                                       {"from_cache", ref.fromCache}}},
                        {"features", network->identity()},
                        {"k", ref.stats.k},
                        {"seconds", seconds}};
    if (std::isfinite(classAccuracy)) j["class_accuracy"] = classAccuracy;
    j["feature_dims"] = m.featureDims;
    j["fid_min_samples"] = fidMinimumSamples(m.featureDims);
    j["fid_low"] = json_fields::finiteOrNull(m.fidLow);
    j["fid_high"] = json_fields::finiteOrNull(m.fidHigh);
    j["fid_resamples"] = m.fidResamples;
    j["fid_resample_bias"] = json_fields::finiteOrNull(m.fidResampleBias);
    const std::string fidWarning = fidSampleWarning(m);
    j["fid_warning"] = fidWarning.empty() ? nlohmann::json(nullptr) : nlohmann::json(fidWarning);
    if (!fidWarning.empty()) {
        clearProgressLine();
        std::cerr << "warning: " << fidWarning << std::endl;
    }
    printResult(args, j, [&] {
        std::cout << "images     " << samples.description << "\n"
                  << "reference  " << ref.description << (ref.fromCache ? " (cached statistics)" : "") << "\n"
                  << "features   " << network->identity() << "\n"
                  << std::fixed << std::setprecision(4) << "fid        " << m.fid << " (" << m.samples << " images; "
                  << (fidWarning.empty() ? "at least " : "FID needs ") << fidMinimumSamples(m.featureDims) << " for "
                  << m.featureDims << " feature dimensions"
                  << (m.fidResamples > 0 ? "; 5–95 % over " + std::to_string(m.fidResamples) + " resamples of the images: " +
                                               fixedText(m.fidLow) + "–" + fixedText(m.fidHigh)
                                         : std::string())
                  << ")\n"
                  << "sfid       " << m.sfid << "\n"
                  << "is         " << m.is.mean << " ± " << m.is.std << " (" << m.is.splits << " splits)\n"
                  << "precision  " << m.precision << "\n"
                  << "recall     " << m.recall << "\n";
        if (std::isfinite(classAccuracy)) std::cout << "class acc  " << classAccuracy << " (classifier agrees with the requested class)\n";
    });
    return 0;
}

} // namespace

void addImageMetricsCommands(std::vector<Command>& out) {
    out.push_back({"train-classifier", "--out DIR [--epochs E] [--seed S] [--max-minutes M]",
                   "Train the demo feature classifier on Fashion-MNIST (resumable: run again to continue).",
                   flagsFor("train-classifier"), runTrainClassifier});
    out.push_back({"metrics",
                   "(--generated DIR | --images-idx FILE | --model MODEL [--n N] [--cfg S] [--seed S]) [--reference REF] "
                   "[--features NET] [--json]",
                   "FID, sFID, Inception Score, precision and recall of images against a reference set.",
                   flagsFor("metrics"), runMetrics});
}

} // namespace npw::cli
