#include "core/models/gguf_export.h"
#include "core/models/non_finite.h"
#include "core/models/weight_values.h"

#include "core/text/llama2c_tokenizer.h"
#include "core/text/sentencepiece_tokenizer.h"
#include "core/text/tiktoken.h"
#include "core/text/tokenizer.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/text/json_fields.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <functional>
#include <optional>
#include <ostream>

namespace npw {

namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// The pre-tokenizer regex of LLaMA-3's tokenizer.json, which llama.cpp calls "llama-bpe", is
// kLlama3Pattern (core/text/tiktoken.h).

// Qwen2's (and Qwen2.5's, Qwen3's) pre-tokenizer regex, which llama.cpp calls "qwen2": LLaMA-3's
// with single digits.
const char* const kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string defaultName(const LlamaCheckpoint& ckpt) {
    std::filesystem::path p(ckpt.source);
    if (ckpt.source.rfind("demo:", 0) == 0) return ckpt.source;
    std::string name = std::filesystem::is_directory(p) ? p.lexically_normal().filename().string() : p.stem().string();
    if (name.empty() || name == ".") name = p.lexically_normal().parent_path().filename().string();
    return name.empty() ? "npw-export" : name;
}

bool isByteToken(const std::string& piece) {
    return piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>' && std::isxdigit(static_cast<unsigned char>(piece[3])) &&
           std::isxdigit(static_cast<unsigned char>(piece[4]));
}

// Whether the text gets a "▁" in front, as llama.cpp's add_space_prefix does for SentencePiece.
bool addsSpacePrefix(const json& root) {
    const json normalizer = root.value("normalizer", json());
    std::vector<json> steps;
    if (normalizer.is_object()) {
        if (normalizer.value("type", "") == "Sequence")
            for (const json& n : normalizer.value("normalizers", json::array())) steps.push_back(n);
        else
            steps.push_back(normalizer);
    }
    for (const json& n : steps)
        if (n.value("type", "") == "Prepend" && n.value("prepend", "") == "\u2581") return true;
    const json pre = root.value("pre_tokenizer", json());
    if (pre.is_object() && pre.value("type", "") == "Metaspace") {
        if (pre.contains("prepend_scheme") && pre["prepend_scheme"].is_string())
            return pre["prepend_scheme"].get<std::string>() != "never";
        return pre.value("add_prefix_space", true);
    }
    return false;
}

// llama.cpp's name for a byte-level tokenizer's pre-tokenizer; npw::Error for one it cannot name
// (llama.cpp would otherwise split the text differently from the model's own tokenizer).
std::string byteLevelPreName(const json& root, const std::string& path) {
    const json pre = root.value("pre_tokenizer", json());
    std::vector<json> steps;
    if (pre.is_object() && pre.value("type", "") == "Sequence")
        for (const json& p : pre.value("pretokenizers", json::array())) steps.push_back(p);
    else if (pre.is_object())
        steps.push_back(pre);
    bool llama3 = false, gpt2 = false, qwen2 = false;
    for (const json& p : steps) {
        const std::string type = p.value("type", "");
        if (type == "Split" && p.contains("pattern") && p["pattern"].value("Regex", "") == kLlama3Pattern) llama3 = true;
        if (type == "Split" && p.contains("pattern") && p["pattern"].value("Regex", "") == kQwen2Pattern) qwen2 = true;
        if (type == "ByteLevel" && p.value("use_regex", true)) gpt2 = true;
    }
    if (llama3) return "llama-bpe";
    if (qwen2) return "qwen2";
    if (gpt2 && steps.size() == 1) return "gpt-2";
    throw Error("tokenizer '" + path +
                "': its byte-level pre-tokenizer is none of LLaMA-3's, Qwen2's and GPT-2's, and llama.cpp would split text "
                "differently from it; npw does not export it");
}

int32_t pieceId(const json& vocab, const std::string& piece) {
    if (piece.empty() || !vocab.contains(piece)) return -1;
    return vocab[piece].get<int32_t>();
}

} // namespace

GgufDtype parseGgufDtype(const std::string& name) {
    if (name == "f32") return GgufDtype::F32;
    if (name == "f16") return GgufDtype::F16;
    if (name == "bf16") return GgufDtype::BF16;
    throw Error("GGUF weight type '" + name + "' is not one of: f32, f16, bf16");
}

namespace {

// llama.cpp's "llama" tokenizer needs a newline token to load: the byte piece <0x0A> or a "\n"
// piece (node-llama-cpp 3.22.1 aborts with std::out_of_range without one). A tokenizer with
// neither (a small character-level one such as babyllama's tok105.model, no byte fallback) turns
// a newline into its unknown piece: so does llama.cpp when that piece's text is "\n" (it looks the
// character up as a piece), and the vocabulary then loads. No unknown piece: refused.
void giveNewlineToUnknownPiece(const std::string& where, std::vector<std::string>& tokens,
                               const std::vector<int32_t>& types, std::vector<std::string>* notes) {
    const auto unknown = std::find(types.begin(), types.end(), static_cast<int32_t>(Unknown));
    if (unknown == types.end())
        throw Error(where + "has neither the byte piece <0x0A> nor a newline piece, nor an unknown piece to stand for "
                    "one, and llama.cpp aborts loading such a vocabulary (std::out_of_range in node-llama-cpp 3.22.1): "
                    "npw does not export it (a tokenizer trained with byte_fallback, as LLaMA's, has the byte pieces)");
    const size_t id = static_cast<size_t>(unknown - types.begin());
    if (notes)
        notes->push_back("the tokenizer has no newline piece, which llama.cpp needs to load a vocabulary: its unknown "
                         "piece (id " + std::to_string(id) + ", '" + tokens[id] +
                         "') is written with the text \"\\n\", so llama.cpp encodes a newline as that id, as "
                         "SentencePiece does (it prints the piece as a newline)");
    tokens[id] = "\n";
}

// A SentencePiece tokenizer.model as llama.cpp's "llama" tokenizer, the way llama.cpp's
// convert_hf_to_gguf.py (_set_vocab_sentencepiece) writes it: the pieces with their scores and
// types (SentencePiece's piece types are llama.cpp's token types, same numbers), rows the
// tokenizer does not fill as [PADn] (score -1000, unused), add_space_prefix = add_dummy_prefix.
// llama.cpp joins the adjacent pair whose joined piece scores highest, leftmost first, as
// SentencePiece's BPE does; what it cannot do is refused or noted.
// llama.cpp's SentencePiece-style ("llama") vocabulary: pieces, scores and piece types, the
// special ids that exist (negative: none), BOS added whenever the tokenizer has one (npw's own
// encoding in generate and eval puts it first), never EOS.
GgufMetadata llamaVocabularyMetadata(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                                     const std::vector<int32_t>& types, int64_t bos, int64_t eos, int64_t unk,
                                     int64_t pad, bool addSpacePrefix) {
    GgufMetadata kv;
    kv.emplace_back("tokenizer.ggml.model", GgufValue::str("llama"));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(tokens));
    kv.emplace_back("tokenizer.ggml.scores", GgufValue::f32s(scores));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
    auto id = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
    if (bos >= 0) kv.emplace_back("tokenizer.ggml.bos_token_id", id(bos));
    if (eos >= 0) kv.emplace_back("tokenizer.ggml.eos_token_id", id(eos));
    if (unk >= 0) kv.emplace_back("tokenizer.ggml.unknown_token_id", id(unk));
    if (pad >= 0) kv.emplace_back("tokenizer.ggml.padding_token_id", id(pad));
    kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolValue(bos >= 0));
    kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolValue(false));
    kv.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolValue(addSpacePrefix));
    return kv;
}

GgufMetadata sentencePieceMetadata(const SentencePieceTokenizer& spm, const std::string& path, int64_t vocabSize,
                                   std::string* modelName, std::vector<std::string>* notes) {
    using sentencepiece::PieceType;
    const sentencepiece::NormalizerSpec& normalizer = spm.normalizerSpec();
    const std::string where = "tokenizer '" + path + "': ";
    if (spm.kind() != Tokenizer::Kind::SentencePieceBpe)
        throw Error(where + "a SentencePiece unigram model; llama.cpp's \"llama\" tokenizer merges pieces by score as "
                    "SentencePiece's BPE does and would split text differently (its unigram tokenizer is T5's): npw exports "
                    "BPE tokenizer.model files (LLaMA-1/2, Mistral, llama2.c's)");
    if (spm.hasCharsMap())
        throw Error(where + "its normalizer '" + normalizer.name + "' rewrites text with a precompiled charsmap (NFKC "
                    "rules), which llama.cpp's \"llama\" tokenizer does not apply, so text would be split differently: "
                    "npw does not export it (LLaMA's own tokenizer.model uses the identity normalizer)");
    if (!normalizer.escapeWhitespaces)
        throw Error(where + "escape_whitespaces is off, but llama.cpp's \"llama\" tokenizer always writes spaces as U+2581: "
                    "npw does not export it");
    const std::vector<sentencepiece::Piece>& pieces = spm.pieces();
    // llama.cpp looks up the newline as the byte piece <0x0A>, else a "\n" piece; node-llama-cpp
    // 3.22.1 aborts loading a vocabulary with neither (std::out_of_range; measured with
    // babyllama's tok105.model, which has no byte fallback).
    const bool hasNewline = std::any_of(pieces.begin(), pieces.end(),
                                        [](const sentencepiece::Piece& p) { return p.text == "<0x0A>" || p.text == "\n"; });
    if (static_cast<int64_t>(pieces.size()) > vocabSize)
        throw Error(where + "has " + std::to_string(pieces.size()) + " pieces, more than the model's " +
                    std::to_string(vocabSize) + " embedding rows; llama.cpp needs one row per token");

    std::vector<std::string> tokens(static_cast<size_t>(vocabSize));
    std::vector<float> scores(static_cast<size_t>(vocabSize), -1000.0f);
    std::vector<int32_t> types(static_cast<size_t>(vocabSize), Unused);
    bool unused = false, userDefined = false;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i >= pieces.size()) {
            tokens[i] = "[PAD" + std::to_string(i) + "]";
            continue;
        }
        tokens[i] = pieces[i].text;
        scores[i] = pieces[i].score;
        types[i] = static_cast<int32_t>(pieces[i].type);
        unused |= pieces[i].type == PieceType::Unused;
        userDefined |= pieces[i].type == PieceType::UserDefined;
    }
    if (!hasNewline) giveNewlineToUnknownPiece(where, tokens, types, notes);
    if (notes) {
        if (normalizer.removeExtraWhitespaces)
            notes->push_back("the tokenizer removes extra whitespace (remove_extra_whitespaces: leading, trailing and "
                             "repeated spaces), llama.cpp does not: such text is tokenized differently there");
        if (!spm.trainerSpec().byteFallback)
            notes->push_back("the tokenizer has no byte fallback: SentencePiece gives <unk> for a character outside its "
                             "vocabulary, llama.cpp cannot encode it (node-llama-cpp 3.22.1 aborts with std::out_of_range)");
        if (unused) notes->push_back("the tokenizer has unused pieces, which SentencePiece never produces and llama.cpp may");
        if (userDefined)
            notes->push_back("the tokenizer has user-defined pieces: llama.cpp adds the dummy-prefix space again after each "
                             "one, SentencePiece does not");
    }
    if (modelName) *modelName = "llama";
    return llamaVocabularyMetadata(tokens, scores, types, spm.bosId(), spm.eosId(), spm.unkId(), spm.padId(),
                                   normalizer.addDummyPrefix);
}

GgufMetadata jsonTokenizerMetadata(const json& root, const std::shared_ptr<Tokenizer>& tokenizer, const std::string& path,
                                   int64_t vocabSize, std::string* modelName);

// A llama2.c tokenizer.bin as llama.cpp's "llama" tokenizer. The file keeps SentencePiece's
// pieces and scores, which is all llama.cpp's SentencePiece tokenizer works from (it joins the
// adjacent pair whose joined piece scores highest, as run.c's encode does); what it lacks is the
// piece types, which follow from run.c's fixed layout: 0 <unk>, 1 BOS, 2 EOS (written
// "\n<s>\n" / "\n</s>\n"), <0xNN> byte pieces, every other piece normal. llama2.c wrote U+2581
// as a space; llama.cpp's tokens carry U+2581 again. run.c always adds the dummy-prefix space.
GgufMetadata llama2cBinMetadata(const Llama2cTokenizer& bin, const std::string& path, int64_t vocabSize,
                                std::string* modelName, std::vector<std::string>* notes) {
    const std::string where = "tokenizer '" + path + "': ";
    const int64_t n = bin.vocabSize();
    if (n > vocabSize)
        throw Error(where + "has " + std::to_string(n) + " pieces, more than the model's " + std::to_string(vocabSize) +
                    " embedding rows; llama.cpp needs one row per token");
    std::vector<std::string> tokens(static_cast<size_t>(vocabSize));
    std::vector<float> scores(static_cast<size_t>(vocabSize), -1000.0f);
    std::vector<int32_t> types(static_cast<size_t>(vocabSize), Unused);
    bool hasNewline = false, hasBytes = false;
    for (int64_t i = 0; i < vocabSize; ++i) {
        const size_t k = static_cast<size_t>(i);
        if (i >= n) {
            tokens[k] = "[PAD" + std::to_string(i) + "]";
            continue;
        }
        const int32_t id = static_cast<int32_t>(i);
        std::string piece = bin.tokenText(id);
        scores[k] = bin.score(id);
        if (id == 0) {
            types[k] = Unknown;
        } else if (id == bin.bosId() || id == bin.eosId()) {
            types[k] = Control;
            // "\n<s>\n" -> "<s>": the newline padding is llama2.c's, for printing.
            if (piece.size() >= 2 && piece.front() == '\n' && piece.back() == '\n') piece = piece.substr(1, piece.size() - 2);
        } else if (isByteToken(piece)) {
            types[k] = Byte;
            hasBytes = true;
        } else {
            types[k] = Normal;
        }
        if (types[k] == Normal || types[k] == Byte) {
            std::string escaped;
            for (char ch : piece) escaped += ch == ' ' ? std::string("\xe2\x96\x81") : std::string(1, ch);
            piece = std::move(escaped);
        }
        if (piece.empty())
            throw Error(where + "piece " + std::to_string(i) + " is empty, which a GGUF vocabulary cannot hold");
        hasNewline |= piece == "<0x0A>" || piece == "\n";
        tokens[k] = std::move(piece);
    }
    if (!hasNewline) giveNewlineToUnknownPiece(where, tokens, types, notes);
    if (notes) {
        notes->push_back("the tokenizer is a llama2.c tokenizer.bin, which has no piece types: id 0 written as unknown, "
                         "1 and 2 as control (BOS, EOS), <0xNN> pieces as bytes, the others as normal pieces");
        if (!hasBytes)
            notes->push_back("the tokenizer has no byte pieces: run.c gives a character outside its vocabulary the ids "
                             "byte + 3, llama.cpp cannot encode it");
    }
    if (modelName) *modelName = "llama";
    // run.c's encode adds the dummy-prefix space; id 0 is the unknown piece; no padding piece.
    return llamaVocabularyMetadata(tokens, scores, types, bin.bosId(), bin.eosId(), 0, -1, true);
}

// --no-tokenizer: llama.cpp's vocabulary-free GGUF ("no_vocab") loads in llama.cpp itself, but
// node-llama-cpp 3.22.1 tokenizes while loading a model and aborts on it ("Tokenizer not
// initialized"; measured). So: a byte-level ("gpt2") vocabulary of one control token per row,
// no merges. Control tokens never come out of tokenizing text, and llama.cpp prints them only
// when asked for special tokens, so the file runs on ids and claims no text.
GgufMetadata placeholderVocabulary(const LlamaConfig& c) {
    std::vector<std::string> tokens(static_cast<size_t>(c.vocab_size));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "<id:" + std::to_string(i) + ">";
    GgufMetadata kv;
    kv.emplace_back("tokenizer.ggml.model", GgufValue::str("gpt2"));
    kv.emplace_back("tokenizer.ggml.pre", GgufValue::str("default"));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(tokens));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(std::vector<int32_t>(tokens.size(), Control)));
    kv.emplace_back("tokenizer.ggml.merges", GgufValue::strings(std::vector<std::string>{}));
    if (c.bos_token_id >= 0 && c.bos_token_id < c.vocab_size)
        kv.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(c.bos_token_id)));
    if (c.eos_token_id >= 0 && c.eos_token_id < c.vocab_size)
        kv.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(c.eos_token_id)));
    kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolValue(false));
    kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolValue(false));
    return kv;
}

} // namespace

GgufMetadata ggufTokenizerMetadata(const std::string& path, int64_t vocabSize, std::string* modelName,
                                   std::vector<std::string>* notes) {
    const std::string bytes = readTokenizerFileBytes(path);
    switch (detectTokenizerFile(bytes)) {
    case TokenizerFileKind::SentencePiece:
        return sentencePieceMetadata(*SentencePieceTokenizer::fromBytes(bytes, path), path, vocabSize, modelName, notes);
    case TokenizerFileKind::Tiktoken: {  // LLaMA-3's tokenizer.model: its tokenizer.json equivalent (tiktoken.h)
        const json root = tiktokenAsTokenizerJson(bytes, path);
        return jsonTokenizerMetadata(root, Tokenizer::fromJsonValue(root, path), path, vocabSize, modelName);
    }
    case TokenizerFileKind::TokenizerJson: {
        const json root = json_fields::parseJsonLimited(bytes, "tokenizer '" + path + "'");
        return jsonTokenizerMetadata(root, Tokenizer::fromJsonValue(root, path), path, vocabSize, modelName);
    }
    case TokenizerFileKind::Llama2cBin:
        return llama2cBinMetadata(*Llama2cTokenizer::fromBytes(bytes, path, -1), path, vocabSize, modelName, notes);
    case TokenizerFileKind::Unknown:
        break;
    }
    Tokenizer::fromAnyFile(path);  // names what the file is not
    throw Error("tokenizer '" + path + "' cannot be exported");
}

namespace {

GgufMetadata jsonTokenizerMetadata(const json& root, const std::shared_ptr<Tokenizer>& tokenizer, const std::string& path,
                                   int64_t vocabSize, std::string* modelName) {
    const json& model = root.at("model");
    const json& vocab = model.at("vocab");
    const bool byteLevel = tokenizer->kind() == Tokenizer::Kind::ByteLevelBpe;
    const int64_t tokenizerSize = tokenizer->vocabSize();
    if (tokenizerSize > vocabSize)
        throw Error("tokenizer '" + path + "' has " + std::to_string(tokenizerSize) + " tokens, more than the model's " +
                    std::to_string(vocabSize) + " embedding rows; llama.cpp needs one row per token");

    std::vector<std::string> tokens(static_cast<size_t>(vocabSize));
    std::vector<int32_t> types(static_cast<size_t>(vocabSize), Unused);
    std::vector<bool> known(static_cast<size_t>(vocabSize), false);
    for (const auto& [piece, id] : vocab.items()) {
        const auto i = id.get<int64_t>();
        tokens[i] = piece;
        known[i] = true;
        types[i] = Normal;
    }
    const bool byteFallback = model.value("byte_fallback", false);
    if (!byteLevel && byteFallback)
        for (int64_t i = 0; i < vocabSize; ++i)
            if (known[i] && isByteToken(tokens[i])) types[i] = Byte;
    const std::string unkPiece = model.value("unk_token", json()).is_string() ? model["unk_token"].get<std::string>() : "";
    const int32_t unkId = pieceId(vocab, unkPiece);
    for (const json& added : root.value("added_tokens", json::array())) {
        const auto id = added.at("id").get<int64_t>();
        tokens[id] = added.at("content").get<std::string>();
        known[id] = true;
        types[id] = added.value("special", false) ? Control : UserDefined;
    }
    if (unkId >= 0) types[unkId] = Unknown;
    // Rows the tokenizer does not name (a vocabulary padded for the embedding): unused tokens,
    // named as convert_hf_to_gguf.py names them.
    for (int64_t i = 0; i < vocabSize; ++i)
        if (!known[i]) tokens[i] = "[PAD" + std::to_string(i) + "]";

    std::vector<std::string> merges;
    std::vector<float> scores;
    if (!byteLevel) {
        // llama.cpp's SentencePiece tokenizer repeatedly joins the adjacent pair whose joined
        // piece has the highest score; BPE joins the pair of lowest merge rank. Scoring a piece
        // −rank of the merge that makes it makes the two agree (tests/tst_gguf_llamacpp checks it
        // against llama.cpp); pieces no merge makes (characters, bytes, specials) score 0 and are
        // never the result of a join.
        scores.assign(static_cast<size_t>(vocabSize), 0.0f);
        std::vector<bool> scored(static_cast<size_t>(vocabSize), false);
        const json mergeList = model.value("merges", json::array());
        for (size_t rank = 0; rank < mergeList.size(); ++rank) {
            const json& m = mergeList[rank];
            std::string joined;
            if (m.is_string()) {
                const std::string s = m.get<std::string>();
                const size_t space = s.find(' ');
                joined = s.substr(0, space) + s.substr(space + 1);
            } else {
                joined = m[0].get<std::string>() + m[1].get<std::string>();
            }
            const int32_t id = pieceId(vocab, joined);
            if (id >= 0 && !scored[id]) {
                scores[id] = -static_cast<float>(rank);
                scored[id] = true;
            }
        }
    } else {
        for (const json& m : model.value("merges", json::array())) {
            if (m.is_string()) {
                merges.push_back(m.get<std::string>());
                continue;
            }
            const std::string left = m[0].get<std::string>(), right = m[1].get<std::string>();
            if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos)
                throw Error("tokenizer '" + path + "': the merge [\"" + left + "\", \"" + right +
                            "\"] holds a space, which GGUF's \"left right\" merges cannot represent");
            merges.push_back(left + " " + right);
        }
    }

    GgufMetadata kv;
    const std::string ggmlModel = byteLevel ? "gpt2" : "llama";
    if (modelName) *modelName = ggmlModel;
    kv.emplace_back("tokenizer.ggml.model", GgufValue::str(ggmlModel));
    if (byteLevel) kv.emplace_back("tokenizer.ggml.pre", GgufValue::str(byteLevelPreName(root, path)));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(tokens));
    if (!byteLevel) kv.emplace_back("tokenizer.ggml.scores", GgufValue::f32s(scores));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
    if (byteLevel) kv.emplace_back("tokenizer.ggml.merges", GgufValue::strings(merges));
    if (tokenizer->bosId() >= 0) kv.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(tokenizer->bosId()));
    if (tokenizer->eosId() >= 0) kv.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(tokenizer->eosId()));
    if (unkId >= 0) kv.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue::u32(unkId));
    // npw's own encoding (generate, eval) puts BOS first whenever the tokenizer has one.
    kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolValue(tokenizer->bosId() >= 0));
    kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolValue(false));
    if (!byteLevel) kv.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolValue(addsSpacePrefix(root)));
    return kv;
}

// A tensor to write, made only when it is written: the checkpoint's tensors may be views of a
// memory-mapped file in its stored dtype, and the permutations and paddings below are applied
// one tensor at a time as the file is written, so the model is never whole in memory.
struct LazyTensor {
    std::vector<int64_t> shape;  // PyTorch layout
    std::function<at::Tensor()> make;
};

// The checkpoint's tensor `hfName`: its values are checked (finite, naming file, tensor and
// index) when it is first read, if the load left that to its reader (weight_values.h).
LazyTensor fromCheckpoint(const LlamaCheckpoint& ckpt, const at::Tensor& t, const std::string& hfName) {
    std::optional<TensorOrigin> origin;
    if (auto it = ckpt.origins.find(hfName); !ckpt.valuesChecked && it != ckpt.origins.end()) origin = it->second;
    return {t.sizes().vec(), [t, origin] {
                if (origin) checkTensorFinite(t, origin->file, origin->tensor, origin->firstIndex);
                return t;
            }};
}

LazyTensor fixed(const at::Tensor& t) {
    return {t.sizes().vec(), [t] { return t; }};
}

LazyTensor then(LazyTensor x, std::vector<int64_t> shape, std::function<at::Tensor(const at::Tensor&)> step) {
    return {std::move(shape), [make = std::move(x.make), step = std::move(step)] { return step(make()); }};
}

struct PendingTensor {
    std::string name;
    LazyTensor value;
    bool matrix;       // stored in the export dtype; vectors stay F32
};

// HF rotates (i, i + head_dim/2) of each head, llama.cpp (2i, 2i+1): interleave each head's two
// halves (the inverse of model_loader's adjacentPairRowsToHalfSplit; convert_hf_to_gguf's permute).
at::Tensor halfSplitRowsToAdjacentPairs(const at::Tensor& w, int64_t heads, int64_t headDim) {
    if (heads == 0) return w;
    return w.reshape({heads, 2, headDim / 2, w.size(1)}).transpose(1, 2).reshape({heads * headDim, w.size(1)}).contiguous();
}

LazyTensor orOnes(const LlamaCheckpoint& ckpt, const at::Tensor& t, const std::string& hfName, int64_t n) {
    return t.defined() ? fromCheckpoint(ckpt, t, hfName) : fixed(at::ones({n}, at::kFloat));
}

GgufTensorToWrite toWrite(const PendingTensor& p, GgmlType matrixType, const std::string& source) {
    GgufTensorToWrite t;
    t.info.name = p.name;
    for (auto d = p.value.shape.rbegin(); d != p.value.shape.rend(); ++d) t.info.ne.push_back(*d);
    t.info.type = p.matrix ? matrixType : GgmlType::F32;
    // Made and written one tensor at a time, converted 4M elements at a time (writeGguf is
    // atomic: an error here leaves no output file). A tensor that is a view of a mapped file is
    // read from its pages chunk by chunk, so even the largest one (the embedding) is never
    // converted whole.
    const GgmlType type = t.info.type;
    t.writeData = [p, type, source](std::ostream& out) {
        const at::Tensor made = p.value.make();
        if (made.sizes().vec() != p.value.shape)
            throw Error("GGUF export: tensor '" + p.name + "' was made with another shape than planned");
        const at::Tensor flat = made.reshape({-1});
        constexpr int64_t kChunk = int64_t(1) << 22;
        for (int64_t i = 0; i < flat.numel(); i += kChunk) {
            at::Tensor data = flat.narrow(0, i, std::min(kChunk, flat.numel() - i)).to(at::kFloat).contiguous();
            if (!allFinite(data))
                throw Error("checkpoint '" + source + "': tensor '" + p.name + "' holds NaN or Inf; not exported");
            if (type == GgmlType::F16) {
                if (data.abs().max().item<double>() > 65504.0) {
                    const double peak = made.abs().max().item<double>();
                    throw Error("checkpoint '" + source + "': tensor '" + p.name + "' has |w| up to " + std::to_string(peak) +
                                ", beyond float16's 65504; export it as f32");
                }
                data = data.to(at::kHalf).contiguous();
            } else if (type == GgmlType::BF16) {
                data = data.to(at::kBFloat16).contiguous();
            }
            out.write(static_cast<const char*>(data.data_ptr()), static_cast<std::streamsize>(data.nbytes()));
        }
    };
    return t;
}

// llama.cpp's qwen2 builds q_proj as hidden × hidden (measured with node-llama-cpp 3.22.1: "tensor
// 'blk.0.attn_q.weight' has wrong shape"), so a Qwen2 with pruned heads is written back at
// hidden / head_dim query heads: every kept KV group keeps its query heads in the first slots of
// a group of `padded / kvPadded`, the other slots and any added KV head are zero (q, k, v rows
// and biases), and their o_proj columns are zero. A zero query head attends uniformly, but its
// output meets a zero o_proj column: the model is exactly the same, llama.cpp only computes more.
struct QwenPadding {
    int64_t heads = 0, kvHeads = 0;  // as written
};

std::optional<QwenPadding> qwen2Padding(int64_t heads, int64_t kvHeads, int64_t hidden, int64_t headDim) {
    if (heads * headDim == hidden) return QwenPadding{heads, kvHeads};
    if (hidden % headDim != 0 || kvHeads == 0) return std::nullopt;
    const int64_t padded = hidden / headDim, group = heads / kvHeads;
    for (int64_t kv = kvHeads; kv <= padded; ++kv)
        if (padded % kv == 0 && padded / kv >= group) return QwenPadding{padded, kv};
    return std::nullopt;
}

// Rows of the (heads·headDim)-row tensor t for the padded layout; zero rows elsewhere.
at::Tensor padHeads(const at::Tensor& t, int64_t headDim, int64_t groups, int64_t perGroup, int64_t groupsPadded,
                    int64_t perGroupPadded, int64_t dim) {
    std::vector<int64_t> shape = t.sizes().vec();
    shape[static_cast<size_t>(dim)] = groupsPadded * perGroupPadded * headDim;
    at::Tensor out = at::zeros(shape, t.options());
    for (int64_t g = 0; g < groups; ++g)
        out.narrow(dim, g * perGroupPadded * headDim, perGroup * headDim)
            .copy_(t.narrow(dim, g * perGroup * headDim, perGroup * headDim));
    return out;
}

} // namespace

GgufExportPlan planGgufExport(const LlamaCheckpoint& ckpt, const GgufExportOptions& options) {
    const LlamaConfig& c = ckpt.config;
    c.validate(ckpt.source);
    const std::string where = "cannot export '" + ckpt.source + "' to GGUF: ";
    if (ckpt.tokenizerPath.empty() && !options.placeholderVocabulary)
        throw Error(where + "it has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin beside it), and "
                    "llama.cpp needs the vocabulary in the file; give one with --tokenizer FILE, or --no-tokenizer for "
                    "a file llama.cpp runs on token ids only");
    if (c.head_dim % 2 != 0) throw Error(where + "head_dim " + std::to_string(c.head_dim) + " is odd; rotary needs pairs");

    // Qwen2 and Qwen3 have llama.cpp architectures of their own (rotary on halves, as in
    // Hugging Face: no Q/K permutation); Mistral is LLaMA's structure and runs as `llama`.
    const bool qwen = c.family == ModelFamily::Qwen2 || c.family == ModelFamily::Qwen3;
    const bool permuteQk = c.rope_layout == RopeLayout::HalfSplit && !qwen;

    GgufExportPlan plan;
    GgufExportReport& report = plan.report;
    report.dtype = options.dtype == GgufDtype::F16 ? "f16" : options.dtype == GgufDtype::BF16 ? "bf16" : "f32";
    const int64_t D = c.hidden_size, hd = c.head_dim;

    // Per-layer shapes as llama.cpp will build them. Its deci graph skips a layer's FFN when
    // n_ff = 0 and then also drops that layer's attention output (it `continue`s before the
    // residual is taken), and skips attention (bias included) when n_head = 0. So:
    //  - a layer that keeps heads (or an attention bias) but no MLP channel gets one zero channel
    //    (gate = up = down = 0: silu(0)·0 = 0, the block adds exactly nothing, or its bias);
    //  - a layer with no head but FLAP's attention bias gets one zero head (q = k = v = 0 and a
    //    zero o_proj column: the block adds exactly its bias);
    //  - so does layer 0 without heads, bias or not: llama.cpp takes the head size from layer 0
    //    (n_embd_head_k = 0 when its head count is 0, and every other layer's q/k/v then has a
    //    zero dimension: the loader aborts, measured with node-llama-cpp 3.22.1).
    // One head or channel of zeros costs a few kilobytes and keeps the model exactly the same.
    std::vector<PendingTensor> pending;
    pending.push_back({"token_embd.weight", fromCheckpoint(ckpt, ckpt.weights.embed, "model.embed_tokens.weight"), true});
    bool anyBias = false;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const LlamaLayerWeights& L = ckpt.weights.layers[l];
        GgufLayerShape shape;
        shape.heads = c.num_heads[l];
        shape.kvHeads = c.num_kv_heads[l];
        shape.feedForward = c.intermediate_size[l];
        const std::string hf = "model.layers." + std::to_string(l) + ".";
        auto source = [&](const at::Tensor& t, const std::string& suffix) {
            return t.defined() ? fromCheckpoint(ckpt, t, hf + suffix) : LazyTensor{};
        };
        LazyTensor wq = source(L.wq, "self_attn.q_proj.weight"), wk = source(L.wk, "self_attn.k_proj.weight"),
                   wv = source(L.wv, "self_attn.v_proj.weight"), wo = source(L.wo, "self_attn.o_proj.weight");
        if (shape.heads == 0 && (L.wo_bias.defined() || l == 0)) {
            shape.heads = shape.kvHeads = 1;
            shape.paddedHead = true;
            wq = wk = wv = fixed(at::zeros({hd, D}, at::kFloat));
            wo = fixed(at::zeros({D, hd}, at::kFloat));
        }
        LazyTensor bq = source(L.wq_bias, "self_attn.q_proj.bias"), bk = source(L.wk_bias, "self_attn.k_proj.bias"),
                   bv = source(L.wv_bias, "self_attn.v_proj.bias");
        // padHeads, applied when the tensor is written.
        auto padded = [&](const LazyTensor& t, int64_t groups, int64_t perGroup, int64_t groupsPadded,
                          int64_t perGroupPadded, int64_t dim) {
            std::vector<int64_t> dims = t.shape;
            dims[static_cast<size_t>(dim)] = groupsPadded * perGroupPadded * hd;
            return then(t, dims, [=](const at::Tensor& x) {
                return padHeads(x, hd, groups, perGroup, groupsPadded, perGroupPadded, dim);
            });
        };
        if (c.family == ModelFamily::Qwen2 && shape.heads > 0) {
            const std::optional<QwenPadding> pad = qwen2Padding(shape.heads, shape.kvHeads, D, hd);
            if (!pad)
                throw Error(where + "llama.cpp's qwen2 architecture needs hidden / head_dim query heads (its q_proj is " +
                            std::to_string(D) + "×" + std::to_string(D) + "), and layer " + std::to_string(l) + "'s " +
                            std::to_string(shape.heads) + " heads over " + std::to_string(shape.kvHeads) +
                            " key/value heads cannot be padded with zero heads to that");
            if (pad->heads != shape.heads) {
                const int64_t group = shape.heads / shape.kvHeads, groupPadded = pad->heads / pad->kvHeads;
                wq = padded(wq, shape.kvHeads, group, pad->kvHeads, groupPadded, 0);
                wo = padded(wo, shape.kvHeads, group, pad->kvHeads, groupPadded, 1);
                wk = padded(wk, shape.kvHeads, 1, pad->kvHeads, 1, 0);
                wv = padded(wv, shape.kvHeads, 1, pad->kvHeads, 1, 0);
                if (bq.make) bq = padded(bq, shape.kvHeads, group, pad->kvHeads, groupPadded, 0);
                if (bk.make) bk = padded(bk, shape.kvHeads, 1, pad->kvHeads, 1, 0);
                if (bv.make) bv = padded(bv, shape.kvHeads, 1, pad->kvHeads, 1, 0);
                if (l == 0)
                    report.notes.push_back("qwen2 with pruned heads: written with zero heads up to " +
                                           std::to_string(pad->heads) + " query / " + std::to_string(pad->kvHeads) +
                                           " key/value heads per layer (llama.cpp's qwen2 needs q_proj hidden × hidden); "
                                           "the model is exactly the same, llama.cpp computes the zero heads too");
                shape.heads = pad->heads;
                shape.kvHeads = pad->kvHeads;
            }
        }
        LazyTensor gate = source(L.w_gate, "mlp.gate_proj.weight"), up = source(L.w_up, "mlp.up_proj.weight"),
                   down = source(L.w_down, "mlp.down_proj.weight");
        if (shape.feedForward == 0 && (shape.heads > 0 || L.w_down_bias.defined())) {
            shape.feedForward = 1;
            shape.paddedChannel = true;
            gate = up = fixed(at::zeros({1, D}, at::kFloat));
            down = fixed(at::zeros({D, 1}, at::kFloat));
        }
        const std::string blk = "blk." + std::to_string(l) + ".";
        if (shape.heads > 0) {
            if (shape.paddedHead && c.qkv_bias) bq = bk = bv = fixed(at::zeros({hd}, at::kFloat));
            if (permuteQk) {
                const int64_t heads = shape.heads, kvHeads = shape.kvHeads;
                wq = then(wq, wq.shape, [=](const at::Tensor& w) { return halfSplitRowsToAdjacentPairs(w, heads, hd); });
                wk = then(wk, wk.shape, [=](const at::Tensor& w) { return halfSplitRowsToAdjacentPairs(w, kvHeads, hd); });
                if (bq.make)
                    bq = then(bq, bq.shape, [=](const at::Tensor& b) {
                        return halfSplitRowsToAdjacentPairs(b.unsqueeze(1), heads, hd).squeeze(1);
                    });
                if (bk.make)
                    bk = then(bk, bk.shape, [=](const at::Tensor& b) {
                        return halfSplitRowsToAdjacentPairs(b.unsqueeze(1), kvHeads, hd).squeeze(1);
                    });
            }
            pending.push_back({blk + "attn_norm.weight", orOnes(ckpt, L.attn_norm, hf + "input_layernorm.weight", D), false});
            pending.push_back({blk + "attn_q.weight", wq, true});
            pending.push_back({blk + "attn_k.weight", wk, true});
            pending.push_back({blk + "attn_v.weight", wv, true});
            if (bq.make) pending.push_back({blk + "attn_q.bias", bq, false});
            if (bk.make) pending.push_back({blk + "attn_k.bias", bk, false});
            if (bv.make) pending.push_back({blk + "attn_v.bias", bv, false});
            if (L.q_norm.defined()) pending.push_back({blk + "attn_q_norm.weight", source(L.q_norm, "self_attn.q_norm.weight"), false});
            if (L.k_norm.defined()) pending.push_back({blk + "attn_k_norm.weight", source(L.k_norm, "self_attn.k_norm.weight"), false});
            pending.push_back({blk + "attn_output.weight", wo, true});
            if (L.wo_bias.defined()) pending.push_back({blk + "attn_output.bias", source(L.wo_bias, "self_attn.o_proj.bias"), false});
        }
        if (shape.feedForward > 0) {
            pending.push_back({blk + "ffn_norm.weight", orOnes(ckpt, L.ffn_norm, hf + "post_attention_layernorm.weight", D), false});
            pending.push_back({blk + "ffn_gate.weight", gate, true});
            pending.push_back({blk + "ffn_up.weight", up, true});
            pending.push_back({blk + "ffn_down.weight", down, true});
            if (L.w_down_bias.defined()) pending.push_back({blk + "ffn_down.bias", source(L.w_down_bias, "mlp.down_proj.bias"), false});
        }
        anyBias = anyBias || L.wo_bias.defined() || L.w_down_bias.defined();
        if (shape.paddedHead)
            report.notes.push_back("layer " + std::to_string(l) + ": every head was pruned; written as one zero head " +
                                   (L.wo_bias.defined() ? "(llama.cpp skips a head-less layer's attention, FLAP's bias included)"
                                                        : "(llama.cpp takes the head size from layer 0's heads)"));
        if (shape.paddedChannel)
            report.notes.push_back("layer " + std::to_string(l) +
                                   ": every MLP channel was pruned; written as one zero channel (llama.cpp drops the "
                                   "attention output of a layer with feed_forward_length 0)");
        report.layers.push_back(shape);
    }
    pending.push_back({"output_norm.weight", fromCheckpoint(ckpt, ckpt.weights.final_norm, "model.norm.weight"), false});
    if (!c.tie_word_embeddings) pending.push_back({"output.weight", fromCheckpoint(ckpt, ckpt.weights.lm_head, "lm_head.weight"), true});

    bool uniform = true;
    for (const GgufLayerShape& s : report.layers)
        uniform = uniform && s.heads == report.layers[0].heads && s.kvHeads == report.layers[0].kvHeads &&
                  s.feedForward == report.layers[0].feedForward && s.heads > 0 && s.feedForward > 0;
    report.architecture = uniform ? "llama" : "deci";
    (void)anyBias;  // both graphs add attn_output.bias and ffn_down.bias when present
    const std::string family = familyName(c.family);
    if (qwen) {
        // llama.cpp's qwen2/qwen3 build every layer with layer 0's sizes, and deci, the one
        // architecture that reads per-layer sizes, lacks what these families need.
        if (!uniform)
            throw Error(where + "it is a " + family +
                        " model whose layers differ in heads or MLP width (non-uniform pruning): llama.cpp's " + family +
                        " architecture builds every layer with layer 0's sizes, and deci, the one that reads per-layer "
                        "sizes, has no " + (c.family == ModelFamily::Qwen2 ? "q/k/v biases" : "q/k norms") +
                        "; prune uniformly per layer (wanda-sp, magnitude, random) to run it in llama.cpp");
        if (anyBias)
            throw Error(where + "llama.cpp's " + family +
                        " architecture has no o_proj or down_proj bias, which FLAP's bias compensation added; prune with "
                        "--compensation none or theorem3 to run it in llama.cpp");
        if (c.family == ModelFamily::Qwen3 && c.qkv_bias)
            throw Error(where + "llama.cpp's qwen3 architecture has no q/k/v biases (attention_bias)");
        report.architecture = family;
    } else if (c.qkv_bias) {
        if (!uniform)
            throw Error(where + "llama.cpp's deci architecture (per-layer sizes) has no q/k/v biases");
        if (c.num_heads[0] * hd != D)
            throw Error(where + "llama.cpp's llama architecture takes q/k/v biases only when heads × head_dim = hidden");
    }
    if (c.sliding_window > 0)
        report.notes.push_back("the model's sliding_window of " + std::to_string(c.sliding_window) +
                               " is not in the file: llama.cpp's " + report.architecture +
                               " graph attends to every position, which agrees with it up to that many positions");
    if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
        // convert_hf_to_gguf's rope_freqs: llama.cpp divides each pair's frequency by its factor.
        const std::vector<double> scaled = c.ropeInverseFrequencies();
        std::vector<float> factors;
        for (int64_t j = 0; j < hd / 2; ++j)
            factors.push_back(static_cast<float>(std::pow(c.rope_theta, -2.0 * double(j) / double(hd)) / scaled[j]));
        pending.push_back({"rope_freqs.weight", fixed(at::tensor(factors, at::kFloat)), false});
        report.notes.push_back("llama3 RoPE scaling (factor " + json(c.rope_scaling.factor).dump() +
                               ") written as rope_freqs.weight");
    }

    GgufMetadata& kv = plan.metadata;
    const std::string a = report.architecture;
    kv.emplace_back("general.architecture", GgufValue::str(a));
    kv.emplace_back("general.name", GgufValue::str(options.name.empty() ? defaultName(ckpt) : options.name));
    // llama.cpp's llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32.
    kv.emplace_back("general.file_type",
                    GgufValue::u32(options.dtype == GgufDtype::F16 ? 1 : options.dtype == GgufDtype::BF16 ? 32 : 0));
    kv.emplace_back(a + ".vocab_size", GgufValue::u32(static_cast<uint32_t>(c.vocab_size)));
    kv.emplace_back(a + ".context_length", GgufValue::u32(static_cast<uint32_t>(c.max_position_embeddings)));
    kv.emplace_back(a + ".embedding_length", GgufValue::u32(static_cast<uint32_t>(D)));
    kv.emplace_back(a + ".block_count", GgufValue::u32(static_cast<uint32_t>(c.num_layers)));
    auto perLayer = [&](const std::string& key, auto field) {
        if (uniform) {
            kv.emplace_back(key, GgufValue::u32(static_cast<uint32_t>(report.layers[0].*field)));
            return;
        }
        std::vector<int32_t> values;
        for (const GgufLayerShape& s : report.layers) values.push_back(static_cast<int32_t>(s.*field));
        kv.emplace_back(key, GgufValue::i32s(values));
    };
    perLayer(a + ".feed_forward_length", &GgufLayerShape::feedForward);
    perLayer(a + ".attention.head_count", &GgufLayerShape::heads);
    perLayer(a + ".attention.head_count_kv", &GgufLayerShape::kvHeads);
    // Given explicitly: llama.cpp otherwise takes embedding_length / head_count of layer 0,
    // which a pruned layer 0 makes wrong.
    kv.emplace_back(a + ".attention.key_length", GgufValue::u32(static_cast<uint32_t>(hd)));
    kv.emplace_back(a + ".attention.value_length", GgufValue::u32(static_cast<uint32_t>(hd)));
    kv.emplace_back(a + ".rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(hd)));
    kv.emplace_back(a + ".rope.freq_base", GgufValue::f32(static_cast<float>(c.rope_theta)));
    kv.emplace_back(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(c.rms_norm_eps)));
    if (c.rope_scaling.type == RopeScaling::Type::Linear) {
        kv.emplace_back(a + ".rope.scaling.type", GgufValue::str("linear"));
        kv.emplace_back(a + ".rope.scaling.factor", GgufValue::f32(static_cast<float>(c.rope_scaling.factor)));
    }
    if (options.placeholderVocabulary) {
        for (auto& entry : placeholderVocabulary(c))
            kv.push_back(std::move(entry));
        report.tokenizerModel = "none (placeholder ids)";
        report.notes.emplace_back("no tokenizer: every token is the placeholder control token '<id:N>', so llama.cpp runs "
                               "the model on token ids only (a prompt as ids, ids out) and cannot tokenize or print text");
    } else {
        for (auto& entry : ggufTokenizerMetadata(ckpt.tokenizerPath, c.vocab_size, &report.tokenizerModel, &report.notes))
            kv.push_back(std::move(entry));
    }

    const GgmlType matrixType = options.dtype == GgufDtype::F16    ? GgmlType::F16
                                : options.dtype == GgufDtype::BF16 ? GgmlType::BF16
                                                                   : GgmlType::F32;
    for (const PendingTensor& p : pending) {
        plan.tensors.push_back(toWrite(p, matrixType, ckpt.source));
        report.parameters += plan.tensors.back().info.elements();
    }
    report.tensors = static_cast<int64_t>(plan.tensors.size());
    return plan;
}

GgufExportReport exportGguf(const LlamaCheckpoint& checkpoint, const std::string& outPath, const GgufExportOptions& options) {
    ensureNotOverwritingSource(checkpoint.source, outPath);
    // A .gguf beside the checkpoint is fine; replacing one of the checkpoint's own files is not.
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(outPath) && !checkpoint.source.empty() && fs::exists(checkpoint.source)) {
        const fs::path sourceDir = fs::is_directory(checkpoint.source) ? fs::path(checkpoint.source)
                                                                       : fs::path(checkpoint.source).parent_path();
        const bool inSource = fs::equivalent(fs::absolute(outPath).parent_path(), fs::absolute(sourceDir), ec);
        if (fs::equivalent(outPath, checkpoint.source, ec) || (inSource && fs::path(outPath).extension() != ".gguf"))
            throw Error("refusing to write '" + outPath + "': it is a file of the source model '" + checkpoint.source +
                        "' (a source checkpoint is never overwritten; choose another output file)");
    }
    if (std::filesystem::is_directory(outPath))
        throw Error("the output '" + outPath + "' is a folder; give the .gguf file to write");
    GgufExportPlan plan = planGgufExport(checkpoint, options);
    writeGguf(outPath, plan.metadata, std::move(plan.tensors));
    plan.report.path = outPath;
    plan.report.bytes = std::filesystem::file_size(outPath);
    return plan.report;
}

} // namespace npw
