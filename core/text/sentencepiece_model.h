#pragma once
// SentencePiece's tokenizer.model (a protobuf ModelProto, google/sentencepiece
// src/sentencepiece_model.proto, as of the 0.1.97 release Debian ships) read by npw's own code:
// libsentencepiece cannot share a process with LibTorch (notes/environment.md).
//
// Only what encoding and decoding need is kept; everything else is skipped as protobuf skips
// unknown fields. The parser checks every length against the buffer, caps sizes and reports
// bad input as an npw::Error naming the file and the field (e.g. "pieces[12].score is NaN").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npw::sentencepiece {

enum class PieceType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
enum class ModelType : int32_t { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };

const char* pieceTypeName(PieceType type);
const char* modelTypeName(ModelType type);

struct Piece {
    std::string text;
    float score = 0.0f;
    PieceType type = PieceType::Normal;
};

// TrainerSpec fields the encoder and decoder read (proto2 defaults where a field is absent).
struct TrainerSpec {
    ModelType modelType = ModelType::Unigram;
    int32_t vocabSize = 8000;  // informational: the pieces are what counts
    bool byteFallback = false;
    bool treatWhitespaceAsSuffix = false;
    bool splitDigits = false;  // training-time flags, kept for describing the model
    bool splitByWhitespace = true;
    bool allowWhitespaceOnlyPieces = false;
    int32_t unkId = 0, bosId = 1, eosId = 2, padId = -1;  // informational; ids come from the pieces
    std::string unkPiece = "<unk>", bosPiece = "<s>", eosPiece = "</s>", padPiece = "<pad>";
    bool hasUnkSurface = false;
    std::string unkSurface = " \xE2\x81\x87 ";  // " ⁇ ", what <unk> decodes to
};

struct NormalizerSpec {
    std::string name;
    std::string precompiledCharsmap;  // <u32 trie size><Darts double array><NUL-separated replacements>
    bool addDummyPrefix = true;
    bool removeExtraWhitespaces = true;
    bool escapeWhitespaces = true;
};

struct ModelProto {
    std::vector<Piece> pieces;
    TrainerSpec trainer;
    NormalizerSpec normalizer;
    bool hasDenormalizer = false;
    NormalizerSpec denormalizer;
};

// Limits: larger inputs are refused by name, before anything of their size is allocated.
inline constexpr std::size_t maxModelBytes = std::size_t{256} << 20;  // 256 MiB
inline constexpr std::size_t maxPieces = std::size_t{1} << 22;        // 4,194,304 (real models: <= 256k)
inline constexpr std::size_t maxPieceBytes = 8000;                    // SentencePiece's own kMaxPieceSize

// Parses and validates a ModelProto. `source` names the file in error messages. Checks what
// SentencePiece's loader checks (non-empty pieces without NUL, no duplicate piece within the
// normal or the reserved group, exactly one unknown piece, 256 byte pieces when byte_fallback is
// on and none when off) plus what npw needs: valid UTF-8 pieces, finite scores (no NaN), known
// enum values, sizes under the limits above.
ModelProto parseModelProto(std::string_view bytes, const std::string& source);

// True when `bytes` starts like a serialized ModelProto (the first field is pieces,
// trainer_spec or normalizer_spec, length-delimited): for telling file kinds apart.
bool looksLikeModelProto(std::string_view bytes);

// <0xNN> pieces: the byte, or -1.
int pieceToByte(std::string_view piece);

} // namespace npw::sentencepiece
