#pragma once
// The papers' evaluation and calibration texts (issue 14): WikiText-2, PTB and C4 read from the
// files researchers have locally and prepared exactly as GPTQ's datautils.py (and SparseGPT,
// FLAP, LLM-Pruner, SliceGPT, which copy it) prepare them, so that a perplexity from npw can be
// put beside a published one.
//
// A data set is named NAME:PATH (`wikitext2:wiki.test.raw`) or NAME-SPLIT:PATH
// (`wikitext2-test:my-rows.jsonl`). The split decides nothing about the preparation, the use
// does (evaluation or calibration); the split is checked against the use, so that calibrating
// on a test file, or scoring a train file, is said rather than done. Without -SPLIT the split
// comes from the file name (train, test, valid/validation/val/dev among its words); a name
// that says none or several is refused with the spelling that decides it.
//
// What the reference code does, and what npw does the same way:
//   rows        WikiText-2: Hugging Face's builder reads the raw file as text (universal
//               newlines: CRLF and CR read as LF) line by line; a row is the line with its
//               "\n", and a line that is only whitespace (Python's str.strip) becomes "".
//               PTB: each line stripped (Python's str.strip). C4: the "text" of each JSON line.
//               Rows as JSON lines (Hugging Face's exports): the "text" field (PTB: "sentence").
//   evaluation  wikitext2: rows joined with "\n\n"; ptb (GPTQ's get_ptb_new, SparseGPT): the
//               test sentences joined with " "; ptb-flap (FLAP, GPTQ's original get_ptb): the
//               validation sentences joined with "\n\n"; c4 (get_c4_new, SparseGPT, FLAP): the
//               first 1100 validation documents joined with " ", tokenized, cut to 256·seqlen
//               tokens. Tokenized once, BOS once at the start.
//   calibration wikitext2, ptb, ptb-flap: train rows joined with " " (SparseGPT, FLAP; GPTQ's
//               own get_wikitext2 joins with "\n\n"), tokenized once with BOS, windows at seeded
//               offsets (core/prune/calibration.h). c4: a seeded document of at least seqlen
//               tokens (each tokenized alone, with BOS), then a seeded window inside it.
// npw's random generator is not Python's: the windows differ from GPTQ's for the same seed.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace npw {

enum class TextDatasetKind { WikiText2, Ptb, PtbFlap, C4 };
enum class DatasetSplit { Unknown, Train, Validation, Test };
enum class TextDatasetUse { Evaluation, Calibration };

const char* textDatasetKindName(TextDatasetKind kind);  // "wikitext2", "ptb", "ptb-flap", "c4"
const char* datasetSplitName(DatasetSplit split);       // "train", "validation", "test", "unknown"
// "wikitext2, ptb, ptb-flap or c4 (NAME:FILE or NAME-train|test|validation:FILE)", for help texts.
std::string textDatasetSyntax();
std::string textDatasetNames();  // "wikitext2, ptb, ptb-flap or c4"

struct TextDatasetRef {
    TextDatasetKind kind = TextDatasetKind::WikiText2;
    DatasetSplit split = DatasetSplit::Unknown;  // as stated (NAME-SPLIT:); Unknown: from the file name
    std::string path;

    std::string label() const;  // "wikitext2-test": the kind and the resolved split
};

// "wikitext2:PATH", "ptb-flap-test:PATH", "c4-validation:PATH", …; nullopt when the text before
// the first ':' is not a data-set name (so "text:FILE", "ids:FILE" and plain paths stay what
// they were). Throws npw::Error for a data-set name with an unknown split or an empty path.
std::optional<TextDatasetRef> parseTextDatasetRef(const std::string& value);

// The split a file name states (its words, case-insensitive): Unknown when none or several.
DatasetSplit splitFromFileName(const std::string& path);

struct TextDataset {
    TextDatasetRef ref;             // split resolved
    std::vector<std::string> rows;  // see the top of this file
    bool jsonLines = false;         // read as JSON lines (false: the release's raw text)
    uint64_t fileBytes = 0;         // after gzip: the bytes read (C4's evaluation stops after its documents)
};

// What a data-set file may inflate to (and its rows hold, counting each row's bookkeeping): a
// file past it is refused as soon as the bound is crossed, never read whole. WikiText-2's and
// PTB's files are 11 MB at most; C4's first train shard, the largest file the papers read, is
// ~0.8 GB of JSON.
constexpr uint64_t kMaxTextDatasetBytes = uint64_t(256) << 20;
constexpr uint64_t kMaxC4DatasetBytes = uint64_t(1) << 30;
// A gzip'd data set is text: it inflates 3- to 5-fold. One that has inflated more than
// kMaxGzipRatio-fold after kGzipRatioCheckBytes is a bomb, refused there.
constexpr uint64_t kMaxGzipRatio = 100;
constexpr uint64_t kGzipRatioCheckBytes = uint64_t(16) << 20;

// A folder stands for the release's file in it for `use` (or the stated split): wikitext2
// wiki.test.raw / wiki.train.raw (wiki.valid.raw); ptb ptb.test.txt, ptb-flap ptb.valid.txt,
// calibration ptb.train.txt; c4 c4-validation.00000-of-00008.json.gz / c4-train.00000-of-01024.json.gz.
// Reads the file in chunks (gzip detected from its magic; zlib), line by line, and checks that
// its split suits `use` (calibration: train; evaluation: test or validation). C4's evaluation
// reads only its first kC4EvalDocuments documents. npw::Error naming the file, and the row or
// byte offset where one is at fault, for: a file that is missing, not a regular file (a FIFO is
// never opened for a blocking read), empty, binary (a NUL byte: refused at the first one) or not
// UTF-8; a name ending in .gz that is not gzip; a broken gzip stream; a stream that inflates past
// kMaxTextDatasetBytes (C4: kMaxC4DatasetBytes) or more than kMaxGzipRatio-fold; a JSON line that
// is not an object with the expected string field; a split that the name does not tell or that
// does not suit the use.
TextDataset readTextDataset(const TextDatasetRef& ref, TextDatasetUse use);

// The text GPTQ tokenizes for `use` (see the top). C4's calibration is not one text: throws.
// C4's evaluation text is its first 1100 documents joined (the cut to 256·seqlen comes after
// tokenizing: evaluationCorpus).
std::string preparedText(const TextDataset& data, TextDatasetUse use);

// Text → ids with BOS at the start, as the model's tokenizer does for a whole text.
using EncodeWithBos = std::function<std::vector<int32_t>(const std::string&)>;

// C4's evaluation: the first kC4EvalDocuments validation documents, cut to kC4EvalWindows·seqlen tokens.
constexpr int64_t kC4EvalDocuments = 1100;
constexpr int64_t kC4EvalWindows = 256;

struct EvaluationCorpus {
    std::vector<int32_t> ids;  // what is scored: BOS first, tokenized once
    int64_t tokensBeforeCut = 0;  // C4: the joined documents' tokens before the 256·seqlen cut
    int64_t rows = 0;             // rows (sentences, documents) joined
    int64_t textBytes = 0;        // bytes of the joined text
};
EvaluationCorpus evaluationCorpus(const TextDataset& data, const EncodeWithBos& encode, int64_t seqlen);

struct CalibrationCorpus {
    std::vector<int32_t> stream;         // wikitext2, ptb, ptb-flap: the train text tokenized once
    std::vector<std::string> documents;  // c4: the documents, each tokenized (with BOS) when drawn
    std::string source;                  // "c4-train:PATH", for the manifest
};
// Takes the data set by value: C4's documents move into the corpus (a train shard is ~0.8 GB).
CalibrationCorpus calibrationCorpus(TextDataset data, const EncodeWithBos& encode);

} // namespace npw
