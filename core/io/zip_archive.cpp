#include "core/io/zip_archive.h"


#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "core/io/mapped_file.h"
#include "core/util/error.h"

namespace npw {

namespace {

// Record signatures and fixed sizes (PKWARE APPNOTE 6.3, sections 4.3.7, 4.3.12, 4.3.14-16).
constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint64_t kEndBytes = 22;
constexpr uint64_t kMaxCommentBytes = 65535;
constexpr uint64_t kZip64LocatorBytes = 20;
constexpr uint64_t kZip64EndBytes = 56;      // without the extensible data sector
constexpr uint64_t kZip64EndSizeField = 44;  // what "size of this record" says for 56 bytes
constexpr uint64_t kCentralHeaderBytes = 46;
constexpr uint64_t kLocalHeaderBytes = 30;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagStrongEncryption = 0x0040;
constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kSaturated16 = 0xFFFF;
constexpr uint32_t kSaturated32 = 0xFFFFFFFF;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("zip archive '" + path + "': " + problem);
}

[[noreturn]] void failEntry(const std::string& path, const std::string& entry, const std::string& problem) {
    fail(path, "entry '" + entry + "': " + problem);
}

std::string hex32(uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", value);
    return text;
}

std::string range(uint64_t begin, uint64_t end) {
    return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

const char* methodName(uint16_t method) {
    switch (method) {
        case 8:
            return "deflate";
        case 9:
            return "deflate64";
        case 12:
            return "bzip2";
        case 14:
            return "lzma";
        case 93:
            return "zstd";
        case 95:
            return "xz";
        default:
            return "unknown";
    }
}

// Little-endian fields of the mapping. The readers do not check bounds: every caller first
// bounds the record it reads (by the file size, the central directory or the space before
// it), so a missing check shows up in review rather than as a silent clamp.
class Bytes {
public:
    explicit Bytes(const uint8_t* data) : data_(data) {}
    uint16_t u16(uint64_t at) const { return static_cast<uint16_t>(data_[at] | data_[at + 1] << 8); }
    uint32_t u32(uint64_t at) const { return u16(at) | static_cast<uint32_t>(u16(at + 2)) << 16; }
    uint64_t u64(uint64_t at) const { return u32(at) | static_cast<uint64_t>(u32(at + 4)) << 32; }
    std::string text(uint64_t at, uint64_t count) const {
        return std::string(reinterpret_cast<const char*>(data_ + at), count);
    }

private:
    const uint8_t* data_;
};

// Where the central directory is, from the end record and, when present, the ZIP64 ones.
struct CentralDirectory {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t entryCount = 0;
    uint64_t endOfDirectory = 0;  // where the first end record (ZIP64 or classic) begins
};

uint64_t findEndRecord(const std::string& path, const Bytes& bytes, uint64_t fileSize) {
    // The end record is the last thing in the file, followed only by its own comment; the
    // comment may contain the signature too, so take the record whose comment ends at EOF.
    const uint64_t lowest = fileSize - kEndBytes > kMaxCommentBytes ? fileSize - kEndBytes - kMaxCommentBytes : 0;
    for (uint64_t at = fileSize - kEndBytes + 1; at-- > lowest;)
        if (bytes.u32(at) == kEndSignature && at + kEndBytes + bytes.u16(at + 20) == fileSize) return at;
    fail(path, "no end-of-central-directory record at the end of the file (not a zip archive, or truncated)");
}

CentralDirectory readEndRecords(const std::string& path, const Bytes& bytes, uint64_t fileSize) {
    const uint64_t end = findEndRecord(path, bytes, fileSize);
    const uint16_t disk = bytes.u16(end + 4), directoryDisk = bytes.u16(end + 6);
    const uint16_t entriesOnDisk = bytes.u16(end + 8), totalEntries = bytes.u16(end + 10);
    const uint32_t directorySize = bytes.u32(end + 12), directoryOffset = bytes.u32(end + 16);

    CentralDirectory directory{directoryOffset, directorySize, totalEntries, end};
    const bool saturated = disk == kSaturated16 || directoryDisk == kSaturated16 || entriesOnDisk == kSaturated16 ||
                           totalEntries == kSaturated16 || directorySize == kSaturated32 ||
                           directoryOffset == kSaturated32;
    const bool hasLocator = end >= kZip64LocatorBytes && bytes.u32(end - kZip64LocatorBytes) == kZip64LocatorSignature;
    if (!hasLocator) {
        if (saturated)
            fail(path,
                 "the end record marks its fields as ZIP64 (0xFFFF...) but no ZIP64 locator precedes it (truncated or "
                 "lying archive)");
        if (disk != 0 || directoryDisk != 0 || entriesOnDisk != totalEntries)
            fail(path, "a multi-disk archive (disk " + std::to_string(disk) + ", directory on disk " +
                           std::to_string(directoryDisk) + "); only single-file archives are read");
        return directory;
    }

    const uint64_t locator = end - kZip64LocatorBytes;
    const uint32_t recordDisk = bytes.u32(locator + 4), diskCount = bytes.u32(locator + 16);
    const uint64_t record = bytes.u64(locator + 8);
    if (recordDisk != 0 || diskCount > 1)
        fail(path, "a multi-disk archive (ZIP64 locator: record on disk " + std::to_string(recordDisk) + " of " +
                       std::to_string(diskCount) + "); only single-file archives are read");
    // The record sits right before its locator (its extensible data sector included), which is
    // also what Python's zipfile assumes; anything else is a lying locator.
    if (record > locator || locator - record < kZip64EndBytes)
        fail(path, "the ZIP64 locator points at offset " + std::to_string(record) +
                       ", which leaves no room for a ZIP64 end record before the locator at " +
                       std::to_string(locator));
    if (bytes.u32(record) != kZip64EndSignature)
        fail(path, "no ZIP64 end record at offset " + std::to_string(record) + ", where the ZIP64 locator points");
    const uint64_t recordSize = bytes.u64(record + 4);
    if (recordSize < kZip64EndSizeField || recordSize != locator - record - 12)
        fail(path, "the ZIP64 end record at offset " + std::to_string(record) + " says it is " +
                       std::to_string(recordSize) + " + 12 bytes, but its locator follows after " +
                       std::to_string(locator - record) + " bytes");
    const uint32_t disk64 = bytes.u32(record + 16), directoryDisk64 = bytes.u32(record + 20);
    const uint64_t entriesOnDisk64 = bytes.u64(record + 24), totalEntries64 = bytes.u64(record + 32);
    const uint64_t directorySize64 = bytes.u64(record + 40), directoryOffset64 = bytes.u64(record + 48);
    if (disk64 != 0 || directoryDisk64 != 0 || entriesOnDisk64 != totalEntries64)
        fail(path, "a multi-disk archive (ZIP64 end record: disk " + std::to_string(disk64) + ", directory on disk " +
                       std::to_string(directoryDisk64) + "); only single-file archives are read");
    // Where the classic record holds a real value, it must agree with the ZIP64 record.
    auto agree = [&](bool classicSaturated, uint64_t classic, uint64_t wide, const char* what) {
        if (!classicSaturated && classic != wide)
            fail(path, std::string("the end record and the ZIP64 end record disagree on the ") + what + " (" +
                           std::to_string(classic) + " vs " + std::to_string(wide) + ")");
    };
    agree(totalEntries == kSaturated16, totalEntries, totalEntries64, "number of entries");
    agree(directorySize == kSaturated32, directorySize, directorySize64, "central directory size");
    agree(directoryOffset == kSaturated32, directoryOffset, directoryOffset64, "central directory offset");
    return {directoryOffset64, directorySize64, totalEntries64, record};
}

struct WideFields {
    uint64_t size;  // uncompressed
    uint64_t compressedSize;
    uint64_t localHeaderOffset;
    uint32_t diskStart;
};

// Replaces the saturated 32/16-bit fields of a central directory entry with the values of its
// ZIP64 extra field record (which holds exactly the saturated ones, in this order).
WideFields readExtraField(const std::string& path, const std::string& name, const Bytes& bytes, uint64_t begin,
                          uint64_t length, WideFields fields) {
    const bool needSize = fields.size == kSaturated32, needCompressed = fields.compressedSize == kSaturated32;
    const bool needOffset = fields.localHeaderOffset == kSaturated32, needDisk = fields.diskStart == kSaturated16;
    bool sawZip64 = false;
    uint64_t at = begin;
    const uint64_t end = begin + length;
    while (at < end) {
        if (end - at < 4) failEntry(path, name, "the central directory's extra field ends in a partial record header");
        const uint16_t id = bytes.u16(at), recordBytes = bytes.u16(at + 2);
        if (recordBytes > end - at - 4)
            failEntry(path, name,
                      "an extra field record of " + std::to_string(recordBytes) +
                          " bytes runs past the end of the extra field");
        if (id == kZip64ExtraId) {
            if (sawZip64) failEntry(path, name, "two ZIP64 extra field records");
            sawZip64 = true;
            uint64_t field = at + 4;
            const uint64_t fieldEnd = field + recordBytes;
            auto take64 = [&](const char* what) {
                if (fieldEnd - field < 8)
                    failEntry(path, name, std::string("the ZIP64 extra field is too short to hold the ") + what);
                uint64_t value = bytes.u64(field);
                field += 8;
                return value;
            };
            if (needSize) fields.size = take64("uncompressed size");
            if (needCompressed) fields.compressedSize = take64("compressed size");
            if (needOffset) fields.localHeaderOffset = take64("local header offset");
            if (needDisk) {
                if (fieldEnd - field < 4)
                    failEntry(path, name, "the ZIP64 extra field is too short to hold the disk number");
                fields.diskStart = bytes.u32(field);
            }
        }
        at += 4 + recordBytes;
    }
    if ((needSize || needCompressed || needOffset || needDisk) && !sawZip64)
        failEntry(path, name, "saturated (0xFFFFFFFF) sizes or offset but no ZIP64 extra field");
    return fields;
}

// Reads one central directory entry at `at` (inside [at, directoryEnd)) and its local header.
// Returns the entry and the number of central directory bytes it took.
std::pair<ZipEntry, uint64_t> readEntry(const std::string& path, const Bytes& bytes, uint64_t at, uint64_t directoryEnd,
                                        uint64_t directoryOffset, uint64_t index, uint64_t count) {
    const std::string which = "central directory entry #" + std::to_string(index + 1) + " of " + std::to_string(count);
    if (directoryEnd - at < kCentralHeaderBytes)
        fail(path, which + " at offset " + std::to_string(at) + " runs past the end of the central directory");
    if (bytes.u32(at) != kCentralHeaderSignature)
        fail(path, "no " + which + " at offset " + std::to_string(at) + " (bad signature)");
    ZipEntry entry;
    entry.flags = bytes.u16(at + 8);
    entry.method = bytes.u16(at + 10);
    entry.crc32 = bytes.u32(at + 16);
    WideFields fields{bytes.u32(at + 24), bytes.u32(at + 20), bytes.u32(at + 42), bytes.u16(at + 34)};
    const uint64_t nameBytes = bytes.u16(at + 28), extraBytes = bytes.u16(at + 30), commentBytes = bytes.u16(at + 32);
    const uint64_t entryBytes = kCentralHeaderBytes + nameBytes + extraBytes + commentBytes;
    if (directoryEnd - at < entryBytes)
        fail(path, which + " at offset " + std::to_string(at) + " (name, extra field and comment: " +
                       std::to_string(entryBytes) + " bytes) runs past the end of the central directory");
    entry.name = bytes.text(at + kCentralHeaderBytes, nameBytes);
    if (entry.name.empty()) fail(path, which + " has an empty name");
    if (entry.name.find('\0') != std::string::npos) fail(path, which + " has a NUL byte in its name");
    const std::string& name = entry.name;

    fields = readExtraField(path, name, bytes, at + kCentralHeaderBytes + nameBytes, extraBytes, fields);
    if (fields.diskStart != 0)
        failEntry(path, name,
                  "starts on disk " + std::to_string(fields.diskStart) + "; only single-file archives are read");
    if (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) failEntry(path, name, "is encrypted");
    if (entry.method != 0)
        failEntry(path, name,
                  "is compressed (method " + std::to_string(entry.method) + ", " + methodName(entry.method) +
                      "); npw reads only STORED entries, which is what torch.save writes");
    if (fields.compressedSize != fields.size)
        failEntry(path, name,
                  "is STORED but its compressed size " + std::to_string(fields.compressedSize) +
                      " differs from its size " + std::to_string(fields.size));
    entry.size = fields.size;
    entry.localHeaderOffset = fields.localHeaderOffset;

    // The local header: its name and method must match, and its extra field (torch pads it to
    // align the data to 64 bytes) decides where the data begin.
    const uint64_t local = entry.localHeaderOffset;
    if (local > directoryOffset || directoryOffset - local < kLocalHeaderBytes)
        failEntry(path, name,
                  "its local header at offset " + std::to_string(local) +
                      " does not fit before the central directory at " + std::to_string(directoryOffset));
    if (bytes.u32(local) != kLocalHeaderSignature)
        failEntry(path, name, "no local header at offset " + std::to_string(local) + " (bad signature)");
    const uint16_t localFlags = bytes.u16(local + 6), localMethod = bytes.u16(local + 8);
    const uint64_t localNameBytes = bytes.u16(local + 26), localExtraBytes = bytes.u16(local + 28);
    if (localFlags != entry.flags)
        failEntry(path, name,
                  "the local header's flags " + hex32(localFlags) + " differ from the central directory's " +
                      hex32(entry.flags));
    if (localMethod != entry.method)
        failEntry(path, name,
                  "the local header says method " + std::to_string(localMethod) + ", the central directory method " +
                      std::to_string(entry.method));
    const uint64_t dataOffset = local + kLocalHeaderBytes + localNameBytes + localExtraBytes;
    if (dataOffset > directoryOffset)
        failEntry(path, name,
                  "its local header at offset " + std::to_string(local) +
                      " (with name and extra field) runs into the central directory at " +
                      std::to_string(directoryOffset));
    const std::string localName = bytes.text(local + kLocalHeaderBytes, localNameBytes);
    if (localName != name) failEntry(path, name, "the local header names it '" + localName + "'");
    if (!(entry.flags & kFlagDataDescriptor)) {
        // Without a data descriptor the local header repeats the checksum and sizes (sizes
        // saturated when a local ZIP64 extra field holds them).
        const uint32_t localCrc = bytes.u32(local + 14), localCompressed = bytes.u32(local + 18);
        const uint32_t localSize = bytes.u32(local + 22);
        const bool sizesAgree = (localCompressed == kSaturated32 && localSize == kSaturated32) ||
                                (localCompressed == fields.compressedSize && localSize == fields.size);
        if (localCrc != entry.crc32 || !sizesAgree)
            failEntry(path, name,
                      "the local header's CRC-32 and sizes (" + hex32(localCrc) + ", " + std::to_string(localSize) +
                          " bytes) differ from the central directory's (" + hex32(entry.crc32) + ", " +
                          std::to_string(entry.size) + " bytes)");
    }
    if (entry.size > directoryOffset - dataOffset)
        failEntry(path, name,
                  "its " + std::to_string(entry.size) + " bytes of data " +
                      range(dataOffset, dataOffset + std::min(entry.size, UINT64_MAX - dataOffset)) +
                      " run past the start of the central directory at " + std::to_string(directoryOffset) +
                      " (truncated or lying archive)");
    entry.dataOffset = dataOffset;
    return {entry, entryBytes};
}

// Local header + data of each entry must not overlap another's: overlapping entries are how
// zip bombs and polyglot archives make one byte range mean two things.
void checkNoOverlap(const std::string& path, const std::vector<ZipEntry>& entries) {
    std::vector<std::tuple<uint64_t, uint64_t, const std::string*>> spans;
    spans.reserve(entries.size());
    for (const ZipEntry& entry : entries)
        spans.emplace_back(entry.localHeaderOffset, entry.dataOffset + entry.size, &entry.name);
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
        if (std::get<0>(spans[i]) < std::get<1>(spans[i - 1]))
            fail(path, "entries '" + *std::get<2>(spans[i - 1]) + "' " +
                           range(std::get<0>(spans[i - 1]), std::get<1>(spans[i - 1])) + " and '" +
                           *std::get<2>(spans[i]) + "' " + range(std::get<0>(spans[i]), std::get<1>(spans[i])) +
                           " overlap");
}

const std::array<uint32_t, 256>& crcTable() {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> result{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t value = i;
            for (int bit = 0; bit < 8; ++bit) value = (value & 1) ? 0xEDB88320u ^ (value >> 1) : value >> 1;
            result[i] = value;
        }
        return result;
    }();
    return table;
}

}  // namespace

uint32_t crc32Of(std::string_view bytes, uint32_t previous) {
    const auto& table = crcTable();
    uint32_t crc = ~previous;
    for (char byte : bytes) crc = table[(crc ^ static_cast<uint8_t>(byte)) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

std::shared_ptr<ZipArchive> ZipArchive::open(const std::string& path) {
    std::shared_ptr<ZipArchive> archive(new ZipArchive());
    archive->path_ = path;

    archive->mapping_ = MappedFile::open(path, "zip archive");
    const uint64_t fileSize = archive->mapping_->size();
    if (fileSize < kEndBytes)
        fail(path, "the file has " + std::to_string(fileSize) + " bytes, fewer than the " + std::to_string(kEndBytes) +
                       " of a zip end record (not a zip archive, or truncated)");
    archive->bytes_ = archive->mapping_->bytes();
    const Bytes bytes(archive->bytes_);

    const CentralDirectory directory = readEndRecords(path, bytes, fileSize);
    if (directory.offset > directory.endOfDirectory || directory.size > directory.endOfDirectory - directory.offset)
        fail(path, "the central directory " + range(directory.offset, directory.offset + directory.size) +
                       " runs past the end records at offset " + std::to_string(directory.endOfDirectory) +
                       " (truncated or lying archive)");
    if (directory.offset + directory.size != directory.endOfDirectory)
        fail(path, std::to_string(directory.endOfDirectory - directory.offset - directory.size) +
                       " unexplained bytes between the central directory and the end records");
    // Bounds the reservation below: every entry takes at least a fixed header.
    if (directory.entryCount > directory.size / kCentralHeaderBytes)
        fail(path, "the end record claims " + std::to_string(directory.entryCount) +
                       " entries, more than a central directory of " + std::to_string(directory.size) +
                       " bytes can hold");

    archive->entries_.reserve(directory.entryCount);
    const uint64_t directoryEnd = directory.offset + directory.size;
    uint64_t at = directory.offset;
    for (uint64_t index = 0; index < directory.entryCount; ++index) {
        auto [entry, entryBytes] =
            readEntry(path, bytes, at, directoryEnd, directory.offset, index, directory.entryCount);
        if (!archive->indexByName_.emplace(entry.name, archive->entries_.size()).second)
            fail(path, "two entries named '" + entry.name + "'");
        archive->entries_.push_back(std::move(entry));
        at += entryBytes;
    }
    if (at != directoryEnd)
        fail(path, std::to_string(directoryEnd - at) + " bytes left in the central directory after its " +
                       std::to_string(directory.entryCount) + " entries");
    checkNoOverlap(path, archive->entries_);
    return archive;
}

ZipArchive::~ZipArchive() = default;

uint64_t ZipArchive::fileSize() const { return mapping_->size(); }

const ZipEntry* ZipArchive::find(const std::string& name) const {
    auto it = indexByName_.find(name);
    return it == indexByName_.end() ? nullptr : &entries_[it->second];
}

const ZipEntry& ZipArchive::entry(const std::string& name) const {
    const ZipEntry* found = find(name);
    if (!found) fail(path_, "no entry named '" + name + "'");
    return *found;
}

std::string_view ZipArchive::data(const ZipEntry& entry) const {
    return std::string_view(reinterpret_cast<const char*>(bytes_ + entry.dataOffset), entry.size);
}

void ZipArchive::verifyCrc32(const ZipEntry& entry) const {
    const uint32_t actual = crc32Of(data(entry));
    if (actual != entry.crc32)
        failEntry(path_, entry.name,
                  "CRC-32 mismatch: the central directory says " + hex32(entry.crc32) + ", the data give " +
                      hex32(actual) + " (corrupted archive)");
}

}  // namespace npw
