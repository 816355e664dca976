#pragma once
// Scores per prunable unit, and the reductions from per-channel scores to them.
//
// An attention unit is what can be removed as a whole: a head for multi-head attention, a
// KV group (one key/value head and its g query heads) for grouped-query attention. In the
// Hugging Face layout the query heads of KV group k are the consecutive heads k·g … k·g+g−1,
// so a unit's o_proj input channels are one consecutive block of D_h (head) or g·D_h (group)
// channels. MLP channels are units of their own.
#include <ATen/core/Tensor.h>
#include <cstdint>
#include <vector>

namespace npw {

// One layer's unit scores; higher = more important.
struct LayerScores {
    std::vector<double> heads;     // one per attention unit (head, or KV group for GQA)
    std::vector<double> channels;  // one per MLP intermediate channel
};

// Means of consecutive blocks of `blockWidth` channel scores: the paper's and FLAP's head
// score (blockWidth = D_h) and the KV-group score (blockWidth = g·D_h). npw::Error unless
// blockWidth divides the number of channels.
std::vector<double> blockMeanScores(const at::Tensor& channelScores, int64_t blockWidth);
// Sums of consecutive blocks: Wanda-sp's and magnitude's head score in FLAP's code.
std::vector<double> blockSumScores(const at::Tensor& channelScores, int64_t blockWidth);

// A tensor's values as float64 on the host.
std::vector<double> toDoubleVector(const at::Tensor& scores);

} // namespace npw
