#include "app/npw/commands.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace npw::cli {

const std::vector<Command>& allCommands() {
    static const std::vector<Command> commands = [] {
        std::vector<Command> c;
        addLanguageModelCommands(c);
        addCompareCommand(c);
        addPruneCommand(c);
        addSweepCommand(c);
        addZeroShotCommands(c);
        addGgufCommand(c);
        addTokenizeCommand(c);
        addTrainingCommands(c);
        addImageMetricsCommands(c);
        addImageTrainingCommands(c);
        addDemoCommand(c);
        return c;
    }();
    return commands;
}

std::string versionString() { return NPW_VERSION_STRING; }

ProgressFn terminalProgress() {
    if (!isatty(fileno(stderr))) return nullptr;
    auto start = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    auto lastStage = std::make_shared<std::string>();
    return [start, lastStage](const Progress& p) {
        if (p.stage != *lastStage) {
            *start = std::chrono::steady_clock::now();
            *lastStage = p.stage;
        }
        const double frac = p.total > 0 ? std::min(1.0, p.done / p.total) : 0.0;
        const int width = 30, filled = static_cast<int>(frac * width);
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - *start).count();
        const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
        std::fprintf(stderr, "\r%-24s [%s%s] %5.1f%%  eta %5.0fs ", p.stage.c_str(), std::string(filled, '#').c_str(),
                     std::string(width - filled, ' ').c_str(), 100 * frac, eta);
        if (frac >= 1.0) std::fprintf(stderr, "\n");
        std::fflush(stderr);
        return true;
    };
}

void printResult(const Args& args, const nlohmann::json& result, const std::function<void()>& printHuman) {
    if (args.flag("json"))
        std::cout << result.dump(2) << std::endl;
    else
        printHuman();
}

} // namespace npw::cli
