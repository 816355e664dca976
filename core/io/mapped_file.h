#pragma once
// A read-only mapping of a whole regular file, shared by the readers of safetensors files and
// zip archives (PyTorch checkpoints): they validate the bytes in place and copy out only the
// tensors asked for, so a large shard is never read twice.
#include <cstdint>
#include <memory>
#include <string>

namespace npw {

class MappedFile {
public:
    // Maps `path`. `kind` names the format in errors ("safetensors file", "zip archive"), which
    // read "cannot open <kind> '<path>': …", "<kind> '<path>' is a FIFO (named pipe), not a regular file …"
    // (regular_file.h), "<kind> '<path>': cannot map: …".
    // An empty file is not mapped: bytes() is nullptr and size() 0 (the caller's size check
    // reports it in its own words).
    static std::unique_ptr<MappedFile> open(const std::string& path, const std::string& kind);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* bytes() const { return bytes_; }
    uint64_t size() const { return size_; }

private:
    MappedFile() = default;
    const uint8_t* bytes_ = nullptr;
    uint64_t size_ = 0;
};

} // namespace npw
