// The run's files from the flags' roles (flag_table.h's outputGuardFromArgs). No LibTorch here:
// npw-text (app/text) guards its run the same way.
#include "app/npw/flag_table.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <filesystem>

namespace npw::cli {

namespace {

// A model argument: demo:NAME is its bundled folder; a path that does not exist is no file of
// anyone's (the command will say it is missing).
void addModelArgument(OutputGuard& guard, const std::string& value, const std::string& what) {
    std::string path = value;
    try {
        path = resolveModelPath(value);
    } catch (const Error&) {
        return;  // an unknown demo: the command refuses it
    }
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) guard.addModel(path, what);
}

} // namespace

OutputGuard outputGuardFromArgs(const std::vector<Flag>& flags, const Args& args) {
    OutputGuard guard;
    for (const std::string& positional : args.positional()) addModelArgument(guard, positional, "the model");
    for (const Flag& f : flags) {
        if (!args.has(f.name)) continue;
        const std::string value = args.get(f.name), what = "--" + f.name;
        switch (f.role) {
        case PathRole::Reads: guard.addInput(value, what); break;
        case PathRole::ReadsModel: addModelArgument(guard, value, what); break;
        case PathRole::ReadsSpec: guard.addInputSpec(value, what); break;
        case PathRole::None:
        case PathRole::Writes: break;
        }
    }
    for (const Flag& f : flags)
        if (f.role == PathRole::Writes && (args.has(f.name) || !f.defaultValue.empty()))
            guard.claim(args.get(f.name), "--" + f.name);
    return guard;
}

} // namespace npw::cli
