#pragma once
// The folder of the running program (/proc/self/exe), where npw's programs find each other: the
// launcher its workers, npw-text npw-run. Header-only, so the launcher stays free of libraries.
#include <climits>
#include <string>
#include <unistd.h>

namespace npw {

// "." when /proc/self/exe cannot be read.
inline std::string executableDirectory() {
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return ".";
    self[n] = '\0';
    const std::string path = self;
    return path.substr(0, path.rfind('/'));
}

} // namespace npw
