#pragma once
// `npw bench --suite image-runtime` (issue 17): how fast npw generates images' tokens with
// classifier-free guidance, against the machine's bounds. Models: a random class-conditional GPT
// of one of LlamaGen's published sizes (GPT-B by default: dim 768, 12 layers × 12 heads, SwiGLU
// 2048, codebook 16384, 16×16 tokens, 1000 classes), the same shape pruned by shape, and the
// bundled demo:c2i. Every image is grid² sampling steps; with guidance each step runs the batch
// [cond; null] as LlamaGen does, so b images are 2b rows per step.
//
// The bound of one step is min(bandwidth bound, GEMM bound) as a rate: the step reads every
// weight once plus the KV cache of its rows (bytes ÷ the one-thread streaming bandwidth) and
// multiplies every weight by every row plus the attention products (FLOPs ÷ the BLAS's GEMM
// rate at a large shape). Small batches are bandwidth-bound like decoding, large ones GEMM-bound.
#include "core/models/llamagen.h"
#include "core/util/progress.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npw {

struct ImageRuntimeBenchOptions {
    std::string gptModel = "B";          // llamaGenNamedConfig's names
    int threads = 1;
    std::vector<int64_t> batches = {1, 4, 16};  // images per forward pass (2 rows each with guidance)
    double cfgScale = 4.0;               // LlamaGen's sample_c2i default
    int repeats = 2;                     // best of
    double prunedRatio = 0.5;            // 0 = no pruned model
    bool demo = true;                    // also demo:c2i (skipped when its files are missing)
    bool decoder = true;                 // time the VQ decoders (one image each, once)
};

// One model at one batch size.
struct ImageRuntimeRow {
    std::string model;
    int64_t batch = 0, rows = 0;         // images per pass; rows per step (2·batch with guidance)
    double seconds = 0;                  // one batch of images, best of the rounds
    double imagesPerSecond = 0, tokensPerSecond = 0;
    // The process's CPU time for the batch (best of the rounds) and images per CPU second: on a
    // shared machine the wall clock counts the time other processes held the core, CPU time
    // does not (memory contention remains). At one thread the undisturbed images/s.
    double cpuSeconds = 0, imagesPerCpuSecond = 0;
    double weightGBs = 0;                // the weights' bytes × steps ÷ seconds (the read rate it implies)
    double bandwidthBound = 0, gemmBound = 0, roofline = 0;  // images/s
    double rooflineRatio() const { return roofline > 0 ? imagesPerSecond / roofline : 0; }
};

struct ImageRuntimeModel {
    std::string name, description;
    int64_t parameters = 0;              // the GPT's (transformer and class embedding)
    double weightBytes = 0;              // read per step: layers' matrices and norms, the classifier
    double decoderSecondsPerImage = 0;   // the VQ decoder's own time (0: not measured)
    std::string decoderNote;             // which decoder, or why it was not timed
};

struct ImageRuntimeBenchReport {
    std::string gemvIsa;
    double bandwidthGBs = 0;             // one-thread streaming read over 1 GiB (best of rounds)
    double gemmGflops = 0;               // at::linear float32 at [1024, dim] · [ffn, dim]ᵀ
    int64_t steps = 0;                   // forwards per image (grid², GPT-B: 256)
    std::vector<ImageRuntimeModel> models;
    std::vector<ImageRuntimeRow> rows;   // model-major, batches in the options' order
    std::string demoSkipped;
};

ImageRuntimeBenchReport runImageRuntimeBench(const ImageRuntimeBenchOptions& options, const ProgressFn& progress = nullptr);

// A random c2i GPT of `config`'s shape: LlamaGen's initialisation scale (normal(0, 0.02)), the
// class embedding with its null row. Seeded.
LlamaGenCheckpoint syntheticLlamaGen(const LlamaGenConfig& config, uint64_t seed);

// The bytes and FLOPs of one generation forward of `rows` rows at `context` cached positions
// (this step's included): bytes = every weight matrix, norm and the classifier once (float32),
// plus K and V of the context for every row; FLOPs = 2 per weight per row plus q·kᵀ and p·v.
// The embedding rows are not counted.
struct StepCost {
    double bytes = 0, flops = 0;
};
StepCost imageStepCost(const LlamaConfig& config, int64_t rows, int64_t context);

// Images/s bounds of generating `batch` images (rows = 2·batch with guidance): steps forwards,
// forward i at context i + 1 (the class token, then one image token per step).
struct ImageBounds {
    double bandwidth = 0, gemm = 0, roofline = 0;  // images/s
};
ImageBounds imageGenerationBounds(const LlamaGenConfig& config, int64_t batch, bool guided, double bandwidthGBs,
                                  double gemmGflops);

} // namespace npw
