#pragma once
// Image files through stb (Debian's libstb): reading a folder of generated images for the
// metrics, writing PNGs. Pixels are float in [0,1], channels first.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace npw {

// The image files (.png, .jpg, .jpeg, .bmp, .tga, .ppm, .pgm) directly in dir, sorted by name.
// Throws npw::Error when dir is not a folder or holds none.
std::vector<std::string> listImageFiles(const std::string& dir);

// 3×H×W float [0,1] (grey and grey+alpha are repeated to RGB, alpha dropped).
at::Tensor readImageRgb(const std::string& path);

// image: 1×H×W or 3×H×W float in [0,1] (clamped, rounded to 8 bits). Atomic write.
void writePng(const std::string& path, const at::Tensor& image);

} // namespace npw
