#pragma once
// The devices a model can run on here, for pickers (the GUI's device menu): "cpu" and one
// "cuda:N" per GPU this LibTorch sees. Names are what chooseRuntime() takes.
#include <string>
#include <vector>

namespace npw {

std::vector<std::string> availableDevices();

} // namespace npw
