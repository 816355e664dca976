#include "core/util/atomic_file.h"

#include <cctype>
#include "core/util/error.h"
#include "core/util/output_guard.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace npw {

namespace {

constexpr const char* kTemporaryMark = ".npw-";
// The kinds of temporary npw writes beside a target, and whether each is a folder.
struct TemporaryKind {
    const char* name;
    bool folder;
};
constexpr TemporaryKind kTemporaryKinds[] = {{"tmp", false}, {"stats", false}, {"staging", true}, {"previous", true}};

bool allDigits(const std::string& s) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// ".TARGET.npw-KIND-PID-RANDOM" → TARGET, KIND, PID; nothing for any other name.
struct ParsedTemporary {
    std::string target;
    const TemporaryKind* kind = nullptr;
    long long pid = 0;
};

std::optional<ParsedTemporary> parseTemporaryName(const std::string& name) {
    if (name.size() < 2 || name[0] != '.') return std::nullopt;
    const size_t mark = name.rfind(kTemporaryMark);
    if (mark == std::string::npos || mark < 2) return std::nullopt;
    const std::string rest = name.substr(mark + std::strlen(kTemporaryMark));  // KIND-PID-RANDOM
    const size_t dash1 = rest.find('-');
    if (dash1 == std::string::npos) return std::nullopt;
    const size_t dash2 = rest.find('-', dash1 + 1);
    if (dash2 == std::string::npos) return std::nullopt;
    const std::string kind = rest.substr(0, dash1), pid = rest.substr(dash1 + 1, dash2 - dash1 - 1),
                      random = rest.substr(dash2 + 1);
    if (!allDigits(pid) || !allDigits(random)) return std::nullopt;
    ParsedTemporary parsed;
    for (const TemporaryKind& k : kTemporaryKinds)
        if (kind == k.name) parsed.kind = &k;
    if (!parsed.kind) return std::nullopt;
    parsed.pid = std::stoll(pid);
    if (parsed.pid <= 0 || parsed.pid > 0x7fffffffLL) return std::nullopt;
    parsed.target = name.substr(1, mark - 1);
    return parsed;
}

// Whether no process with this id runs (on this machine): kill(pid, 0) fails with ESRCH. A
// process of another user (EPERM) is alive.
bool processIsGone(long long pid) {
    if (pid == static_cast<long long>(::getpid())) return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

} // namespace

std::string temporaryPathBeside(const std::string& target, const std::string& kind) {
    fs::path t(target);
    if (!t.has_filename()) t = t.parent_path();  // "dir/"
    const fs::path dir = t.has_parent_path() ? t.parent_path() : fs::path(".");
    std::random_device rd;
    return (dir / ("." + t.filename().string() + kTemporaryMark + kind + "-" + std::to_string(::getpid()) + "-" +
                   std::to_string(rd() % 1000000000u)))
        .string();
}

void removeWorkOfDeadProcesses(const std::string& dir, const std::string& prefix, const std::string& suffix) {
    try {
        std::error_code ec;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
            size_t end = prefix.size();
            while (end < name.size() && end - prefix.size() < 10 && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
            if (end == prefix.size()) continue;
            const std::string rest = name.substr(end);
            const bool named = rest.empty() ? suffix.empty()
                                            : rest[0] == '-' && rest.size() >= suffix.size() &&
                                                  rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0;
            if (!named) continue;
            const long long pid = std::stoll(name.substr(prefix.size(), end - prefix.size()));
            if (pid <= 0 || pid > 0x7fffffffLL || !processIsGone(pid)) continue;
            fs::remove_all(it->path(), ec);
        }
    } catch (...) {
    }
}

void removeStaleTemporaries(const std::string& target) {
    try {
        fs::path t = fs::absolute(target);
        if (!t.has_filename()) t = t.parent_path();
        const fs::path dir = t.parent_path();
        const std::string name = t.filename().string();
        if (name.empty()) return;
        std::error_code ec;
        // Whether `entry` is a temporary of the target, directly or of one of its temporaries
        // (the stream writer's ".X.npw-tmp-…" of a statistics file ".TARGET.npw-stats-…").
        const auto staleOfTarget = [&](const std::string& entry) -> std::optional<ParsedTemporary> {
            std::optional<ParsedTemporary> parsed = parseTemporaryName(entry);
            std::optional<ParsedTemporary> outer = parsed;
            for (int depth = 0; outer && depth < 4; ++depth) {
                if (!processIsGone(outer->pid)) return std::nullopt;
                if (outer->target == name) return parsed;
                outer = parseTemporaryName(outer->target);
            }
            return std::nullopt;
        };
        std::vector<fs::path> previous;
        for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
            const std::string entry = it->path().filename().string();
            const std::optional<ParsedTemporary> stale = staleOfTarget(entry);
            if (!stale) continue;
            const fs::file_status status = it->symlink_status(ec);
            if (ec) continue;
            // The kind says what npw made there; anything else by that name is left alone.
            if (stale->kind->folder ? !fs::is_directory(status) : !fs::is_regular_file(status)) continue;
            if (std::string(stale->kind->name) == "previous" && stale->target == name)
                previous.push_back(it->path());
            else
                fs::remove_all(it->path(), ec);
        }
        for (const fs::path& p : previous) {
            // Interrupted between "move the earlier export aside" and "move the new one in": the
            // earlier export is whole; it goes back where it was.
            if (!fs::exists(fs::symlink_status(t, ec))) fs::rename(p, t, ec);
            else fs::remove_all(p, ec);
        }
    } catch (...) {
        // Best effort: a leftover that cannot be removed is not a reason to fail the write.
    }
}

void testStallPoint(const char* point) {
    const char* want = std::getenv("NPW_TEST_STALL");
    if (!want || std::strcmp(want, point) != 0) return;
    std::cerr << "npw: stalled at " << point << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(600));
}

void writeFileAtomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
    runOutputGuard().check(path, "the output");
    removeStaleTemporaries(path);
    fs::path target(path);
    const fs::path tmp = temporaryPathBeside(path, "tmp");
    try {
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) throw Error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
            write(out);
            out.flush();
            if (!out) throw Error("writing '" + path + "' failed (disk full?)");
        }
        int fd = ::open(tmp.c_str(), O_RDONLY);
        if (fd >= 0) { ::fsync(fd); ::close(fd); }
        testStallPoint("file-written");
        std::error_code ec;
        fs::rename(tmp, target, ec);
        if (ec) throw Error("cannot move '" + tmp.string() + "' to '" + path + "': " + ec.message());
    } catch (...) {
        std::error_code ec;
        fs::remove(tmp, ec);
        throw;
    }
}

void writeTextAtomically(const std::string& path, const std::string& text) {
    writeFileAtomically(path, [&](std::ostream& out) { out << text; });
}

std::string readTextFile(const std::string& path) {
    return readRegularFile(path);  // a FIFO or a directory is refused, never waited on
}

} // namespace npw
