#pragma once
#include <string>

namespace npw {

// The folder of bundled resources (demo models): $NPW_RESOURCES, else the source tree's
// resources/ (a build tree), else the install prefix's share/npw.
std::string resourcesDir();

// Resolves "demo:NAME" to resources/demo/NAME; any other string is returned unchanged.
std::string resolveModelPath(const std::string& model);

} // namespace npw
