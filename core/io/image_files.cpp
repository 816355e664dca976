#include "core/io/image_files.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

namespace fs = std::filesystem;

namespace npw {

std::vector<std::string> listImageFiles(const std::string& dir) {
    if (!fs::is_directory(dir)) throw Error("image folder '" + dir + "' does not exist or is not a folder");
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        std::string ext = entry.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
        if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".tga" || ext == ".ppm" ||
            ext == ".pgm")
            files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error("image folder '" + dir + "' holds no .png/.jpg/.bmp images");
    return files;
}

at::Tensor readImageRgb(const std::string& path) {
    int w = 0, h = 0, channels = 0;
    requireRegularFile(path, "image");  // a FIFO is refused, never waited on
    unsigned char* pixels = stbi_load(path.c_str(), &w, &h, &channels, 3);
    if (!pixels)
        throw Error("cannot read image '" + path + "': " +
                    (stbi_failure_reason() ? stbi_failure_reason() : "unknown stb_image error"));
    at::Tensor hwc = at::empty({h, w, 3}, at::kByte);
    std::memcpy(hwc.data_ptr<uint8_t>(), pixels, size_t(w) * h * 3);
    stbi_image_free(pixels);
    return hwc.permute({2, 0, 1}).to(at::kFloat).div_(255.0).contiguous();
}

} // namespace npw
