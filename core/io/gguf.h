#pragma once
// GGUF v3, the file format of llama.cpp / ggml (notes/formats.md "GGUF"): a header, typed
// key-value metadata, tensor infos, then tensor data aligned to general.alignment. A writer
// (atomic: temp file + rename) and a strict reader of everything but the data itself.
// No ATen here: tensors are handed over as byte writers, so the writer streams them.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npw {

enum class GgufValueType : int32_t {
    Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6,
    Bool = 7, String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12
};
std::string ggufValueTypeName(GgufValueType type);

// ggml tensor types npw writes (and reads the sizes of).
enum class GgmlType : int32_t { F32 = 0, F16 = 1, BF16 = 30 };
std::string ggmlTypeName(GgmlType type);
int64_t ggmlTypeSize(GgmlType type);  // bytes per element

// One metadata value. Integers are kept in `integer` (int64 covers every type but the largest
// uint64 values, which go to `uinteger`), floats in `real`; arrays hold scalars or strings.
struct GgufValue {
    GgufValueType type = GgufValueType::Uint32;
    GgufValueType elementType = GgufValueType::Uint8;  // for arrays
    int64_t integer = 0;
    uint64_t uinteger = 0;
    double real = 0;
    bool boolean = false;
    std::string string;
    std::vector<GgufValue> elements;  // for arrays: scalars or strings of elementType

    static GgufValue u32(uint32_t v);
    static GgufValue i32(int32_t v);
    static GgufValue u64(uint64_t v);
    static GgufValue f32(float v);
    static GgufValue boolValue(bool v);
    static GgufValue str(std::string v);
    static GgufValue strings(const std::vector<std::string>& v);
    static GgufValue i32s(const std::vector<int32_t>& v);
    static GgufValue f32s(const std::vector<float>& v);

    bool isInteger() const;
    // The value as a signed integer; npw::Error (naming `what`) unless it is an integer type.
    int64_t asInteger(const std::string& what) const;
    // A human-readable rendering (arrays shortened), for `npw info` and error messages.
    std::string describe(size_t maxElements = 8) const;
};

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> ne;  // ggml order: ne[0] is the fastest dimension (PyTorch shape reversed)
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;      // relative to the start of the data section
    int64_t elements() const;
    uint64_t bytes() const;
};

// A tensor to write: its info (offset filled by the writer) and a function that writes exactly
// info.bytes() bytes.
struct GgufTensorToWrite {
    GgufTensorInfo info;
    std::function<void(std::ostream&)> writeData;
};

constexpr uint32_t kGgufDefaultAlignment = 32;

// Writes path atomically: header, metadata in the given order (general.alignment added when
// absent, with `alignment`), tensor infos, padded data. Throws npw::Error on a duplicate key or
// tensor name, a name of 64 bytes or more, more than 4 dimensions, or a writer that wrote the
// wrong number of bytes (naming the tensor).
void writeGguf(const std::string& path, const GgufMetadata& metadata, std::vector<GgufTensorToWrite> tensors,
               uint32_t alignment = kGgufDefaultAlignment);

struct GgufFile {
    std::string path;
    uint32_t version = 0;
    GgufMetadata metadata;
    std::vector<GgufTensorInfo> tensors;
    uint32_t alignment = kGgufDefaultAlignment;
    uint64_t dataOffset = 0;  // absolute file offset of the data section
    uint64_t fileSize = 0;

    const GgufValue* find(const std::string& key) const;  // null when absent
    // npw::Error "'<path>': metadata key '<key>' is missing" when absent.
    const GgufValue& at(const std::string& key) const;
    const GgufTensorInfo* findTensor(const std::string& name) const;
};

// Reads and validates header, metadata and tensor infos: magic, version 2 or 3, known value and
// tensor types, lengths within the file, unique keys and names, ≤ 4 dims, aligned offsets, every
// tensor's data within the file and not overlapping another. Errors name the file, what was read
// and what was expected.
GgufFile readGgufFile(const std::string& path);
// The raw bytes of one tensor (for tests and `npw info`).
std::string readGgufTensorBytes(const GgufFile& file, const GgufTensorInfo& tensor);

} // namespace npw
