#include "core/util/checked_math.h"

#include "core/util/error.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace npw {

namespace {

std::string byteCount(uint64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 6) {
        value /= 1024;
        ++unit;
    }
    if (unit == 0) return std::to_string(bytes) + " bytes";
    char text[64];
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
    return text;
}

} // namespace

void throwOverflow(const std::string& what, const char* operation) {
    throw Error(what + ": " + operation + " of the sizes overflows 64 bits (the sizes are corrupt or hostile)");
}

int64_t checkedProduct(const std::vector<int64_t>& factors, const std::string& what) {
    int64_t product = 1;
    for (int64_t factor : factors) {
        if (factor < 0) throw Error(what + ": negative size " + std::to_string(factor));
        product = checkedMul(product, factor, what);
    }
    return product;
}

int64_t checkedProduct(std::initializer_list<int64_t> factors, const std::string& what) {
    return checkedProduct(std::vector<int64_t>(factors), what);
}

uint64_t machineMemoryBytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && pageSize > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize) : 0;
}

uint64_t allocationCapBytes() {
    if (const char* forced = std::getenv("NPW_MAX_ALLOCATION_BYTES")) {
        char* end = nullptr;
        const unsigned long long bytes = std::strtoull(forced, &end, 10);
        if (end == forced || *end != '\0')
            throw Error("NPW_MAX_ALLOCATION_BYTES must be a number of bytes, got '" + std::string(forced) + "'");
        return bytes;
    }
    const uint64_t memory = machineMemoryBytes();
    return memory > 0 ? memory / 2 : uint64_t{8} << 30;
}

void checkAllocation(uint64_t bytes, const std::string& what) {
    const uint64_t cap = allocationCapBytes();
    if (bytes > cap)
        throw Error(what + " needs " + byteCount(bytes) + " of memory, more than the " + byteCount(cap) +
                    " npw allows one allocation (" +
                    (std::getenv("NPW_MAX_ALLOCATION_BYTES") ? "NPW_MAX_ALLOCATION_BYTES" : "half of this machine's memory") +
                    "): the file's sizes are corrupt or too large for this machine");
}

} // namespace npw
