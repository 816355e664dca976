#include "core/experiments/dataset_inputs.h"

namespace npw {

EncodeWithBos encoderOf(const LanguageModel& lm) {
    return [&lm](const std::string& text) { return lm.encode(text, /*addBos=*/true); };
}

CalibrationSet datasetCalibrationSet(const CalibrationCorpus& corpus, const LanguageModel& lm, int64_t samples,
                                     int64_t seqlen, uint64_t seed) {
    if (!corpus.documents.empty())
        return drawCalibrationSetFromDocuments(corpus.documents, encoderOf(lm), samples, seqlen, seed, corpus.source);
    return drawCalibrationSet(corpus.stream, samples, seqlen, seed, corpus.source);
}

CalibrationSet datasetCalibrationSet(const TextDatasetRef& ref, const LanguageModel& lm, int64_t samples, int64_t seqlen,
                                     uint64_t seed) {
    return datasetCalibrationSet(calibrationCorpus(readTextDataset(ref, TextDatasetUse::Calibration), encoderOf(lm)), lm,
                                 samples, seqlen, seed);
}

void setSweepCalibration(SweepSpec& spec, const TextDatasetRef& ref, const LanguageModel& lm) {
    CalibrationCorpus corpus = calibrationCorpus(readTextDataset(ref, TextDatasetUse::Calibration), encoderOf(lm));
    spec.calibSource = corpus.source;
    spec.calibStream = std::move(corpus.stream);
    spec.calibDocuments = std::move(corpus.documents);
    spec.calibSequences.clear();
}

SweepEvalSet datasetEvalSet(const TextDatasetRef& ref, const LanguageModel& lm, int64_t evalSeqlen) {
    const TextDataset data = readTextDataset(ref, TextDatasetUse::Evaluation);
    SweepEvalSet set;
    set.name = data.ref.label();
    set.isText = true;
    set.ids = evaluationCorpus(data, encoderOf(lm), evalSeqlen).ids;
    return set;
}

} // namespace npw
