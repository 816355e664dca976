// The terminal: the progress bar on stderr and the result on stdout (one JSON object with
// --json). No LibTorch here: npw-text (app/text) prints through it too.
#include "app/npw/terminal_output.h"
#include "core/text/json_fields.h"
#include "core/text/json_output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace npw::cli {

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
    auto startFrac = std::make_shared<double>(0.0);
    return [start, lastStage, startFrac](const Progress& p) {
        const double frac = p.total > 0 ? std::min(1.0, p.done / p.total) : 0.0;
        if (p.stage != *lastStage) {
            *start = std::chrono::steady_clock::now();
            *lastStage = p.stage;
            // A stage that starts part-way (a resumed run's calibration or export): the ETA is
            // measured from the work done in this process, not from work an earlier run did.
            *startFrac = frac;
        }
        const int width = 30, filled = static_cast<int>(frac * width);
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - *start).count();
        const double doneHere = frac - *startFrac;
        const double eta = doneHere > 0 ? elapsed * (1 - frac) / doneHere : 0;
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
