#pragma once
// `npw bench --suite projection`: what `npw prune`'s layer-by-layer road will cost on a model and a
// calibration nobody here can run (13B, 70B; the papers' 128 × 2048 tokens), from the work each
// stage does — the same counts the work meter adds up at run time (dense_kernels.h,
// stage_bounds.h) — and from one measured run: each stage's time is its work at this machine's
// rates divided by the efficiency (bound / seconds) that stage reached in the measured run.
//
//   work        per stage, from the shape alone: the forward's float32 GEMM flops
//               (calibrationForwardFlops), the Gram updates d(d+1)·N per site, the scores
//               (WᵀW: d(d+1)·rows, one Cholesky d³/3, one solve 2d²), the L* curve (one Cholesky,
//               one trmm d²·rows), Theorem 3 (one Cholesky, (2kp + k² + p²)·rows for k kept and p
//               pruned channels), the export's bytes and the scratch file's writes (Gram triangles,
//               sums, the hidden states after every layer for a resume)
//   time        this machine: work / (rate × the measured stage's efficiency), plus the stages
//               without an arithmetic bound scaled as their share of the measured run; one GPU:
//               the forward and the Gram updates at stated GPU rates (a bound: efficiency 1), the
//               solves on the GPU machine's CPU cores (this machine's measured rates × cores /
//               threads, stated), as npw runs them (layerwise_prune.h: LAPACK on the host)
//   memory/disk the layer-wise road's peak anonymous memory (the widest layer's apply step: the
//               layer in float32, both sites' G unpacked in float64, one D×D float64 factor, the
//               hidden states of every window in float32, the runtime's baseline), the scratch
//               file (float64 triangles when they fit the checkpoint's size plus the hidden
//               states, else float32: scratchDtype) and the export
//
// A projection, not a measurement: README compares it with the measured 1.1B, 7B and 8B runs.
#include "core/models/llama_config.h"
#include "core/prune/stage_bounds.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

// The shapes it projects to: syntheticCheckpointConfig's (7b, 8b, 1b, 110m, tiny) plus "13b"
// (Llama-2-13B: 40 layers, hidden 5120, 40 heads × 128, MLP 13824, vocabulary 32000) and "70b"
// (Llama-2-70B: 80 layers, hidden 8192, 64 query heads over 8 KV heads, MLP 28672, vocabulary
// 32000). npw::Error naming the shapes for any other name.
LlamaConfig projectionShape(const std::string& name);
std::vector<std::string> projectionShapeNames();

// The input channels a prune removes from each layer's two scored sites (o_proj: removed query
// heads × head_dim; down_proj: removed MLP channels).
struct RemovedChannels {
    std::vector<int64_t> attention, mlp;
};
// ρ of every site's units, as uniform selection removes them: int(ρ·units) heads (KV groups for a
// GQA layer, each g query heads) and int(ρ·D_inter) channels per layer.
RemovedChannels uniformlyRemoved(const LlamaConfig& config, double ratio);

// Each bounded stage's work (StageMeasure with seconds 0): calibration_forward, gram_accumulation,
// scores, cross_layer_ranking, compensation, writing (bytes: the export in `exportElementBytes`
// per parameter), scratch_writing (layer-wise road: triangles of `scratchElementBytes`, the sums,
// and with `hiddenEveryLayer` the hidden states after every layer but the last — what the road
// writes up to kHiddenSavedEveryLayerBytes of them (layerwise_prune.h); above, it writes them only
// as often as keeps that under a tenth of the calibration's time, which projectPrune accounts for).
std::vector<StageMeasure> projectedStageWork(const LlamaConfig& config, int64_t windows, int64_t seqlen,
                                             const RemovedChannels& removed, int64_t exportElementBytes = 2,
                                             int64_t scratchElementBytes = 4, bool hiddenEveryLayer = true);

// The shape after removing `removed` from every layer (a KV head goes with its group).
LlamaConfig configAfter(const LlamaConfig& config, const RemovedChannels& removed);
// Every parameter of a model of this shape: the prunable weights, the norms, the embedding and
// the head (parameter_count.h's count of the prunable ones).
int64_t modelParameters(const LlamaConfig& config);

struct LayerwiseFootprint {
    int64_t checkpointBytes = 0;   // every parameter in bf16
    int64_t hiddenBytes = 0;       // every window's hidden states in float32
    int64_t layerFloat32Bytes = 0; // the widest layer widened to float32
    int64_t gramBytes = 0;         // the widest layer's two G unpacked in float64
    int64_t factorBytes = 0;       // one D_inter × D_inter float64 factor (Theorem 3)
    int64_t baselineBytes = 0;     // the process without a model (LibTorch, the runtime)
    int64_t peakAnonBytes = 0;     // the sum of the above
    int64_t scratchBytes = 0;      // the Gram triangles
    int64_t scratchBoundBytes = 0; // checkpoint + hidden states
    std::string scratchPrecision;  // "float64" or "float32"
    int64_t exportBytes = 0;       // the pruned model in bf16
};
LayerwiseFootprint projectedFootprint(const LlamaConfig& config, int64_t windows, int64_t seqlen, double ratio);

// One measured `npw prune --json` (its stage_bounds): each bounded stage's efficiency (bound /
// seconds; above 1 where a stage beat the rate measured beside it), every stage's seconds, the
// rates of the process that ran it, and its threads (road.blocks_on "cpu (N threads)", else `threads`). npw::Error
// naming `file` when it is not such a report.
struct MeasuredEfficiency {
    std::string file;
    MachineRates rates;
    std::vector<std::pair<std::string, double>> efficiency;  // stage → bound / seconds (stages with a bound)
    std::vector<std::pair<std::string, double>> seconds;     // stage → seconds (every stage)
    double totalSeconds = 0;
    int threads = 1;
};
MeasuredEfficiency measuredEfficiency(const nlohmann::json& pruneReport, const std::string& file, int threads);

struct GpuAssumptions {
    double gemm32 = 400e12;  // the forward's GEMMs (bf16 tensor cores, float32 accumulation): 60 % of an H100 SXM's 989 TFLOP/s
    double gemm64 = 50e12;   // the Gram updates (float64 tensor cores): 75 % of an H100 SXM's 67 TFLOP/s
    int hostCores = 16;      // the GPU machine's CPU cores, for the solves (LAPACK on the host)
};

// The projection of one shape and calibration: per stage its work, seconds here and on one GPU,
// and the footprint. The measured stages it does not model (bookkeeping, slicing, scratch reads,
// resume records) keep their share of the measured run's time in the totals.
nlohmann::json projectPrune(const std::string& shape, int64_t windows, int64_t seqlen, double ratio,
                            const MeasuredEfficiency& measured, const GpuAssumptions& gpu);

} // namespace npw
