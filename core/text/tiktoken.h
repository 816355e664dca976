#pragma once
// Meta's LLaMA-3 tokenizer.model: not SentencePiece protobuf but tiktoken's BPE file, one
// "<base64 bytes> <rank>" line per token (meta-llama/llama3 `llama/tokenizer.py` loads it with
// tiktoken's load_tiktoken_bpe). npw reads it as the byte-level BPE of a tokenizer.json, built as
// transformers' TikTokenConverter builds LLaMA-3's tokenizer.json from this file:
//  - vocabulary: each token's bytes through GPT-2's byte-to-unicode map, id = rank;
//  - merges: for every token, each split into two tokens of the file, ordered by the token's
//    rank (then the two parts' ranks). Merging the lowest-ranked pair is then exactly tiktoken's
//    rule (join the adjacent pair whose concatenation has the lowest rank); a word that is
//    itself a token is taken whole (ignore_merges), as tiktoken does;
//  - pre-tokenizer: LLaMA-3's pattern (tokenizer.py's pat_str) and ByteLevel without regex;
//  - special tokens: the 256 of Meta's LLaMA-3 tokenizer.py after the 128,000 ranks
//    (<|begin_of_text|> = 128000 is BOS, <|end_of_text|> = 128001 EOS, <|start_header_id|>,
//    <|end_header_id|>, <|eot_id|>, <|reserved_special_token_N|>), matched in text as
//    Hugging Face's tokenizer.json matches them. LLaMA-3.1+ renamed some reserved tokens
//    (<|eom_id|>, <|python_tag|>, ...): their ids are the same, their text here is 3.0's.
// Other tiktoken files (GPT-4's cl100k_base, ...) have other patterns and special tokens and are
// refused by name: only a file of exactly LLaMA-3's 128,000 ranks is read.
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace npw {

inline constexpr int32_t kLlama3BaseTokens = 128000;
inline constexpr int32_t kLlama3SpecialTokens = 256;
// The longest token a tiktoken file may hold. LLaMA-3's longest is 128 bytes (tens for most);
// building the merges splits each token at every byte, so a token of hundreds of KB would
// take minutes (quadratic in its length): refused by line instead.
inline constexpr std::size_t kTiktokenMaxTokenBytes = 1024;

// LLaMA-3's pre-tokenizer pattern (Meta's tokenizer.py pat_str), the same text as in its
// tokenizer.json.
extern const char* const kLlama3Pattern;

// The tokenizer.json equivalent of a LLaMA-3 tiktoken file's content. Throws npw::Error naming
// `sourceName`, the line and what was expected for a malformed line (bad base64, a rank that is
// not an integer, a duplicate token or rank, a token longer than kTiktokenMaxTokenBytes, ranks that are not 0..n-1), a file missing one of
// the 256 single bytes, or a file that is not LLaMA-3's (not 128,000 ranks).
nlohmann::json tiktokenAsTokenizerJson(std::string_view bytes, const std::string& sourceName);

} // namespace npw
