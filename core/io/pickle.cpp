#include "core/io/pickle.h"

#include "core/text/utf8.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "core/util/error.h"

namespace npw {

namespace {

// clang-format off
// Opcodes npw accepts (pickletools names).
enum Opcode : uint8_t {
    MARK = '(', STOP = '.', BINFLOAT = 'G', BININT = 'J', BININT1 = 'K', BININT2 = 'M', NONE = 'N',
    BINPERSID = 'Q', REDUCE = 'R', SHORT_BINSTRING = 'U', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b',
    GLOBAL = 'c', APPENDS = 'e', BINGET = 'h', LONG_BINGET = 'j', BINPUT = 'q', LONG_BINPUT = 'r',
    SETITEM = 's', TUPLE = 't', SETITEMS = 'u', EMPTY_DICT = '}', EMPTY_LIST = ']', EMPTY_TUPLE = ')',
    BINBYTES = 'B', SHORT_BINBYTES = 'C',
    PROTO = 0x80, NEWOBJ = 0x81, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89,
    LONG1 = 0x8a, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
    ADDITEMS = 0x90, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
};

// Names of every opcode of pickle protocols 0-5, accepted or not, for error messages.
const char* opcodeName(uint8_t op) {
    switch (op) {
    case '(': return "MARK";            case '.': return "STOP";           case '0': return "POP";
    case '1': return "POP_MARK";        case '2': return "DUP";            case 'F': return "FLOAT";
    case 'I': return "INT";             case 'J': return "BININT";         case 'K': return "BININT1";
    case 'L': return "LONG";            case 'M': return "BININT2";        case 'N': return "NONE";
    case 'P': return "PERSID";          case 'Q': return "BINPERSID";      case 'R': return "REDUCE";
    case 'S': return "STRING";          case 'T': return "BINSTRING";      case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";         case 'X': return "BINUNICODE";     case 'a': return "APPEND";
    case 'b': return "BUILD";           case 'c': return "GLOBAL";         case 'd': return "DICT";
    case '}': return "EMPTY_DICT";      case 'e': return "APPENDS";        case 'g': return "GET";
    case 'h': return "BINGET";          case 'i': return "INST";           case 'j': return "LONG_BINGET";
    case 'l': return "LIST";            case ']': return "EMPTY_LIST";     case 'o': return "OBJ";
    case 'p': return "PUT";             case 'q': return "BINPUT";         case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";         case 't': return "TUPLE";          case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";        case 'G': return "BINFLOAT";       case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";  case 0x80: return "PROTO";         case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";           case 0x83: return "EXT2";          case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";         case 0x86: return "TUPLE2";        case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";        case 0x89: return "NEWFALSE";      case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";          case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";      case 0x8f: return "EMPTY_SET";     case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";      case 0x92: return "NEWOBJ_EX";     case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";        case 0x95: return "FRAME";         case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";    case 0x98: return "READONLY_BUFFER";
    default: return "unknown opcode";
    }
}

const TorchStorageType kStorageTypes[] = {
    {"FloatStorage", "F32", 4},        {"HalfStorage", "F16", 2},          {"BFloat16Storage", "BF16", 2},
    {"DoubleStorage", "F64", 8},       {"LongStorage", "I64", 8},          {"IntStorage", "I32", 4},
    {"ShortStorage", "I16", 2},        {"CharStorage", "I8", 1},           {"ByteStorage", "U8", 1},
    {"BoolStorage", "BOOL", 1},        {"ComplexFloatStorage", "C64", 8},  {"ComplexDoubleStorage", "C128", 16},
};
// clang-format on


bool isIdentifierPath(std::string_view text) {
    if (text.empty()) return false;
    for (char c : text)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    return true;
}

std::string shownText(std::string_view text, size_t maxChars = 60) {
    std::string shown = "'";
    for (size_t i = 0; i < text.size() && i < maxChars; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7F) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            shown += escaped;
        } else {
            shown += static_cast<char>(c);
        }
    }
    return shown + (text.size() > maxChars ? "...'" : "'");
}

// Python numbers compare across int, bool and float (1 == 1.0 == True as dict keys). A
// float equal to an int64 maps to that int; other floats are compared as doubles.
struct NumericKey {
    bool isInteger;
    int64_t integer;
    double real;
};

NumericKey numericKey(const PickleValue& value) {
    switch (value.kind) {
        case PickleKind::Bool:
            return {true, value.boolean ? 1 : 0, 0};
        case PickleKind::Int:
            return {true, value.integer, 0};
        default: {
            const double real = value.real;
            // 2^63 is exactly representable; everything in [-2^63, 2^63) converts without overflow.
            if (std::isfinite(real) && std::floor(real) == real && real >= -9223372036854775808.0 &&
                real < 9223372036854775808.0)
                return {true, static_cast<int64_t>(real), 0};
            return {false, 0, real};
        }
    }
}

bool isNumeric(PickleKind kind) {
    return kind == PickleKind::Bool || kind == PickleKind::Int || kind == PickleKind::Float;
}

size_t mixHash(size_t seed, size_t value) { return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

}  // namespace

const TorchStorageType* findTorchStorageType(std::string_view className) {
    for (const TorchStorageType& type : kStorageTypes)
        if (className == type.className) return &type;
    return nullptr;
}

const PickleValue* PickleValue::get(std::string_view key) const {
    if (kind != PickleKind::Dict) return nullptr;
    for (const PickleDictEntry& entry : entries)
        if (entry.key->kind == PickleKind::String && entry.key->text == key) return entry.value;
    return nullptr;
}

const char* pickleKindName(PickleKind kind) {
    switch (kind) {
        case PickleKind::None:
            return "None";
        case PickleKind::Bool:
            return "bool";
        case PickleKind::Int:
            return "int";
        case PickleKind::BigInt:
            return "int";
        case PickleKind::Float:
            return "float";
        case PickleKind::String:
            return "str";
        case PickleKind::Bytes:
            return "bytes";
        case PickleKind::Tuple:
            return "tuple";
        case PickleKind::List:
            return "list";
        case PickleKind::Dict:
            return "dict";
        case PickleKind::Set:
            return "set";
        case PickleKind::Global:
            return "global";
        case PickleKind::Storage:
            return "storage";
        case PickleKind::Tensor:
            return "tensor";
        case PickleKind::Object:
            return "object";
    }
    return "?";
}

std::string describePickleValue(const PickleValue& value) {
    auto counted = [](const char* what, size_t count, const char* one, const char* many) {
        return std::string(what) + " (" + std::to_string(count) + " " + (count == 1 ? one : many) + ")";
    };
    switch (value.kind) {
        case PickleKind::None:
            return "None";
        case PickleKind::Bool:
            return value.boolean ? "bool True" : "bool False";
        case PickleKind::Int:
            return "int " + std::to_string(value.integer);
        case PickleKind::BigInt:
            return "int (" + std::to_string(value.text.size()) + "-byte integer)";
        case PickleKind::Float: {
            char text[32];
            std::snprintf(text, sizeof text, "%.17g", value.real);
            return std::string("float ") + text;
        }
        case PickleKind::String:
            return "str " + shownText(value.text);
        case PickleKind::Bytes:
            return counted("bytes", value.text.size(), "byte", "bytes");
        case PickleKind::Tuple:
            return counted("tuple", value.items.size(), "item", "items");
        case PickleKind::List:
            return counted("list", value.items.size(), "item", "items");
        case PickleKind::Set:
            return counted("set", value.items.size(), "item", "items");
        case PickleKind::Dict:
            return counted(value.ordered ? "OrderedDict" : "dict", value.entries.size(), "entry", "entries");
        case PickleKind::Global:
            return "global " + value.qualifiedName();
        case PickleKind::Storage:
            return std::string("storage ") + shownText(value.storage->key) + " " + value.storage->type->className + " (" +
                   std::to_string(value.storage->numel) + " elements)";
        case PickleKind::Tensor: {
            std::string shape = "[";
            for (size_t i = 0; i < value.tensor->size.size(); ++i)
                shape += (i ? ", " : "") + std::to_string(value.tensor->size[i]);
            return std::string("tensor ") + value.tensor->storage->storage->type->dtype + " " + shape + "]";
        }
        case PickleKind::Object:
            return value.instantiated ? value.qualifiedName() + " (inert placeholder)"
                                      : value.qualifiedName() + "(...) (inert placeholder, never called)";
    }
    return "?";
}

class Unpickler {
public:
    Unpickler(std::string_view bytes, const std::string& source, const PickleLimits& limits, PickleDocument& document)
        : bytes_(bytes), source_(source), limits_(limits), document_(document) {}

    void run() {
        if (bytes_.empty()) throw Error("pickle '" + source_ + "': empty (0 bytes)");
        while (true) {
            if (pos_ >= bytes_.size())
                throw Error("pickle '" + source_ + "': ends at byte " + std::to_string(pos_) +
                            " without STOP (truncated)");
            opOffset_ = pos_;
            op_ = static_cast<uint8_t>(bytes_[pos_++]);
            if (op_ == STOP) {
                stop();
                return;
            }
            step();
        }
    }

private:
    std::string_view bytes_;
    const std::string& source_;
    const PickleLimits& limits_;
    PickleDocument& document_;
    size_t pos_ = 0;
    size_t opOffset_ = 0;
    uint8_t op_ = 0;
    std::vector<PickleValue*> stack_;
    std::vector<size_t> marks_;  // stack heights at each open MARK; nothing below the last is reachable
    std::unordered_map<uint64_t, PickleValue*> memo_;
    std::unordered_map<std::string, PickleValue*> storagesByKey_;
    // Per dict/set: hash of each key → its position, so inserting stays O(1) for big dicts.
    std::unordered_map<const PickleValue*, std::unordered_multimap<size_t, size_t>> keyIndex_;
    // Hashes of string/bytes/tuple keys, so a long key shared through the memo is hashed once.
    std::unordered_map<const PickleValue*, size_t> hashCache_;
    PickleValue* none_ = nullptr;
    PickleValue* true_ = nullptr;
    PickleValue* false_ = nullptr;

    [[noreturn]] void fail(const std::string& problem) const {
        char code[8];
        std::snprintf(code, sizeof code, "0x%02x", op_);
        throw Error("pickle '" + source_ + "': " + opcodeName(op_) + " (" + code + ") at offset " +
                    std::to_string(opOffset_) + ": " + problem);
    }

    // ---- input ----
    std::string_view take(uint64_t count) {
        if (count > bytes_.size() - pos_)
            fail("needs " + std::to_string(count) + " bytes, only " + std::to_string(bytes_.size() - pos_) +
                 " are left (truncated pickle)");
        std::string_view result = bytes_.substr(pos_, count);
        pos_ += count;
        return result;
    }
    uint64_t unsignedLE(size_t count) {
        std::string_view raw = take(count);
        uint64_t value = 0;
        for (size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
        return value;
    }
    std::string_view takeLine() {
        constexpr size_t kMaxLine = 1024;
        // Searching a bounded window keeps a hostile pickle without newlines from costing O(n) per opcode.
        const size_t length = bytes_.substr(pos_, kMaxLine + 1).find('\n');
        if (length == std::string_view::npos)
            fail("no newline within " + std::to_string(kMaxLine) + " bytes (a GLOBAL name line)");
        std::string_view line = bytes_.substr(pos_, length);
        pos_ += length + 1;
        return line;
    }
    std::string_view takeSized(uint64_t length, const char* what) {
        if (length > limits_.maxStringBytes)
            fail(std::string("a ") + what + " of " + std::to_string(length) + " bytes exceeds the limit of " +
                 std::to_string(limits_.maxStringBytes));
        return take(length);
    }

    // ---- values ----
    PickleValue* make(PickleKind kind) {
        if (document_.values_.size() >= limits_.maxObjects)
            fail("more than " + std::to_string(limits_.maxObjects) + " objects (limit against hostile pickles)");
        PickleValue& value = document_.values_.emplace_back();
        value.kind = kind;
        return &value;
    }
    PickleValue* makeString(std::string_view text) {
        if (utf8::findInvalid(text) != std::string_view::npos) fail("the string is not valid UTF-8");
        PickleValue* value = make(PickleKind::String);
        value->text = text;
        return value;
    }
    PickleValue* makeBytes(std::string_view bytes) {
        PickleValue* value = make(PickleKind::Bytes);
        value->text = bytes;
        return value;
    }
    PickleValue* makeInt(int64_t integer) {
        PickleValue* value = make(PickleKind::Int);
        value->integer = integer;
        return value;
    }
    PickleValue* makeTuple(std::vector<const PickleValue*> items) {
        uint32_t nesting = 1;
        for (const PickleValue* item : items)
            if (item->kind == PickleKind::Tuple) nesting = std::max(nesting, item->tupleNesting + 1);
        if (nesting > limits_.maxDepth)
            fail("tuples nested " + std::to_string(nesting) + " deep exceed the limit of " +
                 std::to_string(limits_.maxDepth));
        PickleValue* tuple = make(PickleKind::Tuple);
        tuple->items = std::move(items);
        tuple->tupleNesting = nesting;
        return tuple;
    }
    PickleValue* singleton(PickleValue*& slot, PickleKind kind, bool boolean) {
        if (!slot) {
            slot = make(kind);
            slot->boolean = boolean;
        }
        return slot;
    }

    // ---- the stack ----
    size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
    void push(PickleValue* value) { stack_.push_back(value); }
    PickleValue* pop() {
        if (stack_.size() <= fence()) fail("stack underflow (nothing above the last MARK)");
        PickleValue* value = stack_.back();
        stack_.pop_back();
        return value;
    }
    PickleValue* top() {
        if (stack_.size() <= fence()) fail("stack underflow (nothing above the last MARK)");
        return stack_.back();
    }
    std::vector<const PickleValue*> popMark() {
        if (marks_.empty()) fail("no open MARK");
        const size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<const PickleValue*> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        return items;
    }

    // ---- dict keys: Python's hashing rules for the primitive kinds ----
    void requireHashable(const PickleValue& key) {
        switch (key.kind) {
            case PickleKind::None:
            case PickleKind::Bool:
            case PickleKind::Int:
            case PickleKind::BigInt:
            case PickleKind::Float:
            case PickleKind::String:
            case PickleKind::Bytes:
            case PickleKind::Global:
                return;
            case PickleKind::Tuple:
                for (const PickleValue* item : key.items) requireHashable(*item);  // depth bounded by tupleNesting
                return;
            default:
                fail(std::string("a ") + pickleKindName(key.kind) +
                     " as a dict key or set item (only None, bool, int, float, str, bytes, globals and tuples of them "
                     "are accepted)");
        }
    }
    size_t hashOf(const PickleValue& key) {
        if (isNumeric(key.kind)) {
            const NumericKey number = numericKey(key);
            return number.isInteger ? std::hash<int64_t>()(number.integer) : std::hash<double>()(number.real);
        }
        if (key.kind == PickleKind::None) return 0x5eed;
        auto cached = hashCache_.find(&key);
        if (cached != hashCache_.end()) return cached->second;
        size_t hash = static_cast<size_t>(key.kind);
        if (key.kind == PickleKind::Tuple) {
            for (const PickleValue* item : key.items) hash = mixHash(hash, hashOf(*item));
        } else if (key.kind == PickleKind::Global) {
            hash = mixHash(mixHash(hash, std::hash<std::string>()(key.module)), std::hash<std::string>()(key.name));
        } else {
            hash = mixHash(hash, std::hash<std::string>()(key.text));
        }
        hashCache_.emplace(&key, hash);
        return hash;
    }
    static bool keysEqual(const PickleValue& a, const PickleValue& b) {
        if (&a == &b) return true;
        if (isNumeric(a.kind) && isNumeric(b.kind)) {
            const NumericKey x = numericKey(a), y = numericKey(b);
            return x.isInteger == y.isInteger && (x.isInteger ? x.integer == y.integer : x.real == y.real);
        }
        if (a.kind != b.kind) return false;
        switch (a.kind) {
            case PickleKind::None:
                return true;
            case PickleKind::BigInt:
            case PickleKind::String:
            case PickleKind::Bytes:
                return a.text == b.text;
            case PickleKind::Global:
                return a.module == b.module && a.name == b.name;
            case PickleKind::Tuple:
                if (a.items.size() != b.items.size()) return false;
                for (size_t i = 0; i < a.items.size(); ++i)
                    if (!keysEqual(*a.items[i], *b.items[i])) return false;
                return true;
            default:
                return false;
        }
    }
    // Finds `key` among the keys of a dict (entries) or set (items); -1 when absent.
    std::ptrdiff_t findKey(const PickleValue& container, const PickleValue& key, size_t hash) {
        auto& index = keyIndex_[&container];
        auto [first, last] = index.equal_range(hash);
        for (auto it = first; it != last; ++it) {
            const PickleValue* existing =
                container.kind == PickleKind::Dict ? container.entries[it->second].key : container.items[it->second];
            if (keysEqual(*existing, key)) return static_cast<std::ptrdiff_t>(it->second);
        }
        return -1;
    }
    void setItem(PickleValue& dict, const PickleValue* key, const PickleValue* value) {
        requireHashable(*key);
        const size_t hash = hashOf(*key);
        const std::ptrdiff_t found = findKey(dict, *key, hash);
        if (found >= 0) {
            dict.entries[static_cast<size_t>(found)].value =
                value;  // Python: the first key stays, the value is replaced
            return;
        }
        keyIndex_[&dict].emplace(hash, dict.entries.size());
        dict.entries.push_back({key, value});
    }
    void addToSet(PickleValue& set, const PickleValue* item) {
        requireHashable(*item);
        const size_t hash = hashOf(*item);
        if (findKey(set, *item, hash) >= 0) return;
        keyIndex_[&set].emplace(hash, set.items.size());
        set.items.push_back(item);
    }

    // ---- argument checks for the interpreted callables ----
    const PickleValue& argument(const PickleValue& args, size_t index, PickleKind kind, const char* callable,
                                const char* what) {
        const PickleValue& value = *args.items[index];
        if (value.kind != kind)
            fail(std::string(callable) + ": argument " + std::to_string(index + 1) + " (" + what + ") must be a " +
                 pickleKindName(kind) + ", got " + describePickleValue(value));
        return value;
    }
    std::vector<int64_t> nonNegativeInts(const PickleValue& tuple, const char* callable, const char* what) {
        std::vector<int64_t> result;
        for (const PickleValue* item : tuple.items) {
            if (item->kind != PickleKind::Int || item->integer < 0)
                fail(std::string(callable) + ": every element of the " + what + " must be a non-negative int, got " +
                     describePickleValue(*item));
            result.push_back(item->integer);
        }
        return result;
    }

    PickleValue* rebuildTensor(const PickleValue& args, const char* callable, bool version2) {
        // v2: (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        // v1: (storage, storage_offset, size, stride)
        const size_t count = args.items.size();
        if (version2 ? (count != 6 && count != 7) : count != 4)
            fail(std::string(callable) + " takes " + (version2 ? "6 or 7" : "4") + " arguments, got " +
                 std::to_string(count));
        const PickleValue& storage = argument(args, 0, PickleKind::Storage, callable, "storage");
        const PickleValue& offset = argument(args, 1, PickleKind::Int, callable, "storage offset");
        const PickleValue& size = argument(args, 2, PickleKind::Tuple, callable, "size");
        const PickleValue& stride = argument(args, 3, PickleKind::Tuple, callable, "stride");
        if (offset.integer < 0)
            fail(std::string(callable) + ": negative storage offset " + std::to_string(offset.integer));
        auto tensor = std::make_unique<PickleTensorRef>();
        tensor->storage = &storage;
        tensor->storageOffset = offset.integer;
        tensor->size = nonNegativeInts(size, callable, "size");
        tensor->stride = nonNegativeInts(stride, callable, "stride");
        if (tensor->size.size() != tensor->stride.size())
            fail(std::string(callable) + ": size has " + std::to_string(tensor->size.size()) + " dimensions, stride " +
                 std::to_string(tensor->stride.size()));
        if (version2) {
            tensor->requiresGrad = argument(args, 4, PickleKind::Bool, callable, "requires_grad").boolean;
            argument(args, 5, PickleKind::Dict, callable, "backward hooks");  // never run; must just be a dict
        }
        PickleValue* value = make(PickleKind::Tensor);
        value->tensor = std::move(tensor);
        return value;
    }

    // REDUCE: the callable is interpreted when npw knows it, and becomes an inert placeholder
    // otherwise. Nothing is ever looked up or called.
    PickleValue* reduce(const PickleValue& callable, const PickleValue* args) {
        const std::string qualified = callable.qualifiedName();
        if (qualified == "collections.OrderedDict") return orderedDict(*args);
        if (qualified == "torch._utils._rebuild_tensor_v2") return rebuildTensor(*args, "_rebuild_tensor_v2", true);
        if (qualified == "torch._utils._rebuild_tensor") return rebuildTensor(*args, "_rebuild_tensor", false);
        if (qualified == "torch._utils._rebuild_parameter") {
            // (data, requires_grad, backward_hooks) → the tensor itself.
            if (args->items.size() != 3)
                fail("_rebuild_parameter takes 3 arguments, got " + std::to_string(args->items.size()));
            const PickleValue& data = argument(*args, 0, PickleKind::Tensor, "_rebuild_parameter", "data");
            const bool requiresGrad =
                argument(*args, 1, PickleKind::Bool, "_rebuild_parameter", "requires_grad").boolean;
            argument(*args, 2, PickleKind::Dict, "_rebuild_parameter", "backward hooks");
            PickleValue* value = make(PickleKind::Tensor);
            value->tensor = std::make_unique<PickleTensorRef>(*data.tensor);  // a copy: `data` may be shared
            value->tensor->requiresGrad = requiresGrad;
            value->tensor->parameter = true;
            return value;
        }
        if (qualified == "torch.Size") {
            if (args->items.size() != 1 || args->items[0]->kind != PickleKind::Tuple)
                fail("torch.Size takes one tuple, got " + describePickleValue(*args));
            nonNegativeInts(*args->items[0], "torch.Size", "size");
            return const_cast<PickleValue*>(args->items[0]);
        }
        if (qualified == "builtins.set" || qualified == "builtins.frozenset") {
            PickleValue* set = make(PickleKind::Set);
            if (args->items.size() > 1) fail(qualified + " takes at most one argument");
            if (!args->items.empty()) {
                const PickleValue& source = *args->items[0];
                if (source.kind != PickleKind::List && source.kind != PickleKind::Tuple)
                    fail(qualified + " of a " + pickleKindName(source.kind) + " (only a list or tuple is accepted)");
                for (const PickleValue* item : source.items) addToSet(*set, item);
            }
            return set;
        }
        if (qualified == "_codecs.encode") return latin1Bytes(*args);
        PickleValue* object = make(PickleKind::Object);
        object->module = callable.module;
        object->name = callable.name;
        object->args = args;
        return object;
    }

    PickleValue* orderedDict(const PickleValue& args) {
        PickleValue* dict = make(PickleKind::Dict);
        dict->ordered = true;
        if (args.items.empty()) return dict;
        const PickleValue& pairs = *args.items[0];
        if (args.items.size() != 1 || (pairs.kind != PickleKind::List && pairs.kind != PickleKind::Tuple))
            fail("collections.OrderedDict takes nothing or one list of (key, value) pairs, got " +
                 describePickleValue(args));
        for (const PickleValue* pair : pairs.items) {
            if (pair->kind != PickleKind::Tuple || pair->items.size() != 2)
                fail("collections.OrderedDict: an item is " + describePickleValue(*pair) + ", not a (key, value) pair");
            setItem(*dict, pair->items[0], pair->items[1]);
        }
        return dict;
    }

    // How protocol 2 pickles bytes: _codecs.encode(str, 'latin1'), each code point one byte.
    PickleValue* latin1Bytes(const PickleValue& args) {
        if (args.items.size() != 2 || args.items[0]->kind != PickleKind::String ||
            args.items[1]->kind != PickleKind::String ||
            (args.items[1]->text != "latin1" && args.items[1]->text != "latin-1"))
            fail("_codecs.encode is accepted only as (str, 'latin1'), which is how protocol 2 pickles bytes");
        const std::string& text = args.items[0]->text;  // valid UTF-8: checked when it was read
        std::string bytes;
        for (size_t i = 0; i < text.size();) {
            const auto lead = static_cast<unsigned char>(text[i]);
            if (lead < 0x80) {
                bytes += static_cast<char>(lead);
                i += 1;
            } else if (lead == 0xC2 || lead == 0xC3) {
                bytes += static_cast<char>(((lead & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F));
                i += 2;
            } else {
                fail("_codecs.encode: a code point above U+00FF cannot be latin1");
            }
        }
        return makeBytes(bytes);
    }

    // ('storage', <torch.XStorage>, key, location, numel): a reference to data/<key>.
    PickleValue* persistentLoad(const PickleValue& id) {
        if (id.kind != PickleKind::Tuple || id.items.size() != 5 || id.items[0]->kind != PickleKind::String ||
            id.items[0]->text != "storage")
            fail("the persistent id must be ('storage', type, key, location, numel), got " + describePickleValue(id));
        const PickleValue& type = *id.items[1];
        const PickleValue& key = *id.items[2];
        const PickleValue& location = *id.items[3];
        const PickleValue& numel = *id.items[4];
        if (type.kind != PickleKind::Global || type.module != "torch")
            fail("the storage type must be a torch.<X>Storage global, got " + describePickleValue(type));
        const TorchStorageType* storageType = findTorchStorageType(type.name);
        if (!storageType) fail("unsupported storage type torch." + type.name);
        if (key.kind != PickleKind::String || key.text.empty())
            fail("the storage key must be a non-empty str, got " + describePickleValue(key));
        if (location.kind != PickleKind::String)
            fail("the storage location must be a str, got " + describePickleValue(location));
        if (numel.kind != PickleKind::Int || numel.integer < 0)
            fail("the storage size must be a non-negative int, got " + describePickleValue(numel));
        auto known = storagesByKey_.find(key.text);
        if (known != storagesByKey_.end()) {
            const PickleStorageRef& earlier = *known->second->storage;
            if (earlier.type != storageType || earlier.numel != numel.integer)
                fail("storage " + shownText(key.text) + " is declared again as " + storageType->className + " of " +
                     std::to_string(numel.integer) + " elements, earlier as " + earlier.type->className + " of " +
                     std::to_string(earlier.numel));
            return known->second;
        }
        PickleValue* storage = make(PickleKind::Storage);
        storage->storage = std::make_unique<PickleStorageRef>();
        storage->storage->type = storageType;
        storage->storage->key = key.text;
        storage->storage->location = location.text;
        storage->storage->numel = numel.integer;
        storagesByKey_.emplace(key.text, storage);
        return storage;
    }

    PickleValue* global(std::string_view module, std::string_view name) {
        if (!isIdentifierPath(module) || !isIdentifierPath(name))
            fail("the global " + shownText(module) + " " + shownText(name) + " is not a dotted Python name");
        PickleValue* value = make(PickleKind::Global);
        // Python 3 writes protocol-2 pickles with Python 2 module names (fix_imports).
        value->module = module == "__builtin__" ? "builtins" : module == "copy_reg" ? "copyreg" : std::string(module);
        value->name = name;
        return value;
    }

    void memoPut(uint64_t index) {
        PickleValue* value = top();
        auto it = memo_.find(index);
        if (it != memo_.end()) {
            it->second = value;
            return;
        }
        if (memo_.size() >= limits_.maxMemoEntries)
            fail("more than " + std::to_string(limits_.maxMemoEntries) +
                 " memo entries (limit against hostile pickles)");
        memo_.emplace(index, value);
    }
    void memoGet(uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
        push(it->second);
    }

    void stop() {
        if (!marks_.empty()) fail(std::to_string(marks_.size()) + " MARK(s) still open");
        if (stack_.size() != 1) fail("the stack holds " + std::to_string(stack_.size()) + " values, not exactly one");
        if (pos_ != bytes_.size())
            fail(std::to_string(bytes_.size() - pos_) + " bytes after STOP (a pickle must end there)");
        document_.root_ = stack_.back();
    }

    void step() {
        switch (op_) {
            case PROTO: {
                const uint64_t protocol = unsignedLE(1);
                if (opOffset_ != 0) fail("PROTO is allowed only as the first opcode");
                if (protocol < 2 || protocol > 5)
                    fail("protocol " + std::to_string(protocol) + " (only 2 to 5 are read)");
                document_.protocol_ = static_cast<int>(protocol);
                return;
            }
            case FRAME: {
                // Protocol 4 framing is a read-ahead hint; the frame must still lie inside the pickle.
                const uint64_t length = unsignedLE(8);
                if (length > bytes_.size() - pos_)
                    fail("a frame of " + std::to_string(length) + " bytes runs past the end of the pickle");
                return;
            }
            case GLOBAL: {
                const std::string_view module = takeLine();
                const std::string_view name = takeLine();
                push(global(module, name));
                return;
            }
            case STACK_GLOBAL: {
                const PickleValue* name = pop();
                const PickleValue* module = pop();
                if (module->kind != PickleKind::String || name->kind != PickleKind::String)
                    fail("module and name must be str, got " + describePickleValue(*module) + " and " +
                         describePickleValue(*name));
                push(global(module->text, name->text));
                return;
            }
            case NEWOBJ: {
                const PickleValue* args = pop();
                const PickleValue* cls = pop();
                if (args->kind != PickleKind::Tuple)
                    fail("the arguments must be a tuple, got " + describePickleValue(*args));
                if (cls->kind != PickleKind::Global)
                    fail("the class must be a global, got " + describePickleValue(*cls));
                if (cls->qualifiedName() == "collections.OrderedDict") {
                    push(orderedDict(*args));
                    return;
                }
                PickleValue* object = make(PickleKind::Object);
                object->module = cls->module;
                object->name = cls->name;
                object->args = args;
                object->instantiated = true;
                push(object);
                return;
            }
            case REDUCE: {
                const PickleValue* args = pop();
                const PickleValue* callable = top();
                if (args->kind != PickleKind::Tuple)
                    fail("the arguments must be a tuple, got " + describePickleValue(*args));
                if (callable->kind != PickleKind::Global)
                    fail("only a global can be called, got " + describePickleValue(*callable));
                stack_.back() = reduce(*callable, args);
                return;
            }
            case BUILD: {
                const PickleValue* state = pop();
                PickleValue* target = top();
                if (target->kind == PickleKind::Dict) {
                    // OrderedDict state: attributes such as a state dict's _metadata.
                    if (state->kind != PickleKind::Dict)
                        fail("a dict's state must be a dict, got " + describePickleValue(*state));
                } else if (target->kind != PickleKind::Object) {
                    fail(std::string("cannot BUILD a ") + pickleKindName(target->kind) +
                         " (only dicts and placeholders)");
                }
                if (target->state) fail("a second BUILD on the same " + describePickleValue(*target));
                target->state = state;
                return;
            }
            case APPEND: {
                const PickleValue* item = pop();
                append(*top(), {item});
                return;
            }
            case APPENDS: {
                std::vector<const PickleValue*> items = popMark();
                append(*top(), items);
                return;
            }
            case SETITEM: {
                const PickleValue* value = pop();
                const PickleValue* key = pop();
                setItems(*top(), {key, value});
                return;
            }
            case SETITEMS: {
                std::vector<const PickleValue*> items = popMark();
                if (items.size() % 2)
                    fail("an odd number of values (" + std::to_string(items.size()) + ") for key/value pairs");
                setItems(*top(), items);
                return;
            }
            case ADDITEMS: {
                std::vector<const PickleValue*> items = popMark();
                PickleValue* set = top();
                if (set->kind != PickleKind::Set)
                    fail(std::string("cannot add items to a ") + pickleKindName(set->kind));
                for (const PickleValue* item : items) addToSet(*set, item);
                return;
            }
            case MARK:
                if (marks_.size() >= limits_.maxDepth)
                    fail("more than " + std::to_string(limits_.maxDepth) +
                         " MARKs open at once (limit against hostile pickles)");
                marks_.push_back(stack_.size());
                return;
            case TUPLE:
                push(makeTuple(popMark()));
                return;
            case TUPLE1: {
                const PickleValue* a = pop();
                push(makeTuple({a}));
                return;
            }
            case TUPLE2: {
                const PickleValue* b = pop();
                const PickleValue* a = pop();
                push(makeTuple({a, b}));
                return;
            }
            case TUPLE3: {
                const PickleValue* c = pop();
                const PickleValue* b = pop();
                const PickleValue* a = pop();
                push(makeTuple({a, b, c}));
                return;
            }
            case NONE:
                push(singleton(none_, PickleKind::None, false));
                return;
            case NEWTRUE:
                push(singleton(true_, PickleKind::Bool, true));
                return;
            case NEWFALSE:
                push(singleton(false_, PickleKind::Bool, false));
                return;
            case EMPTY_TUPLE:
                push(makeTuple({}));
                return;
            case EMPTY_LIST:
                push(make(PickleKind::List));
                return;
            case EMPTY_DICT:
                push(make(PickleKind::Dict));
                return;
            case EMPTY_SET:
                push(make(PickleKind::Set));
                return;
            case BININT:
                push(makeInt(static_cast<int32_t>(static_cast<uint32_t>(unsignedLE(4)))));
                return;
            case BININT1:
                push(makeInt(static_cast<int64_t>(unsignedLE(1))));
                return;
            case BININT2:
                push(makeInt(static_cast<int64_t>(unsignedLE(2))));
                return;
            case LONG1:
                push(long1(takeSized(unsignedLE(1), "long")));
                return;
            case BINFLOAT: {
                // The one big-endian field of the format.
                std::string_view raw = take(8);
                uint64_t bits = 0;
                for (char byte : raw) bits = bits << 8 | static_cast<uint8_t>(byte);
                PickleValue* value = make(PickleKind::Float);
                std::memcpy(&value->real, &bits, 8);
                push(value);
                return;
            }
            case SHORT_BINUNICODE:
                push(makeString(takeSized(unsignedLE(1), "string")));
                return;
            case BINUNICODE:
                push(makeString(takeSized(unsignedLE(4), "string")));
                return;
            case BINUNICODE8:
                push(makeString(takeSized(unsignedLE(8), "string")));
                return;
            // torch.load decodes Python 2 byte strings with encoding='utf-8'; so does npw.
            case SHORT_BINSTRING:
                push(makeString(takeSized(unsignedLE(1), "string")));
                return;
            case SHORT_BINBYTES:
                push(makeBytes(takeSized(unsignedLE(1), "bytes value")));
                return;
            case BINBYTES:
                push(makeBytes(takeSized(unsignedLE(4), "bytes value")));
                return;
            case BINBYTES8:
                push(makeBytes(takeSized(unsignedLE(8), "bytes value")));
                return;
            case BINPERSID: {
                const PickleValue* id = pop();
                push(persistentLoad(*id));
                return;
            }
            case BINGET:
                memoGet(unsignedLE(1));
                return;
            case LONG_BINGET:
                memoGet(unsignedLE(4));
                return;
            case BINPUT:
                memoPut(unsignedLE(1));
                return;
            case LONG_BINPUT:
                memoPut(unsignedLE(4));
                return;
            case MEMOIZE:
                memoPut(memo_.size());
                return;
            default:
                fail(
                    "opcode not allowed in a checkpoint (npw reads only the weights-only set and what protocols 2-4 "
                    "need for it)");
        }
    }

    PickleValue* long1(std::string_view raw) {
        const size_t count = raw.size();
        const auto byte = [&](size_t i) { return static_cast<uint8_t>(raw[i]); };
        if (count == 0) return makeInt(0);
        // It fits int64 when every byte above the eighth repeats the sign of the eighth.
        const size_t low = std::min<size_t>(count, 8);
        const uint8_t extension = (byte(low - 1) & 0x80) ? 0xFF : 0x00;
        bool fits = true;
        for (size_t i = 8; i < count; ++i) fits &= byte(i) == extension;
        if (!fits) {
            PickleValue* big = make(PickleKind::BigInt);
            big->text = raw;
            return big;
        }
        uint64_t bits = 0;
        for (size_t i = 0; i < low; ++i) bits |= static_cast<uint64_t>(byte(i)) << (8 * i);
        if (low < 8 && extension) bits |= ~uint64_t(0) << (8 * low);
        return makeInt(static_cast<int64_t>(bits));
    }

    void append(PickleValue& target, const std::vector<const PickleValue*>& items) {
        if (target.kind != PickleKind::List && target.kind != PickleKind::Object)
            fail(std::string("cannot append to a ") + pickleKindName(target.kind));
        // A placeholder only records what was appended: its append method is never called.
        target.items.insert(target.items.end(), items.begin(), items.end());
    }

    void setItems(PickleValue& target, const std::vector<const PickleValue*>& keysAndValues) {
        if (target.kind == PickleKind::Dict) {
            for (size_t i = 0; i + 1 < keysAndValues.size(); i += 2)
                setItem(target, keysAndValues[i], keysAndValues[i + 1]);
        } else if (target.kind == PickleKind::Object) {
            // Recorded, not applied: a placeholder's __setitem__ is never called.
            for (size_t i = 0; i + 1 < keysAndValues.size(); i += 2)
                target.entries.push_back({keysAndValues[i], keysAndValues[i + 1]});
        } else {
            fail(std::string("cannot set items of a ") + pickleKindName(target.kind));
        }
    }
};

std::shared_ptr<const PickleDocument> unpickle(std::string_view bytes, const std::string& source,
                                               const PickleLimits& limits) {
    auto document = std::make_shared<PickleDocument>();
    Unpickler(bytes, source, limits, *document).run();
    return document;
}

}  // namespace npw
