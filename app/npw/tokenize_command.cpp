// tokenize: a text's token ids and pieces with a model's tokenizer (or a tokenizer file), so a
// user can put npw's tokenization beside their own tools' (issue 14). No LibTorch here: npw-text
// (app/text) runs this command without loading it, npw-run with it (tokenize_command.h).
#include "app/npw/tokenize_command.h"
#include "app/npw/terminal_output.h"
#include "core/models/model_files.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace npw::cli {

namespace {

struct ChosenTokenizer {
    std::string path;        // the tokenizer file
    std::string model;       // the model it belongs to ("" when a tokenizer file was given)
    int64_t vocabSize = -1;  // the model's, when it matters (a tokenizer.bin)
};

// Whether the name says "tokenizer": tokenizer.json/.model/.bin, llama2.c's tok{V}.bin/.model,
// *.model and *.tiktoken (no model file npw reads is named so).
bool namedLikeATokenizer(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string name = p.filename().string(), ext = p.extension().string();
    if (name == "tokenizer.json" || name == "tokenizer.model" || name == "tokenizer.bin") return true;
    if (ext == ".model" || ext == ".tiktoken") return true;
    if (ext == ".bin" && name.size() > 7 && name.compare(0, 3, "tok") == 0) {  // tok105.bin, tok4096.bin
        const std::string digits = name.substr(3, name.size() - 7);
        return !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos;
    }
    return false;
}

// A llama2.c model checkpoint's header: seven positive int32 sizes (vocab_size negative when the
// classifier is not shared) that describe a LLaMA. A tokenizer.bin starts with one small int
// (its longest token) and then a float score: its next ints are not such sizes.
bool looksLikeLlama2cModel(const std::string& head) {
    if (head.size() < 28) return false;
    int32_t h[7];
    std::memcpy(h, head.data(), sizeof h);
    const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kvHeads = h[4], vocab = h[5], seqLen = h[6];
    return dim > 0 && hidden > 0 && layers > 0 && layers <= 100000 && heads > 0 && dim % heads == 0 && kvHeads > 0 &&
           heads % kvHeads == 0 && vocab != 0 && seqLen > 0;
}

// SOURCE may be a tokenizer file or a model (folder, checkpoint, demo name): decided from what
// the file is, its name and its first bytes. A file that is a tokenizer by name or content is
// read as one, so a damaged tokenizer gets the tokenizer reader's own error. Only a llama2.c .bin
// is ambiguous (a model starts with small ints too): it is a tokenizer when it reads as one, else
// a model when its header describes one, else the tokenizer reader's error stands.
ChosenTokenizer chooseTokenizer(const Args& args, const std::string& source, const VocabularyFromTensors& fromTensors) {
    ChosenTokenizer chosen;
    const auto modelChoice = [&] {
        chosen.model = source;
        chosen.path = args.has("tokenizer") ? args.get("tokenizer") : tokenizerFileOfModel(source);
        if (chosen.path.empty())
            throw Error("model '" + source + "' has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin "
                        "beside it); give one with --tokenizer FILE");
        // A tokenizer.bin holds as many tokens as the model's vocabulary (run.c reads that many),
        // which the model's config or header says (no weight is read); Meta's params.json and
        // llama2.c's ckpt.pt may leave it to the tensors' shapes.
        if (detectTokenizerFile(readTokenizerFileBytes(chosen.path)) == TokenizerFileKind::Llama2cBin) {
            const std::optional<int64_t> fromConfig = vocabularyFromConfig(source);
            chosen.vocabSize = fromConfig ? *fromConfig : fromTensors(source);
        }
        return chosen;
    };
    std::error_code ec;
    bool sourceIsTokenizer = false;
    if (!std::filesystem::is_directory(source, ec) && std::filesystem::exists(source, ec)) {
        // The kinds are told apart by their first bytes; a checkpoint may be many GB.
        requireRegularFile(source);  // a FIFO is refused, never waited on
        std::ifstream in(source, std::ios::binary);
        std::string head(64 * 1024, '\0');
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<std::size_t>(in.gcount()));
        const TokenizerFileKind kind = detectTokenizerFile(head);
        if (namedLikeATokenizer(source) || (kind != TokenizerFileKind::Unknown && kind != TokenizerFileKind::Llama2cBin)) {
            sourceIsTokenizer = true;  // read as one below: a damaged file gets the reader's own error
        } else if (kind == TokenizerFileKind::Llama2cBin) {
            // tokenizer.bin files are small (LLaMA-2's 32,000 pieces: 0.4 MB); a large file whose
            // header describes a model is not read whole as a tokenizer first.
            const auto size = std::filesystem::file_size(source, ec);
            if (looksLikeLlama2cModel(head) && (ec || size > (std::uintmax_t{64} << 20))) return modelChoice();
            try {
                Tokenizer::fromAnyFile(source);
                sourceIsTokenizer = true;
            } catch (const Error&) {
                if (!looksLikeLlama2cModel(head)) throw;  // neither: the tokenizer reader says why
            }
        }
    }
    if (!sourceIsTokenizer) return modelChoice();
    if (args.has("tokenizer")) throw Error("'npw tokenize " + source + "': it is a tokenizer file already; --tokenizer is for a MODEL");
    chosen.path = source;
    return chosen;
}

} // namespace

int runTokenize(const Args& args, const VocabularyFromTensors& vocabularyFromTensors) {
    if (args.positional().size() != 1)
        throw Error("'npw tokenize' takes exactly one MODEL or TOKENIZER file, got " + std::to_string(args.positional().size()));
    if (args.has("text") == args.has("string")) throw Error("give exactly one of --text FILE or --string S");
    const ChosenTokenizer chosen = chooseTokenizer(args, args.positional()[0], vocabularyFromTensors);
    const std::string text = args.has("text") ? readTextInput(args.get("text"), "text") : args.get("string");
    const std::string fileKind = tokenizerFileKindName(detectTokenizerFile(readTokenizerFileBytes(chosen.path)));
    const std::shared_ptr<Tokenizer> tokenizer = Tokenizer::fromAnyFile(chosen.path, chosen.vocabSize);
    const bool addBos = !args.flag("no-bos");
    const std::vector<int32_t> ids = tokenizer->encode(text, addBos);
    std::vector<std::string> pieces;
    pieces.reserve(ids.size());
    for (int32_t id : ids) pieces.push_back(tokenizer->tokenText(id));
    const bool bosUsed = addBos && tokenizer->bosId() >= 0;

    nlohmann::json j = {{"tokenizer", chosen.path},
                        {"file", fileKind},
                        {"kind", tokenizerKindName(tokenizer->kind())},
                        {"vocab", tokenizer->vocabSize()},
                        {"bos_id", tokenizer->bosId() >= 0 ? nlohmann::json(tokenizer->bosId()) : nlohmann::json(nullptr)},
                        {"eos_id", tokenizer->eosId() >= 0 ? nlohmann::json(tokenizer->eosId()) : nlohmann::json(nullptr)},
                        {"bos", bosUsed},
                        {"count", ids.size()},
                        {"bytes", text.size()},
                        {"ids", ids}};
    // Readers refuse pieces that are not UTF-8; should one slip through, JSON gets U+FFFD there
    // instead of a throw from dump().
    nlohmann::json jsonPieces = nlohmann::json::array();
    for (const std::string& p : pieces)
        jsonPieces.push_back(nlohmann::json::parse(nlohmann::json(p).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    j["pieces"] = jsonPieces;
    if (!chosen.model.empty()) j["model"] = chosen.model;
    printResult(args, j, [&] {
        std::cout << "tokenizer " << chosen.path << " (" << fileKind << ", " << j["kind"].get<std::string>() << ", "
                  << tokenizer->vocabSize() << " tokens)\n"
                  << "bos       " << (bosUsed ? "added (id " + std::to_string(tokenizer->bosId()) + ")"
                                              : tokenizer->bosId() >= 0 ? std::string("not added (--no-bos)")
                                                                         : std::string("none (the tokenizer defines no BOS)"))
                  << "\ntokens    " << ids.size() << " for " << text.size() << " bytes\nids      ";
        for (int32_t id : ids) std::cout << " " << id;
        std::cout << "\npieces   ";
        for (const nlohmann::json& p : jsonPieces) std::cout << " " << p.dump();
        std::cout << "\n";
    });
    return 0;
}

} // namespace npw::cli
