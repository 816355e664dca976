#include "core/util/regular_file.h"

#include "core/util/error.h"

#include <cerrno>
#include <cstring>
#include <string_view>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npw {

namespace {

std::string kindOfMode(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

// "268435456 bytes (256 MiB)"
std::string bytesText(uint64_t n) {
    std::string s = std::to_string(n) + " bytes";
    if (n >= (uint64_t(1) << 20)) s += " (" + std::to_string(n >> 20) + " MiB)";
    return s;
}

std::string named(const std::string& path, const std::string& what) {
    return what.empty() ? "'" + path + "'" : what + " '" + path + "'";
}

} // namespace

RegularFile RegularFile::open(const std::string& path, const std::string& what) {
    // O_NONBLOCK: open() on a FIFO with no writer returns at once instead of waiting for one.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int error = errno;
        throw Error("cannot open " + named(path, what) + ": " + std::strerror(error));
    }
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
        const int error = errno;
        ::close(fd);
        throw Error(named(path, what) + ": cannot stat: " + std::strerror(error));
    }
    if (!S_ISREG(status.st_mode)) {
        ::close(fd);
        throw Error(named(path, what) + " is " + kindOfMode(status.st_mode) +
                    ", not a regular file; npw reads only regular files");
    }
    // Back to blocking reads (O_NONBLOCK means nothing for a regular file's reads on Linux, but
    // the descriptor goes on to zlib and mmap, which should see an ordinary one).
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return RegularFile(fd, static_cast<uint64_t>(status.st_size));
}

RegularFile::RegularFile(RegularFile&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.fd_;
        size_ = other.size_;
        other.fd_ = -1;
    }
    return *this;
}

RegularFile::~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
}

void requireRegularFile(const std::string& path, const std::string& what) { RegularFile::open(path, what); }

std::string fileKindOf(const std::string& path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) return "missing";
    return kindOfMode(status.st_mode);
}

namespace {

// Reads the whole file through `fd` in chunks; `check(chunk, offset)` sees each chunk.
template <typename Check>
std::string readAll(const RegularFile& file, const std::string& path, const std::string& what, uint64_t maxBytes,
                    Check check) {
    if (file.size() > maxBytes)
        throw Error(named(path, what) + " is " + bytesText(file.size()) + "; npw reads at most " + bytesText(maxBytes) +
                    " from such a file");
    std::string out;
    out.reserve(static_cast<size_t>(file.size()));
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(file.fd(), buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int error = errno;
            throw Error(named(path, what) + ": read failed: " + std::strerror(error));
        }
        if (n == 0) break;
        if (out.size() + static_cast<uint64_t>(n) > maxBytes)  // grew while read
            throw Error(named(path, what) + " holds more than " + bytesText(maxBytes) +
                        "; npw reads at most that from such a file");
        check(std::string_view(buffer, static_cast<size_t>(n)), out.size());
        out.append(buffer, static_cast<size_t>(n));
    }
    return out;
}

} // namespace

std::string readRegularFile(const std::string& path, const std::string& what, uint64_t maxBytes) {
    const RegularFile file = RegularFile::open(path, what);
    return readAll(file, path, what, maxBytes, [](std::string_view, uint64_t) {});
}

std::string readTextInput(const std::string& path, const std::string& what, uint64_t maxBytes) {
    const RegularFile file = RegularFile::open(path, what);
    return readAll(file, path, what, maxBytes, [&](std::string_view chunk, uint64_t offset) {
        const size_t nul = chunk.find('\0');
        if (nul != std::string_view::npos)
            throw Error(named(path, what) + " is binary, not text (a NUL byte at offset " +
                        std::to_string(offset + nul) + ")");
    });
}

} // namespace npw
