#include "core/text/added_tokens.h"

#include "core/text/utf8.h"

#include <unicode/uchar.h>

namespace npw {
namespace {

// Rust's char::is_whitespace and is_alphanumeric, which Hugging Face uses for lstrip/rstrip
// and single_word: Unicode White_Space, and letters or numbers.
bool isWhitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }
bool isWordCharacter(char32_t c) { return u_isalnum(static_cast<UChar32>(c)) || c == U'_'; }

// Start of the character that ends at byte `end` (text[..end] is valid UTF-8 and end > 0).
std::size_t charStartBefore(std::string_view text, std::size_t end) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        --start;
    return start;
}

char32_t codePointBefore(std::string_view text, std::size_t end) {
    return utf8::decodeAt(text, charStartBefore(text, end));
}

} // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : trie_(1) {
    for (const AddedToken& token : tokens) {
        if (token.content.empty())
            continue;
        int32_t node = 0;
        for (unsigned char byte : token.content) {
            const auto found = trie_[node].children.find(byte);
            if (found != trie_[node].children.end()) {
                node = found->second;
                continue;
            }
            const auto child = static_cast<int32_t>(trie_.size());
            trie_[node].children.emplace(byte, child);
            trie_.emplace_back();
            node = child;
        }
        trie_[node].tokenIndex = static_cast<int32_t>(tokens_.size());
        tokens_.push_back(token);
    }
}

AddedTokenMatcher::Match AddedTokenMatcher::longestAt(std::string_view text, std::size_t pos) const {
    Match longest{pos, pos, -1};
    int32_t node = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
        const auto found = trie_[node].children.find(static_cast<unsigned char>(text[i]));
        if (found == trie_[node].children.end())
            break;
        node = found->second;
        if (trie_[node].tokenIndex >= 0)
            longest = {pos, i + 1, trie_[node].tokenIndex};
    }
    return longest;
}

std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text) const {
    std::vector<TextSegment> segments;
    std::size_t plainStart = 0;  // where the pending ordinary text begins
    auto emit = [&](std::size_t begin, std::size_t end, int32_t id) {
        if (begin < end)
            segments.push_back({begin, end, id});
    };
    for (std::size_t pos = 0; pos < text.size() && !tokens_.empty();) {
        Match match = longestAt(text, pos);
        if (match.tokenIndex < 0) {
            ++pos;
            continue;
        }
        const AddedToken& token = tokens_[match.tokenIndex];
        if (token.singleWord) {
            const bool wordBefore = match.begin > 0 && isWordCharacter(codePointBefore(text, match.begin));
            const bool wordAfter = match.end < text.size() && isWordCharacter(utf8::decodeAt(text, match.end));
            if (wordBefore || wordAfter) {
                pos = match.end;  // Hugging Face discards the match and searches on after it
                continue;
            }
        }
        if (token.lstrip)
            while (match.begin > plainStart && isWhitespace(codePointBefore(text, match.begin)))
                match.begin = charStartBefore(text, match.begin);
        if (token.rstrip)
            while (match.end < text.size() && isWhitespace(utf8::decodeAt(text, match.end)))
                match.end += utf8::charLength(text, match.end);
        emit(plainStart, match.begin, -1);
        emit(match.begin, match.end, token.id);
        pos = plainStart = match.end;
    }
    emit(plainStart, text.size(), -1);
    return segments;
}

} // namespace npw
