// Lists, dicts and sets for the unpickler. Dict keys and set items follow Python's rules for
// the primitive kinds, so a pickle's dict has the same keys here as it had in Python.
#include <cmath>
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

size_t mixHash(size_t seed, size_t value) { return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

bool keysEqual(const PickleValue& a, const PickleValue& b) {
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

void Unpickler::setItem(PickleValue& dict, const PickleValue* key, const PickleValue* value) {
    requireHashable(*key);
    const size_t hash = hashOf(*key);
    const std::ptrdiff_t found = findKey(dict, *key, hash);
    if (found >= 0) {
        // Python: the first key stays, the value is replaced.
        dict.entries[static_cast<size_t>(found)].value = value;
        return;
    }
    keyIndex_[&dict].emplace(hash, dict.entries.size());
    dict.entries.push_back({key, value});
}

void Unpickler::addToSet(PickleValue& set, const PickleValue* item) {
    requireHashable(*item);
    const size_t hash = hashOf(*item);
    if (findKey(set, *item, hash) >= 0) return;
    keyIndex_[&set].emplace(hash, set.items.size());
    set.items.push_back(item);
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

size_t Unpickler::hashOf(const PickleValue& key) {
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

// Finds `key` among the keys of a dict (entries) or set (items); -1 when absent.
std::ptrdiff_t Unpickler::findKey(const PickleValue& container, const PickleValue& key, size_t hash) {
    auto& index = keyIndex_[&container];
    auto [first, last] = index.equal_range(hash);
    for (auto it = first; it != last; ++it) {
        const PickleValue* existing =
            container.kind == PickleKind::Dict ? container.entries[it->second].key : container.items[it->second];
        if (keysEqual(*existing, key)) return static_cast<std::ptrdiff_t>(it->second);
    }
    return -1;
}

}  // namespace npw
