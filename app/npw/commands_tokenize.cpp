// tokenize: a text's token ids and pieces with a model's tokenizer (or a tokenizer file), so a
// user can put npw's tokenization beside their own tools' (issue 14).
#include "app/npw/commands.h"
#include "core/models/checkpoint_inspection.h"
#include "core/models/model_loader.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

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

// SOURCE may be a tokenizer file or a model (folder, checkpoint, demo name). A llama2.c model
// .bin starts like a tokenizer.bin (a small int), so a .bin that does not read as a tokenizer
// is taken as a model.
ChosenTokenizer chooseTokenizer(const Args& args, const std::string& source) {
    ChosenTokenizer chosen;
    std::error_code ec;
    bool sourceIsTokenizer = false;
    if (std::filesystem::is_regular_file(source, ec)) {
        // The kinds are told apart by their first bytes; a checkpoint may be many GB.
        std::ifstream in(source, std::ios::binary);
        std::string head(64 * 1024, '\0');
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<std::size_t>(in.gcount()));
        const TokenizerFileKind kind = detectTokenizerFile(head);
        if (kind == TokenizerFileKind::Llama2cBin) {
            // tokenizer.bin files are small (LLaMA-2's 32,000 pieces: 0.4 MB); a llama2.c model is not one.
            const auto size = std::filesystem::file_size(source, ec);
            if (!ec && size <= (std::uintmax_t{64} << 20)) {
                try {
                    Tokenizer::fromAnyFile(source);
                    sourceIsTokenizer = true;
                } catch (const Error&) {
                    sourceIsTokenizer = false;  // a llama2.c checkpoint, most likely
                }
            }
        } else {
            sourceIsTokenizer = kind != TokenizerFileKind::Unknown;
        }
    }
    if (sourceIsTokenizer) {
        if (args.has("tokenizer")) throw Error("'npw tokenize " + source + "': it is a tokenizer file already; --tokenizer is for a MODEL");
        chosen.path = source;
        return chosen;
    }
    chosen.model = source;
    chosen.path = args.has("tokenizer") ? args.get("tokenizer") : tokenizerFileOfModel(source);
    if (chosen.path.empty())
        throw Error("model '" + source + "' has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin beside it); "
                    "give one with --tokenizer FILE");
    // A tokenizer.bin holds as many tokens as the model's vocabulary (run.c reads that many),
    // which the model's headers say: no weight is read.
    if (detectTokenizerFile(readTokenizerFileBytes(chosen.path)) == TokenizerFileKind::Llama2cBin)
        chosen.vocabSize = inspectLlamaCheckpoint(source).config.vocab_size;
    return chosen;
}

int runTokenize(const Args& args) {
    if (args.positional().size() != 1)
        throw Error("'npw tokenize' takes exactly one MODEL or TOKENIZER file, got " + std::to_string(args.positional().size()));
    if (args.has("text") == args.has("string")) throw Error("give exactly one of --text FILE or --string S");
    const ChosenTokenizer chosen = chooseTokenizer(args, args.positional()[0]);
    const std::string text = args.has("text") ? readTextFile(args.get("text")) : args.get("string");
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

} // namespace

void addTokenizeCommand(std::vector<Command>& out) {
    out.push_back({"tokenize", "MODEL|TOKENIZER (--text FILE | --string S) [--tokenizer FILE] [--no-bos] [--json]",
                   "Token ids and pieces of a text with a model's tokenizer or a tokenizer file (tokenizer.json, "
                   "tokenizer.model, tokenizer.bin), to compare with other tools.",
                   flagsFor("tokenize"), runTokenize});
}

} // namespace npw::cli
