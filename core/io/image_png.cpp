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

// Draws text in black into img [3, H, W] (float, white background) with its top-left at (x, y),
// each font pixel `scale` × `scale` image pixels.
void drawText(at::Tensor& img, const std::string& text, int64_t x, int64_t y, int scale = 1) {
    std::vector<char> buffer(text.size() * 300 + 1000);
    std::string copy = text;
    const int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buffer.data(), static_cast<int>(buffer.size()));
    const int64_t H = img.size(1), W = img.size(2);
    auto acc = img.accessor<float, 3>();
    for (int q = 0; q < quads; ++q) {
        // 4 vertices of 16 bytes each: x, y, z (floats), rgba.
        float xs[4], ys[4];
        for (int v = 0; v < 4; ++v) {
            const float* f = reinterpret_cast<const float*>(buffer.data() + static_cast<size_t>(q * 4 + v) * 16);
            xs[v] = f[0] * float(scale);
            ys[v] = f[1] * float(scale);
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

namespace {

// stb's easy font draws ASCII only: the Greek letters of pruning settings are spelled out, any
// other non-ASCII character becomes '?'.
std::string asciiTitle(const std::string& text) {
    static const std::pair<const char*, const char*> greek[] = {{"ρ", "rho"}, {"α", "alpha"}, {"λ", "lambda"}, {"‖", "||"}, {"—", "-"}};
    std::string out;
    for (size_t i = 0; i < text.size();) {
        bool replaced = false;
        for (const auto& [utf8, ascii] : greek) {
            const std::string u(utf8);
            if (text.compare(i, u.size(), u) == 0) {
                out += ascii;
                i += u.size();
                replaced = true;
                break;
            }
        }
        if (replaced) continue;
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            out += (c >= 32 && c < 127) ? char(c) : ' ';
            ++i;
        } else {
            out += '?';
            ++i;
            while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
        }
    }
    return out;
}

constexpr int kTitleScale = 2;

} // namespace

at::Tensor titledPanels(const std::vector<at::Tensor>& panels, const std::vector<std::string>& titles, int64_t gap) {
    if (panels.empty()) throw Error("titled panels: no panels");
    if (titles.size() != panels.size())
        throw Error("titled panels: " + std::to_string(panels.size()) + " panels got " + std::to_string(titles.size()) +
                    " titles");
    std::vector<at::Tensor> rgb;
    std::vector<std::string> text;
    std::vector<int64_t> widths;
    std::vector<int> scales;
    int64_t height = 0;
    for (size_t i = 0; i < panels.size(); ++i) {
        at::Tensor p = checkedImage(panels[i]).to(at::kFloat).cpu().clamp(0, 1);
        if (p.size(0) == 1) p = p.expand({3, p.size(1), p.size(2)});
        text.push_back(asciiTitle(titles[i]));
        std::string copy = text.back();
        // Twice the label size when the title fits over its panel; else the label size, so a
        // long title does not leave a wide white gap beside a narrow panel.
        const int64_t plain = int64_t(stb_easy_font_width(copy.data())) + 4;
        scales.push_back(plain * kTitleScale - 4 <= p.size(2) ? kTitleScale : 1);
        widths.push_back(std::max(p.size(2), scales.back() == 1 ? plain : plain * kTitleScale - 4));
        height = std::max(height, p.size(1));
        rgb.push_back(p);
    }
    const int64_t titleHeight = 12 * kTitleScale + 4;  // the font is about 7 px high, 12 with its line gap
    int64_t width = 0;
    for (int64_t w : widths) width += w;
    width += gap * int64_t(panels.size() - 1);
    at::Tensor out = at::ones({3, titleHeight + height, width}, at::kFloat);
    int64_t x = 0;
    for (size_t i = 0; i < rgb.size(); ++i) {
        drawText(out, text[i], x + 2, scales[i] == 1 ? 12 : 4, scales[i]);
        out.narrow(1, titleHeight, rgb[i].size(1)).narrow(2, x, rgb[i].size(2)).copy_(rgb[i]);
        x += widths[i] + gap;
    }
    return out;
}

at::Tensor withTitle(const at::Tensor& image, const std::string& title) { return titledPanels({image}, {title}, 0); }

} // namespace npw
