#pragma once
// The command line's flag parser. A Flag says what a flag takes (its type, range or choices), its
// default and its help; every flag is declared once in the table of flags (flag_table.h), each
// command's list is derived from it, and the help screen is generated from the declarations.
// parseArgs validates every value it is given against its declaration, so a command only ever
// reads values that are well formed and in range.
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <string>
#include <vector>

namespace npw::cli {

enum class FlagType {
    Switch,    // present or absent, no value
    Text,      // any string (a path, a model, a spec the command parses)
    Choice,    // one of a few names, checked by `parse` (core's parser where the setting has one)
    Int,       // an integer in [min, max]
    Real,      // a finite number in the range
    IntList,   // comma-separated integers, each as Int
    RealList,  // comma-separated numbers, each as Real
};

// What a flag's value is to the run's files: the command line builds the run's OutputGuard
// (core/util/output_guard.h) from these before a command starts, so that no output flag can
// name an input of the run (tst_cli_flags: every flag whose value names a file declares one).
enum class PathRole {
    None,        // not a path (a number, a name, a prompt)
    Reads,       // a file or folder the run reads
    ReadsModel,  // a model (file, folder or demo:NAME): its folder's files are off limits too
    ReadsSpec,   // a spec naming files: NAME:FILE, text:A,ids:B, comma-separated lists
    Writes,      // a file or folder the run writes: checked against every input and every other output
};

struct Flag {
    std::string name;          // without the leading "--"
    std::string valueName;     // e.g. "N"; empty for a switch
    std::string defaultValue;  // shown in help; used when the flag is absent
    std::string help;
    FlagType type = FlagType::Text;
    // Int, Real and the lists: the range, finite bounds only where the flag has one.
    double min = -std::numeric_limits<double>::infinity();
    double max = std::numeric_limits<double>::infinity();
    bool minExclusive = false, maxExclusive = false;
    // Choice: what the values may be (for help and errors), and the parser that refuses any other
    // value with an npw::Error.
    std::string choices;
    std::function<void(const std::string&)> parse;
    PathRole role = PathRole::None;
    // The key of the command's --json output that reports the value in effect, where it has one
    // (the CLI reference shows it; tst_cli_flags checks that the output holds the key).
    std::string jsonKey;

    // Declarations, as the table writes them.
    static Flag toggle(std::string name, std::string help);
    static Flag text(std::string name, std::string valueName, std::string help);
    static Flag choice(std::string name, std::string valueName, std::string choices,
                       std::function<void(const std::string&)> parse, std::string help);
    static Flag integer(std::string name, std::string valueName, int64_t min, int64_t max, std::string help);
    static Flag real(std::string name, std::string valueName, std::string help);  // any finite number
    // Range of a Real (each returns a copy): [lo, ...), (lo, ...), [..., hi], [..., hi).
    Flag atLeast(double lo) const;
    Flag above(double lo) const;
    Flag atMost(double hi) const;
    Flag below(double hi) const;
    // Copies that differ for one command (a default, a help text, a lower bound, a list of values).
    Flag byDefault(std::string value) const;
    Flag described(std::string help) const;
    Flag valueNamed(std::string valueName) const;
    Flag named(std::string name) const;  // a related flag (--ratios beside --ratio)
    Flag asList(std::string valueName) const;
    // The value's role for the run's files (PathRole); each returns a copy.
    Flag reads() const { return withRole(PathRole::Reads); }
    Flag readsModel() const { return withRole(PathRole::ReadsModel); }
    Flag readsSpec() const { return withRole(PathRole::ReadsSpec); }
    Flag writes() const { return withRole(PathRole::Writes); }
    Flag reportedAs(std::string key) const {
        Flag f = *this;
        f.jsonKey = std::move(key);
        return f;
    }

    bool takesValue() const { return type != FlagType::Switch; }
    bool isNumeric() const { return type == FlagType::Int || type == FlagType::Real || isList(); }
    bool isList() const { return type == FlagType::IntList || type == FlagType::RealList; }
    // What a value must be, e.g. "an integer ≥ 1", "a number in [0, 1)", "paper or budget".
    std::string expects() const;

private:
    Flag withRole(PathRole r) const {
        Flag f = *this;
        f.role = r;
        return f;
    }
    Flag bounded(double lo, bool loExclusive, double hi, bool hiExclusive) const;
};

// Throws npw::Error "--NAME expects …, got '…'" unless `value` is one the flag takes.
void validateFlagValue(const Flag& flag, const std::string& value);
// The numbers of a numeric flag's value (one for Int/Real, several for a list), unvalidated:
// npw::Error when an item is not a number at all.
std::vector<double> flagNumbers(const Flag& flag, const std::string& value);

class Args {
public:
    const std::vector<std::string>& positional() const { return positional_; }
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    std::string get(const std::string& name) const;  // the value or the declared default
    long long getInt(const std::string& name) const;
    double getDouble(const std::string& name) const;
    std::vector<std::string> getList(const std::string& name) const;  // comma-separated, empty items skipped
    std::vector<int64_t> getIntList(const std::string& name) const;
    std::vector<double> getDoubleList(const std::string& name) const;
    bool flag(const std::string& name) const { return has(name); }

private:
    friend Args parseArgs(const std::vector<Flag>&, const std::vector<std::string>&, const std::string&);
    std::vector<std::string> positional_;
    std::map<std::string, std::string> values_;
    std::map<std::string, std::string> defaults_;
};

// Parses argv after the subcommand name; throws npw::Error for unknown flags, missing values and
// values their declaration refuses ("--seqlen expects an integer in [2, 1048576], got '0' (see
// 'npw eval --help')").
Args parseArgs(const std::vector<Flag>& flags, const std::vector<std::string>& argv, const std::string& command);
std::string formatFlagHelp(const std::vector<Flag>& flags);

} // namespace npw::cli
