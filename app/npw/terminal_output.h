#pragma once
// What every command prints with: the progress bar on stderr and the result on stdout. No
// LibTorch here (npw-text, app/text, uses it too).
#include "app/npw/cli_args.h"
#include "core/util/progress.h"

#include <functional>
#include <nlohmann/json.hpp>

namespace npw::cli {

// A progress callback drawing a bar on stderr when it is a terminal (silent otherwise). The bar
// is one line redrawn in place ("\r"); anything printed while it stands (a result row on stdout,
// which may be the same terminal, or a warning or error on stderr) must first erase it with
// clearProgressLine(), or the text lands on the bar's line.
ProgressFn terminalProgress();
// Erases the progress bar's line on stderr, if one is drawn and not yet finished (else nothing).
void clearProgressLine();
// Prints the JSON object (with --json) or calls the human printer. (Not "emit": Qt, which the
// CLI tests include first, defines that name as a macro.)
void printResult(const Args& args, const nlohmann::json& result, const std::function<void()>& printHuman);

} // namespace npw::cli
