#include "core/io/mapped_file.h"

#include "core/util/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npw {

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, const std::string& kind) {
    const auto fail = [&](const std::string& problem) { throw Error(kind + " '" + path + "': " + problem); };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        ::close(fd);
        fail("not a regular file");
    }
    std::unique_ptr<MappedFile> file(new MappedFile());
    file->size_ = static_cast<uint64_t>(status.st_size);
    if (file->size_ == 0) {  // mmap refuses a length of 0
        ::close(fd);
        return file;
    }
    void* mapping = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int mapErrno = errno;
    ::close(fd);
    if (mapping == MAP_FAILED) fail(std::string("cannot map: ") + std::strerror(mapErrno));
    file->bytes_ = static_cast<const uint8_t*>(mapping);
    return file;
}

MappedFile::~MappedFile() {
    if (bytes_) ::munmap(const_cast<uint8_t*>(bytes_), size_);
}

} // namespace npw
