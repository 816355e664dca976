#include "core/io/idx_file.h"
#include "core/util/checked_math.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cstring>
#include <memory>
#include <fstream>
#include <zlib.h>

namespace npw {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw Error("IDX file '" + path + "': " + problem);
}

std::vector<uint8_t> readRaw(const std::string& path) {
    requireRegularFile(path, "IDX file");  // a FIFO is refused, never waited on
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error("cannot open '" + path + "'");
    const std::streamoff size = in.tellg();
    if (size < 0) throw Error("cannot read the size of '" + path + "'");
    checkAllocation(static_cast<uint64_t>(size), "reading '" + path + "'");
    in.seekg(0);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), size);
    if (!in) throw Error("cannot read '" + path + "'");
    return bytes;
}

uint32_t bigEndian32(const uint8_t* p) {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

bool isGzip(const std::vector<uint8_t>& raw) { return raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b; }

// A gzip stream inflated on demand: the reader asks for as many bytes as the header says
// exist, so a small file that inflates to gigabytes costs only what its header declares.
class Inflater {
public:
    Inflater(std::string path, const std::vector<uint8_t>& raw) : path_(std::move(path)) {
        std::memset(&zs_, 0, sizeof zs_);
        if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw Error("gzip file '" + path_ + "': zlib could not start");
        zs_.next_in = const_cast<uint8_t*>(raw.data());
        zs_.avail_in = static_cast<uInt>(std::min<size_t>(raw.size(), UINT32_MAX));
        rawLeft_ = raw.size() - zs_.avail_in;
    }
    ~Inflater() { inflateEnd(&zs_); }
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;

    // Inflates until `out` holds at least `want` bytes or the stream ends; returns out.size().
    size_t fillTo(size_t want) {
        uint8_t buffer[1 << 16];
        while (out.size() < want && !ended_) {
            if (zs_.avail_in == 0 && rawLeft_ > 0) {
                const size_t chunk = std::min<size_t>(rawLeft_, UINT32_MAX);
                zs_.avail_in = static_cast<uInt>(chunk);
                rawLeft_ -= chunk;
            }
            zs_.next_out = buffer;
            zs_.avail_out = static_cast<uInt>(std::min<size_t>(sizeof buffer, want - out.size()));
            const uInt asked = zs_.avail_out;
            const int rc = inflate(&zs_, Z_NO_FLUSH);
            if (rc != Z_OK && rc != Z_STREAM_END) {
                if (rc == Z_BUF_ERROR)
                    throw Error("gzip file '" + path_ + "' is truncated (the compressed stream ends early)");
                throw Error("gzip file '" + path_ + "' is corrupt: " + (zs_.msg ? zs_.msg : "error " + std::to_string(rc)));
            }
            out.insert(out.end(), buffer, buffer + (asked - zs_.avail_out));
            ended_ = rc == Z_STREAM_END;
            if (!ended_ && zs_.avail_in == 0 && rawLeft_ == 0 && zs_.avail_out != 0)
                throw Error("gzip file '" + path_ + "' is truncated (the compressed stream ends early)");
        }
        return out.size();
    }
    bool ended() const { return ended_; }

    std::vector<uint8_t> out;

private:
    std::string path_;
    z_stream zs_;
    size_t rawLeft_ = 0;
    bool ended_ = false;
};

} // namespace

std::vector<uint8_t> readMaybeGzip(const std::string& path, uint64_t maxBytes) {
    std::vector<uint8_t> raw = readRaw(path);
    if (!isGzip(raw)) return raw;
    Inflater inflater(path, raw);
    const uint64_t cap = std::min<uint64_t>(maxBytes, allocationCapBytes());
    inflater.fillTo(static_cast<size_t>(std::min<uint64_t>(cap, SIZE_MAX - 1) + 1));
    if (inflater.out.size() > cap)
        throw Error("gzip file '" + path + "' inflates to more than " + std::to_string(cap) + " bytes; refused");
    return std::move(inflater.out);
}

IdxArray readIdxFile(const std::string& path, int expectedDims) {
    std::vector<uint8_t> raw = readRaw(path);
    std::unique_ptr<Inflater> inflater;
    if (isGzip(raw)) inflater = std::make_unique<Inflater>(path, raw);
    // The bytes read so far: the file itself, or what has been inflated of it.
    auto have = [&](size_t want) -> const std::vector<uint8_t>& {
        if (inflater) inflater->fillTo(want);
        return inflater ? inflater->out : raw;
    };
    const std::vector<uint8_t>* bytes = &have(4);
    if (bytes->size() < 4) fail(path, "only " + std::to_string(bytes->size()) + " bytes; not an IDX file");
    if ((*bytes)[0] != 0 || (*bytes)[1] != 0)
        fail(path, "wrong magic (expected 00 00 at the start of an IDX header); not an IDX file");
    const uint8_t type = (*bytes)[2];
    const int dims = (*bytes)[3];
    if (type != 0x08)
        fail(path, "data type 0x" + std::to_string(type) + " is not supported (expected 0x08, unsigned bytes)");
    if (dims < 1 || dims > 4) fail(path, "header says " + std::to_string(dims) + " dimensions (expected 1 to 4)");
    if (expectedDims > 0 && dims != expectedDims)
        fail(path, "has " + std::to_string(dims) + " dimensions; expected " + std::to_string(expectedDims));
    const size_t headerSize = 4 + 4 * size_t(dims);
    bytes = &have(headerSize);
    if (bytes->size() < headerSize) fail(path, "truncated inside the header");
    IdxArray a;
    uint64_t count = 1;
    for (int d = 0; d < dims; ++d) {
        a.shape.push_back(bigEndian32(&(*bytes)[4 + 4 * d]));
        count = checkedMul(count, uint64_t(a.shape.back()), "IDX file '" + path + "': the header's dimensions");
    }
    std::string shape;
    for (int64_t s : a.shape) shape += (shape.empty() ? "" : "x") + std::to_string(s);
    // The header bounds what is read or inflated: one byte more tells trailing data apart.
    if (inflater) {
        checkAllocation(count, "IDX file '" + path + "' (header says " + shape + ")");
        bytes = &have(headerSize + count + 1);
    }
    const uint64_t held = bytes->size() - headerSize;
    if (held != count) {
        const bool more = held > count;
        fail(path, std::string(more ? "has trailing data" : "truncated") + ": header says " + shape + " = " +
                       std::to_string(count) + " bytes of data, the file holds " +
                       (more && inflater ? "more" : std::to_string(held)));
    }
    a.data = at::empty(a.shape, at::kByte);
    if (count > 0) std::memcpy(a.data.data_ptr<uint8_t>(), bytes->data() + headerSize, count);
    return a;
}

} // namespace npw
