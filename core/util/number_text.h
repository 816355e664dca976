#pragma once
// Numbers in messages as a user typed them ("1", "-0.1", "1e-04"), not std::to_string's
// "1.000000".
#include <cstdint>
#include <string>

namespace npw {

std::string shortNumber(double x);
// A size for messages: "1.5 GiB" from 1 GiB up, else "12.3 MiB".
std::string byteSizeText(int64_t bytes);

} // namespace npw
