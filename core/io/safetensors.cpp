#include "core/io/safetensors.h"

#include "core/io/mapped_file.h"
#include "core/io/shape_text.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"
#include "core/text/utf8.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <unistd.h>
#include <limits>
#include <set>
#include <string_view>
#include <tuple>


// The format is little-endian and tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npw reads safetensors on little-endian hosts only");

namespace npw {

using nlohmann::json;

namespace {

// The LibTorch type of each safetensors dtype (the names and element sizes: safetensors_header.h).
struct DtypeSpec {
    const char* name;
    c10::ScalarType torchType;  // Undefined where LibTorch 1.13 has no such type
    uint64_t bytes() const { return safeTensorsElementBytes(name); }
};

const DtypeSpec kDtypes[] = {
    {"BOOL", at::kBool},     {"U8", at::kByte},        {"I8", at::kChar},
    {"F8_E5M2", at::ScalarType::Undefined}, {"F8_E4M3", at::ScalarType::Undefined},
    {"I16", at::kShort},     {"U16", at::ScalarType::Undefined},
    {"F16", at::kHalf},      {"BF16", at::kBFloat16},
    {"I32", at::kInt},       {"U32", at::ScalarType::Undefined}, {"F32", at::kFloat},
    {"F64", at::kDouble},    {"I64", at::kLong},       {"U64", at::ScalarType::Undefined},
};

const DtypeSpec* findDtype(const std::string& name) {
    for (const DtypeSpec& spec : kDtypes)
        if (name == spec.name) return &spec;
    return nullptr;
}

const DtypeSpec* findDtype(c10::ScalarType type) {
    for (const DtypeSpec& spec : kDtypes)
        if (spec.torchType == type) return &spec;
    return nullptr;
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("safetensors file '" + path + "': " + problem);
}

} // namespace

std::shared_ptr<SafeTensorsFile> SafeTensorsFile::open(const std::string& path) {
    std::shared_ptr<SafeTensorsFile> file(new SafeTensorsFile());
    file->read(path);
    return file;
}

SafeTensorsFile::~SafeTensorsFile() = default;

at::Tensor SafeTensorsFile::load(const std::string& name) const {
    const TensorInfo& tensorInfo = info(name);
    const DtypeSpec* spec = findDtype(tensorInfo.dtype);
    if (spec->torchType == at::ScalarType::Undefined)
        fail(path_, "tensor '" + name + "' has dtype " + tensorInfo.dtype + ", which LibTorch 1.13 cannot hold");
    // A copy rather than a view of the mapping: the data may be unaligned, and the tensor
    // must outlive this file.
    at::Tensor tensor = at::empty(tensorInfo.shape, at::TensorOptions().dtype(spec->torchType));
    if (tensorInfo.end > tensorInfo.begin)
        std::memcpy(tensor.data_ptr(), data_ + tensorInfo.begin, tensorInfo.end - tensorInfo.begin);
    return tensor;
}

at::Tensor SafeTensorsFile::view(const std::string& name) const {
    const TensorInfo& tensorInfo = info(name);
    const DtypeSpec* spec = findDtype(tensorInfo.dtype);
    if (spec->torchType == at::ScalarType::Undefined)
        fail(path_, "tensor '" + name + "' has dtype " + tensorInfo.dtype + ", which LibTorch 1.13 cannot hold");
    const uint8_t* begin = data_ + tensorInfo.begin;
    if (reinterpret_cast<uintptr_t>(begin) % spec->bytes() != 0)
        fail(path_, "tensor '" + name + "' is not aligned to its " + std::to_string(spec->bytes()) +
                        "-byte elements in the file (header not padded to 8 bytes?); it can only be copied (load)");
    std::shared_ptr<const SafeTensorsFile> owner = shared_from_this();
    // The mapping is read-only: a write through this view faults instead of changing the file.
    return at::from_blob(const_cast<uint8_t*>(begin), tensorInfo.shape, [owner](void*) {},
                         at::TensorOptions().dtype(spec->torchType));
}

bool SafeTensorsFile::canView(const std::string& name) const {
    const TensorInfo& tensorInfo = info(name);
    const DtypeSpec* spec = findDtype(tensorInfo.dtype);
    return spec->torchType != at::ScalarType::Undefined &&
           reinterpret_cast<uintptr_t>(data_ + tensorInfo.begin) % spec->bytes() == 0;
}

at::Tensor SafeTensorsFile::loadFloat(const std::string& name) const {
    const std::string& dtype = info(name).dtype;
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16" && dtype != "F64")
        fail(path_, "tensor '" + name + "' has dtype " + dtype + "; a floating-point tensor (F32, F16, BF16, F64) was expected");
    return load(name).to(at::kFloat);
}

namespace {

// Ordered like the reference writer's "dtype descending, then name": largest elements first,
// so with the header padded to 8 bytes every tensor is aligned to its element size. Returns the
// header text (padded) and each entry's byte offset in the data buffer, in the input's order.
std::pair<std::string, std::vector<uint64_t>> planLayout(const std::string& path,
                                                         const std::vector<SafeTensorsEntry>& entries,
                                                         const std::map<std::string, std::string>& metadata) {
    std::vector<size_t> order(entries.size());
    std::set<std::string> seen;
    for (size_t i = 0; i < entries.size(); ++i) {
        order[i] = i;
        const SafeTensorsEntry& e = entries[i];
        if (e.name == kSafeTensorsMetadataKey) fail(path, "cannot write a tensor named '__metadata__' (the name is reserved)");
        if (!seen.insert(e.name).second) fail(path, "cannot write two tensors named '" + e.name + "'");
        const DtypeSpec* dtype = findDtype(e.dtype);
        if (!dtype)
            fail(path, "cannot write tensor '" + e.name + "': dtype " + std::string(c10::toString(e.dtype)) +
                           " has no safetensors equivalent");
        for (int64_t size : e.shape)
            if (size < 0) fail(path, "cannot write tensor '" + e.name + "': negative dimension in " + formatShape(e.shape));
    }
    auto bytesOf = [](const SafeTensorsEntry& e) { return findDtype(e.dtype)->bytes(); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (bytesOf(entries[a]) != bytesOf(entries[b])) return bytesOf(entries[a]) > bytesOf(entries[b]);
        return entries[a].name < entries[b].name;
    });
    json header = json::object();
    std::vector<uint64_t> offsets(entries.size());
    uint64_t offset = 0;
    for (size_t i : order) {
        const SafeTensorsEntry& e = entries[i];
        uint64_t bytes = bytesOf(e);
        for (int64_t size : e.shape) bytes *= static_cast<uint64_t>(size);
        header[e.name] = {{"dtype", findDtype(e.dtype)->name}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
        offsets[i] = offset;
        offset += bytes;
    }
    if (!metadata.empty()) header[kSafeTensorsMetadataKey] = metadata;
    std::string headerText;
    try {
        headerText = json_fields::dumpJson(header, -1, "the safetensors header");
    } catch (const json::type_error& e) {
        fail(path, "a tensor name or metadata string is not valid UTF-8 (" + std::string(e.what()) + ")");
    }
    headerText.append((8 - headerText.size() % 8) % 8, ' ');
    return {headerText, offsets};
}

uint64_t entryBytes(const SafeTensorsEntry& e) {
    uint64_t bytes = findDtype(e.dtype)->bytes();
    for (int64_t size : e.shape) bytes *= static_cast<uint64_t>(size);
    return bytes;
}

} // namespace

void writeSafeTensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    std::vector<SafeTensorsEntry> entries;
    std::vector<at::Tensor> data;  // contiguous, on the CPU
    for (const auto& [name, tensor] : tensors) {
        if (!tensor.defined()) fail(path, "cannot write tensor '" + name + "': it is undefined");
        entries.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
        data.push_back(tensor.detach().cpu().contiguous());
    }
    // Not a structured binding: lambdas cannot capture those before C++20 (clang refuses).
    const std::pair<std::string, std::vector<uint64_t>> layout = planLayout(path, entries, metadata);
    const std::string& headerText = layout.first;
    const std::vector<uint64_t>& offsets = layout.second;
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });

    writeFileAtomically(path, [&](std::ostream& out) {
        uint64_t headerBytes = headerText.size();
        out.write(reinterpret_cast<const char*>(&headerBytes), 8);
        out.write(headerText.data(), static_cast<std::streamsize>(headerText.size()));
        for (size_t i : order)
            out.write(static_cast<const char*>(data[i].data_ptr()), static_cast<std::streamsize>(entryBytes(entries[i])));
    });
}

SafeTensorsStreamWriter::SafeTensorsStreamWriter(const std::string& path, const std::vector<SafeTensorsEntry>& entries,
                                                 const std::map<std::string, std::string>& metadata)
    : path_(path) {
    auto [headerText, offsets] = planLayout(path, entries, metadata);
    dataStart_ = 8 + headerText.size();
    uint64_t total = dataStart_;
    for (size_t i = 0; i < entries.size(); ++i) {
        slots_[entries[i].name] = {entries[i], offsets[i], false};
        total += entryBytes(entries[i]);
    }
    runOutputGuard().check(path, "the output");
    removeStaleTemporaries(path);  // what a killed writer of this file left
    tempPath_ = temporaryPathBeside(path, "tmp");
    fd_ = ::open(tempPath_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(path, "cannot create the temporary file '" + tempPath_ + "': " + std::strerror(errno));
    try {
        // The data region is sized (sparse) up front, so a reader of the finished file sees
        // exactly the layout planned here; every tensor is then written in place.
        if (::ftruncate(fd_, static_cast<off_t>(total)) != 0)
            fail(path, "cannot size the temporary file to " + std::to_string(total) + " bytes: " + std::strerror(errno));
        const uint64_t headerBytes = headerText.size();
        writeAt(0, &headerBytes, 8);
        writeAt(8, headerText.data(), headerText.size());
    } catch (...) {
        discard();
        throw;
    }
}

SafeTensorsStreamWriter::~SafeTensorsStreamWriter() { discard(); }

void SafeTensorsStreamWriter::discard() noexcept {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
        ::unlink(tempPath_.c_str());
    }
}

void SafeTensorsStreamWriter::writeAt(uint64_t offset, const void* data, uint64_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(path_, std::string("writing '") + tempPath_ + "' failed: " + std::strerror(n < 0 ? errno : ENOSPC));
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
}

void SafeTensorsStreamWriter::write(const std::string& name, const at::Tensor& tensor) {
    if (fd_ < 0) fail(path_, "cannot write tensor '" + name + "': the writer was committed or discarded");
    auto it = slots_.find(name);
    if (it == slots_.end()) fail(path_, "cannot write tensor '" + name + "': it is not in the planned header");
    Slot& slot = it->second;
    if (!tensor.defined() || tensor.scalar_type() != slot.entry.dtype || tensor.sizes().vec() != slot.entry.shape)
        fail(path_, "tensor '" + name + "': planned " + std::string(c10::toString(slot.entry.dtype)) + " " +
                        formatShape(slot.entry.shape) + ", got " +
                        (tensor.defined() ? std::string(c10::toString(tensor.scalar_type())) + " " + formatShape(tensor.sizes().vec())
                                          : std::string("an undefined tensor")));
    const at::Tensor data = tensor.detach().cpu().contiguous();
    writeAt(dataStart_ + slot.offset, data.data_ptr(), entryBytes(slot.entry));
    slot.written = true;
}

void SafeTensorsStreamWriter::commit() {
    if (fd_ < 0) fail(path_, "cannot commit: the writer was committed or discarded");
    for (const auto& [name, slot] : slots_)
        if (!slot.written) fail(path_, "cannot commit: tensor '" + name + "' was never written");
    try {
        if (::fsync(fd_) != 0) fail(path_, std::string("fsync of '") + tempPath_ + "' failed: " + std::strerror(errno));
        if (::close(fd_) != 0) {
            fd_ = -1;
            ::unlink(tempPath_.c_str());
            fail(path_, std::string("closing '") + tempPath_ + "' failed: " + std::strerror(errno));
        }
        fd_ = -1;
        testStallPoint("file-written");
        if (::rename(tempPath_.c_str(), path_.c_str()) != 0) {
            const int e = errno;
            ::unlink(tempPath_.c_str());
            fail(path_, "cannot move '" + tempPath_ + "' into place: " + std::strerror(e));
        }
    } catch (...) {
        discard();
        throw;
    }
}

} // namespace npw
