#pragma once
// Checking a checkpoint's weight values where they are read, one block at a time. A Mapped load
// (model_loader.h) reads tensor headers only, so a NaN in the file is found when the block that
// holds it is first converted or used, and reported as a load would have: the file, the tensor
// in the file and the flat index of the first non-finite element.
#include "core/models/llama_weights.h"

#include <ATen/core/Tensor.h>

#include <string>

namespace npw {

// Throws npw::Error "tensor 'NAME' in 'FILE' has N NaN or infinite values (the first at flat
// index K)" when `tensor` holds a NaN or ±inf; K is counted from `firstIndex` (the tensor is
// part of a larger stored one). Reads the tensor 4M elements at a time: no tensor-sized temporary.
void checkTensorFinite(const at::Tensor& tensor, const std::string& file, const std::string& name,
                       int64_t firstIndex = 0);

// The tensor of `checkpoint` named `hfName` (namedTensors' names), checked against its origin.
// Nothing to do when the checkpoint's values were checked at load (valuesChecked) or the tensor
// has no recorded origin. `values` may be the tensor itself or a converted copy of it (same shape).
void checkWeightValues(const LlamaCheckpoint& checkpoint, const std::string& hfName, const at::Tensor& values);

// Every tensor of layer `layer` (or, with layer -1, the embedding, final norm and classifier).
void checkLayerValues(const LlamaCheckpoint& checkpoint, int64_t layer);

// Every tensor, block by block (what a command that reads the whole model once calls first).
void checkAllWeightValues(const LlamaCheckpoint& checkpoint);

} // namespace npw
