#pragma once
// Tensor shapes as text for error messages: "[512, 64]".
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace npw {

inline std::string formatShape(c10::IntArrayRef shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) text += ", ";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

} // namespace npw
