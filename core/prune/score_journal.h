#pragma once
// Scoring that an interrupted run takes up again: computeScoresByLayer hands each finished step
// (one layer of one pass) to a journal as a record of named tensors, and takes a step's record
// back from the journal instead of computing it (and instead of reading that layer's weights and
// statistics). The bounded road keeps the records in its work folder (layerwise_prune.h); the
// records hold every value the later steps and the ScoreSet need, exactly (float64 as float64,
// the random method's generator state as text), so a resumed ScoreSet equals an uninterrupted
// one bit for bit.
#include "core/prune/score.h"

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace npw {

// The passes of computeScoresByLayer, in the order they run: the relative λ's pre-pass (one
// numerical solve per site), the scores, and the L* ranking (the numerical rankings lstar and
// lstar-rel). A pass that a method does not make is never asked for.
enum class ScorePass { Solve = 0, Score = 1, Ranking = 2 };
const char* scorePassName(ScorePass pass);  // "solve", "score", "ranking"

using ScoreRecord = std::map<std::string, at::Tensor>;

struct ScoreJournal {
    // The record an earlier run finished for (pass, layer), or nullopt: compute the step.
    std::function<std::optional<ScoreRecord>(ScorePass, size_t layer)> load;
    // The step (pass, layer) is computed; returns once its record is durable.
    std::function<void(ScorePass, size_t layer, const ScoreRecord&)> save;
};

// computeScoresByLayer (score.h) with its steps recorded in and resumed from `journal`.
ScoreSet computeScoresByLayer(const LlamaConfig& config, const at::Tensor& embed, const ScoredLayerSource& layerAt,
                              const PruneSettings& settings, const ProgressFn& progress, const ScoreJournal& journal);

} // namespace npw
