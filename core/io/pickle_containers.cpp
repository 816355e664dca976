// Lists, dicts and sets for the unpickler. Dict keys and set items follow Python's rules for
// the primitive kinds, so a pickle's dict has the same keys here as it had in Python.
#include <cmath>
#include <cstring>
#include <functional>

#include "core/io/pickle_unpickler.h"

namespace npw {

namespace {

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

}  // namespace

bool Unpickler::stepContainer() {
    switch (op_) {
        case EMPTY_LIST:
            push(make(PickleKind::List));
            return true;
        case EMPTY_DICT:
            push(make(PickleKind::Dict));
            return true;
        case EMPTY_SET:
            push(make(PickleKind::Set));
            return true;
        case APPEND: {
            const PickleValue* item = pop();
            append(*top(), {item});
            return true;
        }
        case APPENDS: {
            std::vector<const PickleValue*> items = popMark();
            append(*top(), items);
            return true;
        }
        case SETITEM: {
            const PickleValue* value = pop();
            const PickleValue* key = pop();
            setItems(*top(), {key, value});
            return true;
        }
        case SETITEMS: {
            std::vector<const PickleValue*> items = popMark();
            if (items.size() % 2)
                fail("an odd number of values (" + std::to_string(items.size()) + ") for key/value pairs");
            setItems(*top(), items);
            return true;
        }
        case ADDITEMS: {
            std::vector<const PickleValue*> items = popMark();
            addItems(*top(), items);
            return true;
        }
        default:
            return false;
    }
}

void Unpickler::append(PickleValue& target, const std::vector<const PickleValue*>& items) {
    if (target.kind != PickleKind::List && target.kind != PickleKind::Object)
        fail(std::string("cannot append to a ") + pickleKindName(target.kind));
    // A placeholder only records what was appended: its append method is never called.
    target.items.insert(target.items.end(), items.begin(), items.end());
}

void Unpickler::setItems(PickleValue& target, const std::vector<const PickleValue*>& keysAndValues) {
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

void Unpickler::addItems(PickleValue& set, const std::vector<const PickleValue*>& items) {
    if (set.kind != PickleKind::Set) fail(std::string("cannot add items to a ") + pickleKindName(set.kind));
    for (const PickleValue* item : items) addToSet(set, item);
}

// Dict keys and set items are compared through canonical ids: equal keys (by Python's rules
// for these kinds) get the same id, and each container maps ids to positions. The ids are
// handed out here, in sequence, so no key a file can choose collides with another: every
// insert is O(1) in the container plus O(log n) to find the id, whatever the keys. A NaN is
// equal to nothing but itself (the same object, shared through the memo), so each NaN object
// gets its own id, as in Python.
void Unpickler::setItem(PickleValue& dict, const PickleValue* key, const PickleValue* value) {
    requireHashable(*key);
    auto& index = keyIndex_[&dict];
    const auto [it, inserted] = index.emplace(keyId(*key), dict.entries.size());
    if (!inserted) {
        // Python: the first key stays, the value is replaced.
        dict.entries[it->second].value = value;
        return;
    }
    dict.entries.push_back({key, value});
}

void Unpickler::addToSet(PickleValue& set, const PickleValue* item) {
    requireHashable(*item);
    if (keyIndex_[&set].emplace(keyId(*item), set.items.size()).second) set.items.push_back(item);
}

void Unpickler::requireHashable(const PickleValue& key) {
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

uint64_t Unpickler::keyId(const PickleValue& key) {
    if (const auto cached = keyIds_.find(&key); cached != keyIds_.end()) return cached->second;
    uint64_t id = 0;
    if (isNumeric(key.kind)) {
        const NumericKey number = numericKey(key);
        if (!number.isInteger && std::isnan(number.real)) {
            id = nextKeyId_++;  // only this very object equals it
        } else {
            uint64_t bits = 0;
            if (number.isInteger) bits = static_cast<uint64_t>(number.integer);
            else std::memcpy(&bits, &number.real, sizeof bits);
            id = scalarKeyIds_.emplace(std::make_pair(number.isInteger ? 'i' : 'f', bits), nextKeyId_).first->second;
        }
    } else if (key.kind == PickleKind::None) {
        id = scalarKeyIds_.emplace(std::make_pair('n', uint64_t{0}), nextKeyId_).first->second;
    } else if (key.kind == PickleKind::Tuple) {
        std::vector<uint64_t> items;
        items.reserve(key.items.size());
        for (const PickleValue* item : key.items) items.push_back(keyId(*item));  // depth bounded by tupleNesting
        id = tupleKeyIds_.emplace(std::move(items), nextKeyId_).first->second;
    } else if (key.kind == PickleKind::Global) {
        id = globalKeyIds_.emplace(std::make_pair(key.module, key.name), nextKeyId_).first->second;
    } else {
        // String, Bytes, BigInt: a view of the value's own text (values never move or change).
        const char tag = key.kind == PickleKind::String ? 's' : key.kind == PickleKind::Bytes ? 'y' : 'b';
        id = textKeyIds_.emplace(std::make_pair(tag, std::string_view(key.text)), nextKeyId_).first->second;
    }
    if (id == nextKeyId_) ++nextKeyId_;
    keyIds_.emplace(&key, id);
    return id;
}

}  // namespace npw
