#pragma once
// How much memory this machine has, for the commands that switch to layer-by-layer work when a
// model or its statistics would not fit (npw prune's calibration, npw eval).
#include <cstdint>

namespace npw {

// Physical RAM of this machine (sysconf), 0 when unknown; the environment variable
// NPW_PHYSICAL_MEMORY_BYTES overrides it (to try the layer-wise paths on a small model). A
// malformed value is an npw::Error naming the variable.
int64_t physicalMemoryBytes();

} // namespace npw
