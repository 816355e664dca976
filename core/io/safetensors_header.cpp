// No LibTorch here (safetensors_header.h): npw-text compiles this file.
#include "core/io/safetensors_header.h"

#include "core/io/mapped_file.h"
#include "core/io/shape_text.h"
#include "core/text/json_fields.h"
#include "core/text/utf8.h"
#include "core/util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <tuple>

// The format is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npw reads safetensors on little-endian hosts only");

namespace npw {

using nlohmann::json;

namespace {

// The reference implementation's limit: a bigger header is treated as an attack, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeSpec {
    const char* name;
    uint64_t bytes;
};

const DtypeSpec kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
};

const DtypeSpec* findDtype(const std::string& name) {
    for (const DtypeSpec& spec : kDtypes)
        if (name == spec.name) return &spec;
    return nullptr;
}

std::string knownDtypeList() {
    std::string list;
    for (const DtypeSpec& spec : kDtypes) list += (list.empty() ? "" : ", ") + std::string(spec.name);
    return list;
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("safetensors file '" + path + "': " + problem);
}

// nlohmann::json keeps the last of duplicate keys without a word; the spec forbids
// duplicates and parser differentials on them were a security-audit finding, so the parser
// refuses the second occurrence of a key (and nesting beyond json_fields::kMaxJsonDepth).
json parseHeaderRejectingDuplicates(const std::string& path, std::string_view header) {
    json_fields::JsonParseOptions options;
    options.rejectDuplicateKeys = true;
    options.describeDuplicate = [](const std::string& key, const std::string& entry) {
        return entry.empty() ? "duplicate tensor name '" + key + "' in the header"
                             : "duplicate key '" + key + "' inside the header entry '" + entry + "'";
    };
    return json_fields::parseJsonLimited(header, "safetensors file '" + path + "': the header", options);
}

uint64_t readUnsigned(const std::string& path, const std::string& tensor, const char* field, const json& value) {
    if (!value.is_number_unsigned())
        fail(path, "tensor '" + tensor + "': every element of '" + field +
                       "' must be a non-negative integer, got " + json_fields::preview(value));
    return value.get<uint64_t>();
}

TensorInfo parseTensorEntry(const std::string& path, const std::string& name, const json& entry) {
    if (!entry.is_object())
        fail(path, "tensor '" + name + "': the header entry must be an object with dtype, shape and data_offsets, got " +
                       json_fields::preview(entry));
    for (const auto& field : entry.items())
        if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
            fail(path, "tensor '" + name + "': unknown field '" + field.key() +
                           "' (expected only dtype, shape and data_offsets)");
    for (const char* field : {"dtype", "shape", "data_offsets"})
        if (!entry.contains(field)) fail(path, "tensor '" + name + "': the header entry has no '" + field + "'");

    TensorInfo info;
    const json& dtype = entry["dtype"];
    if (!dtype.is_string()) fail(path, "tensor '" + name + "': dtype must be a string, got " + json_fields::preview(dtype));
    info.dtype = dtype.get<std::string>();
    const DtypeSpec* spec = findDtype(info.dtype);
    if (!spec) fail(path, "tensor '" + name + "': unknown dtype '" + info.dtype + "' (known: " + knownDtypeList() + ")");

    const json& shape = entry["shape"];
    if (!shape.is_array()) fail(path, "tensor '" + name + "': shape must be a list of integers, got " + json_fields::preview(shape));
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& dim : shape) {
        uint64_t size = readUnsigned(path, name, "shape", dim);
        if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            fail(path, "tensor '" + name + "': dimension " + std::to_string(size) + " is too large");
        info.shape.push_back(static_cast<int64_t>(size));
        overflow |= __builtin_mul_overflow(numel, size, &numel);
    }
    uint64_t expectedBytes = 0;
    overflow |= __builtin_mul_overflow(numel, spec->bytes, &expectedBytes);
    if (overflow)
        fail(path, "tensor '" + name + "': shape " + formatShape(info.shape) + " of " + info.dtype +
                       " overflows 64 bits of bytes");

    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
        fail(path, "tensor '" + name + "': data_offsets must be [begin, end], got " + json_fields::preview(offsets));
    info.begin = readUnsigned(path, name, "data_offsets", offsets[0]);
    info.end = readUnsigned(path, name, "data_offsets", offsets[1]);
    if (info.end < info.begin)
        fail(path, "tensor '" + name + "': data_offsets end " + std::to_string(info.end) + " is before begin " +
                       std::to_string(info.begin));
    if (info.end - info.begin != expectedBytes)
        fail(path, "tensor '" + name + "': shape " + formatShape(info.shape) + " of " + info.dtype + " needs " +
                       std::to_string(expectedBytes) + " bytes, but data_offsets [" + std::to_string(info.begin) +
                       ", " + std::to_string(info.end) + "] hold " + std::to_string(info.end - info.begin));
    return info;
}

std::map<std::string, std::string> parseMetadata(const std::string& path, const json& metadata) {
    if (!metadata.is_object())
        fail(path, "__metadata__ must be an object of strings, got " + json_fields::preview(metadata));
    std::map<std::string, std::string> result;
    for (const auto& item : metadata.items()) {
        if (!item.value().is_string())
            fail(path, "__metadata__ entry '" + item.key() + "' must be a string, got " + json_fields::preview(item.value()));
        result[item.key()] = item.value().get<std::string>();
    }
    return result;
}

// The tensors must tile the byte buffer exactly: sorted by offset, the first begins at 0,
// each begins where the previous ends, and the last ends at the end of the file. Trailing
// bytes are refused too: they are how polyglot files hide a second payload.
void checkDataLayout(const std::string& path, const std::map<std::string, TensorInfo>& tensors, uint64_t bufferBytes) {
    std::vector<std::tuple<uint64_t, uint64_t, std::string>> byOffset;
    byOffset.reserve(tensors.size());
    for (const auto& [name, info] : tensors) byOffset.emplace_back(info.begin, info.end, name);
    std::sort(byOffset.begin(), byOffset.end());

    uint64_t expectedBegin = 0;
    std::string previous;
    for (const auto& [begin, end, name] : byOffset) {
        if (begin != expectedBegin) {
            std::string problem = begin > expectedBegin ? "a gap" : "an overlap";
            std::string where = previous.empty() ? "the first tensor must begin at byte 0"
                                                 : "it must begin at byte " + std::to_string(expectedBegin) +
                                                       ", where tensor '" + previous + "' ends";
            fail(path, "tensor '" + name + "' begins at data byte " + std::to_string(begin) + " but " + where + " (" +
                           problem + " in the data)");
        }
        if (end > bufferBytes)
            fail(path, "tensor '" + name + "' ends at data byte " + std::to_string(end) + " but the file holds only " +
                           std::to_string(bufferBytes) + " data bytes after the header (truncated file?)");
        expectedBegin = end;
        previous = name;
    }
    if (expectedBegin != bufferBytes)
        fail(path, std::to_string(bufferBytes - expectedBegin) + " trailing bytes after the last tensor (data ends at " +
                       std::to_string(expectedBegin) + ", the file has " + std::to_string(bufferBytes) +
                       " data bytes)");
}

} // namespace

std::shared_ptr<SafeTensorsHeader> SafeTensorsHeader::open(const std::string& path) {
    std::shared_ptr<SafeTensorsHeader> file(new SafeTensorsHeader());
    file->read(path);
    return file;
}

SafeTensorsHeader::SafeTensorsHeader() = default;
SafeTensorsHeader::~SafeTensorsHeader() = default;

void SafeTensorsHeader::read(const std::string& path) {
    SafeTensorsHeader* file = this;
    file->path_ = path;

    file->mapping_ = MappedFile::open(path, "safetensors file");
    const uint64_t fileBytes = file->mapping_->size();
    if (fileBytes < 8)
        fail(path, "the file has " + std::to_string(fileBytes) + " bytes, fewer than the 8 of the header length");
    const uint8_t* bytes = file->mapping_->bytes();

    uint64_t headerBytes = 0;
    std::memcpy(&headerBytes, bytes, 8);
    if (headerBytes > kMaxHeaderBytes)
        fail(path, "header length " + std::to_string(headerBytes) + " exceeds the limit of " +
                       std::to_string(kMaxHeaderBytes) + " bytes");
    if (8 + headerBytes > fileBytes)
        fail(path, "header of " + std::to_string(headerBytes) + " bytes extends past the end of the file (" +
                       std::to_string(fileBytes) + " bytes)");

    std::string_view header(reinterpret_cast<const char*>(bytes + 8), headerBytes);
    size_t badByte = utf8::findInvalid(header);
    if (badByte != std::string_view::npos)
        fail(path, "the header is not valid UTF-8 (bad byte at header offset " + std::to_string(badByte) + ")");
    json parsed = parseHeaderRejectingDuplicates(path, header);
    if (!parsed.is_object()) fail(path, "the header is not a JSON object (it is " + std::string(parsed.type_name()) + ")");

    for (const auto& item : parsed.items()) {
        if (item.key() == kSafeTensorsMetadataKey) file->metadata_ = parseMetadata(path, item.value());
        else file->tensors_[item.key()] = parseTensorEntry(path, item.key(), item.value());
    }
    checkDataLayout(path, file->tensors_, fileBytes - 8 - headerBytes);
    file->data_ = bytes + 8 + headerBytes;
}

uint64_t safeTensorsElementBytes(const std::string& dtype) {
    const DtypeSpec* spec = findDtype(dtype);
    return spec ? spec->bytes : 0;
}

std::vector<std::string> SafeTensorsHeader::names() const {
    std::vector<std::string> result;
    for (const auto& entry : tensors_) result.push_back(entry.first);
    return result;
}

const TensorInfo& SafeTensorsHeader::info(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail(path_, "no tensor named '" + name + "'");
    return it->second;
}

bool SafeTensorsHeader::anyNonZero(const std::string& name) const {
    const TensorInfo& tensor = info(name);
    const uint64_t width = safeTensorsElementBytes(tensor.dtype);
    if (tensor.dtype != "F32" && tensor.dtype != "F16" && tensor.dtype != "BF16" && tensor.dtype != "F64")
        fail(path_, "tensor '" + name + "' has dtype " + tensor.dtype +
                        "; a floating-point tensor (F32, F16, BF16, F64) was expected");
    for (uint64_t at = tensor.begin; at < tensor.end; at += width) {
        const uint8_t* element = data_ + at;
        if (width == 2) {  // F16, BF16: every bit but the sign's is zero for ±0 only
            uint16_t bits;
            std::memcpy(&bits, element, 2);
            if ((bits & 0x7fff) != 0) return true;
        } else if (width == 4) {
            float value;
            std::memcpy(&value, element, 4);
            if (value != 0.0f) return true;
        } else {
            double value;
            std::memcpy(&value, element, 8);
            if (value != 0.0) return true;
        }
    }
    return false;
}

} // namespace npw
