#include "core/io/torch_checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "core/io/shape_text.h"
#include "core/util/error.h"

// Storages hold the saving machine's bytes, little-endian on every platform torch supports
// (a `byteorder` record says otherwise when not); npw copies them byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npw reads PyTorch checkpoints on little-endian hosts only");

namespace npw {

namespace {

// The file format versions PyTorch's own reader (caffe2 inline_container) accepts; torch 1.13 writes 3.
constexpr int64_t kMinFormatVersion = 1;
constexpr int64_t kMaxFormatVersion = 10;
// A view with zero strides (torch.save keeps expanded tensors as they are) may have more
// elements than its storage; materialising it allocates them all, so hostile sizes are refused.
constexpr int64_t kMaxBroadcastElements = int64_t(1) << 30;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("PyTorch checkpoint '" + path + "': " + problem);
}

[[noreturn]] void failTensor(const std::string& path, const std::string& name, const std::string& problem) {
    fail(path, "tensor '" + name + "': " + problem);
}

std::string joinKeys(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "/" + key;
}

std::string keyLabel(const PickleValue& key) {
    return key.is(PickleKind::String) ? key.text : "[" + describePickleValue(key) + "]";
}

std::string keyList(const PickleValue& dict) {
    constexpr size_t kShown = 12;
    std::string list;
    for (size_t i = 0; i < dict.entries.size() && i < kShown; ++i)
        list += (i ? ", " : "") + keyLabel(*dict.entries[i].key);
    if (dict.entries.size() > kShown) list += ", ... (" + std::to_string(dict.entries.size()) + " in all)";
    return list.empty() ? "none" : list;
}

// torch.save puts every record under one directory: the file's stem, or "archive".
std::string recordPrefix(const ZipArchive& archive) {
    const std::vector<ZipEntry>& entries = archive.entries();
    if (entries.empty()) fail(archive.path(), "the zip archive has no entries");
    const std::string& first = entries.front().name;
    const size_t slash = first.find('/');
    if (slash == std::string::npos || slash == 0)
        fail(archive.path(),
             "the first record '" + first +
                 "' is not inside a directory (torch.save puts every record under one, e.g. 'archive/')");
    const std::string prefix = first.substr(0, slash + 1);
    for (const ZipEntry& entry : entries)
        if (entry.name.compare(0, prefix.size(), prefix) != 0)
            fail(archive.path(),
                 "the record '" + entry.name + "' is outside the directory '" + prefix + "' of the first record");
    return first.substr(0, slash);
}

void checkVersion(const ZipArchive& archive, const std::string& prefix) {
    const ZipEntry* record = archive.find(prefix + "/version");
    if (!record) record = archive.find(prefix + "/.data/version");
    if (!record)
        fail(archive.path(), "no version record ('" + prefix + "/version' or '" + prefix +
                                 "/.data/version'): not a torch.save checkpoint");
    std::string_view text = archive.data(*record);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    int64_t version = 0;
    bool numeric = !text.empty() && text.size() <= 4;
    for (char c : text) {
        numeric &= c >= '0' && c <= '9';
        version = version * 10 + (c - '0');
    }
    if (!numeric || version < kMinFormatVersion || version > kMaxFormatVersion)
        fail(archive.path(), "the record '" + record->name + "' says format version '" +
                                 std::string(text.substr(0, 16)) + "'; versions " + std::to_string(kMinFormatVersion) +
                                 " to " + std::to_string(kMaxFormatVersion) + " are read");
}

void checkByteOrder(const ZipArchive& archive, const std::string& prefix) {
    // Optional (torch 1.13 writes none); newer torch writes "little" or "big".
    const ZipEntry* record = archive.find(prefix + "/byteorder");
    if (record && archive.data(*record) != "little")
        fail(archive.path(), "the record '" + record->name + "' says the storages are '" +
                                 std::string(archive.data(*record).substr(0, 16)) + "', npw reads 'little' only");
}

at::ScalarType scalarTypeOf(const std::string& dtype) {
    static const std::pair<const char*, at::ScalarType> kTypes[] = {
        {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},    {"F64", at::kDouble},
        {"I64", at::kLong},  {"I32", at::kInt},   {"I16", at::kShort},        {"I8", at::kChar},
        {"U8", at::kByte},   {"BOOL", at::kBool}, {"C64", at::kComplexFloat}, {"C128", at::kComplexDouble},
    };
    for (const auto& [name, type] : kTypes)
        if (dtype == name) return type;
    throw Error("internal: no LibTorch type for storage dtype " + dtype);
}

// Checks the tensor's storage record and that the view stays inside it.
TorchTensorInfo validatedTensor(const std::string& path, const ZipArchive& archive, const std::string& prefix,
                                const std::string& name, const PickleTensorRef& tensor) {
    const PickleStorageRef& storage = *tensor.storage->storage;
    TorchTensorInfo info;
    info.dtype = storage.type->dtype;
    info.shape = tensor.size;
    info.stride = tensor.stride;
    info.storageOffset = tensor.storageOffset;
    info.storageKey = storage.key;
    info.storageNumel = storage.numel;
    info.parameter = tensor.parameter;

    const std::string recordName = prefix + "/data/" + storage.key;
    const ZipEntry* record = archive.find(recordName);
    if (!record) failTensor(path, name, "its storage record '" + recordName + "' is missing");
    uint64_t expectedBytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(storage.numel), storage.type->elementBytes, &expectedBytes) ||
        record->size != expectedBytes)
        failTensor(path, name,
                   "its storage '" + storage.key + "' (" + storage.type->className + " of " +
                       std::to_string(storage.numel) + " elements) needs " + std::to_string(storage.numel) + " × " +
                       std::to_string(storage.type->elementBytes) + " bytes, but the record '" + recordName +
                       "' holds " + std::to_string(record->size));

    const std::string view = "shape " + formatShape(info.shape) + " with stride " + formatShape(info.stride) +
                             " at storage offset " + std::to_string(info.storageOffset);
    bool empty = false;
    for (int64_t size : info.shape) empty |= size == 0;
    if (empty) {
        if (info.storageOffset > storage.numel)
            failTensor(path, name,
                       view + " starts past the end of its storage '" + storage.key + "' (" +
                           std::to_string(storage.numel) + " elements)");
        return info;
    }
    int64_t numel = 1, last = info.storageOffset, reach = 0;
    bool overflow = false;
    for (size_t i = 0; i < info.shape.size(); ++i) {
        overflow |= __builtin_mul_overflow(numel, info.shape[i], &numel);
        overflow |= __builtin_mul_overflow(info.shape[i] - 1, info.stride[i], &reach);
        overflow |= __builtin_add_overflow(last, reach, &last);
    }
    if (overflow) failTensor(path, name, view + " overflows 64 bits");
    if (last >= storage.numel)
        failTensor(path, name,
                   view + " reaches element " + std::to_string(last) + ", but its storage '" + storage.key + "' has " +
                       std::to_string(storage.numel) + " elements");
    if (numel > storage.numel && numel > kMaxBroadcastElements)
        failTensor(path, name,
                   view + " has " + std::to_string(numel) + " elements from a storage of " +
                       std::to_string(storage.numel) + "; refusing to expand it");
    return info;
}

}  // namespace

std::shared_ptr<TorchCheckpoint> TorchCheckpoint::open(const std::string& path, const TorchCheckpointOptions& options) {
    std::shared_ptr<TorchCheckpoint> checkpoint(new TorchCheckpoint());
    checkpoint->path_ = path;
    checkpoint->verifyStorageCrc32_ = options.verifyStorageCrc32;
    checkpoint->archive_ = ZipArchive::open(path);
    const ZipArchive& archive = *checkpoint->archive_;
    const std::string prefix = recordPrefix(archive);
    checkpoint->prefix_ = prefix;
    checkVersion(archive, prefix);
    checkByteOrder(archive, prefix);

    const std::string pickleName = prefix + "/data.pkl";
    const ZipEntry* pickle = archive.find(pickleName);
    if (!pickle) fail(path, "no record '" + pickleName + "': not a torch.save checkpoint");
    archive.verifyCrc32(*pickle);  // small, and everything else is found through it
    checkpoint->document_ = unpickle(archive.data(*pickle), path + ": " + pickleName, options.pickleLimits);

    const PickleValue& root = checkpoint->document_->root();
    if (!root.is(PickleKind::Dict))
        fail(path, "the pickle holds " + describePickleValue(root) + ", not a dict: no state dict to read");

    // The key path to the state dict; what sits beside it on the way goes to the summary.
    std::vector<std::string> keys;
    if (options.stateDictPath) {
        const std::string& wanted = *options.stateDictPath;
        for (size_t begin = 0; !wanted.empty() && begin <= wanted.size();) {
            const size_t end = std::min(wanted.find('/', begin), wanted.size());
            if (end == begin) fail(path, "the state dict path '" + wanted + "' has an empty key");
            keys.push_back(wanted.substr(begin, end - begin));
            begin = end + 1;
        }
    } else if (const PickleValue* model = root.get("model"); model && model->is(PickleKind::Dict)) {
        keys.emplace_back("model");
    }
    const PickleValue* stateDict = &root;
    std::string walked;
    for (const std::string& key : keys) {
        for (const PickleDictEntry& entry : stateDict->entries)
            if (!(entry.key->is(PickleKind::String) && entry.key->text == key))
                checkpoint->summary_.push_back(joinKeys(walked, keyLabel(*entry.key)) + ": " +
                                               describePickleValue(*entry.value));
        const PickleValue* next = stateDict->get(key);
        if (!next)
            fail(path, "no key '" + key + "' in " + (walked.empty() ? "the root dict" : "'" + walked + "'") +
                           " (its keys: " + keyList(*stateDict) + ")");
        walked = joinKeys(walked, key);
        if (!next->is(PickleKind::Dict))
            fail(path, "'" + walked + "' holds " + describePickleValue(*next) + ", not a state dict");
        stateDict = next;
    }
    checkpoint->stateDictPath_ = walked;

    for (const PickleDictEntry& entry : stateDict->entries) {
        if (!entry.key->is(PickleKind::String) || !entry.value->is(PickleKind::Tensor)) {
            checkpoint->summary_.push_back(joinKeys(walked, keyLabel(*entry.key)) + ": " +
                                           describePickleValue(*entry.value));
            continue;
        }
        const std::string& name = entry.key->text;
        checkpoint->tensors_.emplace(name, validatedTensor(path, archive, prefix, name, *entry.value->tensor));
        checkpoint->names_.push_back(name);
    }
    if (checkpoint->names_.empty())
        fail(path, "no tensors in the state dict at " +
                       (walked.empty() ? std::string("the root") : "'" + walked + "'") +
                       " (its keys: " + keyList(*stateDict) + "); name where the state dict is");
    return checkpoint;
}

const TorchTensorInfo& TorchCheckpoint::info(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
        fail(path_, "no tensor named '" + name + "' in the state dict" +
                        (stateDictPath_.empty() ? std::string() : " at '" + stateDictPath_ + "'"));
    return it->second;
}

at::Tensor TorchCheckpoint::load(const std::string& name) const {
    const TorchTensorInfo& tensor = info(name);
    const at::ScalarType type = scalarTypeOf(tensor.dtype);
    const ZipEntry& record = archive_->entry(prefix_ + "/data/" + tensor.storageKey);
    if (verifyStorageCrc32_) archive_->verifyCrc32(record);
    const auto options = at::TensorOptions().dtype(type);
    for (int64_t size : tensor.shape)
        if (size == 0) return at::empty(tensor.shape, options);

    // Copy only the part of the storage the view touches (checked inside it at open()); a
    // copy rather than a view of the mapping: the bytes may be unaligned and the tensor
    // must outlive this file.
    int64_t last = tensor.storageOffset;
    for (size_t i = 0; i < tensor.shape.size(); ++i) last += (tensor.shape[i] - 1) * tensor.stride[i];
    const int64_t span = last - tensor.storageOffset + 1;
    const size_t elementBytes = c10::elementSize(type);
    at::Tensor flat = at::empty({span}, options);
    const std::string_view bytes = archive_->data(record);
    std::memcpy(flat.data_ptr(), bytes.data() + static_cast<size_t>(tensor.storageOffset) * elementBytes,
                static_cast<size_t>(span) * elementBytes);
    if (type == at::kBool) {
        // Any byte but 0 and 1 in a bool tensor is undefined behaviour in LibTorch's kernels.
        const auto* raw = static_cast<const uint8_t*>(flat.data_ptr());
        for (int64_t i = 0; i < span; ++i)
            if (raw[i] > 1)
                failTensor(path_, name,
                           "bool storage byte " + std::to_string(i) + " is " + std::to_string(raw[i]) + ", not 0 or 1");
    }
    at::Tensor view = flat.as_strided(tensor.shape, tensor.stride);
    return view.is_contiguous() ? view : view.contiguous();
}

bool TorchCheckpoint::canView(const std::string& name) const {
    const TorchTensorInfo& tensor = info(name);
    if (tensor.dtype != "F32" && tensor.dtype != "F16" && tensor.dtype != "BF16") return false;
    int64_t expected = 1;  // row-major strides: the view's elements are one run of the storage
    for (size_t i = tensor.shape.size(); i-- > 0;) {
        if (tensor.shape[i] == 0) return false;  // nothing to map (load() makes the empty tensor)
        if (tensor.shape[i] != 1 && tensor.stride[i] != expected) return false;
        expected *= tensor.shape[i];
    }
    const size_t elementBytes = c10::elementSize(scalarTypeOf(tensor.dtype));
    const std::string_view bytes = archive_->data(prefix_ + "/data/" + tensor.storageKey);
    const uintptr_t address = reinterpret_cast<uintptr_t>(bytes.data()) + static_cast<uintptr_t>(tensor.storageOffset) * elementBytes;
    return address % elementBytes == 0;
}

at::Tensor TorchCheckpoint::view(const std::string& name) const {
    if (!canView(name))
        failTensor(path_, name, "cannot be viewed in place (not an F32/F16/BF16 tensor stored contiguously at an "
                                "aligned address); it can only be copied");
    const TorchTensorInfo& tensor = info(name);
    const at::ScalarType type = scalarTypeOf(tensor.dtype);
    const ZipEntry& record = archive_->entry(prefix_ + "/data/" + tensor.storageKey);
    if (verifyStorageCrc32_) archive_->verifyCrc32(record);
    const char* begin = archive_->data(record).data() + static_cast<size_t>(tensor.storageOffset) * c10::elementSize(type);
    std::shared_ptr<ZipArchive> owner = archive_;  // the mapping lives as long as any view of it
    return at::from_blob(const_cast<char*>(begin), tensor.shape, [owner](void*) {}, at::TensorOptions().dtype(type));
}

at::Tensor TorchCheckpoint::loadFloat(const std::string& name) const {
    const std::string& dtype = info(name).dtype;
    // Weights are floating point: integer storages would be converted into a model that runs
    // and says nothing (a perplexity of null, a generation of zeros), so they are refused, as
    // the safetensors reader refuses them.
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16" && dtype != "F64")
        failTensor(path_, name, "has dtype " + dtype + "; a floating-point tensor (F32, F16, BF16, F64) was expected");
    return load(name).to(at::kFloat);
}

}  // namespace npw
