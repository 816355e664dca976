#include "core/text/tokenizer.h"

#include "core/text/added_tokens.h"
#include "core/text/bpe_model.h"
#include "core/text/json_fields.h"
#include "core/text/normalizer.h"
#include "core/text/pre_tokenizer.h"
#include "core/text/token_decoder.h"
#include "core/text/utf8.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace npw {
namespace {

using json_fields::Json;

constexpr std::string_view metaspace = "\u2581";
// Post-processor Sequences nested deeper than this are refused (real files nest one level).
constexpr int kMaxComponentNesting = 64;

struct ModelParts {
    std::unordered_map<std::string, int32_t> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    BpeModelOptions options;
};

std::pair<std::string, std::string> readMerge(const Json& merge, std::size_t rank) {
    const std::string where = "model.merges[" + std::to_string(rank) + "]";
    // Older files write "left right", newer ones ["left", "right"] (pieces may then hold spaces).
    if (merge.is_string()) {
        const std::string text = merge.get<std::string>();
        const std::size_t space = text.find(' ');
        if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
            throw Error("'" + where + "' is \"" + text + "\"; expected two pieces separated by one space");
        return {text.substr(0, space), text.substr(space + 1)};
    }
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
        return {merge[0].get<std::string>(), merge[1].get<std::string>()};
    throw Error("'" + where + "' must be \"left right\" or [\"left\", \"right\"], found " + json_fields::preview(merge));
}

ModelParts readModel(const Json& root) {
    const Json& model = json_fields::required(root, "model", "");
    const std::string type = json_fields::typeOf(model, "model");
    if (type != "BPE")
        throw Error("model type '" + type + "' is not supported (npw reads BPE tokenizers: LLaMA-1/2/3, Mistral, GPT-2 style)");
    if (const Json& dropout = json_fields::optional(model, "dropout", "model");
        !dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0))
        throw Error("'model.dropout' is " + json_fields::preview(dropout) + "; BPE dropout is a training-time option npw does not apply");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (!json_fields::stringOr(model, key, "", "model").empty())
            throw Error(std::string("'model.") + key + "' is set; npw does not support it (LLaMA tokenizers leave it null)");

    ModelParts parts;
    const Json& vocab = json_fields::required(model, "vocab", "model");
    if (!vocab.is_object())
        throw Error(std::string("'model.vocab' must be an object of piece -> id, found ") + vocab.type_name());
    std::unordered_map<int64_t, std::string> pieceOfId;
    parts.vocab.reserve(vocab.size());
    for (const auto& [piece, id] : vocab.items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            throw Error("'model.vocab' gives '" + piece + "' the id " + json_fields::preview(id) + "; ids must be integers >= 0");
        const auto [it, inserted] = pieceOfId.emplace(id.get<int64_t>(), piece);
        if (!inserted)
            throw Error("'model.vocab' gives the id " + json_fields::preview(id) + " to both '" + it->second + "' and '" + piece + "'");
        parts.vocab.emplace(piece, static_cast<int32_t>(id.get<int64_t>()));
    }
    const Json& merges = json_fields::optional(model, "merges", "model");
    if (!merges.is_null() && !merges.is_array())
        throw Error(std::string("'model.merges' must be an array, found ") + merges.type_name());
    parts.merges.reserve(merges.size());
    for (std::size_t rank = 0; merges.is_array() && rank < merges.size(); ++rank)
        parts.merges.push_back(readMerge(merges[rank], rank));

    parts.options.unkToken = json_fields::stringOr(model, "unk_token", "", "model");
    parts.options.fuseUnk = json_fields::boolOr(model, "fuse_unk", false, "model");
    parts.options.byteFallback = json_fields::boolOr(model, "byte_fallback", false, "model");
    parts.options.ignoreMerges = json_fields::boolOr(model, "ignore_merges", false, "model");
    return parts;
}

std::vector<AddedToken> readAddedTokens(const Json& root) {
    std::vector<AddedToken> tokens;
    const Json& list = json_fields::optional(root, "added_tokens", "");
    if (!list.is_null() && !list.is_array())
        throw Error(std::string("'added_tokens' must be an array, found ") + list.type_name());
    for (std::size_t i = 0; list.is_array() && i < list.size(); ++i) {
        const std::string path = "added_tokens[" + std::to_string(i) + "]";
        AddedToken token;
        const int64_t id = json_fields::intOr(list[i], "id", -1, path);
        if (id < 0 || id > INT32_MAX)
            throw Error("'" + path + ".id' is missing or negative");
        token.id = static_cast<int32_t>(id);
        token.content = json_fields::requiredString(list[i], "content", path);
        token.special = json_fields::boolOr(list[i], "special", false, path);
        token.singleWord = json_fields::boolOr(list[i], "single_word", false, path);
        token.lstrip = json_fields::boolOr(list[i], "lstrip", false, path);
        token.rstrip = json_fields::boolOr(list[i], "rstrip", false, path);
        tokens.push_back(std::move(token));
    }
    return tokens;
}

// The ids a TemplateProcessing post-processor puts before and after a single sequence; null
// when the file has no such template (LLaMA-3 files written with a ByteLevel post-processor).
struct Template {
    bool present = false;
    int32_t leadingId = -1;
    int32_t trailingId = -1;
};

Template readTemplate(const Json& node, const std::string& path, int depth = 0) {
    if (node.is_null())
        return {};
    if (depth > kMaxComponentNesting)
        throw Error("'" + path + "': Sequences nested deeper than " + std::to_string(kMaxComponentNesting) + " levels");
    const std::string type = json_fields::typeOf(node, path);
    if (type == "Sequence") {
        const Json& list = json_fields::required(node, "processors", path);
        for (std::size_t i = 0; list.is_array() && i < list.size(); ++i)
            if (Template found = readTemplate(list[i], path + ".processors[" + std::to_string(i) + "]", depth + 1); found.present)
                return found;
        return {};
    }
    if (type != "TemplateProcessing")
        return {};  // ByteLevel, Roberta, Bert...: only offsets or pair layouts, no BOS of LLaMA's kind
    Template result;
    result.present = true;
    const Json& single = json_fields::required(node, "single", path);
    const Json& specialTokens = json_fields::required(node, "special_tokens", path);
    if (!single.is_array())
        throw Error("'" + path + ".single' must be an array");
    bool sequenceSeen = false;
    for (const Json& item : single) {
        if (item.contains("Sequence")) {
            sequenceSeen = true;
            continue;
        }
        const std::string name = json_fields::requiredString(json_fields::required(item, "SpecialToken", path + ".single"), "id",
                                                             path + ".single[].SpecialToken");
        const Json& ids = json_fields::required(json_fields::required(specialTokens, name.c_str(), path + ".special_tokens"),
                                                "ids", path + ".special_tokens." + name);
        if (!ids.is_array() || ids.size() != 1 || !ids[0].is_number_integer())
            throw Error("'" + path + ".special_tokens." + name + ".ids' must hold exactly one id");
        const Json& id = ids[0];
        if (id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            throw Error("'" + path + ".special_tokens." + name + ".ids' holds " + json_fields::preview(id) +
                        "; token ids are integers from 0 to 2^31-1");
        (sequenceSeen ? result.trailingId : result.leadingId) = static_cast<int32_t>(id.get<int64_t>());
    }
    return result;
}

int32_t addedTokenNamed(const std::vector<AddedToken>& tokens, std::initializer_list<const char*> names) {
    for (const char* name : names)
        for (const AddedToken& token : tokens)
            if (token.content == name)
                return token.id;
    return -1;
}

// Hugging Face's BPE pipeline: added tokens split out, then per stretch of text the
// normalizer, the pre-tokenizer and the BPE model; decoding runs the decoder steps.
class BpeTokenizer final : public Tokenizer {
public:
    BpeTokenizer(const Json& root, std::string sourceName)
        : sourceName_(std::move(sourceName)),
          normalizer_(Normalizer::fromJson(json_fields::optional(root, "normalizer", ""), "normalizer")),
          preTokenizer_(PreTokenizer::fromJson(json_fields::optional(root, "pre_tokenizer", ""), "pre_tokenizer")),
          decoder_(TokenDecoder::fromJson(json_fields::optional(root, "decoder", ""), "decoder")) {
        ModelParts parts = readModel(root);
        const std::vector<AddedToken> addedTokens = readAddedTokens(root);
        kind_ = preTokenizer_.hasByteLevel() ? Kind::ByteLevelBpe : Kind::SentencePieceBpe;
        buildIdTable(parts.vocab, addedTokens);
        splitAtWordStarts_ = kind_ == Kind::SentencePieceBpe && !parts.options.ignoreMerges &&
                             wordStartsNeverMerge(parts.vocab);
        model_ = std::make_unique<BpeModel>(std::move(parts.vocab), parts.merges, parts.options);
        addedTokens_ = std::make_unique<AddedTokenMatcher>(addedTokens);

        // The template says what BOS the file's own encoding adds. Files without one (this
        // LLaMA-3 file) and EOS, which templates rarely add, go by the names LLaMA, Mistral,
        // Gemma and GPT-2 give these tokens.
        const Template single = readTemplate(json_fields::optional(root, "post_processor", ""), "post_processor");
        bosId_ = single.present ? single.leadingId : addedTokenNamed(addedTokens, {"<s>", "<|begin_of_text|>", "<bos>"});
        eosId_ = single.trailingId >= 0
                     ? single.trailingId
                     : addedTokenNamed(addedTokens, {"</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>"});
    }

    Kind kind() const override { return kind_; }
    int32_t vocabSize() const override { return static_cast<int32_t>(textOfId_.size()); }
    int32_t bosId() const override { return bosId_; }
    int32_t eosId() const override { return eosId_; }

    std::string tokenText(int32_t id) const override {
        checkId(id);
        return textOfId_[id];
    }

    std::vector<int32_t> encode(const std::string& text, bool addBos) const override {
        if (const std::size_t bad = utf8::findInvalid(text); bad != std::string::npos)
            throw Error("tokenizer '" + sourceName_ + "': the text is not valid UTF-8 (byte offset " +
                        std::to_string(bad) + ")");
        std::vector<int32_t> ids;
        ids.reserve(text.size() / 3 + 2);
        if (addBos && bosId_ >= 0)
            ids.push_back(bosId_);
        WordCache cache;
        try {
            for (const TextSegment& segment : addedTokens_->split(text)) {
                if (segment.addedTokenId >= 0) {
                    ids.push_back(segment.addedTokenId);
                    continue;
                }
                std::string normalized = normalizer_.apply(text.substr(segment.begin, segment.end - segment.begin));
                for (const PreToken& word : preTokenizer_.apply(std::move(normalized), segment.begin == 0))
                    tokenizeWord(word.text, cache, ids);
            }
        } catch (const Error& e) {  // a regex of the file past its limits: say which file
            throw Error("tokenizer '" + sourceName_ + "': " + e.what());
        }
        return ids;
    }

    std::string decode(const std::vector<int32_t>& ids) const override {
        std::vector<std::string> tokens;
        tokens.reserve(ids.size());
        for (int32_t id : ids) {
            checkId(id);
            if (!isSpecial_[id])
                tokens.push_back(textOfId_[id]);
        }
        return decoder_.decode(std::move(tokens));
    }

private:
    // Ids of the words seen in one encode call: running text repeats its words a lot.
    using WordCache = std::unordered_map<std::string, std::vector<int32_t>>;
    static constexpr std::size_t longestCachedWord = 256;

    void buildIdTable(const std::unordered_map<std::string, int32_t>& vocab, const std::vector<AddedToken>& addedTokens) {
        int32_t largestId = -1;
        for (const auto& [piece, id] : vocab)
            largestId = std::max(largestId, id);
        for (const AddedToken& token : addedTokens)
            largestId = std::max(largestId, token.id);
        // The id table is sized by the largest id, so ids must be (nearly) dense: a file that
        // names 100 tokens cannot make npw allocate 2^31 entries.
        const std::size_t entries = vocab.size() + addedTokens.size();
        const std::size_t allowed = 2 * entries + 1024;
        if (largestId >= 0 && static_cast<std::size_t>(largestId) >= allowed)
            throw Error("token id " + std::to_string(largestId) + " is far beyond the " + std::to_string(entries) +
                        " tokens the file defines (ids must be nearly dense: at most " + std::to_string(allowed - 1) +
                        " here)");
        textOfId_.assign(static_cast<std::size_t>(largestId) + 1, std::string());
        isSpecial_.assign(textOfId_.size(), false);
        for (const auto& [piece, id] : vocab)
            textOfId_[id] = piece;
        for (const AddedToken& token : addedTokens) {
            textOfId_[token.id] = token.content;
            isSpecial_[token.id] = token.special;
        }
    }

    // SentencePiece-style BPE runs on a whole stretch of text, but when no piece of the
    // vocabulary holds "▁" right after another character, no merge can cross the start of a
    // "▁word", so cutting there gives the same ids and lets words be cached. Runs of "▁" stay
    // with the word they precede ("▁▁▁▁" pieces exist for indentation).
    static bool wordStartsNeverMerge(const std::unordered_map<std::string, int32_t>& vocab) {
        if (vocab.count(std::string(metaspace)) == 0)
            return false;
        for (const auto& [piece, id] : vocab)
            for (std::size_t hit = piece.find(metaspace, 1); hit != std::string::npos;
                 hit = piece.find(metaspace, hit + metaspace.size()))
                if (hit < metaspace.size() || piece.compare(hit - metaspace.size(), metaspace.size(), metaspace) != 0)
                    return false;
        return true;
    }

    void tokenizeWord(std::string_view word, WordCache& cache, std::vector<int32_t>& ids) const {
        if (!splitAtWordStarts_) {
            tokenizeCached(word, cache, ids);
            return;
        }
        std::size_t start = 0;
        for (std::size_t hit = word.find(metaspace, 1); hit != std::string_view::npos;
             hit = word.find(metaspace, hit + metaspace.size())) {
            const bool afterMetaspace =
                hit >= metaspace.size() && word.compare(hit - metaspace.size(), metaspace.size(), metaspace) == 0;
            if (afterMetaspace)
                continue;
            tokenizeCached(word.substr(start, hit - start), cache, ids);
            start = hit;
        }
        tokenizeCached(word.substr(start), cache, ids);
    }

    void tokenizeCached(std::string_view word, WordCache& cache, std::vector<int32_t>& ids) const {
        if (word.size() > longestCachedWord) {
            model_->tokenize(word, ids);
            return;
        }
        auto [it, inserted] = cache.try_emplace(std::string(word));
        if (inserted)
            model_->tokenize(word, it->second);
        ids.insert(ids.end(), it->second.begin(), it->second.end());
    }

    void checkId(int32_t id) const {
        if (id < 0 || id >= vocabSize())
            throw Error("tokenizer '" + sourceName_ + "': token id " + std::to_string(id) +
                        " is out of range (the vocabulary has ids 0.." + std::to_string(vocabSize() - 1) + ")");
    }

    std::string sourceName_;
    Kind kind_ = Kind::SentencePieceBpe;
    Normalizer normalizer_;
    PreTokenizer preTokenizer_;
    TokenDecoder decoder_;
    std::unique_ptr<BpeModel> model_;
    std::unique_ptr<AddedTokenMatcher> addedTokens_;
    std::vector<std::string> textOfId_;
    std::vector<bool> isSpecial_;
    bool splitAtWordStarts_ = false;
    int32_t bosId_ = -1;
    int32_t eosId_ = -1;
};

} // namespace

std::shared_ptr<Tokenizer> Tokenizer::fromFile(const std::string& tokenizerJsonPath) {
    if (std::filesystem::is_directory(tokenizerJsonPath))
        throw Error("tokenizer '" + tokenizerJsonPath + "' is a folder; give the tokenizer.json file in it");
    // A FIFO is refused, never waited on; 1 GiB at most (Gemma's tokenizer.json is 34 MB).
    return fromJson(readRegularFile(tokenizerJsonPath, "tokenizer", uint64_t(1) << 30), tokenizerJsonPath);
}

std::shared_ptr<Tokenizer> Tokenizer::fromJson(const std::string& json, const std::string& sourceName) {
    return fromJsonValue(json_fields::parseJsonLimited(json, "tokenizer '" + sourceName + "'"), sourceName);
}

std::shared_ptr<Tokenizer> Tokenizer::fromJsonValue(const nlohmann::json& root, const std::string& sourceName) {
    if (!root.is_object())
        throw Error("tokenizer '" + sourceName + "' is not a tokenizer.json: the top level is " + root.type_name() +
                    ", not an object");
    try {
        return std::make_shared<BpeTokenizer>(root, sourceName);
    } catch (const Error& e) {
        throw Error("tokenizer '" + sourceName + "': " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw Error("tokenizer '" + sourceName + "': unexpected JSON content: " + e.what());
    }
}

} // namespace npw
