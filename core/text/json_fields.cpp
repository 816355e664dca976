#include "core/text/json_fields.h"

#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <cmath>
#include <limits>
#include <set>
#include <type_traits>
#include <vector>

namespace npw::json_fields {
namespace {

std::string field(std::string_view path, const char* key) {
    return path.empty() ? std::string(key) : std::string(path) + "." + key;
}

const Json* find(const Json& object, const char* key, std::string_view path) {
    if (!object.is_object())
        throw Error("'" + std::string(path) + "' must be a JSON object, found " + object.type_name());
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrongType(const std::string& path, const char* key, const char* wanted, const Json& found) {
    throw Error("'" + field(path, key) + "' must be " + wanted + ", found " + found.type_name() + " " + preview(found, 40));
}

// nlohmann's own DOM builder behind a SAX front that counts the depth, knows where in the
// document it is (for messages), and, when asked, the keys of each open object: one pass, and
// the limit holds before anything deep is built.
class LimitedDomParser {
public:
    using Dom = nlohmann::detail::json_sax_dom_parser<Json>;

    LimitedDomParser(Json& root, const std::string& what, const JsonParseOptions& options)
        : dom_(root, true), what_(what), options_(options) {}

    bool null() { return value(), dom_.null(); }
    bool boolean(bool v) { return value(), dom_.boolean(v); }
    bool number_integer(Json::number_integer_t v) { return value(), dom_.number_integer(v); }
    bool number_unsigned(Json::number_unsigned_t v) { return value(), dom_.number_unsigned(v); }
    bool number_float(Json::number_float_t v, const Json::string_t& text) { return value(), dom_.number_float(v, text); }
    bool string(Json::string_t& v) { return value(), dom_.string(v); }
    bool binary(Json::binary_t& v) { return value(), dom_.binary(v); }
    bool start_object(std::size_t length) {
        enter(false);
        return dom_.start_object(length);
    }
    bool key(Json::string_t& key) {
        Frame& object = frames_.back();
        if (options_.rejectDuplicateKeys && !object.keys.insert(key).second) {
            const std::string path = pathTo(frames_.size() - 1);
            throw Error(what_ + ": " +
                        (options_.describeDuplicate
                             ? options_.describeDuplicate(key, path)
                             : "duplicate key '" + key + "'" + (path.empty() ? " at the top level" : " inside '" + path + "'")));
        }
        object.key = key;
        return dom_.key(key);
    }
    bool end_object() {
        frames_.pop_back();
        return dom_.end_object();
    }
    bool start_array(std::size_t length) {
        enter(true);
        return dom_.start_array(length);
    }
    bool end_array() {
        frames_.pop_back();
        return dom_.end_array();
    }
    // Syntax errors and numbers out of range (1e999): npw::Error naming where it happened.
    template <class Exception>
    bool parse_error(std::size_t position, const std::string&, const Exception& e) {
        const std::string path = pathTo(frames_.size());
        const std::string where = "at byte " + std::to_string(position) + (path.empty() ? "" : ", field '" + path + "'");
        if constexpr (std::is_same_v<Exception, nlohmann::json::out_of_range>)
            throw Error(what_ + ": a number out of range " + where + " (" + e.what() + ")");
        throw Error(what_ + " is not valid JSON " + where + " (" + e.what() + ")");
    }
    bool is_errored() const { return dom_.is_errored(); }

private:
    struct Frame {
        bool array = false;
        std::size_t index = 0;       // arrays: elements seen so far
        std::string key;             // objects: the last key
        std::set<std::string> keys;  // objects, when duplicates are refused
    };

    // A value begins: in an array, it is the next element.
    void value() {
        if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    }
    void enter(bool array) {
        value();
        if (frames_.size() >= options_.maxDepth)
            throw Error(what_ + ": JSON nested deeper than " + std::to_string(options_.maxDepth) + " levels at '" +
                        pathTo(frames_.size()).substr(0, 200) +
                        "'; refused (real files nest a few levels; this one is corrupt or hostile)");
        frames_.push_back({array, 0, {}, {}});
    }
    // "a.b[2].c": the position in the first `count` open containers.
    std::string pathTo(std::size_t count) const {
        std::string path;
        for (std::size_t i = 0; i < count && i < frames_.size(); ++i) {
            const Frame& f = frames_[i];
            if (f.array) path += "[" + std::to_string(f.index == 0 ? 0 : f.index - 1) + "]";
            else path += (path.empty() ? "" : ".") + f.key;
        }
        return path;
    }

    Dom dom_;
    const std::string& what_;
    const JsonParseOptions& options_;
    std::vector<Frame> frames_;
};

// Appends a shortened rendering of `value` to `out`, stopping once out reaches `limit`.
void previewInto(const Json& value, std::string& out, std::size_t limit, int depth) {
    if (out.size() > limit) return;
    if (value.is_string()) {
        const std::string& text = value.get_ref<const std::string&>();
        const std::size_t room = limit - out.size() + 1;
        const Json head(text.size() > room ? text.substr(0, room) : text);
        out += head.dump(-1, ' ', false, Json::error_handler_t::replace);
        if (text.size() > room) out += "…";
        return;
    }
    if (!value.is_structured()) {
        out += value.dump();
        return;
    }
    const bool object = value.is_object();
    out += object ? '{' : '[';
    if (depth >= 4 && !value.empty()) out += "…";
    bool first = true;
    for (auto it = value.begin(); depth < 4 && it != value.end(); ++it) {
        if (out.size() > limit) {
            out += ", …";
            break;
        }
        if (!first) out += ", ";
        first = false;
        if (object) out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ": ";
        previewInto(it.value(), out, limit, depth + 1);
    }
    out += object ? '}' : ']';
}

} // namespace

Json parseJsonLimited(std::string_view text, const std::string& what, const JsonParseOptions& options) {
    Json root;
    try {
        LimitedDomParser sax(root, what, options);
        Json::sax_parse(text.begin(), text.end(), &sax);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(what + " is not valid JSON (" + e.what() + ")");
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + ": not readable as JSON (" + e.what() + ")");
    }
    return root;
}

Json readJsonFile(const std::string& path, const std::string& what, const JsonParseOptions& options) {
    return parseJsonLimited(readTextFile(path), what.empty() ? "'" + path + "'" : what, options);
}

std::string preview(const Json& value, std::size_t maxChars) {
    std::string out;
    previewInto(value, out, maxChars, 0);
    if (out.size() > maxChars + 8) {
        std::size_t cut = maxChars;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // a whole UTF-8 character
        out.resize(cut);
        out += "…";
    }
    return out;
}

const Json& optional(const Json& object, const char* key, std::string_view path) {
    static const Json null;
    const Json* value = find(object, key, path);
    return value ? *value : null;
}

const Json& required(const Json& object, const char* key, std::string_view path) {
    if (const Json* value = find(object, key, path))
        return *value;
    throw Error("'" + field(path, key) + "' is missing");
}

std::string stringOr(const Json& object, const char* key, const std::string& fallback, const std::string& path) {
    const Json* value = find(object, key, path);
    if (!value)
        return fallback;
    if (!value->is_string())
        wrongType(path, key, "a string", *value);
    return value->get<std::string>();
}

bool boolOr(const Json& object, const char* key, bool fallback, const std::string& path) {
    const Json* value = find(object, key, path);
    if (!value)
        return fallback;
    if (!value->is_boolean())
        wrongType(path, key, "true or false", *value);
    return value->get<bool>();
}

int64_t intOr(const Json& object, const char* key, int64_t fallback, const std::string& path) {
    const Json* value = find(object, key, path);
    if (!value)
        return fallback;
    if (!value->is_number_integer())
        wrongType(path, key, "an integer", *value);
    return value->get<int64_t>();
}

double numberOr(const Json& object, const char* key, double fallback, const std::string& path) {
    const Json* value = find(object, key, path);
    if (!value)
        return fallback;
    if (!value->is_number())
        wrongType(path, key, "a number", *value);
    return value->get<double>();
}

std::string requiredString(const Json& object, const char* key, const std::string& path) {
    const Json& value = required(object, key, path);
    if (!value.is_string())
        wrongType(path, key, "a string", value);
    return value.get<std::string>();
}

std::string typeOf(const Json& component, const std::string& path) { return requiredString(component, "type", path); }

void forEachSequenceStep(const Json& sequence, const char* listKey, const std::string& path, int depth,
                         const std::function<void(const Json& step, const std::string& stepPath)>& each) {
    if (depth >= kMaxSequenceNesting)
        throw Error("'" + path + "': Sequences nested deeper than " + std::to_string(kMaxSequenceNesting) + " levels");
    const Json& list = required(sequence, listKey, path);
    const std::string listPath = path + "." + listKey;
    if (!list.is_array())
        throw Error("'" + listPath + "' must be an array");
    if (list.size() > kMaxSequenceSteps)
        throw Error("'" + listPath + "' has " + std::to_string(list.size()) + " steps; at most " +
                    std::to_string(kMaxSequenceSteps) + " are accepted");
    for (std::size_t i = 0; i < list.size(); ++i)
        each(list[i], listPath + "[" + std::to_string(i) + "]");
}

Pattern pattern(const Json& component, const std::string& path) {
    const Json& value = required(component, "pattern", path);
    const std::string patternPath = field(path, "pattern");
    if (find(value, "String", patternPath))
        return {requiredString(value, "String", patternPath), false};
    if (find(value, "Regex", patternPath))
        return {requiredString(value, "Regex", patternPath), true};
    throw Error("'" + patternPath + "' must hold \"String\" or \"Regex\"");
}

std::string literalPattern(const Json& component, const std::string& path) {
    Pattern found = pattern(component, path);
    if (found.isRegex)
        throw Error("'" + field(path, "pattern") + "' is a Regex; only {\"String\": ...} patterns are supported here");
    return std::move(found.text);
}

double requiredNumber(const Json& object, const char* key, const std::string& path) {
    const Json& value = required(object, key, path);
    if (!value.is_number()) wrongType(path, key, "a number", value);
    return value.get<double>();
}

int64_t requiredInt(const Json& object, const char* key, const std::string& path) {
    const Json& value = required(object, key, path);
    if (!value.is_number_integer()) wrongType(path, key, "an integer", value);
    return value.get<int64_t>();
}

double numberOrNaN(const Json& object, const char* key, const std::string& path) {
    if (!object.is_object() || !object.contains(key)) throw Error("'" + field(path, key) + "' is missing");
    const Json& value = object.at(key);
    if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!value.is_number()) wrongType(path, key, "a number or null", value);
    return value.get<double>();
}

Json finiteOrNull(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

} // namespace npw::json_fields
