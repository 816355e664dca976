#pragma once
// The one parser of JSON files (parseJsonLimited: bounded depth, npw::Error naming the byte and
// the field) and typed reads of their fields (tokenizer.json, workspace files, sweep rows). A missing or
// mistyped field throws npw::Error naming the field's path (e.g.
// "pre_tokenizer.pretokenizers[0].behavior"); the caller adds the file name, so each message
// says which file, which field and what was wrong.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace npw::json_fields {

using Json = nlohmann::json;

// ---- Parsing a file's JSON: every reader of a JSON file goes through this. ----

// Deeper nesting than this is refused while parsing: real files nest < 20 levels, and copying,
// printing or walking a value nested 400,000 deep would recurse until the stack runs out.
constexpr std::size_t kMaxJsonDepth = 512;

struct JsonParseOptions {
    std::size_t maxDepth = kMaxJsonDepth;
    // Refuse an object key given twice (nlohmann keeps the last without a word). The message
    // comes from describeDuplicate(key, path of the object: "" for the top level, "a.b" below).
    bool rejectDuplicateKeys = false;
    std::function<std::string(const std::string& key, const std::string& path)> describeDuplicate;
};

// Parses `text` (a file's content). Throws npw::Error "<what>: ..." for invalid JSON, a number
// out of range (1e999), nesting beyond maxDepth, or a duplicate key when asked: never a JSON
// library exception.
Json parseJsonLimited(std::string_view text, const std::string& what, const JsonParseOptions& options = {});
// readTextFile + parseJsonLimited; `what` defaults to "'<path>'".
Json readJsonFile(const std::string& path, const std::string& what = "", const JsonParseOptions& options = {});

// A bounded rendering of a value for error messages (at most ~maxChars characters, arrays and
// objects shortened with "…"): never dump() a value from a file into a message.
std::string preview(const Json& value, std::size_t maxChars = 80);

// `object[key]`; throws when `object` is not an object or lacks the key.
// The result refers into `object` only. The path (for messages) is a string_view taken by value,
// not a reference: `const Json& x = required(root, "model", "model")` then binds no temporary
// to a reference parameter, so there is nothing it could dangle from (gcc 14's
// -Wdangling-reference checks exactly that). Passing a temporary `object` would dangle: don't.
const Json& required(const Json& object, const char* key, std::string_view path);
// `object[key]`, or a null value when absent; throws when `object` is not an object.
const Json& optional(const Json& object, const char* key, std::string_view path);

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

// The steps of a Sequence normalizer, pre-tokenizer or decoder ({"type": "Sequence", listKey:
// [...]}): calls each(step, its path "path.listKey[i]") in order. Real files nest one Sequence
// and list a few steps; a Sequence nested deeper than kMaxSequenceNesting (depth counts the
// Sequences around this one) or listing more than kMaxSequenceSteps steps is refused before it
// costs memory or stack, as is a listKey that is not an array.
constexpr int kMaxSequenceNesting = 64;
constexpr std::size_t kMaxSequenceSteps = 1024;
void forEachSequenceStep(const Json& sequence, const char* listKey, const std::string& path, int depth,
                         const std::function<void(const Json& step, const std::string& stepPath)>& each);

// The "pattern" of Replace and Split: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
    std::string text;
    bool isRegex = false;
};
Pattern pattern(const Json& component, const std::string& path);
// The same where only a String pattern is supported; a Regex throws.
std::string literalPattern(const Json& component, const std::string& path);

} // namespace npw::json_fields
