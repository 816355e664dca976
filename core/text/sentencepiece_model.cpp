#include "core/text/sentencepiece_model.h"

#include "core/text/protobuf_reader.h"
#include "core/text/utf8.h"
#include "core/util/error.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace npw::sentencepiece {
namespace {

using protobuf::Field;
using protobuf::Reader;
using protobuf::WireType;

bool readBool(const Reader& reader, const Field& field, const char* name) {
    reader.expectWireType(field, WireType::Varint, name);
    return field.varint != 0;
}

int32_t readInt32(const Reader& reader, const Field& field, const char* name) {
    reader.expectWireType(field, WireType::Varint, name);
    return static_cast<int32_t>(static_cast<uint32_t>(field.varint));  // int32 is sign-extended to 64 bits
}

float readFloat(const Reader& reader, const Field& field, const char* name) {
    reader.expectWireType(field, WireType::Fixed32, name);
    float value;
    std::memcpy(&value, &field.fixed32, sizeof value);
    return value;
}

std::string readString(const Reader& reader, const Field& field, const char* name, bool mustBeUtf8) {
    reader.expectWireType(field, WireType::LengthDelimited, name);
    if (mustBeUtf8)
        if (const std::size_t bad = utf8::findInvalid(field.bytes); bad != std::string_view::npos)
            reader.fail(field, name, "is not valid UTF-8 (byte " + std::to_string(bad) + " of the string)");
    return std::string(field.bytes);
}

// unk_surface as some trainers wrote it: the C escapes of its UTF-8 bytes as text, " \\342\\201\\207 "
// for the default " ⁇ " (llama2.c's tok105.model, trained with SentencePiece's Python trainer,
// holds exactly that, 14 characters). SentencePiece decodes <unk> to those characters,
// backslashes and all; npw shows what they spell. Only a string whose every backslash starts a
// three-digit octal escape, and whose bytes then form UTF-8, is read so; any other stays as stored.
std::string unescapeOctalSurface(const std::string& stored) {
    if (stored.find('\\') == std::string::npos) return stored;
    std::string out;
    for (std::size_t i = 0; i < stored.size(); ++i) {
        if (stored[i] != '\\') {
            out += stored[i];
            continue;
        }
        if (i + 3 >= stored.size()) return stored;  // a backslash without three digits after it
        int value = 0;
        for (std::size_t k = 1; k <= 3; ++k) {
            const char c = stored[i + k];
            if (c < '0' || c > '7') return stored;
            value = value * 8 + (c - '0');
        }
        if (value > 0xFF) return stored;
        out += static_cast<char>(value);
        i += 3;
    }
    return utf8::findInvalid(out) == std::string_view::npos ? out : stored;
}

void readPiece(Reader reader, Piece& piece) {
    Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case 1: {
            reader.expectWireType(field, WireType::LengthDelimited, "piece");
            if (field.bytes.size() >= maxPieceBytes)
                reader.fail(field, "piece", "is " + std::to_string(field.bytes.size()) + " bytes long; npw, like SentencePiece, refuses pieces of " +
                                                std::to_string(maxPieceBytes) + " bytes or more");
            piece.text = readString(reader, field, "piece", true);
            break;
        }
        case 2: {
            piece.score = readFloat(reader, field, "score");
            if (std::isnan(piece.score))
                reader.fail(field, "score", "is NaN; a piece's score must be a number");
            break;
        }
        case 3: {
            const int32_t type = readInt32(reader, field, "type");
            if (type < 1 || type > 6)
                reader.fail(field, "type", "is " + std::to_string(type) +
                                               ", not a SentencePiece piece type (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)");
            piece.type = static_cast<PieceType>(type);
            break;
        }
        default:
            break;  // extensions and fields of later versions: skipped, as protobuf does
        }
    }
}

void readTrainerSpec(Reader reader, TrainerSpec& spec) {
    Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case 3: {
            const int32_t type = readInt32(reader, field, "model_type");
            if (type < 1 || type > 4)
                reader.fail(field, "model_type", "is " + std::to_string(type) + ", not a SentencePiece model type (1 unigram, 2 bpe, 3 word, 4 char)");
            spec.modelType = static_cast<ModelType>(type);
            break;
        }
        case 4: spec.vocabSize = readInt32(reader, field, "vocab_size"); break;
        case 22: spec.splitByWhitespace = readBool(reader, field, "split_by_whitespace"); break;
        case 24: spec.treatWhitespaceAsSuffix = readBool(reader, field, "treat_whitespace_as_suffix"); break;
        case 25: spec.splitDigits = readBool(reader, field, "split_digits"); break;
        case 26: spec.allowWhitespaceOnlyPieces = readBool(reader, field, "allow_whitespace_only_pieces"); break;
        case 35: spec.byteFallback = readBool(reader, field, "byte_fallback"); break;
        case 40: spec.unkId = readInt32(reader, field, "unk_id"); break;
        case 41: spec.bosId = readInt32(reader, field, "bos_id"); break;
        case 42: spec.eosId = readInt32(reader, field, "eos_id"); break;
        case 43: spec.padId = readInt32(reader, field, "pad_id"); break;
        case 44:
            spec.unkSurface = unescapeOctalSurface(readString(reader, field, "unk_surface", true));
            spec.hasUnkSurface = true;
            break;
        case 45: spec.unkPiece = readString(reader, field, "unk_piece", true); break;
        case 46: spec.bosPiece = readString(reader, field, "bos_piece", true); break;
        case 47: spec.eosPiece = readString(reader, field, "eos_piece", true); break;
        case 48: spec.padPiece = readString(reader, field, "pad_piece", true); break;
        default: break;  // training options (input files, sizes, ...): not needed to encode
        }
    }
}

void readNormalizerSpec(Reader reader, NormalizerSpec& spec) {
    Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case 1: spec.name = readString(reader, field, "name", false); break;
        case 2: spec.precompiledCharsmap = readString(reader, field, "precompiled_charsmap", false); break;
        case 3: spec.addDummyPrefix = readBool(reader, field, "add_dummy_prefix"); break;
        case 4: spec.removeExtraWhitespaces = readBool(reader, field, "remove_extra_whitespaces"); break;
        case 5: spec.escapeWhitespaces = readBool(reader, field, "escape_whitespaces"); break;
        default: break;  // normalization_rule_tsv: the rules as given to the trainer, compiled into the charsmap
        }
    }
}

} // namespace

const char* pieceTypeName(PieceType type) {
    switch (type) {
    case PieceType::Normal: return "normal";
    case PieceType::Unknown: return "unknown";
    case PieceType::Control: return "control";
    case PieceType::UserDefined: return "user-defined";
    case PieceType::Unused: return "unused";
    case PieceType::Byte: return "byte";
    }
    return "?";
}

const char* modelTypeName(ModelType type) {
    switch (type) {
    case ModelType::Unigram: return "unigram";
    case ModelType::Bpe: return "bpe";
    case ModelType::Word: return "word";
    case ModelType::Char: return "char";
    }
    return "?";
}

int pieceToByte(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>')
        return -1;
    int value = 0;
    for (char c : piece.substr(3, 2)) {
        int digit;
        if (c >= '0' && c <= '9') digit = c - '0';
        else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;  // SentencePiece writes and accepts upper case only
        else return -1;
        value = value * 16 + digit;
    }
    return value;
}

bool looksLikeModelProto(std::string_view bytes) {
    if (bytes.size() < 2)
        return false;
    const auto tag = static_cast<unsigned char>(bytes[0]);
    return tag == 0x0A || tag == 0x12 || tag == 0x1A;  // fields 1, 2, 3, length-delimited
}

ModelProto parseModelProto(std::string_view bytes, const std::string& source) {
    if (bytes.size() > maxModelBytes)
        throw Error(source + ": " + std::to_string(bytes.size()) + " bytes is more than npw reads as a SentencePiece model (" +
                    std::to_string(maxModelBytes >> 20) + " MiB)");
    if (bytes.empty())
        throw Error(source + ": the file is empty, not a SentencePiece model");
    ModelProto model;
    Reader reader(bytes, source, "");
    Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case 1: {
            if (model.pieces.size() >= maxPieces)
                reader.fail(field, "pieces", "more than " + std::to_string(maxPieces) + " pieces; npw refuses vocabularies that large");
            const std::string name = "pieces[" + std::to_string(model.pieces.size()) + "]";
            Piece piece;
            readPiece(reader.nested(field, name), piece);
            model.pieces.push_back(std::move(piece));
            break;
        }
        // A message field given twice is merged, as protobuf merges it.
        case 2: readTrainerSpec(reader.nested(field, "trainer_spec"), model.trainer); break;
        case 3: readNormalizerSpec(reader.nested(field, "normalizer_spec"), model.normalizer); break;
        case 5:
            readNormalizerSpec(reader.nested(field, "denormalizer_spec"), model.denormalizer);
            model.hasDenormalizer = true;
            break;
        default: break;  // self_test_data (4) and extensions
        }
    }

    // SentencePiece's ModelInterface::InitializePieces checks, with the file and piece named.
    if (model.pieces.empty())
        throw Error(source + ": the model has no pieces (field 'pieces' is absent); not a SentencePiece model, or an empty one");
    std::unordered_map<std::string_view, std::size_t> normalIds, reservedIds;
    int64_t unknownId = -1;
    bool byteFound[256] = {};
    for (std::size_t i = 0; i < model.pieces.size(); ++i) {
        const Piece& piece = model.pieces[i];
        const std::string where = source + ": pieces[" + std::to_string(i) + "]";
        if (piece.text.empty())
            throw Error(where + ".piece is empty; SentencePiece requires every piece to have text");
        if (piece.text.find('\0') != std::string::npos)
            throw Error(where + ".piece holds a NUL byte, which SentencePiece forbids");
        const bool normalGroup = piece.type == PieceType::Normal || piece.type == PieceType::UserDefined ||
                                 piece.type == PieceType::Unused;
        auto& group = normalGroup ? normalIds : reservedIds;
        if (const auto [it, inserted] = group.emplace(piece.text, i); !inserted)
            throw Error(where + ".piece '" + piece.text + "' is already pieces[" + std::to_string(it->second) + "]");
        if (piece.type == PieceType::Unknown) {
            if (unknownId >= 0)
                throw Error(where + " is a second unknown piece (pieces[" + std::to_string(unknownId) + "] is the first)");
            unknownId = static_cast<int64_t>(i);
        }
        if (piece.type == PieceType::Byte) {
            if (!model.trainer.byteFallback)
                throw Error(where + " is the byte piece '" + piece.text + "' although trainer_spec.byte_fallback is false");
            const int byte = pieceToByte(piece.text);
            if (byte < 0)
                throw Error(where + " has type byte but its text '" + piece.text + "' is not <0xNN>");
            byteFound[byte] = true;
        }
    }
    if (unknownId < 0)
        throw Error(source + ": no piece has type unknown (SentencePiece needs exactly one, usually <unk>)");
    if (model.trainer.byteFallback)
        for (int byte = 0; byte < 256; ++byte)
            if (!byteFound[byte]) {
                char name[8];
                std::snprintf(name, sizeof name, "<0x%02X>", byte);
                throw Error(source + ": trainer_spec.byte_fallback is true but there is no byte piece " + name +
                            " (byte fallback needs all 256)");
            }
    return model;
}

} // namespace npw::sentencepiece
