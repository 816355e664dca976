#pragma once
// The papers' data sets (core/data/text_datasets.h) where a run takes its text: the calibration
// windows of `npw prune` and the studio, and a sweep's calibration and evaluation sets. One
// place, so that the CLI and the studio read, prepare and draw them the same way.
#include "core/data/text_datasets.h"
#include "core/experiments/sweep.h"
#include "core/prune/calibration.h"

namespace npw {

// The model's tokenizer, BOS first (what GPTQ's tokenizer call does).
EncodeWithBos encoderOf(const LanguageModel& lm);

// Windows drawn from a data set's train split: a stream for wikitext2/ptb/ptb-flap
// (drawCalibrationSet), documents for c4 (drawCalibrationSetFromDocuments).
CalibrationSet datasetCalibrationSet(const CalibrationCorpus& corpus, const LanguageModel& lm, int64_t samples,
                                     int64_t seqlen, uint64_t seed);
// readTextDataset (train split) + calibrationCorpus + the draw above.
CalibrationSet datasetCalibrationSet(const TextDatasetRef& ref, const LanguageModel& lm, int64_t samples, int64_t seqlen,
                                     uint64_t seed);

// Fills spec.calibStream or spec.calibDocuments and spec.calibSource from the data set.
void setSweepCalibration(SweepSpec& spec, const TextDatasetRef& ref, const LanguageModel& lm);

// A sweep's evaluation set from a data set's held-out split (named by its label, e.g. "c4-validation");
// C4 is cut to 256 windows of `evalSeqlen`.
SweepEvalSet datasetEvalSet(const TextDatasetRef& ref, const LanguageModel& lm, int64_t evalSeqlen);

} // namespace npw
