#pragma once
// `npw bench --suite scale --synthetic SIZE`: the whole job at a real size, each step in a
// process of its own so that its peak memory is its own (core/util/child_process.h):
//
//   write     a random checkpoint of that shape, tensor by tensor (bench --write-synthetic)
//   prune     each method (numerical, FLAP) at ρ 0.2 on seeded random calibration ids, the road
//             chosen by npw's rule (or forced layer-wise), with its per-stage times and bounds
//             (prune --json: timings, stage_bounds) and its scratch file
//   eval      the dense model and each export, layer by layer (eval --layerwise), on their own ids
//
// Reported per step: wall time, peak RssAnon / RssFile / VmHWM, and the bytes on disk (the
// checkpoint, the scratch file, the export). Everything is written under one folder the suite
// creates (it must not exist) and removes at the end; each export is removed once evaluated, so
// the disk holds the checkpoint, one export and one scratch file at a time.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npw {

struct ScaleBenchOptions {
    std::string size = "1b";          // syntheticCheckpointConfig's names: tiny, 110m, 1b, 7b, 8b
    std::string npwRun;               // the npw-run program each step runs
    std::string folder;               // created; removed at the end (must not exist)
    int threads = 2;                  // NPW_NUM_THREADS of every step
    int64_t nsamples = 16, seqlen = 512;
    int64_t evalWindows = 4;          // evaluation windows of seqlen tokens (the flag's default)
    double ratio = 0.2;
    std::vector<std::string> methods = {"numerical", "flap"};
    bool layerwise = false;           // force the layer-wise road (else npw's rule decides)
    uint64_t seed = 0;
};

// Runs the suite; `say` gets one line per finished step (for the terminal). Throws npw::Error
// naming the step when one fails (its folder is removed).
nlohmann::json runScaleBench(const ScaleBenchOptions& options, const std::function<void(const std::string&)>& say);

} // namespace npw
