#include "core/io/idx_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <cstring>
#include <fstream>
#include <zlib.h>

namespace npw {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("IDX file '" + path + "': " + problem);
}

std::vector<uint8_t> readRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open '" + path + "'");
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint32_t bigEndian32(const uint8_t* p) {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

} // namespace

std::vector<uint8_t> readMaybeGzip(const std::string& path) {
    std::vector<uint8_t> raw = readRaw(path);
    if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
    z_stream zs;
    std::memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 32) != Z_OK) throw Error("gzip file '" + path + "': zlib could not start");
    zs.next_in = raw.data();
    zs.avail_in = static_cast<uInt>(raw.size());
    std::vector<uint8_t> out;
    uint8_t buffer[1 << 16];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = buffer;
        zs.avail_out = sizeof buffer;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            const std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
            inflateEnd(&zs);
            if (rc == Z_BUF_ERROR)
                throw Error("gzip file '" + path + "' is truncated (the compressed stream ends early)");
            throw Error("gzip file '" + path + "' is corrupt: " + msg);
        }
        out.insert(out.end(), buffer, buffer + (sizeof buffer - zs.avail_out));
        if (rc != Z_STREAM_END && zs.avail_in == 0 && zs.avail_out != 0) {
            inflateEnd(&zs);
            throw Error("gzip file '" + path + "' is truncated (the compressed stream ends early)");
        }
    }
    inflateEnd(&zs);
    return out;
}

IdxArray readIdxFile(const std::string& path, int expectedDims) {
    const std::vector<uint8_t> bytes = readMaybeGzip(path);
    if (bytes.size() < 4) fail(path, "only " + std::to_string(bytes.size()) + " bytes; not an IDX file");
    if (bytes[0] != 0 || bytes[1] != 0)
        fail(path, "wrong magic (expected 00 00 at the start of an IDX header); not an IDX file");
    const uint8_t type = bytes[2];
    const int dims = bytes[3];
    if (type != 0x08)
        fail(path, "data type 0x" + std::to_string(type) + " is not supported (expected 0x08, unsigned bytes)");
    if (dims < 1 || dims > 4) fail(path, "header says " + std::to_string(dims) + " dimensions (expected 1 to 4)");
    if (expectedDims > 0 && dims != expectedDims)
        fail(path, "has " + std::to_string(dims) + " dimensions; expected " + std::to_string(expectedDims));
    const size_t headerSize = 4 + 4 * size_t(dims);
    if (bytes.size() < headerSize) fail(path, "truncated inside the header");
    IdxArray a;
    uint64_t count = 1;
    for (int d = 0; d < dims; ++d) {
        a.shape.push_back(bigEndian32(&bytes[4 + 4 * d]));
        count *= uint64_t(a.shape.back());
    }
    const uint64_t have = bytes.size() - headerSize;
    if (have != count) {
        std::string shape;
        for (int64_t s : a.shape) shape += (shape.empty() ? "" : "x") + std::to_string(s);
        fail(path, std::string(have < count ? "truncated" : "has trailing data") + ": header says " + shape + " = " +
                       std::to_string(count) + " bytes of data, the file holds " + std::to_string(have));
    }
    a.data = at::empty(a.shape, at::kByte);
    std::memcpy(a.data.data_ptr<uint8_t>(), bytes.data() + headerSize, count);
    return a;
}

} // namespace npw
