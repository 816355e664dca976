#pragma once
// A bounds-checked reader of the protobuf wire format (https://protobuf.dev/programming-guides/encoding/),
// enough for SentencePiece's ModelProto: varints, 32/64-bit fixed fields and length-delimited
// fields (strings, bytes, nested messages). No library, no recursion, no allocation beyond the
// caller's: every length is checked against what is left of the buffer before it is used, so a
// truncated or lying file ends in an npw::Error that names the file, the field and the offset.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace npw::protobuf {

enum class WireType : uint8_t { Varint = 0, Fixed64 = 1, LengthDelimited = 2, StartGroup = 3, EndGroup = 4, Fixed32 = 5 };

struct Field {
    uint32_t number = 0;
    WireType wireType = WireType::Varint;
    uint64_t varint = 0;          // Varint
    uint32_t fixed32 = 0;         // Fixed32 (a float's bits)
    uint64_t fixed64 = 0;         // Fixed64
    std::string_view bytes;       // LengthDelimited: the payload, inside the reader's buffer
    std::size_t offset = 0;       // where the field's tag starts, from the start of the file
};

// Reads the fields of one message in order. Errors read
// "<source>: field '<path>.<n>' at byte <offset>: <problem>".
class Reader {
public:
    // `message` lies at `baseOffset` in the file called `source`; `path` names the message
    // ("" for the top level, "trainer_spec", "pieces[3]") in error messages.
    Reader(std::string_view message, std::string source, std::string path, std::size_t baseOffset = 0);

    // The next field, false at the end of the message. Throws npw::Error on a malformed tag,
    // a varint longer than 10 bytes, a length past the end, a group or a reserved wire type.
    bool next(Field& field);

    // Checks for use by the message's parser; they throw naming `name` (the field's name).
    void expectWireType(const Field& field, WireType expected, const char* name) const;
    [[noreturn]] void fail(const Field& field, const std::string& name, const std::string& problem) const;

    const std::string& source() const { return source_; }
    const std::string& path() const { return path_; }
    std::string fieldPath(const std::string& name) const { return path_.empty() ? name : path_ + "." + name; }

    // A nested message's reader (its payload and where it lies in the file).
    Reader nested(const Field& field, const std::string& name) const;

private:
    uint64_t readVarint(const char* what);
    [[noreturn]] void failAt(std::size_t offset, const std::string& problem) const;

    std::string_view data_;
    std::size_t pos_ = 0;
    std::string source_;
    std::string path_;
    std::size_t baseOffset_ = 0;
};

} // namespace npw::protobuf
