#pragma once
// Typed reads of JSON fields (tokenizer.json, workspace files, sweep rows). A missing or
// mistyped field throws npw::Error naming the field's path (e.g.
// "pre_tokenizer.pretokenizers[0].behavior"); the caller adds the file name, so each message
// says which file, which field and what was wrong.
#include <nlohmann/json.hpp>

#include <string>

namespace npw::json_fields {

using Json = nlohmann::json;

// `object[key]`; throws when `object` is not an object or lacks the key.
const Json& required(const Json& object, const char* key, const std::string& path);
// `object[key]`, or a null value when absent; throws when `object` is not an object.
const Json& optional(const Json& object, const char* key, const std::string& path);

// Absent or null fields give the fallback; any other type than asked for throws.
std::string stringOr(const Json& object, const char* key, const std::string& fallback, const std::string& path);
bool boolOr(const Json& object, const char* key, bool fallback, const std::string& path);
int64_t intOr(const Json& object, const char* key, int64_t fallback, const std::string& path);
double numberOr(const Json& object, const char* key, double fallback, const std::string& path);

std::string requiredString(const Json& object, const char* key, const std::string& path);
double requiredNumber(const Json& object, const char* key, const std::string& path);
int64_t requiredInt(const Json& object, const char* key, const std::string& path);
// A number that may be null (written by finiteOrNull): NaN for null.
double numberOrNaN(const Json& object, const char* key, const std::string& path);

// NaN and ±∞ have no JSON spelling: they are written as null.
Json finiteOrNull(double x);
// The "type" member every normalizer, pre-tokenizer, decoder and model has.
std::string typeOf(const Json& component, const std::string& path);

// The "pattern" of Replace and Split: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
    std::string text;
    bool isRegex = false;
};
Pattern pattern(const Json& component, const std::string& path);
// The same where only a String pattern is supported; a Regex throws.
std::string literalPattern(const Json& component, const std::string& path);

} // namespace npw::json_fields
