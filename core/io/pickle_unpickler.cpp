#include "core/io/pickle_unpickler.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/text/utf8.h"
#include "core/util/error.h"

namespace npw {

namespace {

// Names of every opcode of pickle protocols 0-5, accepted or not, for error messages.
const char* opcodeName(uint8_t op) {
    // clang-format off
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
    // clang-format on
}

}  // namespace

void Unpickler::run() {
    if (bytes_.empty()) throw Error("pickle '" + source_ + "': empty (0 bytes)");
    while (true) {
        if (pos_ >= bytes_.size())
            throw Error("pickle '" + source_ + "': ends at byte " + std::to_string(pos_) + " without STOP (truncated)");
        opOffset_ = pos_;
        op_ = static_cast<uint8_t>(bytes_[pos_++]);
        if (op_ == STOP) {
            stop();
            return;
        }
        step();
    }
}

void Unpickler::fail(const std::string& problem) const {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", op_);
    throw Error("pickle '" + source_ + "': " + opcodeName(op_) + " (" + code + ") at offset " +
                std::to_string(opOffset_) + ": " + problem);
}

// ---- input ----

std::string_view Unpickler::take(uint64_t count) {
    if (count > bytes_.size() - pos_)
        fail("needs " + std::to_string(count) + " bytes, only " + std::to_string(bytes_.size() - pos_) +
             " are left (truncated pickle)");
    std::string_view result = bytes_.substr(pos_, count);
    pos_ += count;
    return result;
}

uint64_t Unpickler::unsignedLE(size_t count) {
    std::string_view raw = take(count);
    uint64_t value = 0;
    for (size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
    return value;
}

std::string_view Unpickler::takeLine() {
    constexpr size_t kMaxLine = 1024;
    // Searching a bounded window keeps a hostile pickle without newlines from costing O(n) per opcode.
    const size_t length = bytes_.substr(pos_, kMaxLine + 1).find('\n');
    if (length == std::string_view::npos)
        fail("no newline within " + std::to_string(kMaxLine) + " bytes (a GLOBAL name line)");
    std::string_view line = bytes_.substr(pos_, length);
    pos_ += length + 1;
    return line;
}

std::string_view Unpickler::takeSized(uint64_t length, const char* what) {
    if (length > limits_.maxStringBytes)
        fail(std::string("a ") + what + " of " + std::to_string(length) + " bytes exceeds the limit of " +
             std::to_string(limits_.maxStringBytes));
    return take(length);
}

// ---- values ----

PickleValue* Unpickler::make(PickleKind kind) {
    if (document_.values_.size() >= limits_.maxObjects)
        fail("more than " + std::to_string(limits_.maxObjects) + " objects (limit against hostile pickles)");
    PickleValue& value = document_.values_.emplace_back();
    value.kind = kind;
    return &value;
}

PickleValue* Unpickler::makeString(std::string_view text) {
    if (utf8::findInvalid(text) != std::string_view::npos) fail("the string is not valid UTF-8");
    PickleValue* value = make(PickleKind::String);
    value->text = text;
    return value;
}

PickleValue* Unpickler::makeBytes(std::string_view bytes) {
    PickleValue* value = make(PickleKind::Bytes);
    value->text = bytes;
    return value;
}

PickleValue* Unpickler::makeInt(int64_t integer) {
    PickleValue* value = make(PickleKind::Int);
    value->integer = integer;
    return value;
}

PickleValue* Unpickler::makeTuple(std::vector<const PickleValue*> items) {
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

PickleValue* Unpickler::singleton(PickleValue*& slot, PickleKind kind, bool boolean) {
    if (!slot) {
        slot = make(kind);
        slot->boolean = boolean;
    }
    return slot;
}

PickleValue* Unpickler::long1(std::string_view raw) {
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

PickleValue* Unpickler::binFloat() {
    // The one big-endian field of the format.
    std::string_view raw = take(8);
    uint64_t bits = 0;
    for (char byte : raw) bits = bits << 8 | static_cast<uint8_t>(byte);
    PickleValue* value = make(PickleKind::Float);
    std::memcpy(&value->real, &bits, 8);
    return value;
}

// ---- the stack ----

PickleValue* Unpickler::pop() {
    if (stack_.size() <= fence()) fail("stack underflow (nothing above the last MARK)");
    PickleValue* value = stack_.back();
    stack_.pop_back();
    return value;
}

PickleValue* Unpickler::top() {
    if (stack_.size() <= fence()) fail("stack underflow (nothing above the last MARK)");
    return stack_.back();
}

void Unpickler::pushMark() {
    if (marks_.size() >= limits_.maxDepth)
        fail("more than " + std::to_string(limits_.maxDepth) + " MARKs open at once (limit against hostile pickles)");
    marks_.push_back(stack_.size());
}

std::vector<const PickleValue*> Unpickler::popMark() {
    if (marks_.empty()) fail("no open MARK");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<const PickleValue*> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
}

// ---- opcode steps ----

void Unpickler::step() {
    // Each opcode belongs to exactly one family, so the order only decides how soon one is found.
    if (stepMemo() || stepText() || stepMarkOrTuple() || stepContainer() || stepConstant() || stepObject() ||
        stepFraming())
        return;
    fail("opcode not allowed in a checkpoint (npw reads only the weights-only set and what protocols 2-4 need for it)");
}

bool Unpickler::stepFraming() {
    switch (op_) {
        case PROTO: {
            const uint64_t protocol = unsignedLE(1);
            if (opOffset_ != 0) fail("PROTO is allowed only as the first opcode");
            if (protocol < 2 || protocol > 5) fail("protocol " + std::to_string(protocol) + " (only 2 to 5 are read)");
            document_.protocol_ = static_cast<int>(protocol);
            return true;
        }
        case FRAME: {
            // Protocol 4 framing is a read-ahead hint; the frame must still lie inside the pickle.
            const uint64_t length = unsignedLE(8);
            if (length > bytes_.size() - pos_)
                fail("a frame of " + std::to_string(length) + " bytes runs past the end of the pickle");
            return true;
        }
        default:
            return false;
    }
}

bool Unpickler::stepConstant() {
    switch (op_) {
        case NONE:
            push(singleton(none_, PickleKind::None, false));
            return true;
        case NEWTRUE:
            push(singleton(true_, PickleKind::Bool, true));
            return true;
        case NEWFALSE:
            push(singleton(false_, PickleKind::Bool, false));
            return true;
        case BININT:
            push(makeInt(static_cast<int32_t>(static_cast<uint32_t>(unsignedLE(4)))));
            return true;
        case BININT1:
            push(makeInt(static_cast<int64_t>(unsignedLE(1))));
            return true;
        case BININT2:
            push(makeInt(static_cast<int64_t>(unsignedLE(2))));
            return true;
        case LONG1:
            push(long1(takeSized(unsignedLE(1), "long")));
            return true;
        case BINFLOAT:
            push(binFloat());
            return true;
        default:
            return false;
    }
}

bool Unpickler::stepText() {
    switch (op_) {
        case SHORT_BINUNICODE:
            push(makeString(takeSized(unsignedLE(1), "string")));
            return true;
        case BINUNICODE:
            push(makeString(takeSized(unsignedLE(4), "string")));
            return true;
        case BINUNICODE8:
            push(makeString(takeSized(unsignedLE(8), "string")));
            return true;
        // torch.load decodes Python 2 byte strings with encoding='utf-8'; so does npw.
        case SHORT_BINSTRING:
            push(makeString(takeSized(unsignedLE(1), "string")));
            return true;
        case SHORT_BINBYTES:
            push(makeBytes(takeSized(unsignedLE(1), "bytes value")));
            return true;
        case BINBYTES:
            push(makeBytes(takeSized(unsignedLE(4), "bytes value")));
            return true;
        case BINBYTES8:
            push(makeBytes(takeSized(unsignedLE(8), "bytes value")));
            return true;
        default:
            return false;
    }
}

bool Unpickler::stepMarkOrTuple() {
    switch (op_) {
        case MARK:
            pushMark();
            return true;
        case EMPTY_TUPLE:
            push(makeTuple({}));
            return true;
        case TUPLE:
            push(makeTuple(popMark()));
            return true;
        case TUPLE1: {
            const PickleValue* a = pop();
            push(makeTuple({a}));
            return true;
        }
        case TUPLE2: {
            const PickleValue* b = pop();
            const PickleValue* a = pop();
            push(makeTuple({a, b}));
            return true;
        }
        case TUPLE3: {
            const PickleValue* c = pop();
            const PickleValue* b = pop();
            const PickleValue* a = pop();
            push(makeTuple({a, b, c}));
            return true;
        }
        default:
            return false;
    }
}

bool Unpickler::stepMemo() {
    switch (op_) {
        case BINGET:
            memoGet(unsignedLE(1));
            return true;
        case LONG_BINGET:
            memoGet(unsignedLE(4));
            return true;
        case BINPUT:
            memoPut(unsignedLE(1));
            return true;
        case LONG_BINPUT:
            memoPut(unsignedLE(4));
            return true;
        case MEMOIZE:
            memoPut(memo_.size());
            return true;
        default:
            return false;
    }
}

void Unpickler::memoPut(uint64_t index) {
    PickleValue* value = top();
    auto it = memo_.find(index);
    if (it != memo_.end()) {
        it->second = value;
        return;
    }
    if (memo_.size() >= limits_.maxMemoEntries)
        fail("more than " + std::to_string(limits_.maxMemoEntries) + " memo entries (limit against hostile pickles)");
    memo_.emplace(index, value);
}

void Unpickler::memoGet(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
    push(it->second);
}

void Unpickler::stop() {
    if (!marks_.empty()) fail(std::to_string(marks_.size()) + " MARK(s) still open");
    if (stack_.size() != 1) fail("the stack holds " + std::to_string(stack_.size()) + " values, not exactly one");
    if (pos_ != bytes_.size())
        fail(std::to_string(bytes_.size() - pos_) + " bytes after STOP (a pickle must end there)");
    document_.root_ = stack_.back();
}

std::shared_ptr<const PickleDocument> unpickle(std::string_view bytes, const std::string& source,
                                               const PickleLimits& limits) {
    auto document = std::make_shared<PickleDocument>();
    Unpickler(bytes, source, limits, *document).run();
    return document;
}

}  // namespace npw
