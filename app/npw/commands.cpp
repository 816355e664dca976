#include "app/npw/commands.h"
#include "core/text/json_fields.h"
#include "core/util/atomic_file.h"
#include "core/text/json_output.h"
#include "core/io/export_manifest.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
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

std::string modelLabel(const std::string& model) {
    namespace fs = std::filesystem;
    const fs::path manifest = fs::path(model) / "npw-manifest.json";
    std::error_code ec;
    // The folder's name, not its whole path: a title has to fit above a picture.
    const std::string name = fs::path(model).filename().empty() ? fs::path(model).parent_path().filename().string()
                                                                 : fs::path(model).filename().string();
    if (!fs::is_regular_file(manifest, ec)) return model.find('/') == std::string::npos ? model : name;
    // Any folder's file of that name may be read here, so through the one bounded parser, and
    // only when it is of a manifest's size.
    const uintmax_t bytes = fs::file_size(manifest, ec);
    if (ec || bytes > (uintmax_t(1) << 26)) return name;
    try {
        // The bounded reader: a manifest is a file the user can edit (nested 100,000 deep, say).
        const ExportManifestSummary summary = readExportManifestSummary(manifest.string());
        std::ostringstream out;
        out << name << " (" << summary.method << " ρ=" << std::fixed << std::setprecision(2) << summary.ratio << ")";
        return out.str();
    } catch (const Error&) {
        return name;  // a label only: a manifest npw cannot read does not stop the command
    }
}

std::string versionString() { return NPW_VERSION_STRING; }

namespace {

// The bar's visible width on stderr now; 0 when no unfinished bar stands there.
size_t& progressLineWidth() {
    static size_t width = 0;
    return width;
}

size_t visibleWidth(const std::string& s) {  // UTF-8 code points (a stage may say "ρ")
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

} // namespace

void clearProgressLine() {
    size_t& width = progressLineWidth();
    if (width == 0) return;
    // Spaces over the bar, then back to the line's start: no terminal escape codes needed.
    std::fprintf(stderr, "\r%s\r", std::string(width, ' ').c_str());
    std::fflush(stderr);
    width = 0;
}

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
        char tail[64];
        std::snprintf(tail, sizeof tail, "] %5.1f%%  eta %5.0fs", 100 * frac, eta);
        std::string line = p.stage;
        const size_t stageWidth = visibleWidth(line);
        if (stageWidth < 24) line += std::string(24 - stageWidth, ' ');
        line += " [" + std::string(filled, '#') + std::string(width - filled, ' ') + tail;
        // Pad over a longer previous line (a longer stage name) instead of leaving its end.
        const size_t lineWidth = visibleWidth(line);
        size_t& shown = progressLineWidth();
        if (lineWidth < shown) line += std::string(shown - lineWidth, ' ');
        std::fprintf(stderr, "\r%s", line.c_str());
        shown = std::max(lineWidth, shown);
        if (frac >= 1.0) {
            std::fprintf(stderr, "\n");  // a finished stage stays on its own line
            shown = 0;
        }
        std::fflush(stderr);
        return true;
    };
}

void printResult(const Args& args, const nlohmann::json& result, const std::function<void()>& printHuman) {
    clearProgressLine();
    if (args.flag("json"))
        std::cout << npw::json_fields::dumpJson(result, 2) << std::endl;
    else
        printHuman();
}

} // namespace npw::cli
