#pragma once
// One exception type for everything a user can cause (bad file, bad flag, bad shape).
// Deep code throws with the facts (file, tensor, expected, actual); the CLI and GUI
// report it once. Never abort on user input.
#include <stdexcept>
#include <string>

namespace npw {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when a progress callback asked to stop. Not an error: the caller said so.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

} // namespace npw
