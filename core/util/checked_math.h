#pragma once
// Sizes that come from a file (a header's dimensions, counts, offsets) are hostile until
// checked: every product, sum and byte range computed from them goes through these helpers,
// which throw npw::Error naming what was computed instead of wrapping around, and every
// allocation a file can size passes a cap derived from the file and the machine.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

namespace npw {

[[noreturn]] void throwOverflow(const std::string& what, const char* operation);

// a × b and a + b, or npw::Error("<what>: ... overflows"). Works for any integer type.
template <class T>
T checkedMul(T a, T b, const std::string& what) {
    static_assert(std::is_integral_v<T>, "checkedMul: integers only");
    T result;
    if (__builtin_mul_overflow(a, b, &result)) throwOverflow(what, "a product");
    return result;
}

template <class T>
T checkedAdd(T a, T b, const std::string& what) {
    static_assert(std::is_integral_v<T>, "checkedAdd: integers only");
    T result;
    if (__builtin_add_overflow(a, b, &result)) throwOverflow(what, "a sum");
    return result;
}

// The product of non-negative factors (a shape's element count); a negative factor or an
// overflow of int64 throws.
int64_t checkedProduct(const std::vector<int64_t>& factors, const std::string& what);
int64_t checkedProduct(std::initializer_list<int64_t> factors, const std::string& what);

// Whether [offset, offset + length) lies inside [0, size), without overflowing.
constexpr bool rangeInside(uint64_t offset, uint64_t length, uint64_t size) {
    return offset <= size && length <= size - offset;
}

// The physical memory of this machine in bytes (0 when unknown).
uint64_t machineMemoryBytes();

// The most bytes one allocation sized by a file may take: half the machine's memory
// (NPW_MAX_ALLOCATION_BYTES=N overrides it, for tests). A file that declares more is refused
// with a clear error instead of dying of std::bad_alloc or the OOM killer.
uint64_t allocationCapBytes();

// Throws npw::Error("<what> needs N bytes, more than ...") when bytes exceed the cap.
void checkAllocation(uint64_t bytes, const std::string& what);

} // namespace npw
