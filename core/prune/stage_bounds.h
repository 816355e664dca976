#pragma once
// Each pruning stage set against its own bound: the work it did (floating-point operations or
// bytes), the rate this machine reaches for that kind of work measured in the same process
// (short micro-benchmarks), and the ratio bound time / actual time (1 = at the bound).
#include "core/models/llama_config.h"

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace npw {

// Rates measured here and now, with the thread count in force (~1 s in all).
struct MachineRates {
    double gemm32 = 0;      // float32 GEMM, flop/s (at::mm, square, n = 1024)
    double gemm64 = 0;      // float64 GEMM, flop/s (at::mm, square, n = 1024)
    double cholesky64 = 0;  // float64 Cholesky (LAPACK dpotrf), flop/s (n³/3 per factorisation) at n = choleskySize
    double diskWrite = 0;   // bytes/s: the better of two 64 MiB writes, fsync'ed, beside `scratchTarget`
    int64_t choleskySize = 0;
    std::string diskNote;   // why diskWrite is 0 (the scratch file could not be written)
};
// choleskySize: the factorisation size to measure (the model's typical site width: the rate
// grows with n). The disk is measured with a temporary file beside scratchTarget (removed; a killed
// run's is removed by the next write there); one that cannot be written leaves diskWrite 0 and
// says why in diskNote.
MachineRates measureMachineRates(const std::string& scratchTarget, int64_t choleskySize);
// The widest scored site of a model (heads × head_dim or the MLP width): the Cholesky size to
// measure at, capped at 2048 (the rate is flat beyond it and the measurement stays ~1 s).
int64_t choleskySizeFor(const LlamaConfig& config);

struct StageMeasure {
    std::string stage;        // calibration_forward, gram_accumulation, scores, cross_layer_ranking, …
    double seconds = 0;
    double gemm32Flops = 0, gemm64Flops = 0, choleskyFlops = 0, bytes = 0;
    std::string note;         // why a stage has no bound, or what its work counts
    double boundSeconds(const MachineRates& r) const;  // NaN when the stage has no work measured
};

// The forward work of calibrating `tokens` tokens in windows of `seqlen` through every block of
// the model (2 flop per weight per token, plus the attention's QKᵀ and AV over whole windows).
double calibrationForwardFlops(const LlamaConfig& config, int64_t tokens, int64_t seqlen);

// The stages of one `npw prune` in this process: the calibration's and the run's timings split
// by the work meter of the per-site arithmetic (dense_kernels.h). calibrated: statistics were
// computed here (not read with --stats); bytesWritten: the export's size.
struct PruneStageInputs {
    double calibrateSeconds = 0, scoreSeconds = 0, selectSeconds = 0, applySeconds = 0, saveSeconds = 0;
    double bytesWritten = 0;
    bool calibrated = false;
    int64_t tokens = 0, seqlen = 0;
};
std::vector<StageMeasure> pruneStageMeasures(const LlamaConfig& config, const PruneStageInputs& in);

// Bytes of the regular files under `path` (a file: its size; missing: 0): what an export wrote.
uint64_t regularFileBytesUnder(const std::string& path);

struct PruneTimings;
// A prune's stage inputs from its timings, the export's save time and the bytes it wrote under
// `out`; the caller adds what it calibrated (calibrated, tokens, seqlen).
PruneStageInputs pruneStageInputs(const PruneTimings& timings, double saveSeconds, const std::string& out);

// Stage-by-stage JSON: [{stage, seconds, work: {…}, bound_s, ratio, note}] (bound_s and ratio only
// where the stage has a bound), plus the rates.
nlohmann::json stageBoundsJson(const std::vector<StageMeasure>& stages, const MachineRates& rates);

// A few lines for the human output: each stage's seconds, bound and ratio.
std::string stageBoundsText(const std::vector<StageMeasure>& stages, const MachineRates& rates);

} // namespace npw
