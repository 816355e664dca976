#include "core/text/sentencepiece_normalizer.h"

#include "core/text/utf8.h"
#include "core/util/error.h"

#include <cstring>

namespace npw::sentencepiece {
namespace {

constexpr std::string_view spaceSymbol = "\xE2\x96\x81";  // U+2581
constexpr std::string_view replacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// darts-clone's DoubleArrayUnit.
bool hasLeaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t unitValue(uint32_t unit) { return unit & ((1U << 31) - 1); }
uint32_t unitLabel(uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
uint32_t unitOffset(uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); }
bool isLeafUnit(uint32_t unit) { return (unit >> 31) != 0; }

} // namespace

// --- PieceTrie ---------------------------------------------------------------------------

void PieceTrie::insert(std::string_view key, int32_t value) {
    uint32_t node = 0;
    for (unsigned char byte : key) {
        const auto [it, inserted] = children_.try_emplace(edgeKey(node, byte), static_cast<uint32_t>(nodes_.size()));
        if (inserted)
            nodes_.push_back(-1);
        node = it->second;
    }
    nodes_[node] = value;
}

std::size_t PieceTrie::longestPrefix(std::string_view text) const {
    std::size_t longest = 0;
    forEachPrefix(text, [&](std::size_t length, int32_t) { longest = length; });
    return longest;
}

// --- CharsMap ----------------------------------------------------------------------------

CharsMap::CharsMap(std::string_view blob, const std::string& source, const std::string& field)
    : source_(source), field_(field) {
    // Normalizer::DecodePrecompiledCharsMap.
    if (blob.size() <= 4)
        throw Error(source + ": " + field + " is " + std::to_string(blob.size()) +
                    " bytes, too short for a compiled normalization rule (4-byte trie size, trie, replacements)");
    uint32_t trieBytes;
    std::memcpy(&trieBytes, blob.data(), 4);  // little-endian, as the file
    if (trieBytes > blob.size() - 4)
        throw Error(source + ": " + field + " says its trie is " + std::to_string(trieBytes) + " bytes, but only " +
                    std::to_string(blob.size() - 4) + " bytes follow the size");
    units_.resize(trieBytes / 4);  // SentencePiece passes size / unit size: a partial last unit is ignored
    std::memcpy(units_.data(), blob.data() + 4, units_.size() * 4);
    replacements_.assign(blob.substr(4 + static_cast<std::size_t>(trieBytes)));
    // A darts-clone array sets bit 31 on leaf units only; their values index the replacements.
    for (std::size_t i = 0; i < units_.size(); ++i)
        if (isLeafUnit(units_[i]) && unitValue(units_[i]) >= replacements_.size())
            throw Error(source + ": " + field + ": trie unit " + std::to_string(i) + " points to replacement byte " +
                        std::to_string(unitValue(units_[i])) + ", past the " + std::to_string(replacements_.size()) +
                        " bytes of replacement strings");
}

std::size_t CharsMap::longestMatch(std::string_view text, std::string_view& replacement) const {
    // darts-clone's commonPrefixSearch from the root, keeping the longest result. Indexes outside
    // the array (only a damaged trie produces them: a real one keeps every jump inside its
    // 256-unit block) end the search.
    if (units_.empty())
        return 0;
    std::size_t longest = 0;
    uint32_t value = 0;
    std::size_t id = unitOffset(units_[0]);
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        id ^= byte;
        if (id >= units_.size())
            break;
        const uint32_t unit = units_[id];
        if (unitLabel(unit) != byte)
            break;
        id ^= unitOffset(unit);
        if (hasLeaf(unit)) {
            if (id >= units_.size())
                break;
            longest = i + 1;
            value = unitValue(units_[id]);
        }
    }
    if (longest == 0)
        return 0;
    if (value >= replacements_.size())
        throw Error(source_ + ": " + field_ + ": a rule points to replacement byte " + std::to_string(value) +
                    ", past the " + std::to_string(replacements_.size()) + " bytes of replacement strings");
    const std::string_view rest = std::string_view(replacements_).substr(value);
    replacement = rest.substr(0, std::min(rest.find('\0'), rest.size()));
    return longest;
}

// --- Normalizer --------------------------------------------------------------------------

Normalizer::Normalizer(const NormalizerSpec& spec, const std::vector<std::string>& userDefined,
                       const std::string& source, const std::string& field)
    : spec_(spec) {
    if (!spec_.precompiledCharsmap.empty())
        charsMap_ = std::make_unique<CharsMap>(spec_.precompiledCharsmap, source, field + ".precompiled_charsmap");
    spec_.precompiledCharsmap.clear();  // kept in charsMap_
    for (const std::string& symbol : userDefined)
        userDefined_.insert(symbol, 0);
}

std::pair<std::string_view, std::size_t> Normalizer::normalizePrefix(std::string_view input) const {
    if (input.empty())
        return {};
    if (!userDefined_.empty())
        if (const std::size_t length = userDefined_.longestPrefix(input); length > 0)
            return {input.substr(0, length), length};
    if (charsMap_) {
        std::string_view replacement;
        if (const std::size_t length = charsMap_->longestMatch(input, replacement); length > 0)
            return {replacement, length};
    }
    const std::size_t length = utf8::charLength(input, 0);
    if (length == 0)
        return {replacementCharacter, 1};  // one malformed byte
    return {input.substr(0, length), length};
}

std::string Normalizer::normalize(std::string_view input) const {
    std::string normalized;
    if (input.empty())
        return normalized;
    if (spec_.removeExtraWhitespaces) {  // leading spaces
        while (!input.empty()) {
            const auto [text, consumed] = normalizePrefix(input);
            if (text != " ")
                break;
            input.remove_prefix(consumed);
        }
    }
    if (input.empty())
        return normalized;
    normalized.reserve(input.size() * 3);
    const std::string_view space = spec_.escapeWhitespaces ? spaceSymbol : std::string_view(" ");
    if (spec_.addDummyPrefix)
        normalized += space;
    bool previousIsSpace = spec_.removeExtraWhitespaces;
    while (!input.empty()) {
        auto [text, consumed] = normalizePrefix(input);
        while (previousIsSpace && !text.empty() && text.front() == ' ')
            text.remove_prefix(1);
        if (!text.empty()) {
            for (char c : text) {
                if (c == ' ')
                    normalized += space;
                else
                    normalized += c;
            }
            previousIsSpace = text.back() == ' ';
        }
        input.remove_prefix(consumed);
        if (!spec_.removeExtraWhitespaces)
            previousIsSpace = false;
    }
    if (spec_.removeExtraWhitespaces)  // trailing spaces
        while (normalized.size() >= space.size() &&
               normalized.compare(normalized.size() - space.size(), space.size(), space) == 0)
            normalized.resize(normalized.size() - space.size());
    return normalized;
}

} // namespace npw::sentencepiece
