#include "core/models/image_classifier.h"
#include "core/models/non_finite.h"

#include "core/io/shape_text.h"
#include "core/io/safetensors.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace npw {

std::string ImageClassifierConfig::toJson() const {
    nlohmann::json j = {{"architecture", "npw-image-classifier"},
                        {"image_size", imageSize},
                        {"conv1_channels", conv1},
                        {"conv2_channels", conv2},
                        {"hidden", hidden},
                        {"num_classes", numClasses},
                        {"input_mean", mean},
                        {"input_std", stdev},
                        {"class_names", classNames}};
    return json_fields::dumpJson(j, 2, "the classifier config");
}

ImageClassifierConfig ImageClassifierConfig::fromJson(const std::string& text, const std::string& source) {
    const nlohmann::json j = json_fields::parseJsonLimited(text, "classifier config '" + source + "'");
    const std::string architecture =
        j.is_object() && j.contains("architecture") && j["architecture"].is_string() ? j["architecture"].get<std::string>() : "";
    if (architecture != "npw-image-classifier")
        throw Error("classifier config '" + source + "': architecture is " +
                    (j.is_object() && j.contains("architecture") ? json_fields::preview(j["architecture"]) : std::string("missing")) +
                    "; expected \"npw-image-classifier\"");
    ImageClassifierConfig c;
    try {
        c.imageSize = j.at("image_size").get<int64_t>();
        c.conv1 = j.at("conv1_channels").get<int64_t>();
        c.conv2 = j.at("conv2_channels").get<int64_t>();
        c.hidden = j.at("hidden").get<int64_t>();
        c.numClasses = j.at("num_classes").get<int64_t>();
        c.mean = j.at("input_mean").get<double>();
        c.stdev = j.at("input_std").get<double>();
        if (j.contains("class_names")) c.classNames = j["class_names"].get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
        throw Error("classifier config '" + source + "': " + e.what());
    }
    if (c.imageSize < 4 || c.imageSize % 4 != 0 || c.conv1 < 1 || c.conv2 < 1 || c.hidden < 1 || c.numClasses < 2 ||
        c.stdev <= 0)
        throw Error("classifier config '" + source + "': sizes out of range (image_size a multiple of 4, " +
                    "channels/hidden >= 1, num_classes >= 2, input_std > 0)");
    if (!c.classNames.empty() && static_cast<int64_t>(c.classNames.size()) != c.numClasses)
        throw Error("classifier config '" + source + "': " + std::to_string(c.classNames.size()) +
                    " class names for " + std::to_string(c.numClasses) + " classes");
    return c;
}

std::vector<std::pair<std::string, at::Tensor*>> ImageClassifierWeights::named() {
    return {{"conv1.weight", &conv1W}, {"conv1.bias", &conv1B}, {"conv2.weight", &conv2W}, {"conv2.bias", &conv2B},
            {"fc1.weight", &fc1W},     {"fc1.bias", &fc1B},     {"fc2.weight", &fc2W},     {"fc2.bias", &fc2B}};
}

namespace {

std::vector<std::vector<int64_t>> expectedShapes(const ImageClassifierConfig& c) {
    const int64_t s = c.spatialSize();
    return {{c.conv1, 1, 3, 3}, {c.conv1}, {c.conv2, c.conv1, 3, 3}, {c.conv2},
            {c.hidden, c.conv2 * s * s}, {c.hidden}, {c.numClasses, c.hidden}, {c.numClasses}};
}

} // namespace

ClassifierOutputs classifierForward(const ImageClassifierConfig& c, const ImageClassifierWeights& w,
                                    const at::Tensor& images) {
    if (images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3))
        throw Error("classifier input must be N×1×H×W or N×3×H×W, got " + formatShape(images.sizes()));
    at::Tensor x = images.to(at::kFloat);
    if (x.size(1) == 3) x = x.mean(1, true);
    if (x.size(2) != c.imageSize || x.size(3) != c.imageSize)
        x = at::upsample_bilinear2d(x, {c.imageSize, c.imageSize}, false);
    x = (x - c.mean) / c.stdev;
    x = at::max_pool2d(at::relu(at::conv2d(x, w.conv1W, w.conv1B, 1, 1)), 2);
    at::Tensor spatial = at::max_pool2d(at::relu(at::conv2d(x, w.conv2W, w.conv2B, 1, 1)), 2);
    at::Tensor pooled = at::relu(at::linear(spatial.flatten(1), w.fc1W, w.fc1B));
    at::Tensor logits = at::linear(pooled, w.fc2W, w.fc2B);
    return {pooled, logits, spatial};
}

ImageClassifierWeights initClassifierWeights(const ImageClassifierConfig& c, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ImageClassifierWeights w;
    auto shapes = expectedShapes(c);
    auto named = w.named();
    for (size_t i = 0; i < named.size(); i += 2) {
        const auto& ws = shapes[i];
        int64_t fanIn = 1;
        for (size_t d = 1; d < ws.size(); ++d) fanIn *= ws[d];
        const double bound = 1.0 / std::sqrt(double(fanIn));
        *named[i].second = at::empty(ws, at::kFloat).uniform_(-bound, bound, gen);
        *named[i + 1].second = at::empty(shapes[i + 1], at::kFloat).uniform_(-bound, bound, gen);
    }
    return w;
}

ImageClassifier loadImageClassifier(const std::string& dir) {
    const fs::path d = dir;
    const fs::path configPath = d / "config.json", weightsPath = d / "model.safetensors";
    if (!fs::exists(configPath))
        throw Error("classifier folder '" + dir + "' has no config.json (expected config.json + model.safetensors)");
    ImageClassifier m;
    m.config = ImageClassifierConfig::fromJson(readTextFile(configPath.string()), configPath.string());
    auto file = SafeTensorsFile::open(weightsPath.string());
    auto shapes = expectedShapes(m.config);
    auto named = m.weights.named();
    for (size_t i = 0; i < named.size(); ++i) {
        const std::string& name = named[i].first;
        if (!file->has(name))
            throw Error("classifier weights '" + weightsPath.string() + "' lack tensor '" + name + "'");
        at::Tensor t = file->loadFloat(name);
        if (t.sizes() != at::IntArrayRef(shapes[i]))
            throw Error("classifier weights '" + weightsPath.string() + "': tensor '" + name + "' has shape " +
                        formatShape(t.sizes()) + "; config.json expects " + formatShape(shapes[i]));
        if (!allFinite(t))
            throw Error("classifier weights '" + weightsPath.string() + "': tensor '" + name + "' holds NaN or Inf");
        *named[i].second = t;
    }
    return m;
}

void saveImageClassifier(const ImageClassifier& model, const std::string& dir, const std::string& recipeJson) {
    fs::create_directories(dir);
    ImageClassifierWeights w = model.weights;
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (auto& [name, t] : w.named()) tensors.emplace_back(name, t->detach().contiguous());
    std::map<std::string, std::string> meta = {{"format", "pt"}};
    if (!recipeJson.empty()) meta["npw_training"] = recipeJson;
    writeSafeTensors((fs::path(dir) / "model.safetensors").string(), tensors, meta);
    writeTextAtomically((fs::path(dir) / "config.json").string(), model.config.toJson() + "\n");
}

double classifierAccuracy(const ImageClassifier& model, const at::Tensor& images, const at::Tensor& labels,
                          int64_t batch) {
    at::NoGradGuard noGrad;
    const int64_t n = images.size(0);
    if (labels.size(0) != n) throw Error("classifierAccuracy: images and labels differ in count");
    int64_t correct = 0;
    for (int64_t b = 0; b < n; b += batch) {
        const int64_t m = std::min(batch, n - b);
        at::Tensor logits = classifierForward(model.config, model.weights, images.narrow(0, b, m)).logits;
        correct += logits.argmax(1).eq(labels.narrow(0, b, m)).sum().item<int64_t>();
    }
    return n ? double(correct) / double(n) : 0.0;
}

} // namespace npw
