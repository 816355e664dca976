#pragma once
// The inert value graph the safe unpickler (core/io/pickle.h) builds: plain data, with
// nothing in it that could import, call or construct what a pickle names.
// No torch and no Qt here.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace npw {

enum class PickleKind {
    None,
    Bool,
    Int,
    BigInt,
    Float,
    String,
    Bytes,
    Tuple,
    List,
    Dict,
    Set,
    Global,   // a (module, name) reference that was never imported
    Storage,  // a torch storage named by BINPERSID: bytes in the archive's data/<key>
    Tensor,   // a tensor view over a storage (from torch._utils._rebuild_tensor_v2)
    Object,   // an inert placeholder for a call or an instance npw does not interpret
};

// The element types of torch.<X>Storage classes (torch 1.13 and later pickle typed storages).
struct TorchStorageType {
    const char* className;  // "FloatStorage"
    const char* dtype;      // safetensors spelling: "F32", "F16", "BF16", "F64", "I64", ...
    uint64_t elementBytes;
};
// nullptr for unknown names and for the quantized storages (they need _rebuild_qtensor).
const TorchStorageType* findTorchStorageType(std::string_view className);

struct PickleValue;

struct PickleDictEntry {
    const PickleValue* key;
    const PickleValue* value;
};

struct PickleStorageRef {
    const TorchStorageType* type = nullptr;
    std::string key;       // the archive record <prefix>/data/<key>
    std::string location;  // "cpu", "cuda:0", ...: where it lived, irrelevant to reading
    int64_t numel = 0;     // elements; the record must hold numel × elementBytes bytes
};

struct PickleTensorRef {
    const PickleValue* storage = nullptr;  // kind Storage; shared by views of one storage
    int64_t storageOffset = 0;             // in elements
    std::vector<int64_t> size, stride;     // in elements, same length, all ≥ 0
    bool requiresGrad = false;
    bool parameter = false;  // came through torch._utils._rebuild_parameter
};

// One value. Which fields mean something depends on `kind`; the rest stay empty. Values are
// shared where the pickle shares them (memo references), so walk the graph with a bound:
// a hostile pickle can even make a list contain itself.
struct PickleValue {
    PickleKind kind = PickleKind::None;
    bool boolean = false;                   // Bool
    int64_t integer = 0;                    // Int
    double real = 0;                        // Float
    std::string text;                       // String (valid UTF-8), Bytes, BigInt (little-endian two's complement)
    std::string module, name;               // Global; Object: its callable or class
    std::vector<const PickleValue*> items;  // Tuple, List, Set; Object: what APPEND(S) gave it
    std::vector<PickleDictEntry> entries;   // Dict (keys unique, in insertion order); Object: what SETITEM(S) gave it
    bool ordered = false;                   // Dict: a collections.OrderedDict
    bool instantiated = false;              // Object: NEWOBJ (an instance) rather than REDUCE (a call)
    const PickleValue* args = nullptr;      // Object: its argument tuple
    const PickleValue* state = nullptr;     // Object, Dict: what BUILD gave it; nullptr when nothing
    uint32_t tupleNesting = 0;              // Tuple: 1 + the deepest tuple inside it (bounded by the limits)
    std::unique_ptr<PickleStorageRef> storage;  // Storage
    std::unique_ptr<PickleTensorRef> tensor;    // Tensor

    bool is(PickleKind k) const { return kind == k; }
    std::string qualifiedName() const { return module + "." + name; }  // Global, Object
    // Dict: the value under a string key, nullptr when absent or not a dict.
    const PickleValue* get(std::string_view key) const;
};

// One line, without descending: "int 123", "str 'GPT-B'", "OrderedDict (3 entries)",
// "tensor F32 [4, 3]", "argparse.Namespace (inert placeholder)",
// "posix.system(...) (inert placeholder, never called)".
std::string describePickleValue(const PickleValue& value);
const char* pickleKindName(PickleKind kind);
// Text from a pickle, safe to put in a message: in single quotes, control bytes as \xNN,
// cut after 60 characters (a hostile string may be megabytes of anything).
std::string quotedPickleText(std::string_view text);

}  // namespace npw
