#pragma once
// The demo feature classifier: a small CNN for 28×28 grey images (Fashion-MNIST) that plays
// Inception-v3's three roles in the image metrics, at the demo's scale:
//   conv3×3(1→c1) ReLU maxpool2 → conv3×3(c1→c2) ReLU maxpool2 = spatial map (c2×7×7, sFID)
//   → flatten → linear(→hidden) ReLU = pooled features (FID, precision/recall)
//   → linear(→classes) = logits (IS).
// Weights: safetensors (conv1.weight, conv1.bias, conv2.*, fc1.*, fc2.*) + config.json.
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace npw {

struct ImageClassifierConfig {
    int64_t imageSize = 28;
    int64_t conv1 = 32, conv2 = 64;  // channels of the two conv layers
    int64_t hidden = 128;            // penultimate width (the pooled features)
    int64_t numClasses = 10;
    double mean = 0.2860, stdev = 0.3530;  // input normalisation (Fashion-MNIST train pixels)
    std::vector<std::string> classNames;

    std::string toJson() const;
    static ImageClassifierConfig fromJson(const std::string& text, const std::string& source);
    int64_t spatialSize() const { return imageSize / 4; }
};

struct ImageClassifierWeights {
    at::Tensor conv1W, conv1B, conv2W, conv2B, fc1W, fc1B, fc2W, fc2B;
    std::vector<std::pair<std::string, at::Tensor*>> named();  // safetensors names
};

struct ClassifierOutputs {
    at::Tensor pooled;   // N×hidden
    at::Tensor logits;   // N×classes
    at::Tensor spatial;  // N×conv2×(size/4)×(size/4)
};

// images: N×1×H×W or N×3×H×W float in [0,1] (RGB is averaged to grey; other sizes are
// resized bilinearly to imageSize). Differentiable (used by the trainer too).
ClassifierOutputs classifierForward(const ImageClassifierConfig& config, const ImageClassifierWeights& w,
                                    const at::Tensor& images);

// PyTorch's default initialisation (uniform ±1/sqrt(fan_in)) from a seed.
ImageClassifierWeights initClassifierWeights(const ImageClassifierConfig& config, uint64_t seed);

struct ImageClassifier {
    ImageClassifierConfig config;
    ImageClassifierWeights weights;
};

// DIR holds config.json and model.safetensors. Shapes are checked against the config.
ImageClassifier loadImageClassifier(const std::string& dir);
void saveImageClassifier(const ImageClassifier& model, const std::string& dir, const std::string& recipeJson = "");

// Fraction of images whose argmax logit equals the label (batched, no grad).
double classifierAccuracy(const ImageClassifier& model, const at::Tensor& images, const at::Tensor& labels,
                          int64_t batch = 1000);

} // namespace npw
