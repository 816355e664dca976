#pragma once
// The content hash that result rows carry to name the text they were measured on: 64-bit
// FNV-1a over the file's bytes, written "fnv1a64:" and 16 lowercase hex digits. Not a
// cryptographic hash (nothing here is adversarial): it tells whether two runs read the same
// bytes, with no dependency, in one pass. No Qt.
#include <cstddef>
#include <cstdint>
#include <string>

namespace npw {

inline constexpr uint64_t kFnv64Offset = 14695981039346656037ull;
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t hash = kFnv64Offset);
// "fnv1a64:0123456789abcdef"
std::string contentHashText(uint64_t hash);
// The hash of a file's bytes (a folder: empty); npw::Error naming the file when it cannot be read.
std::string fileContentHash(const std::string& path);

} // namespace npw
