#pragma once
// The interpreter behind unpickle() (core/io/pickle.h), private to it: only the pickle_*.cpp
// files include this. Its opcode steps are split by family over
//   pickle_unpickler.cpp   input, the stack, framing, constants, strings, tuples, the memo;
//   pickle_containers.cpp  lists, dicts and sets, with Python's rules for dict keys;
//   pickle_objects.cpp     globals, calls, instances and persistent ids: the allow-list.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/io/pickle.h"

namespace npw {

class Unpickler {
public:
    Unpickler(std::string_view bytes, const std::string& source, const PickleLimits& limits, PickleDocument& document)
        : bytes_(bytes), source_(source), limits_(limits), document_(document) {}

    void run();

private:
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
    // clang-format on

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
    // Per dict/set: the canonical id of each key → its position (pickle_containers.cpp).
    std::unordered_map<const PickleValue*, std::unordered_map<uint64_t, size_t>> keyIndex_;
    // Canonical key ids: equal keys share one. Ordered maps, so no chosen keys can collide.
    std::unordered_map<const PickleValue*, uint64_t> keyIds_;
    std::map<std::pair<char, uint64_t>, uint64_t> scalarKeyIds_;
    std::map<std::pair<char, std::string_view>, uint64_t> textKeyIds_;
    std::map<std::pair<std::string, std::string>, uint64_t> globalKeyIds_;
    std::map<std::vector<uint64_t>, uint64_t> tupleKeyIds_;
    uint64_t nextKeyId_ = 0;
    // Bytes made by _codecs.encode in all (bounded by PickleLimits::maxDerivedBytes).
    uint64_t derivedBytes_ = 0;
    PickleValue* none_ = nullptr;
    PickleValue* true_ = nullptr;
    PickleValue* false_ = nullptr;

    [[noreturn]] void fail(const std::string& problem) const;

    // ---- input ----
    std::string_view take(uint64_t count);
    uint64_t unsignedLE(size_t count);
    std::string_view takeLine();
    std::string_view takeSized(uint64_t length, const char* what);

    // ---- values ----
    PickleValue* make(PickleKind kind);
    PickleValue* makeString(std::string_view text);
    PickleValue* makeBytes(std::string_view bytes);
    PickleValue* makeInt(int64_t integer);
    PickleValue* makeTuple(std::vector<const PickleValue*> items);
    PickleValue* singleton(PickleValue*& slot, PickleKind kind, bool boolean);
    PickleValue* long1(std::string_view raw);
    PickleValue* binFloat();

    // ---- the stack ----
    size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
    void push(PickleValue* value) { stack_.push_back(value); }
    PickleValue* pop();
    PickleValue* top();
    void pushMark();
    std::vector<const PickleValue*> popMark();

    // ---- opcode steps: step() offers op_ to each family, which returns false when it is not theirs ----
    void step();
    bool stepFraming();
    bool stepConstant();
    bool stepText();
    bool stepMarkOrTuple();
    bool stepMemo();
    bool stepContainer();  // pickle_containers.cpp
    bool stepObject();     // pickle_objects.cpp
    void memoPut(uint64_t index);
    void memoGet(uint64_t index);
    void stop();

    // ---- lists, dicts, sets (pickle_containers.cpp) ----
    void append(PickleValue& target, const std::vector<const PickleValue*>& items);
    void setItems(PickleValue& target, const std::vector<const PickleValue*>& keysAndValues);
    void addItems(PickleValue& set, const std::vector<const PickleValue*>& items);
    void setItem(PickleValue& dict, const PickleValue* key, const PickleValue* value);
    void addToSet(PickleValue& set, const PickleValue* item);
    void requireHashable(const PickleValue& key);
    uint64_t keyId(const PickleValue& key);

    // ---- globals, calls, instances, persistent ids (pickle_objects.cpp) ----
    PickleValue* global(std::string_view module, std::string_view name);
    PickleValue* stackGlobal();
    PickleValue* newObject();
    void reduceTop();
    PickleValue* reduce(const PickleValue& callable, const PickleValue* args);
    void build();
    PickleValue* persistentLoad(const PickleValue& id);
    PickleValue* rebuildTensor(const PickleValue& args, const char* callable, bool version2);
    PickleValue* rebuildParameter(const PickleValue& args);
    PickleValue* torchSize(const PickleValue& args);
    PickleValue* builtinSet(const std::string& qualified, const PickleValue& args);
    PickleValue* orderedDict(const PickleValue& args);
    PickleValue* latin1Bytes(const PickleValue& args);
    PickleValue* placeholder(const PickleValue& callable, const PickleValue* args, bool instantiated);
    const PickleValue& argument(const PickleValue& args, size_t index, PickleKind kind, const char* callable,
                                const char* what);
    std::vector<int64_t> nonNegativeInts(const PickleValue& tuple, const char* callable, const char* what);
};

}  // namespace npw
