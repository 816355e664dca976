#pragma once
// A safetensors file's header, read and validated without LibTorch: the names, dtypes, shapes and
// byte ranges of its tensors, checked as the reference parser checks them and stricter
// (duplicate names, gaps, overlaps, trailing bytes are all rejected). SafeTensorsFile
// (safetensors.h) is this with the tensors as LibTorch's; npw-text (app/text) answers `npw info`
// of a Hugging Face folder from this alone.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace npw {

class MappedFile;

struct TensorInfo {
    std::string dtype;             // safetensors dtype string: "F32", "F16", "BF16", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;   // byte offsets into the data buffer
};

// The key of the header's string map, which names no tensor.
inline constexpr const char* kSafeTensorsMetadataKey = "__metadata__";

// The bytes of one element of a safetensors dtype ("F32": 4); 0 for a name the format lacks.
uint64_t safeTensorsElementBytes(const std::string& dtype);

class SafeTensorsHeader {
public:
    // Maps the file and validates its header; the data stay mapped until the object dies.
    // Throws npw::Error naming the file and what is wrong.
    static std::shared_ptr<SafeTensorsHeader> open(const std::string& path);
    virtual ~SafeTensorsHeader();

    const std::string& path() const { return path_; }
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    std::vector<std::string> names() const;
    const TensorInfo& info(const std::string& name) const;  // throws when missing
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

    // Whether any element of a floating-point tensor (F32, F16, BF16, F64) is non-zero, as
    // LibTorch's count_nonzero counts them (-0 is zero, NaN is not), from the mapped bytes.
    bool anyNonZero(const std::string& name) const;

protected:
    SafeTensorsHeader();
    void read(const std::string& path);  // what open does, for SafeTensorsFile too
    std::string path_;
    std::map<std::string, TensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
    const uint8_t* data_ = nullptr;  // start of the byte buffer (after the header)
    std::unique_ptr<MappedFile> mapping_;
};

} // namespace npw
