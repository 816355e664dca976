#pragma once
// safetensors reader (memory-mapped, validated as the reference parser does and stricter:
// duplicate names, gaps, overlaps, trailing bytes are all rejected) and an atomic writer.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace npw {

class MappedFile;

struct TensorInfo {
    std::string dtype;             // safetensors dtype string: "F32", "F16", "BF16", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;   // byte offsets into the data buffer
};

class SafeTensorsFile {
public:
    // Opens and validates the header; the data stay mapped until the object dies.
    // Throws npw::Error naming the file and what is wrong.
    static std::shared_ptr<SafeTensorsFile> open(const std::string& path);
    ~SafeTensorsFile();

    const std::string& path() const { return path_; }
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    std::vector<std::string> names() const;
    const TensorInfo& info(const std::string& name) const;  // throws when missing
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

    // A float32 copy of the tensor (F32/F16/BF16/F64 are converted). Throws when missing.
    at::Tensor loadFloat(const std::string& name) const;
    // The tensor in its stored dtype (a copy; the mapping may go away).
    at::Tensor load(const std::string& name) const;

private:
    SafeTensorsFile() = default;
    std::string path_;
    std::map<std::string, TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
    const uint8_t* data_ = nullptr;  // start of the byte buffer (after the header)
    std::unique_ptr<MappedFile> mapping_;
};

// Writes tensors (any of F32/F16/BF16/F64/I64/I32/U8/BOOL, contiguous or not) atomically,
// header padded to 8 bytes like the reference writer. Rejects the name "__metadata__" and
// duplicates.
void writeSafeTensors(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

} // namespace npw
