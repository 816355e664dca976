#include "core/models/weight_values.h"

#include "core/models/non_finite.h"
#include "core/util/error.h"

#include <ATen/ATen.h>

namespace npw {

void checkTensorFinite(const at::Tensor& tensor, const std::string& file, const std::string& name, int64_t firstIndex) {
    // allFinite allocates nothing the size of the tensor: at::isfinite on the whole tensor builds
    // four tensor-sized temporaries, which left +1.4 GB of anonymous memory in the heap after
    // checking a 4 GB memory-mapped model tensor by tensor. The exact check below runs only to
    // name the first bad element.
    if (allFinite(tensor)) return;
    at::Tensor bad = at::logical_not(at::isfinite(tensor)).flatten();
    throw Error("tensor '" + name + "' in '" + file + "' has " + std::to_string(bad.sum().item<int64_t>()) +
                " NaN or infinite values (the first at flat index " +
                std::to_string(firstIndex + bad.nonzero()[0][0].item<int64_t>()) + ")");
}

void checkWeightValues(const LlamaCheckpoint& checkpoint, const std::string& hfName, const at::Tensor& values) {
    if (checkpoint.valuesChecked || !values.defined()) return;
    auto it = checkpoint.origins.find(hfName);
    if (it == checkpoint.origins.end()) return;
    const TensorOrigin& origin = it->second;
    checkTensorFinite(values, origin.file, origin.tensor, origin.firstIndex);
}

namespace {

void checkNamed(const LlamaCheckpoint& checkpoint, const std::string& prefix) {
    // namedTensors takes a mutable LlamaWeights; the tensors are only read here.
    auto& weights = const_cast<LlamaWeights&>(checkpoint.weights);
    for (const auto& [name, tensor] : namedTensors(weights))
        if (prefix.empty() ? true : name.compare(0, prefix.size(), prefix) == 0) checkWeightValues(checkpoint, name, *tensor);
}

} // namespace

void checkLayerValues(const LlamaCheckpoint& checkpoint, int64_t layer) {
    if (checkpoint.valuesChecked) return;
    if (layer >= 0) {
        checkNamed(checkpoint, "model.layers." + std::to_string(layer) + ".");
        return;
    }
    auto& weights = const_cast<LlamaWeights&>(checkpoint.weights);
    for (const auto& [name, tensor] : namedTensors(weights))
        if (name.compare(0, 13, "model.layers.") != 0) checkWeightValues(checkpoint, name, *tensor);
}

void checkAllWeightValues(const LlamaCheckpoint& checkpoint) {
    if (checkpoint.valuesChecked) return;
    checkNamed(checkpoint, "");
}

} // namespace npw
