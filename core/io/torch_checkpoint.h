#pragma once
// Reader of PyTorch zip checkpoints (torch.save, as LlamaGen and most PyTorch training code
// write them): the state dict's tensors are listed from data.pkl by the safe unpickler
// (core/io/pickle.h, nothing in the pickle is ever called) and only the tensors asked for are
// read from their storages (data/<key>), each bounds-checked against its storage.
// LibTorch's own pickle loader cannot do this: it rejects OrderedDict state dicts.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/io/pickle.h"
#include "core/io/zip_archive.h"

namespace npw {

struct TorchTensorInfo {
    std::string dtype;  // safetensors spelling of the storage type: "F32", "F16", "BF16", ...
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;  // in elements; a view (transposed, sliced) is read as such
    int64_t storageOffset = 0;    // in elements
    std::string storageKey;       // the archive record <prefix>/data/<storageKey>
    int64_t storageNumel = 0;     // elements in the whole storage (views share storages)
    bool parameter = false;       // saved as an nn.Parameter
};

struct TorchCheckpointOptions {
    // Where the state dict is: keys from the root joined by '/' ("model", "ema/model"), or ""
    // for the root itself (a raw state dict, as FSDP checkpoints are). Unset: "model" when the
    // root has a dict there (LlamaGen's {"model", "optimizer", "steps", "args"}), else the root.
    std::optional<std::string> stateDictPath;
    // Also verify a storage's CRC-32 each time a tensor is read from it (data.pkl's is always verified).
    bool verifyStorageCrc32 = false;
    PickleLimits pickleLimits;
};

class TorchCheckpoint {
public:
    // Reads the archive and data.pkl and validates every tensor of the state dict against its
    // storage record (present, numel × element size bytes, the view inside it). Throws
    // npw::Error naming the file and the tensor or record.
    static std::shared_ptr<TorchCheckpoint> open(const std::string& path, const TorchCheckpointOptions& options = {});

    const std::string& path() const { return path_; }
    const std::string& prefix() const { return prefix_; }                // "archive" or the file's stem, as written
    const std::string& stateDictPath() const { return stateDictPath_; }  // "" for the root
    // Tensor entries of the state dict, in the file's order.
    const std::vector<std::string>& names() const { return names_; }
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    const TorchTensorInfo& info(const std::string& name) const;  // throws when missing

    // A contiguous copy in the stored dtype (any storage type LibTorch 1.13 has).
    at::Tensor load(const std::string& name) const;
    // A read-only view of the tensor's bytes in the memory-mapped archive, in the stored dtype, no
    // copy: for F32, F16 and BF16 tensors laid out contiguously (row-major strides) at an address
    // aligned to their element size (torch.save aligns records to 64 bytes). The view keeps the
    // archive mapped; a write through it faults instead of changing the file. npw::Error naming
    // the file and tensor when !canView(name).
    bool canView(const std::string& name) const;
    at::Tensor view(const std::string& name) const;
    // A contiguous float32 copy of a floating-point tensor (F32, F16, BF16, F64); any other dtype
    // (integers, bool) is refused by name: weights are never read from integer storages.
    at::Tensor loadFloat(const std::string& name) const;

    // What else the checkpoint holds, one line per entry that is not a tensor of the state
    // dict, e.g. "steps: int 123", "args: argparse.Namespace (inert placeholder)".
    const std::vector<std::string>& summary() const { return summary_; }
    // The whole pickle, inert, for callers that want more than the state dict.
    const PickleValue& root() const { return document_->root(); }

private:
    TorchCheckpoint() = default;
    std::string path_, prefix_, stateDictPath_;
    std::shared_ptr<ZipArchive> archive_;
    std::shared_ptr<const PickleDocument> document_;
    std::vector<std::string> names_;
    std::unordered_map<std::string, TorchTensorInfo> tensors_;
    std::vector<std::string> summary_;
    bool verifyStorageCrc32_ = false;
};

}  // namespace npw
