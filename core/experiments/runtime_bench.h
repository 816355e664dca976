#pragma once
// `npw bench --suite runtime` (issue 17): npw's runtime against the references on the same
// random weights, measured side by side in one run — npw's decode, prefill and evaluation;
// llama2.c's run.c (decode); an eager re-write of Hugging Face's LLaMA forward in PyTorch
// (resources/bench/eager_llama.py); the one-thread streaming read bandwidth (the decode
// roofline) and the GEMM rate of LibTorch's BLAS (the evaluation bound). llama.cpp runs from
// the command (it needs the CLI's Node bridge) on the checkpoint this returns.
#include "core/models/llama_weights.h"

#include <c10/core/ScalarType.h>
#include "core/util/progress.h"

#include <cstdint>
#include <string>

namespace npw {

struct RuntimeBenchOptions {
    std::string size = "110m";      // syntheticLlamaConfig's names
    int threads = 1;                 // every runtime's threads
    int64_t promptTokens = 128, decodeTokens = 128;
    int64_t evalWindows = 4, evalSeqlen = 256;
    int repeats = 3;                 // best of
    double prunedRatio = 0.5;        // the pruned model's ratio (by shape); 0 = skip it
    std::string workDir;             // the .bin and run's binary go here (made if missing)
    std::string runcSource;          // llama2.c's run.c; empty or missing: run.c skipped
    std::string python = "/usr/bin/python3";
    std::string eagerScript;         // eager_llama.py; empty or missing: skipped
    bool halfPrecision = true;       // also the same weights as BF16 and F16 safetensors, mapped
};

// One reference's figures; tokens/s ≤ 0 where it has none. `skipped` says why it did not run.
struct ReferenceFigures {
    double prefill = 0, decode = 0, eval = 0;
    std::string skipped;
};

struct RuntimeBenchReport {
    LlamaCheckpoint checkpoint;   // the dense synthetic model (for llama.cpp), demo tokenizer
    std::string llama2cPath;      // the same weights as a llama2.c .bin
    std::string gemvIsa;          // which GEMV kernel npw ran
    int64_t parameters = 0;
    double bytesPerToken = 0;     // decode: layer weights + lm_head + KV cache read (no embedding)
    double flopsPerToken = 0;     // evaluation: 2·(weights used per token) + attention, per token
    double bandwidthGBs = 0;      // one-thread streaming read over ≥ 1 GiB (best of repeats)
    double gemmGflops = 0;        // at::mm float32 (best of repeats)
    ReferenceFigures npw, runc, eager;
    // Decode with the GEMV kernels limited to AVX2 (setGemvIsaLimit), in rounds alternating with
    // the AVX-512 ones above, where this CPU has AVX-512 (0 otherwise): the wider kernels' gain,
    // side by side. Float32 and the bfloat16 weights.
    double decodeAvx2 = 0, bf16DecodeAvx2 = 0;
    // The pruned model (by shape, every layer's KV groups and MLP channels × (1 − ratio)).
    double prunedRatio = 0, prunedBytesPerToken = 0, prunedDecode = 0;
    // The same weights rounded to bfloat16 and to float16, written as Hugging Face safetensors
    // folders and loaded WeightStorage::Mapped: the runtime reads them as stored (gemv.h,
    // widened_linear.h). bf16Checkpoint and f16Checkpoint (the mapped folders) are what llama.cpp
    // gets as a BF16 and an F16 GGUF: the same weights, as stored. Memory: RssAnon sampled every few ms from before the 16-bit model is loaded to the end
    // of its first generation (prefill and decode) — the peak above the level before (the file's
    // pages are RssFile; the float32 model of the rounds above stays resident and is not counted).
    ReferenceFigures bf16, f16;
    std::string bf16Dir, f16Dir;
    LlamaCheckpoint bf16Checkpoint, f16Checkpoint;
    double float32WeightsMiB = 0;     // parameters · 4 bytes: what a float32 copy would take
    double bf16AnonAddedMiB = 0, f16AnonAddedMiB = 0;  // peak RssAnon above the level before
    double halfBytesPerToken = 0;     // decode bytes per token with 2-byte weights
    double roofline() const { return bytesPerToken > 0 ? bandwidthGBs * 1e9 / bytesPerToken : 0; }
    double gemmBound() const { return flopsPerToken > 0 ? gemmGflops * 1e9 / flopsPerToken : 0; }
};

RuntimeBenchReport runRuntimeBench(const RuntimeBenchOptions& options, const ProgressFn& progress = nullptr);

// The checkpoint as llama2.c's version-0 .bin (unshared classifier: negative vocab in the
// header; rotary tables of θ = 10000) and a tokenizer.bin of `vocab` synthetic pieces beside
// it (`path` minus .bin + .tokenizer.bin), both written atomically. Throws npw::Error for what
// the format cannot hold: per-layer shapes, biases, q/k norms, another rotary layout.
void writeLlama2cCheckpoint(const LlamaCheckpoint& checkpoint, const std::string& path);

// Bytes one decoded token reads at context `context` (weights of the layers and the
// classifier, float32 — or `weightBytes` each — plus the float32 K and V cache read by
// attention); the embedding row is not counted (one row).
double decodeBytesPerToken(const LlamaConfig& config, int64_t context, int weightBytes = 4);

// The checkpoint as a Hugging Face folder (saveHfLlamaDirectory) whose safetensors hold every
// tensor in `dtype` (bfloat16 or float16, as such releases ship), converted tensor by tensor
// from the float32 file through a mapping (never a second whole copy in memory).
void writeHfCheckpointIn(const LlamaCheckpoint& checkpoint, const std::string& dir, c10::ScalarType dtype);

// One-thread streaming read rate in GB/s over a buffer of `bytes` (best of repeats).
double measureStreamBandwidth(int64_t bytes, int repeats);

// float32 GEMM rate of LibTorch's BLAS in GFLOP/s on [m, k] · [k, n] (best of repeats).
double measureGemmRate(int64_t m, int64_t k, int64_t n, int repeats);

} // namespace npw
