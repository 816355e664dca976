#pragma once
// safetensors reader (memory-mapped, its header validated as safetensors_header.h says) and an
// atomic writer.
#include "core/io/safetensors_header.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace npw {

// The header's reader (path, names, info, metadata) with the tensors as LibTorch's.
class SafeTensorsFile : public SafeTensorsHeader, public std::enable_shared_from_this<SafeTensorsFile> {
public:
    // Opens and validates the header; the data stay mapped until the object dies.
    // Throws npw::Error naming the file and what is wrong.
    static std::shared_ptr<SafeTensorsFile> open(const std::string& path);
    ~SafeTensorsFile() override;

    // A float32 copy of the tensor (F32/F16/BF16/F64 are converted). Throws when missing.
    at::Tensor loadFloat(const std::string& name) const;
    // The tensor in its stored dtype (a copy; the mapping may go away).
    at::Tensor load(const std::string& name) const;
    // The tensor in its stored dtype as a view of the mapping, no copy: pages are read from the
    // file when touched and can be dropped again by the kernel. The view keeps this file (and
    // its mapping) alive. Read-only: writing through it faults. Throws when the data are not
    // aligned to the element size (writers that pad the header to 8 bytes, as the reference
    // writer and writeSafeTensors do, always align).
    at::Tensor view(const std::string& name) const;
    // Whether view(name) can serve the tensor: a dtype LibTorch holds, aligned in the file.
    bool canView(const std::string& name) const;

private:
    SafeTensorsFile() = default;
};

// One tensor of a file whose layout is planned before its data exist.
struct SafeTensorsEntry {
    std::string name;
    c10::ScalarType dtype;
    std::vector<int64_t> shape;
};

// Writes a safetensors file tensor by tensor, in any order, with exactly the layout (header,
// order, offsets) writeSafeTensors gives the same names, dtypes, shapes and metadata: the
// header is computed from the entries up front. Atomic like writeSafeTensors: the data go to a
// temporary file beside `path`, renamed over it by commit(); destroying an uncommitted writer
// (an error, a cancelled run) removes the temporary file and leaves `path` as it was.
class SafeTensorsStreamWriter {
public:
    SafeTensorsStreamWriter(const std::string& path, const std::vector<SafeTensorsEntry>& entries,
                            const std::map<std::string, std::string>& metadata = {});
    ~SafeTensorsStreamWriter();
    SafeTensorsStreamWriter(const SafeTensorsStreamWriter&) = delete;
    SafeTensorsStreamWriter& operator=(const SafeTensorsStreamWriter&) = delete;

    // Writes one planned tensor (dtype and shape must match the plan; any device).
    void write(const std::string& name, const at::Tensor& tensor);
    // fsync, then rename into place. Throws naming the first tensor never written.
    void commit();
    const std::string& tempPath() const { return tempPath_; }

private:
    struct Slot {
        SafeTensorsEntry entry;
        uint64_t offset = 0;  // in the data buffer
        bool written = false;
    };
    void writeAt(uint64_t offset, const void* data, uint64_t bytes);
    void discard() noexcept;

    std::string path_, tempPath_;
    int fd_ = -1;
    uint64_t dataStart_ = 0;
    std::map<std::string, Slot> slots_;
};

// Writes tensors (any of F32/F16/BF16/F64/I64/I32/U8/BOOL, contiguous or not) atomically,
// header padded to 8 bytes like the reference writer. Rejects the name "__metadata__" and
// duplicates.
void writeSafeTensors(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

} // namespace npw
