#pragma once
// SliceGPT (Ashkboos et al. 2024; its rotate.py, model_adapter and slicing scheduler), on npw's
// LLaMA runtime. Steps:
//  1. Fold every RMSNorm scale into the weights that read its output (q/k/v columns, gate/up
//     columns, the classifier's columns); the norms become scale-free, RMSN(x)·Q = RMSN(x·Q)
//     for any orthogonal Q, so the model may be rotated without changing its function.
//  2. Sequentially over the residual locations (the embedding's output, then after every
//     attention and every MLP), on the model already sliced below: the uncentred covariance
//     H = Σ xxᵀ of the hidden states over every calibration token in float64, damped by 1 % of its
//     mean diagonal as SliceGPT's pca_calc does, Q from eigh(H) with the eigenvectors in
//     descending order of eigenvalue.
//  3. Rotate by Q and keep the leading d directions: the writers of the residual stream
//     (embedding columns, o_proj and down_proj rows) by Qᵀ, its readers (q/k/v, gate/up
//     columns) by Q; a shortcut matrix Q_prevᵀ·Q_next [d, d] on every residual connection.
//     The classifier reads the full width (SliceGPT's default leaves the head unsliced: the last
//     block's output keeps D directions and its shortcut is [d, D]).
//  4. RMSN divides by the original width D after slicing.
// ρ is the fraction of attention + MLP parameters removed, counting the shortcut matrices and,
// for a tied embedding, the classifier matrix untying adds (the growth of embedding + classifier
// parameters, V·d); the slicing fraction is solved for: the smallest d (a multiple of the round
// interval) whose count reaches ρ. The slicing fraction 1 − d/D is the native knob.
// Memory: the hidden states of every calibration window at the current location (tokens · D
// floats, twice while a block runs) plus one D×D float64 covariance.
#include "core/models/sliced_llama.h"
#include "core/prune/baselines.h"

#include <vector>

namespace npw {

// Q [D, D] of SliceGPT's pca_calc for hidden states x [..., D] given as batches: eigenvectors of
// Σxxᵀ + 0.01·mean(diag)·I, columns ordered by descending eigenvalue; eigenvalues into *values.
at::Tensor slicegptBasis(const std::vector<at::Tensor>& batches, at::Tensor* values = nullptr);

// Attention + MLP weights of the model sliced to d (shortcut matrices included), and the growth
// of embedding + classifier (V·d when tied, else 0): what the ratio counts.
int64_t slicedPrunableParameters(const LlamaConfig& config, int64_t d);
int64_t untyingExtraParameters(const LlamaConfig& config, int64_t d);
// The d of SliceGPT for ρ (see the top). When even the narrowest width (one round interval)
// misses ρ, that width, and *reached = false.
int64_t slicegptWidthForRatio(const LlamaConfig& config, double ratio, int64_t roundInterval, bool* reached = nullptr);

// Slices `model` to width d at every residual location (d = D: a rotation only, the same
// function up to rounding). Progress "slicegpt", locations done / locations.
SlicedLlama sliceGpt(const LlamaModel& model, const CalibrationSet& set, int64_t d, const ProgressFn& progress = nullptr);

BaselineRun pruneSliceGpt(const LlamaModel& model, const CalibrationSet& set, const BaselineOptions& options,
                          const ProgressFn& progress = nullptr);

// The sliced model's export directory (sliced_llama.h), atomic like savePrunedModel.
void saveSlicedModel(const SlicedLlama& model, const std::string& dir, const std::string& manifestJson,
                     const std::string& sourceModel);

} // namespace npw
