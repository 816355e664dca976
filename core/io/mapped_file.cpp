#include "core/io/mapped_file.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npw {

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, const std::string& kind) {
    const auto fail = [&](const std::string& problem) { throw Error(kind + " '" + path + "': " + problem); };
    // Opened without waiting on a FIFO, and refused unless a regular file (regular_file.h).
    const RegularFile regular = RegularFile::open(path, kind);
    std::unique_ptr<MappedFile> file(new MappedFile());
    file->size_ = regular.size();
    if (file->size_ == 0) return file;  // mmap refuses a length of 0
    void* mapping = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, regular.fd(), 0);
    const int mapErrno = errno;
    if (mapping == MAP_FAILED) fail(std::string("cannot map: ") + std::strerror(mapErrno));
    file->bytes_ = static_cast<const uint8_t*>(mapping);
    return file;
}

MappedFile::~MappedFile() {
    if (bytes_) ::munmap(const_cast<uint8_t*>(bytes_), size_);
}

} // namespace npw
