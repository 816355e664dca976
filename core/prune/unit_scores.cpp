#include "core/prune/unit_scores.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include <string>

namespace npw {

namespace {

at::Tensor blocks(const at::Tensor& channelScores, int64_t blockWidth, const char* what) {
    if (channelScores.dim() != 1)
        throw Error(std::string(what) + ": expected a vector of channel scores, got " +
                    std::to_string(channelScores.dim()) + " dimensions");
    if (blockWidth <= 0 || channelScores.size(0) % blockWidth != 0)
        throw Error(std::string(what) + ": block width " + std::to_string(blockWidth) + " does not divide " +
                    std::to_string(channelScores.size(0)) + " channels");
    return channelScores.to(at::kDouble).reshape({-1, blockWidth});
}

} // namespace

std::vector<double> blockMeanScores(const at::Tensor& channelScores, int64_t blockWidth) {
    return toDoubleVector(blocks(channelScores, blockWidth, "blockMeanScores").mean(1));
}

std::vector<double> blockSumScores(const at::Tensor& channelScores, int64_t blockWidth) {
    return toDoubleVector(blocks(channelScores, blockWidth, "blockSumScores").sum(1));
}

std::vector<double> toDoubleVector(const at::Tensor& scores) {
    const at::Tensor flat = scores.to(at::kCPU, at::kDouble).contiguous().reshape({-1});
    const double* p = flat.data_ptr<double>();
    return std::vector<double>(p, p + flat.numel());
}

} // namespace npw
