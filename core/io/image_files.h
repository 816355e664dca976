#pragma once
// Image files through stb (Debian's libstb): reading a folder of generated images for the
// metrics, writing PNGs. Pixels are float in [0,1], channels first.
#include <ATen/core/Tensor.h>

#include <string>
#include "core/io/image_png.h"

#include <vector>

namespace npw {

// The image files (.png, .jpg, .jpeg, .bmp, .tga, .ppm, .pgm) directly in dir, sorted by name.
// Throws npw::Error when dir is not a folder or holds none.
std::vector<std::string> listImageFiles(const std::string& dir);

// 3×H×W float [0,1] (grey and grey+alpha are repeated to RGB, alpha dropped).
at::Tensor readImageRgb(const std::string& path);

// Writing PNGs: writePng in core/io/image_png.h (included here for the callers of both).

} // namespace npw
