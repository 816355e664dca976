#pragma once
// The one way npw opens a path for reading. A path can name a named pipe (FIFO), a directory,
// a device or a socket as easily as a file: open() on a FIFO blocks until a writer comes (for
// ever), a device can be endless. So every reader opens through here: the path is opened with
// O_NONBLOCK (which makes open() on a FIFO return at once), fstat'ed, refused unless it is a
// regular file (the message names the file and what it is), and only then switched back to
// blocking reads. The zip reader, safetensors, GGUF, IDX, the tokenizer files, texts, data sets,
// configs, zero-shot tasks, workspaces and statistics files all come here.
#include <cstdint>
#include <string>

namespace npw {

// An open, read-only descriptor of a regular file; closes it when destroyed.
class RegularFile {
public:
    // Throws npw::Error "cannot open <what> '<path>': …" or "<what> '<path>' is a FIFO (named
    // pipe), not a regular file …". `what` may be empty ("'<path>' is a directory, …").
    static RegularFile open(const std::string& path, const std::string& what = "");
    RegularFile(RegularFile&& other) noexcept;
    RegularFile& operator=(RegularFile&& other) noexcept;
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;
    ~RegularFile();

    int fd() const { return fd_; }
    uint64_t size() const { return size_; }  // at open
    // Hands the descriptor over (the caller closes it).
    int release();

private:
    RegularFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
    int fd_ = -1;
    uint64_t size_ = 0;
};

// RegularFile::open and close: for readers that go on through another API (std::ifstream,
// zlib). A path swapped between the check and the read is not guarded against (not a threat
// npw defends: the user's own folders).
void requireRegularFile(const std::string& path, const std::string& what = "");

// What a path is, in words, for messages: "a regular file", "a directory", "a FIFO (named
// pipe)", "a character device", "a block device", "a socket", "a symbolic link", "missing".
std::string fileKindOf(const std::string& path);

// The whole content of a regular file. Throws npw::Error naming `what`/the path when the file
// is not regular, cannot be read, or holds more than maxBytes ("… is 2147483648 bytes; npw reads
// at most …"), checked against its size before anything is read.
std::string readRegularFile(const std::string& path, const std::string& what = "",
                            uint64_t maxBytes = uint64_t(1) << 30);

// Texts given as whole files (--text, --calib, --eval, a training corpus, a verse text): at most
// this many bytes (a tokenizer needs minutes per hundred MB; WikiText-103's train split is 0.5 GB).
constexpr uint64_t kMaxTextInputBytes = uint64_t(256) << 20;

// readRegularFile bounded by kMaxTextInputBytes that also refuses a NUL byte (binary data is
// not text; a file of NULs would otherwise be tokenized), naming the file and the byte offset.
// The size is checked before reading, the NULs chunk by chunk as read.
std::string readTextInput(const std::string& path, const std::string& what = "",
                          uint64_t maxBytes = kMaxTextInputBytes);

} // namespace npw
