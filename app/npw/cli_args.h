#pragma once
// The command line's flag parser: every flag is declared once, with its help text and
// default, and the help screen is generated from those declarations (no copied defaults).
#include <map>
#include <string>
#include <vector>

namespace npw::cli {

struct Flag {
    std::string name;          // without the leading "--"
    std::string valueName;     // e.g. "N"; empty for a switch
    std::string defaultValue;  // shown in help; used when the flag is absent
    std::string help;
};

class Args {
public:
    const std::vector<std::string>& positional() const { return positional_; }
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    std::string get(const std::string& name) const;  // the value or the declared default
    long long getInt(const std::string& name) const;
    double getDouble(const std::string& name) const;
    bool flag(const std::string& name) const { return has(name); }

private:
    friend Args parseArgs(const std::vector<Flag>&, const std::vector<std::string>&, const std::string&);
    std::vector<std::string> positional_;
    std::map<std::string, std::string> values_;
    std::map<std::string, std::string> defaults_;
};

// Parses argv after the subcommand name; throws npw::Error for unknown flags or missing values.
Args parseArgs(const std::vector<Flag>& flags, const std::vector<std::string>& argv, const std::string& command);
std::string formatFlagHelp(const std::vector<Flag>& flags);

} // namespace npw::cli
