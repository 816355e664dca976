#pragma once
// The texts the launcher prints itself, generated from npw-run's own command table while
// building (app/CMakeLists.txt), so they are the same texts, byte for byte.
#include <cstddef>

namespace npw::launcher {

struct CommandHelp {
    const char* name;
    const char* help;    // what `npw NAME --help` prints
    const char* worker;  // the program that runs it: "npw-run", or "npw-text" (no LibTorch: app/text)
};

extern const char* const kVersion;
extern const char* const kUsage;  // `npw --help`
extern const CommandHelp kCommands[];
extern const std::size_t kCommandCount;

} // namespace npw::launcher
