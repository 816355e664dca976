#include "core/io/gguf.h"

#include "core/text/utf8.h"
#include "core/util/atomic_file.h"
#include "core/util/checked_math.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>

namespace npw {

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kVersion = 3;
constexpr size_t kMaxNameBytes = 63;  // GGML_MAX_NAME 64 with the terminating zero
constexpr uint32_t kMaxDims = 4;

int64_t scalarSize(GgufValueType type) {
    switch (type) {
    case GgufValueType::Uint8: case GgufValueType::Int8: case GgufValueType::Bool: return 1;
    case GgufValueType::Uint16: case GgufValueType::Int16: return 2;
    case GgufValueType::Uint32: case GgufValueType::Int32: case GgufValueType::Float32: return 4;
    case GgufValueType::Uint64: case GgufValueType::Int64: case GgufValueType::Float64: return 8;
    case GgufValueType::String: case GgufValueType::Array: return 0;
    }
    return 0;
}

bool knownValueType(int32_t type) { return type >= 0 && type <= 12; }

uint64_t padTo(uint64_t offset, uint64_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

// ---- writing

template <class T>
void put(std::ostream& out, T value) {
    out.write(reinterpret_cast<const char*>(&value), sizeof(T));  // GGUF is little-endian, as x86/ARM
}

void putString(std::ostream& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

void putScalar(std::ostream& out, const GgufValue& v, GgufValueType type) {
    switch (type) {
    case GgufValueType::Uint8: put<uint8_t>(out, static_cast<uint8_t>(v.integer)); break;
    case GgufValueType::Int8: put<int8_t>(out, static_cast<int8_t>(v.integer)); break;
    case GgufValueType::Uint16: put<uint16_t>(out, static_cast<uint16_t>(v.integer)); break;
    case GgufValueType::Int16: put<int16_t>(out, static_cast<int16_t>(v.integer)); break;
    case GgufValueType::Uint32: put<uint32_t>(out, static_cast<uint32_t>(v.integer)); break;
    case GgufValueType::Int32: put<int32_t>(out, static_cast<int32_t>(v.integer)); break;
    case GgufValueType::Float32: put<float>(out, static_cast<float>(v.real)); break;
    case GgufValueType::Bool: put<uint8_t>(out, v.boolean ? 1 : 0); break;
    case GgufValueType::String: putString(out, v.string); break;
    case GgufValueType::Uint64: put<uint64_t>(out, v.uinteger); break;
    case GgufValueType::Int64: put<int64_t>(out, v.integer); break;
    case GgufValueType::Float64: put<double>(out, v.real); break;
    case GgufValueType::Array: throw Error("GGUF: nested arrays are not supported");
    }
}

void putValue(std::ostream& out, const GgufValue& v) {
    put<int32_t>(out, static_cast<int32_t>(v.type));
    if (v.type != GgufValueType::Array) {
        putScalar(out, v, v.type);
        return;
    }
    put<int32_t>(out, static_cast<int32_t>(v.elementType));
    put<uint64_t>(out, v.elements.size());
    for (const GgufValue& e : v.elements) putScalar(out, e, v.elementType);
}

// ---- reading

class Reader {
public:
    Reader(std::istream& in, std::string path, uint64_t size) : in_(in), path_(std::move(path)), size_(size) {}

    uint64_t position() const { return pos_; }

    [[noreturn]] void fail(const std::string& problem) const {
        throw Error("GGUF file '" + path_ + "': " + problem + " (at byte " + std::to_string(pos_) + " of " +
                    std::to_string(size_) + ")");
    }

    void bytes(char* out, uint64_t n, const char* what) {
        if (n > size_ - pos_)
            fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
                 std::to_string(size_ - pos_) + " are left");
        in_.read(out, static_cast<std::streamsize>(n));
        if (!in_) fail(std::string("cannot read ") + what + ": " + std::strerror(errno));
        pos_ += n;
    }

    template <class T>
    T get(const char* what) {
        T value;
        bytes(reinterpret_cast<char*>(&value), sizeof(T), what);
        return value;
    }

    std::string string(const std::string& what) {
        const auto length = get<uint64_t>(what.c_str());
        if (length > size_ - pos_)
            fail(what + " claims " + std::to_string(length) + " bytes, only " + std::to_string(size_ - pos_) +
                 " are left in the file");
        std::string s(length, '\0');
        bytes(s.data(), length, what.c_str());
        return s;
    }

    // What the parsed metadata may occupy in memory: a GgufValue is ~100 bytes however small
    // its element in the file, so a file of one-byte array elements would otherwise cost 100
    // times its size. Real files (vocabularies: strings, f32 scores, i32 types) need < 16×.
    void chargeMemory(uint64_t bytes, const std::string& what) {
        memoryUsed_ = checkedAdd(memoryUsed_, bytes, "GGUF file '" + path_ + "': " + what);
        const uint64_t budget = (uint64_t{64} << 20) + 16 * size_;
        if (memoryUsed_ > budget)
            fail(what + " brings the metadata to " + std::to_string(memoryUsed_) + " bytes in memory, more than the " +
                 std::to_string(budget) + " a file of this size may need (64 MiB + 16 × its size)");
        if (memoryUsed_ > allocationCapBytes()) checkAllocation(memoryUsed_, "GGUF file '" + path_ + "': the metadata");
    }

    // A count of items each at least minBytes long must fit in what is left of the file.
    void checkCount(uint64_t count, uint64_t minBytes, const std::string& what) const {
        if (minBytes > 0 && count > (size_ - pos_) / minBytes)
            fail(what + " is " + std::to_string(count) + ", more than the " + std::to_string(size_ - pos_) +
                 " bytes left can hold");
    }

private:
    std::istream& in_;
    std::string path_;
    uint64_t size_;
    uint64_t pos_ = 0;
    uint64_t memoryUsed_ = 0;
};

GgufValue readScalar(Reader& r, GgufValueType type, const std::string& key) {
    GgufValue v;
    v.type = type;
    const char* what = "a metadata value";
    switch (type) {
    case GgufValueType::Uint8: v.integer = r.get<uint8_t>(what); break;
    // NOLINTNEXTLINE(bugprone-signed-char-misuse): GGUF's INT8 is signed; the sign extension is meant
    case GgufValueType::Int8: v.integer = r.get<int8_t>(what); break;
    case GgufValueType::Uint16: v.integer = r.get<uint16_t>(what); break;
    case GgufValueType::Int16: v.integer = r.get<int16_t>(what); break;
    case GgufValueType::Uint32: v.integer = r.get<uint32_t>(what); break;
    case GgufValueType::Int32: v.integer = r.get<int32_t>(what); break;
    case GgufValueType::Float32: v.real = r.get<float>(what); break;
    case GgufValueType::Bool: {
        const auto b = r.get<uint8_t>(what);
        if (b > 1) r.fail("metadata key '" + key + "': a bool must be 0 or 1, found " + std::to_string(b));
        v.boolean = b == 1;
        break;
    }
    case GgufValueType::String: v.string = r.string("the string value of '" + key + "'"); break;
    case GgufValueType::Uint64:
        v.uinteger = r.get<uint64_t>(what);
        v.integer = static_cast<int64_t>(v.uinteger);
        break;
    case GgufValueType::Int64: v.integer = r.get<int64_t>(what); break;
    case GgufValueType::Float64: v.real = r.get<double>(what); break;
    case GgufValueType::Array: r.fail("metadata key '" + key + "': nested arrays are not valid GGUF");
    }
    if (type == GgufValueType::Uint64) return v;
    v.uinteger = static_cast<uint64_t>(v.integer);
    return v;
}

GgufValue readValue(Reader& r, const std::string& key) {
    const auto rawType = r.get<int32_t>("a metadata value type");
    if (!knownValueType(rawType))
        r.fail("metadata key '" + key + "' has value type " + std::to_string(rawType) + "; expected 0..12");
    const auto type = static_cast<GgufValueType>(rawType);
    if (type != GgufValueType::Array) return readScalar(r, type, key);
    GgufValue v;
    v.type = type;
    const auto rawElement = r.get<int32_t>("an array element type");
    if (!knownValueType(rawElement) || rawElement == static_cast<int32_t>(GgufValueType::Array))
        r.fail("metadata key '" + key + "' is an array of type " + std::to_string(rawElement) +
               "; expected a scalar or string type 0..8, 10..12");
    v.elementType = static_cast<GgufValueType>(rawElement);
    const auto count = r.get<uint64_t>("an array length");
    const int64_t elementBytes = v.elementType == GgufValueType::String ? 8 : scalarSize(v.elementType);
    r.checkCount(count, static_cast<uint64_t>(elementBytes), "the length of array '" + key + "'");
    r.chargeMemory(checkedMul<uint64_t>(count, sizeof(GgufValue), "GGUF array '" + key + "'"),
                   "array '" + key + "' of " + std::to_string(count) + " elements");
    // Grown as elements are read, never reserved from the declared count alone.
    v.elements.reserve(static_cast<size_t>(std::min<uint64_t>(count, 4096)));
    for (uint64_t i = 0; i < count; ++i) {
        v.elements.push_back(readScalar(r, v.elementType, key));
        if (v.elementType == GgufValueType::String) r.chargeMemory(v.elements.back().string.size(), "array '" + key + "'");
    }
    return v;
}

} // namespace

std::string ggufValueTypeName(GgufValueType type) {
    static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                                  "u64", "i64", "f64"};
    const auto i = static_cast<int32_t>(type);
    return i >= 0 && i <= 12 ? names[i] : "type " + std::to_string(i);
}

std::string ggmlTypeName(GgmlType type) {
    switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    }
    return "type " + std::to_string(static_cast<int32_t>(type));
}

int64_t ggmlTypeSize(GgmlType type) { return type == GgmlType::F32 ? 4 : 2; }

GgufValue GgufValue::u32(uint32_t v) { GgufValue r; r.type = GgufValueType::Uint32; r.integer = v; r.uinteger = v; return r; }
GgufValue GgufValue::i32(int32_t v) { GgufValue r; r.type = GgufValueType::Int32; r.integer = v; r.uinteger = static_cast<uint64_t>(v); return r; }
GgufValue GgufValue::u64(uint64_t v) { GgufValue r; r.type = GgufValueType::Uint64; r.uinteger = v; r.integer = static_cast<int64_t>(v); return r; }
GgufValue GgufValue::f32(float v) { GgufValue r; r.type = GgufValueType::Float32; r.real = v; return r; }
GgufValue GgufValue::boolValue(bool v) { GgufValue r; r.type = GgufValueType::Bool; r.boolean = v; return r; }
GgufValue GgufValue::str(std::string v) { GgufValue r; r.type = GgufValueType::String; r.string = std::move(v); return r; }

GgufValue GgufValue::strings(const std::vector<std::string>& v) {
    GgufValue r;
    r.type = GgufValueType::Array;
    r.elementType = GgufValueType::String;
    r.elements.reserve(v.size());
    for (const std::string& s : v) r.elements.push_back(str(s));
    return r;
}

GgufValue GgufValue::i32s(const std::vector<int32_t>& v) {
    GgufValue r;
    r.type = GgufValueType::Array;
    r.elementType = GgufValueType::Int32;
    for (int32_t x : v) r.elements.push_back(i32(x));
    return r;
}

GgufValue GgufValue::f32s(const std::vector<float>& v) {
    GgufValue r;
    r.type = GgufValueType::Array;
    r.elementType = GgufValueType::Float32;
    r.elements.reserve(v.size());
    for (float x : v) r.elements.push_back(f32(x));
    return r;
}

bool GgufValue::isInteger() const {
    switch (type) {
    case GgufValueType::Uint8: case GgufValueType::Int8: case GgufValueType::Uint16: case GgufValueType::Int16:
    case GgufValueType::Uint32: case GgufValueType::Int32: case GgufValueType::Uint64: case GgufValueType::Int64:
        return true;
    default: return false;
    }
}

int64_t GgufValue::asInteger(const std::string& what) const {
    if (!isInteger()) throw Error(what + " is a " + ggufValueTypeName(type) + "; expected an integer");
    return integer;
}

std::string GgufValue::describe(size_t maxElements) const {
    std::ostringstream s;
    switch (type) {
    case GgufValueType::Float32: case GgufValueType::Float64: s << real; break;
    case GgufValueType::Bool: s << (boolean ? "true" : "false"); break;
    case GgufValueType::String: {
        // Bounded and valid UTF-8 (string values are not checked when read: a vocabulary may
        // hold raw bytes), so that `npw info` and its --json can always print it.
        constexpr size_t kMaxShown = 256;
        std::string shown = string.size() > kMaxShown ? string.substr(0, kMaxShown) : string;
        s << '"' << utf8::toValidLossy(shown) << (string.size() > kMaxShown ? "…" : "") << '"';
        break;
    }
    case GgufValueType::Uint64: s << uinteger; break;
    case GgufValueType::Array: {
        s << ggufValueTypeName(elementType) << "[" << elements.size() << "] [";
        for (size_t i = 0; i < elements.size() && i < maxElements; ++i) s << (i ? ", " : "") << elements[i].describe();
        if (elements.size() > maxElements) s << ", …";
        s << "]";
        break;
    }
    default: s << integer;
    }
    return s.str();
}

int64_t GgufTensorInfo::elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

uint64_t GgufTensorInfo::bytes() const { return static_cast<uint64_t>(elements() * ggmlTypeSize(type)); }

void writeGguf(const std::string& path, const GgufMetadata& metadata, std::vector<GgufTensorToWrite> tensors,
               uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        throw Error("GGUF '" + path + "': alignment " + std::to_string(alignment) + " is not a power of two");
    std::set<std::string> keys;
    for (const auto& [key, value] : metadata) {
        if (!keys.insert(key).second) throw Error("GGUF '" + path + "': metadata key '" + key + "' is given twice");
        if (value.type == GgufValueType::Array && value.elementType == GgufValueType::Array)
            throw Error("GGUF '" + path + "': metadata key '" + key + "' is a nested array");
    }
    GgufMetadata kv = metadata;
    if (const auto it = std::find_if(kv.begin(), kv.end(), [](const auto& p) { return p.first == "general.alignment"; });
        it == kv.end())
        kv.insert(kv.begin() + (kv.empty() ? 0 : 1), {"general.alignment", GgufValue::u32(alignment)});
    else if (it->second.type != GgufValueType::Uint32 || it->second.integer != alignment)
        throw Error("GGUF '" + path + "': general.alignment is given as " + it->second.describe() + ", but the data is aligned to " +
                    std::to_string(alignment));

    std::set<std::string> names;
    uint64_t offset = 0;
    for (GgufTensorToWrite& t : tensors) {
        GgufTensorInfo& info = t.info;
        if (info.name.empty() || info.name.size() > kMaxNameBytes)
            throw Error("GGUF '" + path + "': tensor name '" + info.name + "' must be 1.." + std::to_string(kMaxNameBytes) +
                        " bytes long");
        if (!names.insert(info.name).second) throw Error("GGUF '" + path + "': tensor '" + info.name + "' is given twice");
        if (info.ne.empty() || info.ne.size() > kMaxDims)
            throw Error("GGUF '" + path + "': tensor '" + info.name + "' has " + std::to_string(info.ne.size()) +
                        " dimensions; GGUF allows 1..4");
        for (int64_t d : info.ne)
            if (d <= 0)
                throw Error("GGUF '" + path + "': tensor '" + info.name + "' has a dimension of " + std::to_string(d) +
                            "; ggml tensors need every dimension ≥ 1");
        info.offset = offset;
        offset = padTo(offset + info.bytes(), alignment);
    }

    writeFileAtomically(path, [&](std::ostream& out) {
        out.write(kMagic, 4);
        put<uint32_t>(out, kVersion);
        put<int64_t>(out, static_cast<int64_t>(tensors.size()));
        put<int64_t>(out, static_cast<int64_t>(kv.size()));
        for (const auto& [key, value] : kv) {
            putString(out, key);
            putValue(out, value);
        }
        for (const GgufTensorToWrite& t : tensors) {
            putString(out, t.info.name);
            put<uint32_t>(out, static_cast<uint32_t>(t.info.ne.size()));
            for (int64_t d : t.info.ne) put<int64_t>(out, d);
            put<int32_t>(out, static_cast<int32_t>(t.info.type));
            put<uint64_t>(out, t.info.offset);
        }
        static const char zeros[64] = {};
        auto pad = [&](uint64_t position) {
            const uint64_t target = padTo(position, alignment);
            for (uint64_t left = target - position; left > 0;) {
                const uint64_t n = std::min<uint64_t>(left, sizeof(zeros));
                out.write(zeros, static_cast<std::streamsize>(n));
                left -= n;
            }
            return target;
        };
        const std::streamoff headerEnd = out.tellp();
        if (headerEnd < 0) throw Error("GGUF '" + path + "': cannot tell the write position");
        const uint64_t dataStart = pad(static_cast<uint64_t>(headerEnd));
        for (const GgufTensorToWrite& t : tensors) {
            const std::streamoff before = out.tellp();
            t.writeData(out);
            const std::streamoff after = out.tellp();
            if (!out) throw Error("GGUF '" + path + "': writing tensor '" + t.info.name + "' failed (disk full?)");
            const auto written = static_cast<uint64_t>(after - before);
            if (written != t.info.bytes() || static_cast<uint64_t>(before) != dataStart + t.info.offset)
                throw Error("GGUF '" + path + "': tensor '" + t.info.name + "' wrote " + std::to_string(written) +
                            " bytes; expected " + std::to_string(t.info.bytes()) + " (" + ggmlTypeName(t.info.type) + ")");
            pad(static_cast<uint64_t>(after) - dataStart);
        }
    });
}

const GgufValue* GgufFile::find(const std::string& key) const {
    for (const auto& [k, v] : metadata)
        if (k == key) return &v;
    return nullptr;
}

const GgufValue& GgufFile::at(const std::string& key) const {
    if (const GgufValue* v = find(key)) return *v;
    throw Error("GGUF file '" + path + "': metadata key '" + key + "' is missing");
}

const GgufTensorInfo* GgufFile::findTensor(const std::string& name) const {
    for (const GgufTensorInfo& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

GgufFile readGgufFile(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error("cannot open GGUF file '" + path + "': " + ec.message());
    requireRegularFile(path, "GGUF file");  // a FIFO is refused, never waited on
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open GGUF file '" + path + "': " + std::strerror(errno));
    Reader r(in, path, size);
    GgufFile file;
    file.path = path;
    file.fileSize = size;

    char magic[4];
    r.bytes(magic, 4, "the magic");
    if (std::memcmp(magic, kMagic, 4) != 0)
        r.fail("not a GGUF file: the first 4 bytes are not \"GGUF\"");
    file.version = r.get<uint32_t>("the version");
    if (file.version != 2 && file.version != 3)
        r.fail("GGUF version " + std::to_string(file.version) + " is not supported; expected 2 or 3");
    const auto nTensors = r.get<int64_t>("the tensor count");
    const auto nKv = r.get<int64_t>("the metadata count");
    if (nTensors < 0 || nKv < 0) r.fail("negative tensor or metadata count");
    r.checkCount(static_cast<uint64_t>(nKv), 8 + 4, "the metadata count");
    std::set<std::string> keys;
    for (int64_t i = 0; i < nKv; ++i) {
        std::string key = r.string("metadata key " + std::to_string(i));
        if (const size_t bad = utf8::findInvalid(key); bad != std::string::npos)
            r.fail("metadata key " + std::to_string(i) + " is not valid UTF-8 (bad byte at offset " + std::to_string(bad) +
                   " of the key)");
        if (!keys.insert(key).second) r.fail("metadata key '" + key + "' appears twice");
        r.chargeMemory(sizeof(std::pair<std::string, GgufValue>) + 2 * key.size(), "metadata key '" + key + "'");
        GgufValue value = readValue(r, key);
        file.metadata.emplace_back(std::move(key), std::move(value));
    }
    if (const GgufValue* a = file.find("general.alignment")) {
        if (a->type != GgufValueType::Uint32)
            r.fail("general.alignment is a " + ggufValueTypeName(a->type) + "; expected u32");
        if (a->integer == 0 || (a->integer & (a->integer - 1)) != 0)
            r.fail("general.alignment is " + std::to_string(a->integer) + "; expected a power of two");
        file.alignment = static_cast<uint32_t>(a->integer);
    }
    r.checkCount(static_cast<uint64_t>(nTensors), 8 + 4 + 8 + 4 + 8, "the tensor count");
    std::set<std::string> names;
    for (int64_t i = 0; i < nTensors; ++i) {
        GgufTensorInfo t;
        t.name = r.string("tensor name " + std::to_string(i));
        if (t.name.size() > kMaxNameBytes)
            r.fail("tensor name '" + t.name.substr(0, kMaxNameBytes) + "…' is " + std::to_string(t.name.size()) +
                   " bytes; at most 63 allowed");
        if (const size_t bad = utf8::findInvalid(t.name); bad != std::string::npos)
            r.fail("tensor name " + std::to_string(i) + " is not valid UTF-8 (bad byte at offset " + std::to_string(bad) + ")");
        if (!names.insert(t.name).second) r.fail("tensor '" + t.name + "' appears twice");
        const auto nDims = r.get<uint32_t>("a dimension count");
        if (nDims == 0 || nDims > kMaxDims)
            r.fail("tensor '" + t.name + "' has " + std::to_string(nDims) + " dimensions; expected 1..4");
        int64_t elements = 1;
        for (uint32_t d = 0; d < nDims; ++d) {
            const auto n = r.get<int64_t>("a dimension");
            if (n <= 0 || elements > INT64_MAX / 4 / n)
                r.fail("tensor '" + t.name + "' has dimension " + std::to_string(d) + " = " + std::to_string(n) +
                       "; expected a positive size");
            elements *= n;
            t.ne.push_back(n);
        }
        const auto type = r.get<int32_t>("a tensor type");
        if (type != 0 && type != 1 && type != 30)
            r.fail("tensor '" + t.name + "' has ggml type " + std::to_string(type) +
                   "; npw reads F32 (0), F16 (1) and BF16 (30)");
        t.type = static_cast<GgmlType>(type);
        t.offset = r.get<uint64_t>("a tensor offset");
        if (t.offset % file.alignment != 0)
            r.fail("tensor '" + t.name + "' starts at data offset " + std::to_string(t.offset) +
                   ", not a multiple of the alignment " + std::to_string(file.alignment));
        file.tensors.push_back(std::move(t));
    }
    file.dataOffset = padTo(r.position(), file.alignment);
    // The data section starts after the header's padding and must exist when tensors do; then
    // every tensor's [offset, offset + bytes) must lie inside it.
    if (!file.tensors.empty() && file.dataOffset > size)
        throw Error("GGUF file '" + path + "': the data section would start at byte " + std::to_string(file.dataOffset) +
                    " (after the header, padded to " + std::to_string(file.alignment) + "), past the end of the " +
                    std::to_string(size) + "-byte file; the file is truncated");
    const uint64_t dataBytes = file.dataOffset <= size ? size - file.dataOffset : 0;
    std::vector<const GgufTensorInfo*> byOffset;
    for (const GgufTensorInfo& t : file.tensors) {
        if (!rangeInside(t.offset, t.bytes(), dataBytes))
            throw Error("GGUF file '" + path + "': tensor '" + t.name + "' data (" + std::to_string(t.bytes()) +
                        " bytes at data offset " + std::to_string(t.offset) + ") is not within the file bounds (a " +
                        std::to_string(dataBytes) + "-byte data section); the file is corrupted or incomplete");
        byOffset.push_back(&t);
    }
    std::sort(byOffset.begin(), byOffset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < byOffset.size(); ++i)
        if (byOffset[i - 1]->offset + byOffset[i - 1]->bytes() > byOffset[i]->offset)
            throw Error("GGUF file '" + path + "': tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name +
                        "' overlap");
    return file;
}

std::string readGgufTensorBytes(const GgufFile& file, const GgufTensorInfo& tensor) {
    requireRegularFile(file.path, "GGUF file");
    std::ifstream in(file.path, std::ios::binary);
    if (!in) throw Error("cannot open GGUF file '" + file.path + "': " + std::strerror(errno));
    in.seekg(static_cast<std::streamoff>(file.dataOffset + tensor.offset));
    std::string bytes(tensor.bytes(), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in) throw Error("GGUF file '" + file.path + "': cannot read tensor '" + tensor.name + "'");
    return bytes;
}

} // namespace npw
