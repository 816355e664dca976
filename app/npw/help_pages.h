#pragma once
// npw's help texts, all from the commands and the table of flags (flag_table.h), so that no
// description of the command line is typed twice and none can drift from what parseArgs accepts:
//   - the usage screen (`npw --help`) and a command's help (`npw COMMAND --help`), which the
//     launcher prints from texts generated at build time (launcherHelpSource);
//   - the CLI reference in Markdown (`npw help --markdown`): the manual's cli-reference.md, which
//     a test (tests/CMakeLists.txt, cli_reference_current) compares with the committed page;
//   - the man page npw.1 in roff (`npw help --man`), generated and installed by the build.
#include "app/npw/commands.h"

#include <string>
#include <vector>

namespace npw::cli {

std::string usageText(const std::vector<Command>& commands);    // `npw --help`
std::string commandHelpText(const Command& command);             // `npw COMMAND --help`
std::string markdownReference(const std::vector<Command>& commands);
std::string manPage(const std::vector<Command>& commands, const std::string& version);

// Markdown and roff as their readers take them: every character that would be markup is escaped
// (a help text's "4*D_h/3" must not turn into emphasis, a line starting with "." into a request).
std::string markdownEscaped(const std::string& text);
std::string roffEscaped(const std::string& text);

} // namespace npw::cli
