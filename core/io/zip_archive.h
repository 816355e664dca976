#pragma once
// A minimal read-only zip reader for PyTorch checkpoints (torch.save): memory-mapped, STORED
// entries only, ZIP64-aware, bounds-checked everywhere. A lying or truncated archive is an
// npw::Error naming the file and the entry, never a crash or a read outside the mapping.
// No torch and no Qt here.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace npw {

class MappedFile;

struct ZipEntry {
    std::string name;
    uint16_t method = 0;  // 0 = STORED; open() refuses every other method
    uint16_t flags = 0;   // general-purpose bit flags of the central directory
    uint32_t crc32 = 0;   // from the central directory (local headers may hold 0)
    uint64_t size = 0;    // bytes of data (STORED: compressed = uncompressed)
    uint64_t localHeaderOffset = 0;
    uint64_t dataOffset = 0;  // from the local header: its extra field pads to alignment
};

class ZipArchive {
public:
    // Maps the file and validates the end records, the whole central directory and every
    // local header. Throws npw::Error naming the file (and the entry) on anything wrong:
    // no end record, multi-disk archives, encrypted or compressed entries, duplicate names,
    // a local header that disagrees with the central directory, data outside the file or
    // overlapping another entry or the central directory.
    static std::shared_ptr<ZipArchive> open(const std::string& path);
    ~ZipArchive();
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;

    const std::string& path() const { return path_; }
    uint64_t fileSize() const;
    // Entries in central-directory order.
    const std::vector<ZipEntry>& entries() const { return entries_; }
    const ZipEntry* find(const std::string& name) const;   // nullptr when absent
    const ZipEntry& entry(const std::string& name) const;  // throws when absent

    // The entry's bytes, a view into the mapping: valid while this archive lives. The range
    // was checked against the file at open(). Unaligned in general: copy before typed access.
    std::string_view data(const ZipEntry& entry) const;
    std::string_view data(const std::string& name) const { return data(entry(name)); }

    // Recomputes the CRC-32 of the entry's bytes; throws npw::Error naming the entry, the
    // expected and the actual checksum on a mismatch. open() does not (it would read every byte).
    void verifyCrc32(const ZipEntry& entry) const;
    void verifyCrc32(const std::string& name) const { verifyCrc32(entry(name)); }

private:
    ZipArchive() = default;
    std::string path_;
    std::vector<ZipEntry> entries_;
    std::unordered_map<std::string, size_t> indexByName_;
    const uint8_t* bytes_ = nullptr;
    std::unique_ptr<MappedFile> mapping_;
};

// CRC-32 (ISO-HDLC, the zip polynomial) of a byte range; exposed for tests.
uint32_t crc32Of(std::string_view bytes, uint32_t previous = 0);

}  // namespace npw
