#include "app/npw/cli_args.h"
#include "core/util/error.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace npw::cli {

namespace {

// Integers beyond 2^53 are not exact as doubles: a bound that large means "no upper bound".
constexpr double kExactIntegers = 9007199254740992.0;

std::string number(double x) {
    std::ostringstream out;
    if (x == std::floor(x) && std::fabs(x) < 1e15)
        out << static_cast<long long>(x);
    else
        out << std::setprecision(15) << x;
    return out.str();
}

std::vector<std::string> listItems(const std::string& value) {
    std::vector<std::string> items;
    std::stringstream in(value);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) items.push_back(item);
    return items;
}

// The whole of `text` as a finite or infinite double (NaN included); false when it is not a number.
bool parseReal(const std::string& text, double& x) {
    size_t used = 0;
    try {
        x = std::stod(text, &used);
    } catch (const std::exception&) {
        return false;
    }
    return !text.empty() && used == text.size();
}

// The whole of `text` as an integer: digits, or a number with an exact integral value ("1e3").
bool parseInteger(const std::string& text, long long& x) {
    size_t used = 0;
    try {
        x = std::stoll(text, &used);
        if (!text.empty() && used == text.size()) return true;
    } catch (const std::exception&) {
    }
    double d = 0;
    if (!parseReal(text, d) || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) > kExactIntegers) return false;
    x = static_cast<long long>(d);
    return true;
}

bool integerType(FlagType t) { return t == FlagType::Int || t == FlagType::IntList; }

bool inRange(const Flag& f, double x) {
    if (!std::isfinite(x)) return false;
    if (f.minExclusive ? !(x > f.min) : !(x >= f.min)) return false;
    if (f.maxExclusive ? !(x < f.max) : !(x <= f.max)) return false;
    return true;
}

// One item of a numeric flag: parsed and in range.
bool validItem(const Flag& f, const std::string& item) {
    if (integerType(f.type)) {
        long long x = 0;
        return parseInteger(item, x) && inRange(f, static_cast<double>(x));
    }
    double x = 0;
    return parseReal(item, x) && inRange(f, x);
}

} // namespace

Flag Flag::toggle(std::string name, std::string help) {
    Flag f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = FlagType::Switch;
    return f;
}

Flag Flag::text(std::string name, std::string valueName, std::string help) {
    Flag f;
    f.name = std::move(name);
    f.valueName = std::move(valueName);
    f.help = std::move(help);
    f.type = FlagType::Text;
    return f;
}

Flag Flag::choice(std::string name, std::string valueName, std::string choices,
                  std::function<void(const std::string&)> parse, std::string help) {
    Flag f = text(std::move(name), std::move(valueName), std::move(help));
    f.type = FlagType::Choice;
    f.choices = std::move(choices);
    f.parse = std::move(parse);
    return f;
}

Flag Flag::integer(std::string name, std::string valueName, int64_t min, int64_t max, std::string help) {
    Flag f = text(std::move(name), std::move(valueName), std::move(help));
    f.type = FlagType::Int;
    f.min = static_cast<double>(min);
    f.max = static_cast<double>(max);
    return f;
}

Flag Flag::real(std::string name, std::string valueName, std::string help) {
    Flag f = text(std::move(name), std::move(valueName), std::move(help));
    f.type = FlagType::Real;
    return f;
}

Flag Flag::atLeast(double lo) const { return bounded(lo, false, max, maxExclusive); }
Flag Flag::above(double lo) const { return bounded(lo, true, max, maxExclusive); }
Flag Flag::atMost(double hi) const { return bounded(min, minExclusive, hi, false); }
Flag Flag::below(double hi) const { return bounded(min, minExclusive, hi, true); }

Flag Flag::bounded(double lo, bool loExclusive, double hi, bool hiExclusive) const {
    Flag f = *this;
    f.min = lo;
    f.minExclusive = loExclusive;
    f.max = hi;
    f.maxExclusive = hiExclusive;
    return f;
}

Flag Flag::byDefault(std::string value) const {
    Flag f = *this;
    f.defaultValue = std::move(value);
    return f;
}

Flag Flag::described(std::string text) const {
    Flag f = *this;
    f.help = std::move(text);
    return f;
}

Flag Flag::valueNamed(std::string name) const {
    Flag f = *this;
    f.valueName = std::move(name);
    return f;
}

Flag Flag::named(std::string newName) const {
    Flag f = *this;
    f.name = std::move(newName);
    return f;
}

Flag Flag::asList(std::string name) const {
    Flag f = valueNamed(std::move(name));
    if (f.type == FlagType::Int) f.type = FlagType::IntList;
    if (f.type == FlagType::Real) f.type = FlagType::RealList;
    return f;
}

std::string Flag::expects() const {
    switch (type) {
    case FlagType::Switch: return "no value";
    case FlagType::Text: return "a value";
    case FlagType::Choice: return choices;
    default: break;
    }
    const bool list = isList(), integral = integerType(type);
    const bool hasMin = std::isfinite(min), hasMax = std::isfinite(max) && !(integral && max >= kExactIntegers);
    std::string noun = integral ? (list ? "integers" : "an integer") : (list ? "numbers" : "a number");
    std::string range;
    if (hasMin && hasMax) {
        range = std::string(" in ") + (minExclusive ? "(" : "[") + number(min) + ", " + number(max) +
                (maxExclusive ? ")" : "]");
    } else if (hasMin) {
        if (!integral && min == 0 && minExclusive) noun = list ? "positive numbers" : "a positive number";
        else range = std::string(minExclusive ? " > " : " ≥ ") + number(min);
    } else if (hasMax) {
        range = std::string(maxExclusive ? " < " : " ≤ ") + number(max);
    } else if (!integral) {
        noun = list ? "finite numbers" : "a finite number";
    }
    return (list ? "comma-separated " : "") + noun + range;
}

void validateFlagValue(const Flag& f, const std::string& value) {
    auto refuse = [&](const std::string& shown) {
        throw Error("--" + f.name + " expects " + f.expects() + ", got '" + shown + "'" +
                    (shown == value ? std::string() : " in '" + value + "'"));
    };
    switch (f.type) {
    case FlagType::Switch:
    case FlagType::Text: return;
    case FlagType::Choice:
        try {
            if (f.parse) f.parse(value);
        } catch (const Error&) {
            refuse(value);
        }
        return;
    case FlagType::Int:
    case FlagType::Real:
        if (!validItem(f, value)) refuse(value);
        return;
    case FlagType::IntList:
    case FlagType::RealList: {
        const std::vector<std::string> items = listItems(value);
        if (items.empty()) refuse(value);
        for (const std::string& item : items)
            if (!validItem(f, item)) refuse(item);
        return;
    }
    }
}

std::vector<double> flagNumbers(const Flag& f, const std::string& value) {
    std::vector<double> out;
    for (const std::string& item : f.isList() ? listItems(value) : std::vector<std::string>{value}) {
        double x = 0;
        long long i = 0;
        if (integerType(f.type) ? !parseInteger(item, i) : !parseReal(item, x))
            throw Error("--" + f.name + " expects " + f.expects() + ", got '" + item + "'");
        out.push_back(integerType(f.type) ? static_cast<double>(i) : x);
    }
    return out;
}

std::string Args::get(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
    return {};
}

long long Args::getInt(const std::string& name) const {
    const std::string v = get(name);
    long long x = 0;
    if (!parseInteger(v, x)) throw Error("--" + name + " expects an integer, got '" + v + "'");
    return x;
}

double Args::getDouble(const std::string& name) const {
    const std::string v = get(name);
    double x = 0;
    if (!parseReal(v, x)) throw Error("--" + name + " expects a number, got '" + v + "'");
    return x;
}

std::vector<std::string> Args::getList(const std::string& name) const { return listItems(get(name)); }

std::vector<int64_t> Args::getIntList(const std::string& name) const {
    std::vector<int64_t> out;
    for (const std::string& item : listItems(get(name))) {
        long long x = 0;
        if (!parseInteger(item, x)) throw Error("--" + name + ": '" + item + "' is not an integer");
        out.push_back(x);
    }
    if (out.empty()) throw Error("--" + name + " needs at least one value");
    return out;
}

std::vector<double> Args::getDoubleList(const std::string& name) const {
    std::vector<double> out;
    for (const std::string& item : listItems(get(name))) {
        double x = 0;
        if (!parseReal(item, x)) throw Error("--" + name + ": '" + item + "' is not a number");
        out.push_back(x);
    }
    if (out.empty()) throw Error("--" + name + " needs at least one value");
    return out;
}

Args parseArgs(const std::vector<Flag>& flags, const std::vector<std::string>& argv, const std::string& command) {
    std::map<std::string, const Flag*> byName;
    Args args;
    for (const Flag& f : flags) {
        if (!byName.emplace(f.name, &f).second)
            throw Error("internal: flag --" + f.name + " declared twice for '" + command + "'");
        if (f.takesValue() && !f.defaultValue.empty()) args.defaults_[f.name] = f.defaultValue;
    }
    const std::string seeHelp = " (see 'npw " + command + " --help')";
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
        if (it == byName.end()) throw Error("unknown option --" + name + " for 'npw " + command + "'" + seeHelp);
        const Flag& flag = *it->second;
        if (!flag.takesValue()) {
            if (inlineValue) throw Error("--" + name + " takes no value");
            args.values_[name] = "1";
        } else {
            if (!inlineValue) {
                if (i + 1 >= argv.size()) throw Error("--" + name + " needs a value (" + flag.valueName + ")");
                value = argv[++i];
            }
            try {
                validateFlagValue(flag, value);
            } catch (const Error& e) {
                throw Error(e.what() + seeHelp);
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
