#pragma once
#include <string>

namespace npw {

// The project version (CMake's PROJECT_VERSION), recorded in what npw writes (manifests).
std::string npwVersion();

} // namespace npw
