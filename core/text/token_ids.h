#pragma once
// Token id files: whitespace-separated integers, as `npw eval --ids`, calibration and the
// llama2.c reference dumps use them.
#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// Reads whitespace-separated token ids; errors name the file and the offending word. vocabSize
// > 0 bounds every id to [0, vocabSize).
std::vector<int32_t> readTokenIdFile(const std::string& path, int64_t vocabSize);

} // namespace npw
