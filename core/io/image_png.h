#pragma once
// Writing images as PNG (stb_image_write) and laying samples out as a labelled grid.
// Images are float tensors in [0, 1], channels first; 1 (grey) or 3 (RGB) channels.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// image [C, H, W] → PNG bytes. Values are clamped to [0, 1] and rounded as torchvision's
// save_image does (x·255 + 0.5, truncated), which LlamaGen uses for its samples.
std::string encodePng(const at::Tensor& image);
// encodePng written atomically to path. npw::Error naming the path when it cannot be written.
void writePng(const std::string& path, const at::Tensor& image);

struct GridOptions {
    int64_t columns = 8;
    int64_t padding = 2;      // pixels between tiles and around the grid (white)
    int64_t minTileSize = 64; // tiles smaller than this are enlarged by an integer factor (nearest)
};

// images [N, C, H, W] → one RGB image [3, H', W'] with a white frame; when labels are given
// (one per image, e.g. "class 3"), each tile gets its label above it, drawn with stb's built-in
// easy font (ASCII, about 7 px high, black on white).
at::Tensor imageGrid(const at::Tensor& images, const std::vector<std::string>& labels = {},
                     const GridOptions& options = {});

// Pictures compared side by side: each panel [1|3, H, W] under its title (e.g. "numerical rho=0.30"),
// `gap` white pixels apart, top-aligned; a column is widened when its title is wider than its
// panel. Titles are drawn with the same easy font at twice the size (the label size when that
// would be wider than the panel); it has ASCII only, so ρ, α
// and λ are spelled out (rho, alpha, lambda) and other non-ASCII characters become '?'.
at::Tensor titledPanels(const std::vector<at::Tensor>& panels, const std::vector<std::string>& titles,
                        int64_t gap = 24);
// One picture under a title (titledPanels of one panel).
at::Tensor withTitle(const at::Tensor& image, const std::string& title);

} // namespace npw
