#include "core/data/fashion_mnist.h"
#include "core/io/idx_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace npw {

const std::vector<std::string>& fashionMnistClassNames() {
    static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    return names;
}

std::string fashionMnistDir() {
    if (const char* env = std::getenv("NPW_FASHION_MNIST"); env && *env) return env;
    return "/usr/share/datasets/fashion-mnist";
}

namespace {

std::string splitPrefix(const std::string& split) {
    if (split == "train") return "train";
    if (split == "test" || split == "t10k") return "t10k";
    throw Error("unknown Fashion-MNIST split '" + split + "' (expected train or test)");
}

std::string existingFile(const fs::path& base) {
    for (const char* ext : {".gz", ""}) {
        fs::path p = base.string() + ext;
        if (fs::exists(p)) return p.string();
    }
    throw Error("Fashion-MNIST file '" + base.string() +
                ".gz' not found (install Debian's dataset-fashion-mnist, or set NPW_FASHION_MNIST to a folder "
                "holding the IDX files)");
}

} // namespace

std::string fashionMnistImagesPath(const std::string& split, const std::string& dir) {
    const fs::path d = dir.empty() ? fashionMnistDir() : dir;
    return existingFile(d / (splitPrefix(split) + "-images-idx3-ubyte"));
}

LabelledImages loadFashionMnist(const std::string& split, const std::string& dir) {
    const fs::path d = dir.empty() ? fashionMnistDir() : dir;
    const std::string prefix = splitPrefix(split);
    const std::string images = existingFile(d / (prefix + "-images-idx3-ubyte"));
    const std::string labels = existingFile(d / (prefix + "-labels-idx1-ubyte"));
    LabelledImages set = loadIdxImages(images, labels, 10);
    const int64_t expected = prefix == "train" ? 60000 : 10000;
    if (set.images.size(0) != expected || set.images.size(2) != 28 || set.images.size(3) != 28)
        throw Error("Fashion-MNIST file '" + images + "' holds " + std::to_string(set.images.size(0)) + " images of " +
                    std::to_string(set.images.size(2)) + "x" + std::to_string(set.images.size(3)) + "; expected " +
                    std::to_string(expected) + " of 28x28");
    return set;
}

LabelledImages loadIdxImages(const std::string& imagesPath, const std::string& labelsPath, int64_t numClasses) {
    IdxArray img = readIdxFile(imagesPath, 3);
    LabelledImages set;
    set.source = imagesPath;
    set.images = img.data.to(at::kFloat).div_(255.0).unsqueeze(1).contiguous();
    if (!labelsPath.empty()) {
        IdxArray lab = readIdxFile(labelsPath, 1);
        if (lab.shape[0] != img.shape[0])
            throw Error("IDX label file '" + labelsPath + "' holds " + std::to_string(lab.shape[0]) +
                        " labels, but the image file '" + imagesPath + "' holds " + std::to_string(img.shape[0]) +
                        " images");
        set.labels = lab.data.to(at::kLong);
        if (numClasses > 0 && lab.shape[0] > 0) {
            const int64_t top = set.labels.max().item<int64_t>();
            if (top >= numClasses)
                throw Error("IDX label file '" + labelsPath + "' holds label " + std::to_string(top) + "; expected 0 to " +
                            std::to_string(numClasses - 1));
        }
    }
    return set;
}

at::Tensor greyToRgb(const at::Tensor& images) {
    if (images.dim() != 4 || (images.size(1) != 1 && images.size(1) != 3))
        throw Error("expected images N×1×H×W or N×3×H×W, got " + std::to_string(images.dim()) + " dimensions" +
                    (images.dim() >= 2 ? " with " + std::to_string(images.size(1)) + " channels" : ""));
    return images.size(1) == 3 ? images : images.expand({-1, 3, -1, -1}).contiguous();
}

} // namespace npw
