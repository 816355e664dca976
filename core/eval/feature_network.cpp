#include "core/eval/feature_network.h"

#include "core/io/shape_text.h"
#include "core/data/fashion_mnist.h"
#include "core/io/image_files.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/regular_file.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/script.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace npw {

namespace {

class ClassifierFeatureNetwork : public FeatureNetwork {
public:
    ClassifierFeatureNetwork(ImageClassifier model, std::string identity)
        : model_(std::move(model)), identity_(std::move(identity)) {}
    NetworkFeatures forward(const at::Tensor& images) override {
        at::NoGradGuard noGrad;
        ClassifierOutputs o = classifierForward(model_.config, model_.weights, images);
        return {o.pooled, o.logits, o.spatial};
    }
    std::string identity() const override { return identity_; }

private:
    ImageClassifier model_;
    std::string identity_;
};

class TorchScriptFeatureNetwork : public FeatureNetwork {
public:
    TorchScriptFeatureNetwork(std::string path, c10::Device device) : path_(std::move(path)), device_(device) {
        try {
            module_ = torch::jit::load(path_, device_);
        } catch (const c10::Error& e) {
            throw Error("cannot load TorchScript feature network '" + path_ + "': " + e.what_without_backtrace() +
                        " (expected a file written by torch.jit.save; the manual's Image models page shows how to export one)");
        } catch (const std::exception& e) {
            throw Error("cannot load TorchScript feature network '" + path_ + "': " + e.what() +
                        " (expected a file written by torch.jit.save; the manual's Image models page shows how to export one)");
        }
        module_.eval();
        identity_ = "torchscript@" + fileFingerprint(path_);
    }

    NetworkFeatures forward(const at::Tensor& images) override {
        at::NoGradGuard noGrad;
        const int64_t n = images.size(0);
        // The interface is RGB: grey images (Fashion-MNIST, the demo's) become three equal channels.
        const at::Tensor rgb = images.size(1) == 1 ? images.expand({-1, 3, -1, -1}) : images;
        c10::IValue out;
        try {
            out = module_.forward({rgb.to(device_, at::kFloat).contiguous()});
        } catch (const c10::Error& e) {
            throw Error("TorchScript feature network '" + path_ + "' failed on images " + formatShape(images.sizes()) +
                        ": " + e.what_without_backtrace());
        } catch (const std::exception& e) {  // the interpreter's own errors (JITException)
            throw Error("TorchScript feature network '" + path_ + "' failed on images " + formatShape(images.sizes()) +
                        ": " + e.what());
        }
        std::vector<at::Tensor> parts;
        if (out.isTuple())
            for (const auto& v : out.toTuple()->elements()) parts.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
        else if (out.isTensorList())
            for (const at::Tensor& t : out.toTensorVector()) parts.push_back(t);
        if (parts.size() != 3 || !parts[0].defined() || !parts[1].defined() || !parts[2].defined())
            throw Error("TorchScript feature network '" + path_ +
                        "': forward must return a tuple of 3 tensors (pooled features, logits, spatial features), got " +
                        (out.isTuple() ? "a tuple of " + std::to_string(out.toTuple()->elements().size()) +
                                             " elements"
                                       : std::string(out.tagKind())));
        NetworkFeatures f;
        f.pooled = parts[0].to(at::kCPU, at::kFloat);
        f.logits = parts[1].to(at::kCPU, at::kFloat);
        f.spatial = parts[2].to(at::kCPU, at::kFloat);
        if (f.pooled.dim() == 4 && f.pooled.size(2) == 1 && f.pooled.size(3) == 1)
            f.pooled = f.pooled.flatten(1);  // Inception's pool3 is N×2048×1×1
        auto bad = [&](const std::string& what, const at::Tensor& t, const std::string& expected) {
            throw Error("TorchScript feature network '" + path_ + "': " + what + " has shape " +
                        formatShape(t.sizes()) + "; expected " + expected + " for " + std::to_string(n) + " images");
        };
        if (f.pooled.dim() != 2 || f.pooled.size(0) != n) bad("output 0 (pooled features)", f.pooled, "N×D");
        if (f.logits.dim() != 2 || f.logits.size(0) != n || f.logits.size(1) < 2)
            bad("output 1 (logits)", f.logits, "N×K, K >= 2");
        if (f.spatial.dim() != 4 || f.spatial.size(0) != n) bad("output 2 (spatial features)", f.spatial, "N×C×H×W");
        return f;
    }
    std::string identity() const override { return identity_; }

private:
    std::string path_;
    c10::Device device_;
    torch::jit::script::Module module_;
    std::string identity_;
};

} // namespace

std::string fileFingerprint(const std::string& path) {
    requireRegularFile(path);  // a FIFO is refused, never waited on
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open '" + path + "'");
    uint64_t h = 1469598103934665603ULL;
    char buffer[1 << 16];
    while (in) {
        in.read(buffer, sizeof buffer);
        for (std::streamsize i = 0; i < in.gcount(); ++i) {
            h ^= static_cast<uint8_t>(buffer[i]);
            h *= 1099511628211ULL;
        }
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

std::unique_ptr<FeatureNetwork> makeClassifierFeatureNetwork(ImageClassifier model, std::string identity) {
    return std::make_unique<ClassifierFeatureNetwork>(std::move(model), std::move(identity));
}

std::unique_ptr<FeatureNetwork> loadTorchScriptFeatureNetwork(const std::string& path, c10::Device device) {
    if (!fs::is_regular_file(path)) throw Error("feature network file '" + path + "' does not exist");
    return std::make_unique<TorchScriptFeatureNetwork>(path, device);
}

std::unique_ptr<FeatureNetwork> loadFeatureNetwork(const std::string& spec, c10::Device device) {
    std::string dir;
    if (spec == "demo")
        dir = (fs::path(resourcesDir()) / "demo" / "classifier").string();
    else if (fs::is_directory(spec))
        dir = spec;
    if (dir.empty()) return loadTorchScriptFeatureNetwork(spec, device);
    ImageClassifier model = loadImageClassifier(dir);
    const std::string id = "npw-image-classifier@" + fileFingerprint((fs::path(dir) / "model.safetensors").string());
    return makeClassifierFeatureNetwork(std::move(model), id);
}

ImageSource imageSourceFromTensor(at::Tensor images, std::string description) {
    if (images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3))
        throw Error("images must be N×1×H×W or N×3×H×W, got " + formatShape(images.sizes()));
    ImageSource s;
    s.count = images.size(0);
    s.description = std::move(description);
    s.read = [images = std::move(images)](int64_t begin, int64_t n) { return images.narrow(0, begin, n); };
    return s;
}

ImageSource imageSourceFromFolder(const std::string& dir) {
    auto files = std::make_shared<std::vector<std::string>>(listImageFiles(dir));
    at::Tensor first = readImageRgb(files->front());
    ImageSource s;
    s.count = static_cast<int64_t>(files->size());
    s.description = "folder " + dir + " (" + std::to_string(s.count) + " images)";
    const auto size = std::make_pair(first.size(1), first.size(2));
    s.read = [files, size](int64_t begin, int64_t n) {
        std::vector<at::Tensor> batch;
        for (int64_t i = begin; i < begin + n; ++i) {
            at::Tensor img = readImageRgb((*files)[i]);
            if (img.size(1) != size.first || img.size(2) != size.second)
                throw Error("image '" + (*files)[i] + "' is " + std::to_string(img.size(2)) + "x" +
                            std::to_string(img.size(1)) + "; the folder's first image is " +
                            std::to_string(size.second) + "x" + std::to_string(size.first) +
                            " (all images must share one size)");
            batch.push_back(img);
        }
        return at::stack(batch);
    };
    return s;
}

FeatureSet extractFeatures(FeatureNetwork& network, const ImageSource& images, int64_t batch,
                           const ProgressFn& progress) {
    if (images.count < 1) throw Error("no images to compute features of (" + images.description + ")");
    std::vector<at::Tensor> pooled, logits, spatial;
    for (int64_t b = 0; b < images.count; b += batch) {
        const int64_t n = std::min(batch, images.count - b);
        at::Tensor x = greyToRgb(images.read(b, n).to(at::kFloat));
        NetworkFeatures f = network.forward(x);
        pooled.push_back(f.pooled.to(at::kFloat).contiguous());
        logits.push_back(f.logits.to(at::kFloat).contiguous());
        spatial.push_back(sfidFeatures(f.spatial.to(at::kFloat)));
        reportProgress(progress, "features", double(b + n), double(images.count));
    }
    return {at::cat(pooled), at::cat(logits), at::cat(spatial)};
}

} // namespace npw
