#include "core/util/system_memory.h"

#include "core/util/error.h"

#include <cstdlib>
#include <string>
#include <unistd.h>

namespace npw {

int64_t physicalMemoryBytes() {
    if (const char* forced = std::getenv("NPW_PHYSICAL_MEMORY_BYTES")) {
        char* end = nullptr;
        const long long bytes = std::strtoll(forced, &end, 10);
        if (end == forced || *end != '\0' || bytes < 0)
            throw Error("NPW_PHYSICAL_MEMORY_BYTES must be a number of bytes, got '" + std::string(forced) + "'");
        return bytes;
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize : 0;
}

} // namespace npw
