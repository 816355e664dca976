#include "core/text/utf8.h"

namespace npw::utf8 {
namespace {

bool isContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Number of leading bytes at `pos` that are a prefix of some valid sequence (Unicode's
// "maximal subpart"), together with the full length that sequence needs. A full valid
// character returns prefix == needed.
struct Prefix {
    std::size_t prefix = 0;
    std::size_t needed = 0;
};

Prefix validPrefix(std::string_view text, std::size_t pos) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80)
        return {1, 1};
    std::size_t needed = 0;
    unsigned char secondLow = 0x80, secondHigh = 0xBF;  // the range the second byte must be in
    if (lead >= 0xC2 && lead <= 0xDF) {
        needed = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        needed = 3;
        if (lead == 0xE0) secondLow = 0xA0;   // overlong
        if (lead == 0xED) secondHigh = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        needed = 4;
        if (lead == 0xF0) secondLow = 0x90;   // overlong
        if (lead == 0xF4) secondHigh = 0x8F;  // above U+10FFFF
    } else {
        return {0, 1};
    }
    std::size_t prefix = 1;
    for (; prefix < needed && pos + prefix < text.size(); ++prefix) {
        const auto byte = static_cast<unsigned char>(text[pos + prefix]);
        const bool ok = prefix == 1 ? (byte >= secondLow && byte <= secondHigh) : isContinuation(byte);
        if (!ok)
            break;
    }
    return {prefix, needed};
}

} // namespace

std::size_t charLength(std::string_view text, std::size_t pos) {
    const Prefix p = validPrefix(text, pos);
    return p.prefix == p.needed ? p.needed : 0;
}

std::size_t findInvalid(std::string_view text) {
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t length = charLength(text, pos);
        if (length == 0)
            return pos;
        pos += length;
    }
    return std::string_view::npos;
}

char32_t decodeAt(std::string_view text, std::size_t pos) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80)
        return lead;
    const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    char32_t codePoint = lead & (0x7F >> length);
    for (std::size_t i = 1; i < length; ++i)
        codePoint = (codePoint << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
    return codePoint;
}

void append(std::string& out, char32_t codePoint) {
    if (codePoint < 0x80) {
        out += static_cast<char>(codePoint);
    } else if (codePoint < 0x800) {
        out += static_cast<char>(0xC0 | (codePoint >> 6));
        out += static_cast<char>(0x80 | (codePoint & 0x3F));
    } else if (codePoint < 0x10000) {
        out += static_cast<char>(0xE0 | (codePoint >> 12));
        out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (codePoint & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (codePoint >> 18));
        out += static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (codePoint & 0x3F));
    }
}

std::string toValidLossy(std::string_view bytes) {
    static constexpr std::string_view replacementCharacter = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t pos = 0; pos < bytes.size();) {
        const Prefix p = validPrefix(bytes, pos);
        if (p.prefix == p.needed) {
            out.append(bytes.substr(pos, p.needed));
            pos += p.needed;
        } else {
            out.append(replacementCharacter);
            pos += p.prefix == 0 ? 1 : p.prefix;
        }
    }
    return out;
}

} // namespace npw::utf8
