#pragma once
// UTF-8 helpers shared by the tokenizers and the BPE trainer. Strict decoding (no overlongs,
// no surrogates, nothing above U+10FFFF), as Rust's str and therefore Hugging Face's
// tokenizers require, so that npw accepts and rejects the same text they do.
#include <cstddef>
#include <string>
#include <string_view>

namespace npw::utf8 {

// Byte offset of the first ill-formed sequence in `text`, or npos when all of it is valid.
std::size_t findInvalid(std::string_view text);

// Length in bytes of the valid character starting at `pos`, 0 when ill-formed there.
std::size_t charLength(std::string_view text, std::size_t pos);

// The code point of the valid character starting at `pos` (charLength() must be > 0).
char32_t decodeAt(std::string_view text, std::size_t pos);

void append(std::string& out, char32_t codePoint);

// `bytes` made valid the way Rust's String::from_utf8_lossy does it: each maximal ill-formed
// subpart becomes one U+FFFD. Byte-level decoders use it, so decode matches Hugging Face's.
std::string toValidLossy(std::string_view bytes);

} // namespace npw::utf8
