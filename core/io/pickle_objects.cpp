// Globals, calls, instances and persistent ids: where a pickle asks to run code. This is the
// safe unpickler's allow-list. A name is only ever recorded; the few callables npw knows are
// interpreted as data, and every other call or instance stays an inert placeholder.
#include "core/io/pickle_unpickler.h"

namespace npw {

namespace {

bool isIdentifierPath(std::string_view text) {
    if (text.empty()) return false;
    for (char c : text)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    return true;
}

}  // namespace

bool Unpickler::stepObject() {
    switch (op_) {
        case GLOBAL: {
            const std::string_view module = takeLine();
            const std::string_view name = takeLine();
            push(global(module, name));
            return true;
        }
        case STACK_GLOBAL:
            push(stackGlobal());
            return true;
        case NEWOBJ:
            push(newObject());
            return true;
        case REDUCE:
            reduceTop();
            return true;
        case BUILD:
            build();
            return true;
        case BINPERSID: {
            const PickleValue* id = pop();
            push(persistentLoad(*id));
            return true;
        }
        default:
            return false;
    }
}

PickleValue* Unpickler::global(std::string_view module, std::string_view name) {
    if (!isIdentifierPath(module) || !isIdentifierPath(name))
        fail("the global " + quotedPickleText(module) + " " + quotedPickleText(name) + " is not a dotted Python name");
    PickleValue* value = make(PickleKind::Global);
    // Python 3 writes protocol-2 pickles with Python 2 module names (fix_imports).
    value->module = module == "__builtin__" ? "builtins" : module == "copy_reg" ? "copyreg" : std::string(module);
    value->name = name;
    return value;
}

PickleValue* Unpickler::stackGlobal() {
    const PickleValue* name = pop();
    const PickleValue* module = pop();
    if (module->kind != PickleKind::String || name->kind != PickleKind::String)
        fail("module and name must be str, got " + describePickleValue(*module) + " and " + describePickleValue(*name));
    return global(module->text, name->text);
}

PickleValue* Unpickler::newObject() {
    const PickleValue* args = pop();
    const PickleValue* cls = pop();
    if (args->kind != PickleKind::Tuple) fail("the arguments must be a tuple, got " + describePickleValue(*args));
    if (cls->kind != PickleKind::Global) fail("the class must be a global, got " + describePickleValue(*cls));
    if (cls->qualifiedName() == "collections.OrderedDict") return orderedDict(*args);
    return placeholder(*cls, args, true);
}

void Unpickler::reduceTop() {
    const PickleValue* args = pop();
    const PickleValue* callable = top();
    if (args->kind != PickleKind::Tuple) fail("the arguments must be a tuple, got " + describePickleValue(*args));
    if (callable->kind != PickleKind::Global)
        fail("only a global can be called, got " + describePickleValue(*callable));
    stack_.back() = reduce(*callable, args);
}

// Nothing is ever looked up or called: the callables npw knows are interpreted, every other
// call becomes an inert placeholder.
PickleValue* Unpickler::reduce(const PickleValue& callable, const PickleValue* args) {
    const std::string qualified = callable.qualifiedName();
    if (qualified == "collections.OrderedDict") return orderedDict(*args);
    if (qualified == "torch._utils._rebuild_tensor_v2") return rebuildTensor(*args, "_rebuild_tensor_v2", true);
    if (qualified == "torch._utils._rebuild_tensor") return rebuildTensor(*args, "_rebuild_tensor", false);
    if (qualified == "torch._utils._rebuild_parameter") return rebuildParameter(*args);
    if (qualified == "torch.Size") return torchSize(*args);
    if (qualified == "builtins.set" || qualified == "builtins.frozenset") return builtinSet(qualified, *args);
    if (qualified == "_codecs.encode") return latin1Bytes(*args);
    return placeholder(callable, args, false);
}

void Unpickler::build() {
    const PickleValue* state = pop();
    PickleValue* target = top();
    if (target->kind == PickleKind::Dict) {
        // OrderedDict state: attributes such as a state dict's _metadata.
        if (state->kind != PickleKind::Dict) fail("a dict's state must be a dict, got " + describePickleValue(*state));
    } else if (target->kind != PickleKind::Object) {
        fail(std::string("cannot BUILD a ") + pickleKindName(target->kind) + " (only dicts and placeholders)");
    }
    if (target->state) fail("a second BUILD on the same " + describePickleValue(*target));
    target->state = state;
}

PickleValue* Unpickler::placeholder(const PickleValue& callable, const PickleValue* args, bool instantiated) {
    PickleValue* object = make(PickleKind::Object);
    object->module = callable.module;
    object->name = callable.name;
    object->args = args;
    object->instantiated = instantiated;
    return object;
}

// ('storage', <torch.XStorage>, key, location, numel): a reference to data/<key>.
PickleValue* Unpickler::persistentLoad(const PickleValue& id) {
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
            fail("storage " + quotedPickleText(key.text) + " is declared again as " + storageType->className + " of " +
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

// ---- the interpreted callables ----

PickleValue* Unpickler::rebuildTensor(const PickleValue& args, const char* callable, bool version2) {
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
    if (offset.integer < 0) fail(std::string(callable) + ": negative storage offset " + std::to_string(offset.integer));
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

// (data, requires_grad, backward_hooks) → the tensor itself.
PickleValue* Unpickler::rebuildParameter(const PickleValue& args) {
    if (args.items.size() != 3) fail("_rebuild_parameter takes 3 arguments, got " + std::to_string(args.items.size()));
    const PickleValue& data = argument(args, 0, PickleKind::Tensor, "_rebuild_parameter", "data");
    const bool requiresGrad = argument(args, 1, PickleKind::Bool, "_rebuild_parameter", "requires_grad").boolean;
    argument(args, 2, PickleKind::Dict, "_rebuild_parameter", "backward hooks");
    PickleValue* value = make(PickleKind::Tensor);
    value->tensor = std::make_unique<PickleTensorRef>(*data.tensor);  // a copy: `data` may be shared
    value->tensor->requiresGrad = requiresGrad;
    value->tensor->parameter = true;
    return value;
}

PickleValue* Unpickler::torchSize(const PickleValue& args) {
    if (args.items.size() != 1 || args.items[0]->kind != PickleKind::Tuple)
        fail("torch.Size takes one tuple, got " + describePickleValue(args));
    nonNegativeInts(*args.items[0], "torch.Size", "size");
    return const_cast<PickleValue*>(args.items[0]);
}

PickleValue* Unpickler::builtinSet(const std::string& qualified, const PickleValue& args) {
    PickleValue* set = make(PickleKind::Set);
    if (args.items.size() > 1) fail(qualified + " takes at most one argument");
    if (!args.items.empty()) {
        const PickleValue& source = *args.items[0];
        if (source.kind != PickleKind::List && source.kind != PickleKind::Tuple)
            fail(qualified + " of a " + pickleKindName(source.kind) + " (only a list or tuple is accepted)");
        for (const PickleValue* item : source.items) addToSet(*set, item);
    }
    return set;
}

PickleValue* Unpickler::orderedDict(const PickleValue& args) {
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
PickleValue* Unpickler::latin1Bytes(const PickleValue& args) {
    if (args.items.size() != 2 || args.items[0]->kind != PickleKind::String ||
        args.items[1]->kind != PickleKind::String ||
        (args.items[1]->text != "latin1" && args.items[1]->text != "latin-1"))
        fail("_codecs.encode is accepted only as (str, 'latin1'), which is how protocol 2 pickles bytes");
    const std::string& text = args.items[0]->text;  // valid UTF-8: checked when it was read
    // One string of the input can be encoded any number of times through the memo: the bytes
    // made here are bounded in total, not only per value.
    derivedBytes_ += text.size();
    if (derivedBytes_ > limits_.maxDerivedBytes)
        fail("_codecs.encode has made more than " + std::to_string(limits_.maxDerivedBytes) +
             " bytes in all (limit against hostile pickles)");
    std::string bytes;
    bytes.reserve(text.size());
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

// ---- argument checks for the interpreted callables ----

const PickleValue& Unpickler::argument(const PickleValue& args, size_t index, PickleKind kind, const char* callable,
                                       const char* what) {
    const PickleValue& value = *args.items[index];
    if (value.kind != kind)
        fail(std::string(callable) + ": argument " + std::to_string(index + 1) + " (" + what + ") must be a " +
             pickleKindName(kind) + ", got " + describePickleValue(value));
    return value;
}

std::vector<int64_t> Unpickler::nonNegativeInts(const PickleValue& tuple, const char* callable, const char* what) {
    std::vector<int64_t> result;
    for (const PickleValue* item : tuple.items) {
        if (item->kind != PickleKind::Int || item->integer < 0)
            fail(std::string(callable) + ": every element of the " + what + " must be a non-negative int, got " +
                 describePickleValue(*item));
        result.push_back(item->integer);
    }
    return result;
}

}  // namespace npw
