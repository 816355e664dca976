#include "core/io/image_png.h"

#include "core/io/shape_text.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include <stb/stb_image_write.h>  // Debian's libstb is compiled: no STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_easy_font.h>    // header-only, static functions

namespace npw {

namespace {

void appendBytes(void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

at::Tensor checkedImage(const at::Tensor& image) {
    if (image.dim() != 3 || (image.size(0) != 1 && image.size(0) != 3) || image.size(1) <= 0 || image.size(2) <= 0)
        throw Error("an image must be [1|3, H, W], got " + formatShape(image.sizes()));
    return image;
}

} // namespace

std::string encodePng(const at::Tensor& image) {
    checkedImage(image);
    // HWC bytes: x·255 + 0.5 clamped and truncated (torchvision's save_image).
    at::Tensor bytes = (image.to(at::kFloat).cpu().clamp(0, 1) * 255.0 + 0.5)
                           .clamp(0, 255)
                           .to(at::kByte)
                           .permute({1, 2, 0})
                           .contiguous();
    const int h = static_cast<int>(image.size(1)), w = static_cast<int>(image.size(2)), c = static_cast<int>(image.size(0));
    std::string png;
    if (!stbi_write_png_to_func(appendBytes, &png, w, h, c, bytes.data_ptr<uint8_t>(), w * c))
        throw Error("PNG encoding failed for an image of " + formatShape(image.sizes()));
    return png;
}

void writePng(const std::string& path, const at::Tensor& image) {
    const std::string png = encodePng(image);
    writeFileAtomically(path, [&](std::ostream& out) { out.write(png.data(), static_cast<std::streamsize>(png.size())); });
}

namespace {

// Draws text in black into img [3, H, W] (float, white background) with its top-left at (x, y).
void drawText(at::Tensor& img, const std::string& text, int64_t x, int64_t y) {
    std::vector<char> buffer(text.size() * 300 + 1000);
    std::string copy = text;
    const int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buffer.data(), static_cast<int>(buffer.size()));
    const int64_t H = img.size(1), W = img.size(2);
    auto acc = img.accessor<float, 3>();
    for (int q = 0; q < quads; ++q) {
        // 4 vertices of 16 bytes each: x, y, z (floats), rgba.
        float xs[4], ys[4];
        for (int v = 0; v < 4; ++v) {
            const float* f = reinterpret_cast<const float*>(buffer.data() + (q * 4 + v) * 16);
            xs[v] = f[0];
            ys[v] = f[1];
        }
        const int64_t x0 = x + static_cast<int64_t>(std::floor(*std::min_element(xs, xs + 4)));
        const int64_t x1 = x + static_cast<int64_t>(std::ceil(*std::max_element(xs, xs + 4)));
        const int64_t y0 = y + static_cast<int64_t>(std::floor(*std::min_element(ys, ys + 4)));
        const int64_t y1 = y + static_cast<int64_t>(std::ceil(*std::max_element(ys, ys + 4)));
        for (int64_t yy = std::max<int64_t>(y0, 0); yy < std::min(y1, H); ++yy)
            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x1, W); ++xx)
                for (int c = 0; c < 3; ++c) acc[c][yy][xx] = 0.0f;
    }
}

} // namespace

at::Tensor imageGrid(const at::Tensor& images, const std::vector<std::string>& labels, const GridOptions& o) {
    if (images.dim() != 4 || images.size(0) == 0 || (images.size(1) != 1 && images.size(1) != 3))
        throw Error("a grid needs images [N, 1|3, H, W], got " + formatShape(images.sizes()));
    if (!labels.empty() && static_cast<int64_t>(labels.size()) != images.size(0))
        throw Error("a grid of " + std::to_string(images.size(0)) + " images got " + std::to_string(labels.size()) + " labels");
    const int64_t N = images.size(0), cols = std::max<int64_t>(1, std::min(o.columns, N)), rows = (N + cols - 1) / cols;
    int64_t scale = 1;
    while (std::max(images.size(2), images.size(3)) * scale < o.minTileSize) ++scale;
    at::Tensor tiles = images.to(at::kFloat).cpu().clamp(0, 1);
    if (tiles.size(1) == 1) tiles = tiles.expand({N, 3, tiles.size(2), tiles.size(3)});
    if (scale > 1) tiles = tiles.repeat_interleave(scale, 2).repeat_interleave(scale, 3);
    const int64_t th = tiles.size(2), tw = tiles.size(3), pad = o.padding;
    const int64_t labelHeight = labels.empty() ? 0 : 12;
    at::Tensor grid = at::ones({3, pad + rows * (labelHeight + th + pad), pad + cols * (tw + pad)}, at::kFloat);
    for (int64_t i = 0; i < N; ++i) {
        const int64_t r = i / cols, c = i % cols;
        const int64_t x = pad + c * (tw + pad), y = pad + r * (labelHeight + th + pad);
        if (!labels.empty()) drawText(grid, labels[static_cast<size_t>(i)], x + 1, y + 2);
        grid.narrow(1, y + labelHeight, th).narrow(2, x, tw).copy_(tiles[i]);
    }
    return grid;
}

} // namespace npw
