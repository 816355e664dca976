#include "core/text/protobuf_reader.h"

#include "core/util/error.h"

#include <cstring>

namespace npw::protobuf {
namespace {

const char* wireTypeName(WireType type) {
    switch (type) {
    case WireType::Varint: return "varint";
    case WireType::Fixed64: return "64-bit";
    case WireType::LengthDelimited: return "length-delimited";
    case WireType::StartGroup: return "start-group";
    case WireType::EndGroup: return "end-group";
    case WireType::Fixed32: return "32-bit";
    }
    return "unknown";
}

} // namespace

Reader::Reader(std::string_view message, std::string source, std::string path, std::size_t baseOffset)
    : data_(message), source_(std::move(source)), path_(std::move(path)), baseOffset_(baseOffset) {}

void Reader::failAt(std::size_t offset, const std::string& problem) const {
    throw Error(source_ + ": " + (path_.empty() ? std::string("top-level message") : "message '" + path_ + "'") +
                " at byte " + std::to_string(baseOffset_ + offset) + ": " + problem);
}

void Reader::fail(const Field& field, const std::string& name, const std::string& problem) const {
    throw Error(source_ + ": field '" + fieldPath(name) + "' at byte " + std::to_string(field.offset) + ": " + problem);
}

void Reader::expectWireType(const Field& field, WireType expected, const char* name) const {
    if (field.wireType != expected)
        fail(field, name, std::string("is encoded as ") + wireTypeName(field.wireType) + ", expected " +
                              wireTypeName(expected) + " (field number " + std::to_string(field.number) + ")");
}

uint64_t Reader::readVarint(const char* what) {
    const std::size_t start = pos_;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (pos_ >= data_.size())
            failAt(start, std::string("the ") + what + " varint runs past the end of the message (truncated file?)");
        const auto byte = static_cast<unsigned char>(data_[pos_++]);
        if (shift == 63 && byte > 1)
            failAt(start, std::string("the ") + what + " varint overflows 64 bits");
        value |= static_cast<uint64_t>(byte & 0x7F) << shift;
        if ((byte & 0x80) == 0)
            return value;
    }
    failAt(start, std::string("the ") + what + " varint is longer than 10 bytes");
}

bool Reader::next(Field& field) {
    if (pos_ >= data_.size())
        return false;
    const std::size_t start = pos_;
    const uint64_t tag = readVarint("tag");
    const uint64_t number = tag >> 3;
    const auto wire = static_cast<unsigned>(tag & 7);
    if (number == 0 || number > 0x1FFFFFFF)
        failAt(start, "field number " + std::to_string(number) + " is not valid (1 .. 2^29-1); this is not protobuf data");
    field = Field();
    field.number = static_cast<uint32_t>(number);
    field.offset = baseOffset_ + start;
    switch (wire) {
    case 0:
        field.wireType = WireType::Varint;
        field.varint = readVarint("value");
        return true;
    case 1:
        field.wireType = WireType::Fixed64;
        if (data_.size() - pos_ < 8)
            failAt(start, "field " + std::to_string(number) + ": its 8-byte value runs past the end of the message");
        std::memcpy(&field.fixed64, data_.data() + pos_, 8);  // little-endian, as the host
        pos_ += 8;
        return true;
    case 2: {
        field.wireType = WireType::LengthDelimited;
        const uint64_t length = readVarint("length");
        if (length > data_.size() - pos_)
            failAt(start, "field " + std::to_string(number) + " says it is " + std::to_string(length) +
                              " bytes long, but only " + std::to_string(data_.size() - pos_) +
                              " bytes of the message are left (truncated or damaged file)");
        field.bytes = data_.substr(pos_, static_cast<std::size_t>(length));
        pos_ += static_cast<std::size_t>(length);
        return true;
    }
    case 3:
    case 4:
        failAt(start, "field " + std::to_string(number) +
                          " is a protobuf group, which SentencePiece's ModelProto never uses (damaged file?)");
    case 5:
        field.wireType = WireType::Fixed32;
        if (data_.size() - pos_ < 4)
            failAt(start, "field " + std::to_string(number) + ": its 4-byte value runs past the end of the message");
        std::memcpy(&field.fixed32, data_.data() + pos_, 4);
        pos_ += 4;
        return true;
    default:
        failAt(start, "field " + std::to_string(number) + " has wire type " + std::to_string(wire) +
                          ", which protobuf does not define; this is not protobuf data");
    }
}

Reader Reader::nested(const Field& field, const std::string& name) const {
    expectWireType(field, WireType::LengthDelimited, name.c_str());
    const std::size_t payloadOffset = static_cast<std::size_t>(field.bytes.data() - data_.data()) + baseOffset_;
    return Reader(field.bytes, source_, fieldPath(name), payloadOffset);
}

} // namespace npw::protobuf
