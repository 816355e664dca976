#pragma once
// Numbers in messages as a user typed them ("1", "-0.1", "1e-04"), not std::to_string's
// "1.000000".
#include <string>

namespace npw {

std::string shortNumber(double x);

} // namespace npw
