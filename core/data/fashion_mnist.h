#pragma once
// Fashion-MNIST (Zalando, MIT licence) as Debian's dataset-fashion-mnist installs it:
// /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
// 60 000 training and 10 000 test images, 28×28 grey, 10 balanced classes.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace npw {

struct LabelledImages {
    at::Tensor images;   // float32 N×1×H×W in [0,1] (byte / 255)
    at::Tensor labels;   // int64 N (empty when read without labels)
    std::string source;  // the images file, for messages and cache metadata
};

// "T-shirt/top", "Trouser", … in label order.
const std::vector<std::string>& fashionMnistClassNames();

// $NPW_FASHION_MNIST when set, else /usr/share/datasets/fashion-mnist.
std::string fashionMnistDir();

// split: "train" or "test". Throws npw::Error naming the missing file and the Debian package.
LabelledImages loadFashionMnist(const std::string& split, const std::string& dir = "");
std::string fashionMnistImagesPath(const std::string& split, const std::string& dir = "");

// An IDX image file (N×H×W bytes) and optionally its IDX label file (N bytes); checks that
// the counts agree and, when numClasses > 0, that labels lie in [0, numClasses).
LabelledImages loadIdxImages(const std::string& imagesPath, const std::string& labelsPath = "",
                             int64_t numClasses = 0);

// N×1×H×W → N×3×H×W (the channel repeated), what RGB feature networks take. N×3×H×W passes.
at::Tensor greyToRgb(const at::Tensor& images);

} // namespace npw
