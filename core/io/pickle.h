#pragma once
// A safe unpickler for the data.pkl of PyTorch checkpoints (torch.save). It builds an inert
// graph of values and never imports, calls or constructs anything a pickle names: GLOBAL only
// records a (module, name) pair, and REDUCE/NEWOBJ are interpreted as data for the handful of
// callables npw understands (collections.OrderedDict, torch._utils._rebuild_tensor[_v2],
// torch._utils._rebuild_parameter, torch.Size, builtins.set/frozenset, _codecs.encode); any
// other call or instantiation becomes an inert Object placeholder that is never called.
// Opcodes: the weights-only set of shared/notes/formats.md plus what protocols 2-4 need for
// state dicts and argparse.Namespace (MEMOIZE, FRAME, STACK_GLOBAL, SHORT_BINUNICODE,
// BINUNICODE8, (SHORT_)BINBYTES(8), EMPTY_SET/ADDITEMS); every other opcode is an npw::Error
// naming it and its offset. Limits bound what a hostile pickle can make npw allocate.
// No torch and no Qt here.
#include <cstddef>
#include <cstdint>
#include <deque>
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

struct PickleLimits {
    size_t maxDepth = 256;  // open MARKs at once, and tuples nested in tuples
    size_t maxMemoEntries = 1 << 20;
    size_t maxStringBytes = 64u << 20;  // one string or bytes value
    size_t maxObjects = 1 << 21;        // values created in all (each costs ~200 bytes)
};

// The values of one pickle; the graph lives as long as the document.
class PickleDocument {
public:
    const PickleValue& root() const { return *root_; }
    size_t objectCount() const { return values_.size(); }
    int protocol() const { return protocol_; }

private:
    friend class Unpickler;
    std::deque<PickleValue> values_;  // a deque: values never move, so pointers to them stay valid
    const PickleValue* root_ = nullptr;
    int protocol_ = 0;
};

// Parses a whole pickle: it must end with STOP at its last byte. `source` names it in errors
// ("model.pt: model/data.pkl"). Throws npw::Error naming the source, the opcode and its offset.
std::shared_ptr<const PickleDocument> unpickle(std::string_view bytes, const std::string& source,
                                               const PickleLimits& limits = {});

// One line, without descending: "int 123", "str 'GPT-B'", "OrderedDict (3 entries)",
// "tensor F32 [4, 3]", "argparse.Namespace (inert placeholder)",
// "posix.system(...) (inert placeholder, never called)".
std::string describePickleValue(const PickleValue& value);
const char* pickleKindName(PickleKind kind);

}  // namespace npw
