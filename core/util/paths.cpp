#include "core/util/paths.h"
#include "core/util/error.h"

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace npw {

std::string resourcesDir() {
    if (const char* env = std::getenv("NPW_RESOURCES"); env && *env) return env;
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
