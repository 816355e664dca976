#pragma once
// The feature network of the image metrics: one interface, two kinds.
//   (a) a TorchScript module the user provides (torch.jit.save), whose forward maps float RGB
//       images in [0,1], N×3×H×W, to the tuple (pooled features N×D, class logits N×K,
//       spatial features N×C×H'×W') — e.g. Inception-v3 (README shows the export);
//   (b) the demo classifier (core/models/image_classifier.h): penultimate layer, logits, the
//       feature map after its second conv block.
#include "core/eval/image_metrics.h"
#include "core/models/image_classifier.h"
#include "core/util/progress.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>

namespace npw {

struct NetworkFeatures {
    at::Tensor pooled;   // N×D
    at::Tensor logits;   // N×K
    at::Tensor spatial;  // N×C×H×W
};

class FeatureNetwork {
public:
    virtual ~FeatureNetwork() = default;
    // images: N×3×H×W float in [0,1] on the CPU. Outputs are float32 on the CPU.
    virtual NetworkFeatures forward(const at::Tensor& images) = 0;
    // What made the features, for cache keys and metadata: the kind and a hash of the weight
    // file's bytes ("npw-image-classifier@…", "torchscript@…"), so a moved file keeps its cache.
    virtual std::string identity() const = 0;
};

// spec: "demo" (the bundled classifier, resources/demo/classifier), a classifier folder
// (config.json + model.safetensors), or a TorchScript file (.pt/.pth/.ts: anything else).
std::unique_ptr<FeatureNetwork> loadFeatureNetwork(const std::string& spec, c10::Device device = c10::kCPU);
std::unique_ptr<FeatureNetwork> makeClassifierFeatureNetwork(ImageClassifier model, std::string identity);
std::unique_ptr<FeatureNetwork> loadTorchScriptFeatureNetwork(const std::string& path, c10::Device device = c10::kCPU);

// A set of images read batch by batch (files, an IDX file, or a generator — the hook for
// `npw metrics --model`): read(begin, n) returns N×C×H×W float in [0,1], C = 1 or 3.
struct ImageSource {
    int64_t count = 0;
    std::string description;  // e.g. "Fashion-MNIST test (10000 images)", for metadata
    std::function<at::Tensor(int64_t begin, int64_t n)> read;
};
ImageSource imageSourceFromTensor(at::Tensor images, std::string description);
ImageSource imageSourceFromFolder(const std::string& dir);  // all images must share one size

// Runs the network over the source in batches; spatial features are reduced to sFID's
// first-7-channel vectors as they come, so memory stays O(N·(D + K + 7·H·W)).
FeatureSet extractFeatures(FeatureNetwork& network, const ImageSource& images, int64_t batch = 250,
                           const ProgressFn& progress = nullptr);

// 64-bit FNV-1a of a file's bytes, as hex: identifies weights in cache metadata.
std::string fileFingerprint(const std::string& path);

} // namespace npw
