#pragma once
// The commands npw-text runs without LibTorch and their flags, as npw-run's table of flags declares
// them: the definition is generated from that table while building (`npw-run
// --write-torch-free-flags`, app/CMakeLists.txt), so the two programs parse and check alike.
#include "app/npw/cli_args.h"

#include <limits>
#include <string>
#include <vector>

namespace npw::cli {

struct TorchFreeCommand {
    std::string name;
    std::vector<Flag> flags;
};
const std::vector<TorchFreeCommand>& torchFreeCommands();

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A flag as the table built it (the generated source calls this once per flag).
inline Flag declaredFlag(std::string name, std::string valueName, std::string defaultValue, std::string help,
                         FlagType type, double min, double max, bool minExclusive, bool maxExclusive,
                         std::string choices, PathRole role) {
    Flag f;
    f.name = std::move(name);
    f.valueName = std::move(valueName);
    f.defaultValue = std::move(defaultValue);
    f.help = std::move(help);
    f.type = type;
    f.min = min;
    f.max = max;
    f.minExclusive = minExclusive;
    f.maxExclusive = maxExclusive;
    f.choices = std::move(choices);
    f.role = role;
    return f;
}

} // namespace npw::cli
