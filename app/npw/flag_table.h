#pragma once
// The table of flags: every flag of every command declared once, the way llama.cpp's
// common/arg.cpp declares its options. Each declaration carries the flag's value name, help,
// type, validation (finite, range, integer bounds, choices through core's parser where the
// setting has one), its default (read from the settings struct where one exists, never a copied
// literal) and its scope: the commands that take it. A command's flag list, and so its help
// screen and what parseArgs accepts and validates, is derived from the table (flagsFor).
//
// Where a command takes a flag with another default, help text or bound (--seqlen, --batch,
// --seed, --out, ...), the table holds a variant of the one declaration, right after it: a name's
// entries are consecutive, and no command takes two entries of one name (tst_cli_flags checks
// both).
#include "app/npw/cli_args.h"
#include "core/util/output_guard.h"

#include <string>
#include <vector>

namespace npw::cli {

struct FlagEntry {
    Flag flag;
    std::vector<std::string> commands;  // scope: the commands that take the flag as declared here
};

// Every declaration, in table order (a command's flags and its help come in this order).
const std::vector<FlagEntry>& flagTable();
// The flags `command` takes, in table order.
std::vector<Flag> flagsFor(const std::string& command);

// The run's files as the table declares them (Flag::role): every positional argument (a model,
// a tokenizer) and every flag given that reads is an input; then every flag that writes, given or
// defaulted, is claimed (OutputGuard::claim), so an output that is an input, holds one, or
// collides with another output is refused (npw::Error) before the command starts. main installs
// the result as runOutputGuard(), which core's writers consult on every write.
OutputGuard outputGuardFromArgs(const std::vector<Flag>& flags, const Args& args);

} // namespace npw::cli
