#include "core/io/pickle_value.h"

#include <cstdio>

namespace npw {

namespace {

// clang-format off
const TorchStorageType kStorageTypes[] = {
    {"FloatStorage", "F32", 4},        {"HalfStorage", "F16", 2},          {"BFloat16Storage", "BF16", 2},
    {"DoubleStorage", "F64", 8},       {"LongStorage", "I64", 8},          {"IntStorage", "I32", 4},
    {"ShortStorage", "I16", 2},        {"CharStorage", "I8", 1},           {"ByteStorage", "U8", 1},
    {"BoolStorage", "BOOL", 1},        {"ComplexFloatStorage", "C64", 8},  {"ComplexDoubleStorage", "C128", 16},
};
// clang-format on

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
            return "str " + quotedPickleText(value.text);
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
            return std::string("storage ") + quotedPickleText(value.storage->key) + " " +
                   value.storage->type->className + " (" + std::to_string(value.storage->numel) + " elements)";
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

std::string quotedPickleText(std::string_view text) {
    constexpr size_t kMaxChars = 60;
    std::string shown = "'";
    for (size_t i = 0; i < text.size() && i < kMaxChars; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7F) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            shown += escaped;
        } else {
            shown += static_cast<char>(c);
        }
    }
    return shown + (text.size() > kMaxChars ? "...'" : "'");
}

}  // namespace npw
