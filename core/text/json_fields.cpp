#include "core/text/json_fields.h"

#include "core/util/error.h"

#include <cmath>
#include <limits>

namespace npw::json_fields {
namespace {

std::string field(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

const Json* find(const Json& object, const char* key, const std::string& path) {
    if (!object.is_object())
        throw Error("'" + path + "' must be a JSON object, found " + object.type_name());
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrongType(const std::string& path, const char* key, const char* wanted, const Json& found) {
    throw Error("'" + field(path, key) + "' must be " + wanted + ", found " + found.type_name());
}

} // namespace

const Json& optional(const Json& object, const char* key, const std::string& path) {
    static const Json null;
    const Json* value = find(object, key, path);
    return value ? *value : null;
}

const Json& required(const Json& object, const char* key, const std::string& path) {
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
