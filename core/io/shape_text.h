#pragma once
// Tensor shapes as text for error messages: "[512, 64]". No LibTorch here: a std::vector<int64_t>
// and a tensor's sizes() read alike, and npw-text (app/text) words the same messages.
#include <cstdint>
#include <string>

namespace npw {

template <class Shape>
std::string formatShape(const Shape& shape) {
    std::string text = "[";
    bool first = true;
    for (int64_t size : shape) {
        text += (first ? "" : ", ") + std::to_string(size);
        first = false;
    }
    return text + "]";
}

} // namespace npw
