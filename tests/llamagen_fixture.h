#pragma once
// What the LlamaGen suites share: the tiny GPT fixture's sizes (tests/fixtures/
// make_llamagen_fixtures.py writes it; a raw checkpoint does not say them), the fixture files,
// and the normalised error the suites compare against their references with.
#include "core/models/llamagen.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <string>

namespace npw::test {

// The GPT fixture: dim 16, 2 layers of 2 heads, a 4×4 token grid over a 16-code vocabulary,
// 10 classes, FFN 48. downsample: the VQ fixture's factor when images are decoded (2), else
// LlamaGen's 16 (it only sets the image size the config reports).
inline LlamaGenConfig llamagenFixtureConfig(int64_t downsample = 16) {
    LlamaGenSizes s;
    s.dim = 16;
    s.layers = 2;
    s.heads = 2;
    s.grid = 4;
    s.vocab = 16;
    s.classes = 10;
    s.ffnHidden = 48;
    s.downsample = downsample;
    return llamaGenCustomConfig(s);
}

inline std::string llamagenDataFile(const std::string& name) { return std::string(NPW_TEST_DATA "/llamagen_ref/") + name; }

// max|actual − expected| / max|expected|.
inline double normalisedError(const at::Tensor& actual, const at::Tensor& expected) {
    const at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
    return (a - e).abs().max().item<double>() / std::max(e.abs().max().item<double>(), 1e-12);
}

} // namespace npw::test
