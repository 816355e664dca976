#include "app/npw/cli_args.h"
#include "core/util/error.h"

#include <set>
#include <sstream>

namespace npw::cli {

std::string Args::get(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
    return {};
}

long long Args::getInt(const std::string& name) const {
    const std::string v = get(name);
    size_t used = 0;
    long long x = 0;
    try {
        x = std::stoll(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != v.size() || v.empty()) throw Error("--" + name + " expects an integer, got '" + v + "'");
    return x;
}

double Args::getDouble(const std::string& name) const {
    const std::string v = get(name);
    size_t used = 0;
    double x = 0;
    try {
        x = std::stod(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != v.size() || v.empty()) throw Error("--" + name + " expects a number, got '" + v + "'");
    return x;
}

Args parseArgs(const std::vector<Flag>& flags, const std::vector<std::string>& argv, const std::string& command) {
    std::map<std::string, const Flag*> byName;
    Args args;
    for (const Flag& f : flags) {
        if (!byName.emplace(f.name, &f).second)
            throw Error("internal: flag --" + f.name + " declared twice for '" + command + "'");
        if (!f.valueName.empty() && !f.defaultValue.empty()) args.defaults_[f.name] = f.defaultValue;
    }
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a.rfind("--", 0) != 0 || a == "--") {
            args.positional_.push_back(a);
            continue;
        }
        std::string name = a.substr(2), value;
        const bool inlineValue = name.find('=') != std::string::npos;
        if (inlineValue) {
            value = name.substr(name.find('=') + 1);
            name = name.substr(0, name.find('='));
        }
        auto it = byName.find(name);
        if (it == byName.end())
            throw Error("unknown option --" + name + " for 'npw " + command + "' (see 'npw " + command + " --help')");
        if (it->second->valueName.empty()) {
            if (inlineValue) throw Error("--" + name + " takes no value");
            args.values_[name] = "1";
        } else {
            if (!inlineValue) {
                if (i + 1 >= argv.size()) throw Error("--" + name + " needs a value (" + it->second->valueName + ")");
                value = argv[++i];
            }
            args.values_[name] = value;
        }
    }
    return args;
}

std::string formatFlagHelp(const std::vector<Flag>& flags) {
    std::ostringstream out;
    for (const Flag& f : flags) {
        std::string left = "  --" + f.name + (f.valueName.empty() ? "" : " " + f.valueName);
        out << left;
        out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << f.help;
        if (!f.defaultValue.empty()) out << " [default: " << f.defaultValue << "]";
        out << "\n";
    }
    return out.str();
}

} // namespace npw::cli
