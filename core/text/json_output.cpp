#include "core/text/json_output.h"

#include "core/util/error.h"

#include <cmath>
#include <vector>

namespace npw::json_fields {

namespace {

// The first non-finite number under `value` (in the order the text would show it) and its field
// path ("rows[3].ppl"). Iterative: no recursion on a value's depth.
bool findNonFinite(const nlohmann::json& value, std::string& path, double& found) {
    struct Item {
        const nlohmann::json* value;
        std::string path;
    };
    std::vector<Item> stack{{&value, ""}};
    while (!stack.empty()) {
        Item item = std::move(stack.back());
        stack.pop_back();
        const nlohmann::json& v = *item.value;
        if (v.is_number_float()) {
            const double x = v.get<double>();
            if (!std::isfinite(x)) {
                path = item.path;
                found = x;
                return true;
            }
        } else if (v.is_object()) {
            std::vector<Item> children;
            for (auto it = v.begin(); it != v.end(); ++it)
                children.push_back({&it.value(), item.path.empty() ? it.key() : item.path + "." + it.key()});
            for (auto c = children.rbegin(); c != children.rend(); ++c) stack.push_back(std::move(*c));
        } else if (v.is_array()) {
            for (std::size_t i = v.size(); i-- > 0;) stack.push_back({&v[i], item.path + "[" + std::to_string(i) + "]"});
        }
    }
    return false;
}

// Whether any number under `value` is non-finite: the common case, without building paths.
bool anyNonFinite(const nlohmann::json& value) {
    std::vector<const nlohmann::json*> stack{&value};
    while (!stack.empty()) {
        const nlohmann::json& v = *stack.back();
        stack.pop_back();
        if (v.is_number_float()) {
            if (!std::isfinite(v.get<double>())) return true;
        } else if (v.is_structured()) {
            for (const nlohmann::json& child : v) stack.push_back(&child);
        }
    }
    return false;
}

} // namespace

std::string dumpJson(const nlohmann::json& value, int indent, const std::string& what) {
    std::string path;
    double found = 0;
    if (anyNonFinite(value) && findNonFinite(value, path, found)) {
        const char* spelled = std::isnan(found) ? "NaN" : found > 0 ? "inf" : "-inf";
        throw Error((path.empty() ? std::string("the value") : "'" + path + "'") + " of " + what + " is not finite (" +
                    spelled + "): a non-finite result has no JSON spelling and is never written as null");
    }
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace npw::json_fields
