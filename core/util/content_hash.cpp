#include "core/util/content_hash.h"
#include "core/util/error.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace npw {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t hash) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) {
        hash ^= p[i];
        hash *= 1099511628211ull;
    }
    return hash;
}

std::string contentHashText(uint64_t hash) {
    char text[32];
    std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(hash));
    return text;
}

std::string fileContentHash(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return {};
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("'" + path + "': cannot read the file to hash its contents");
    uint64_t hash = kFnv64Offset;
    std::vector<char> buffer(1 << 16);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        hash = fnv1a64(buffer.data(), size_t(in.gcount()), hash);
    }
    if (in.bad()) throw Error("'" + path + "': a read error while hashing its contents");
    return contentHashText(hash);
}

} // namespace npw
