#pragma once
// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed (detected from the
// gzip magic, not the file name). Big-endian header: 0x00 0x00 TYPE NDIM, then NDIM u32
// dimensions, then the data. Only unsigned-byte data (type 0x08) is read: that is what the
// image and label files hold.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

struct IdxArray {
    std::vector<int64_t> shape;  // e.g. {10000, 28, 28} or {10000}
    at::Tensor data;             // uint8, that shape
};

// Reads the whole file. Throws npw::Error naming the file for a missing file, a broken gzip
// stream, a wrong magic, a data type other than u8, or a size that disagrees with the header.
// expectedDims > 0 also checks the number of dimensions.
IdxArray readIdxFile(const std::string& path, int expectedDims = 0);

// The decompressed bytes of a gzip file (or the raw bytes when it is not gzip). Inflation stops
// with npw::Error past maxBytes (and past the allocation cap, core/util/checked_math.h).
std::vector<uint8_t> readMaybeGzip(const std::string& path, uint64_t maxBytes = UINT64_MAX);

} // namespace npw
