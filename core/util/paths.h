#pragma once
#include <string>

namespace npw {

// The folder of bundled resources (demo models): $NPW_RESOURCES, else share/npw relative to the
// running program when it is installed (its prefix's share/npw, wherever the package was
// unpacked), else the source tree's resources/ (a program in the build tree), else the
// configured install prefix's share/npw.
std::string resourcesDir();

// Resolves "demo:NAME" to resources/demo/NAME; any other string is returned unchanged.
std::string resolveModelPath(const std::string& model);

} // namespace npw
