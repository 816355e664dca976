#include "core/util/paths.h"
#include "core/util/error.h"
#include "core/util/executable_path.h"

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace npw {

std::string resourcesDir() {
    if (const char* env = std::getenv("NPW_RESOURCES"); env && *env) return env;
    // An installed program finds share/npw beside it: from bin/ (npw-studio) and from
    // libexec/npw/ (npw-run, npw-text) — paths relative to the install prefix, computed by the
    // build (core/CMakeLists.txt). This comes first, so that a package built in a tree that still
    // exists on the machine reads its own demo models, not the build tree's. A program in the
    // build tree has no share/npw there and falls through to the source tree.
    const fs::path self = executableDirectory();
    for (const char* relative : {NPW_RESOURCES_FROM_BINDIR, NPW_RESOURCES_FROM_LIBEXECDIR}) {
        const fs::path installed = (self / relative).lexically_normal();
        if (fs::is_directory(installed / "demo")) return installed.string();
    }
    for (const char* candidate : {NPW_SOURCE_RESOURCES, NPW_INSTALL_RESOURCES})
        if (fs::is_directory(fs::path(candidate) / "demo")) return candidate;
    return NPW_INSTALL_RESOURCES;
}

std::string resolveModelPath(const std::string& model) {
    const std::string prefix = "demo:";
    if (model.rfind(prefix, 0) != 0) return model;
    std::string name = model.substr(prefix.size());
    fs::path dir = fs::path(resourcesDir()) / "demo" / name;
    if (!fs::exists(dir))
        throw Error("unknown demo model '" + model + "': no folder " + dir.string() +
                    " (bundled demos live in resources/demo; set NPW_RESOURCES to point elsewhere)");
    return dir.string();
}

} // namespace npw
