// WikiText-2, PTB and C4 as GPTQ's datautils.py prepares them (core/data/text_datasets.h,
// issue 14), against an independent Python implementation of that preparation:
// tests/fixtures/make_text_dataset_fixtures.py wrote small files in every form researchers have
// (the release's raw text, CRLF, Hugging Face rows as JSON lines, gzip'd C4 shards) and, per
// file and use, the joined text (compared byte for byte) and the ids python3-sentencepiece gives
// for it with tests/data/sentencepiece/llama_bpe.model (compared id for id with npw's reader of
// that tokenizer.model). Files in a wrong form must end in an npw::Error that names the file
// and what was expected.
#include "core/data/text_datasets.h"
#include "core/experiments/dataset_inputs.h"
#include "core/prune/calibration.h"
#include "core/text/tokenizer.h"
#include "error_of.h"

#include <nlohmann/json.hpp>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <zlib.h>

using namespace npw;
using Json = nlohmann::json;

namespace {

const std::string dataDir = NPW_TEST_DATA "/text_datasets/";

Json readExpected() {
    std::ifstream in(dataDir + "expected.json");
    std::stringstream text;
    text << in.rdbuf();
    return Json::parse(text.str());
}

// "wikitext2:wiki.test.raw" → the same with the path inside tests/data/text_datasets.
TextDatasetRef refOf(const std::string& spec) {
    std::optional<TextDatasetRef> ref = parseTextDatasetRef(spec);
    if (!ref) throw std::runtime_error("not a data set: " + spec);
    ref->path = dataDir + ref->path;
    return *ref;
}

void writeTextFile(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

TextDatasetUse useOf(const std::string& use) {
    return use == "calibration" ? TextDatasetUse::Calibration : TextDatasetUse::Evaluation;
}

// Is `window` a contiguous run of one of `documents` that has at least `minLength` tokens?
bool insideOneOf(const std::vector<int32_t>& window, const std::vector<std::vector<int32_t>>& documents, size_t minLength) {
    for (const auto& d : documents)
        if (d.size() >= minLength && std::search(d.begin(), d.end(), window.begin(), window.end()) != d.end()) return true;
    return false;
}

} // namespace

class TestTextDatasets : public QObject {
    Q_OBJECT

    Json expected_;
    LanguageModel lm_;  // the tokenizer only: these tests never run a model

private slots:
    void initTestCase() {
        expected_ = readExpected();
        lm_.name = "llama_bpe.model";
        lm_.tokenizer = Tokenizer::fromAnyFile(NPW_TEST_DATA "/sentencepiece/llama_bpe.model");
        QVERIFY(expected_["cases"].size() >= 12);
    }

    void namesAndSplits() {
        auto ref = parseTextDatasetRef("wikitext2:a/wiki.test.raw");
        QVERIFY(ref && ref->kind == TextDatasetKind::WikiText2 && ref->split == DatasetSplit::Unknown);
        QCOMPARE(ref->path, std::string("a/wiki.test.raw"));
        ref = parseTextDatasetRef("ptb-flap-test:x:y.txt");  // the path may hold ':'
        QVERIFY(ref && ref->kind == TextDatasetKind::PtbFlap && ref->split == DatasetSplit::Test);
        QCOMPARE(ref->path, std::string("x:y.txt"));
        ref = parseTextDatasetRef("PTB-Train:p");
        QVERIFY(ref && ref->kind == TextDatasetKind::Ptb && ref->split == DatasetSplit::Train);
        ref = parseTextDatasetRef("c4-validation:v.json.gz");
        QVERIFY(ref && ref->kind == TextDatasetKind::C4 && ref->split == DatasetSplit::Validation);
        QCOMPARE(ref->label(), std::string("c4-validation"));
        for (const char* notADataset : {"text:x.txt", "ids:x", "x.txt", "ptbx:y", "c44:y", "/abs/wikitext2.txt"})
            QVERIFY2(!parseTextDatasetRef(notADataset), notADataset);
        QVERIFY(test::errorOf([] { parseTextDatasetRef("ptb-tset:x"); }).contains("'tset' is not a split"));
        QVERIFY(test::errorOf([] { parseTextDatasetRef("wikitext2:"); }).contains("names no file"));

        QCOMPARE(splitFromFileName("/d/wiki.test.raw"), DatasetSplit::Test);
        QCOMPARE(splitFromFileName("wiki.train.raw"), DatasetSplit::Train);
        QCOMPARE(splitFromFileName("ptb.valid.txt"), DatasetSplit::Validation);
        QCOMPARE(splitFromFileName("c4-validation.00000-of-00008.json.gz"), DatasetSplit::Validation);
        QCOMPARE(splitFromFileName("c4-train.00000-of-01024.json.gz"), DatasetSplit::Train);
        QCOMPARE(splitFromFileName("/train/rows.jsonl"), DatasetSplit::Unknown);  // the file's name only
        QCOMPARE(splitFromFileName("latest-contest.txt"), DatasetSplit::Unknown);  // words, not substrings
        QCOMPARE(splitFromFileName("train-test.jsonl"), DatasetSplit::Unknown);    // two splits: ambiguous
    }

    // The joined text byte for byte, the row count and the ids, for every file form and use.
    void preparedAsTheReference_data() {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < expected_["cases"].size(); ++i) {
            const Json& c = expected_["cases"][i];
            QTest::newRow((c["spec"].get<std::string>() + " " + c["use"].get<std::string>()).c_str()) << int(i);
        }
    }
    void preparedAsTheReference() {
        QFETCH(int, index);
        const Json& c = expected_["cases"][size_t(index)];
        const TextDatasetUse use = useOf(c["use"]);
        const TextDataset data = readTextDataset(refOf(c["spec"]), use);
        const EncodeWithBos encode = encoderOf(lm_);
        if (use == TextDatasetUse::Evaluation) {
            const std::string text = preparedText(data, use);
            QCOMPARE(text, c["text"].get<std::string>());
            const int64_t seqlen = c.value("seqlen", 2048);
            const EvaluationCorpus corpus = evaluationCorpus(data, encode, seqlen);
            QCOMPARE(corpus.rows, c["rows"].get<int64_t>());
            QCOMPARE(corpus.textBytes, int64_t(text.size()));
            QCOMPARE(corpus.tokensBeforeCut, c["tokens_before_cut"].get<int64_t>());
            QCOMPARE(corpus.ids, c["ids"].get<std::vector<int32_t>>());
        } else if (data.ref.kind == TextDatasetKind::C4) {
            QCOMPARE(data.rows, c["documents"].get<std::vector<std::string>>());
            QVERIFY(test::errorOf([&] { preparedText(data, use); }).contains("documents one by one"));
        } else {
            QCOMPARE(int64_t(data.rows.size()), c["rows"].get<int64_t>());
            QCOMPARE(preparedText(data, use), c["text"].get<std::string>());
            QCOMPARE(calibrationCorpus(data, encode).stream, c["ids"].get<std::vector<int32_t>>());
        }
    }

    // C4 evaluation: 256 windows of seqlen when the documents are longer, all of them otherwise.
    void c4EvaluationCut() {
        const TextDataset data = readTextDataset(refOf("c4:c4/c4-validation.00000-of-00008.json.gz"),
                                                 TextDatasetUse::Evaluation);
        const EvaluationCorpus cut = evaluationCorpus(data, encoderOf(lm_), 8);
        QCOMPARE(int64_t(cut.ids.size()), 256 * 8);
        const EvaluationCorpus whole = evaluationCorpus(data, encoderOf(lm_), 4096);
        QCOMPARE(int64_t(whole.ids.size()), whole.tokensBeforeCut);
        QVERIFY(whole.tokensBeforeCut < 256 * 4096);
        QVERIFY(std::equal(cut.ids.begin(), cut.ids.end(), whole.ids.begin()));
        // A sweep's evaluation set is the same cut corpus, named by its label.
        const SweepEvalSet set = datasetEvalSet(refOf("c4:c4/c4-validation.00000-of-00008.json.gz"), lm_, 8);
        QCOMPARE(set.name, std::string("c4-validation"));
        QCOMPARE(set.ids, cut.ids);
    }

    // WikiText-2 calibration: windows of the train stream the reference tokenized.
    void streamCalibration() {
        const Json* reference = nullptr;
        for (const Json& c : expected_["cases"])
            if (c["spec"] == "wikitext2:wikitext-2-raw/wiki.train.raw") reference = &c;
        QVERIFY(reference);
        const std::vector<std::vector<int32_t>> stream = {(*reference)["ids"].get<std::vector<int32_t>>()};
        const CalibrationSet set = datasetCalibrationSet(refOf("wikitext2:wikitext-2-raw/wiki.train.raw"), lm_, 16, 64, 5);
        QCOMPARE(int64_t(set.windows.size()), int64_t(16));
        QCOMPARE(set.streamTokens, int64_t(stream[0].size()));
        QVERIFY(set.source.rfind("wikitext2-train:", 0) == 0);
        for (const auto& w : set.windows) QVERIFY(w.size() == 64 && insideOneOf(w, stream, 64));
        // The same draw as a plain stream of the same ids: the window rule is drawCalibrationSet's.
        QCOMPARE(set.windows, drawCalibrationSet(stream[0], 16, 64, 5).windows);
    }

    // C4 calibration: each window lies inside one train document of at least seqlen tokens
    // (each tokenized alone, BOS first, by the reference), seeded and reproducible.
    void documentCalibration() {
        const Json* reference = nullptr;
        for (const Json& c : expected_["cases"])
            if (c["spec"] == "c4:c4/c4-train.00000-of-01024.json.gz") reference = &c;
        QVERIFY(reference);
        const auto documents = (*reference)["document_ids"].get<std::vector<std::vector<int32_t>>>();
        const int64_t seqlen = 64;
        const size_t longOnes = size_t(std::count_if(documents.begin(), documents.end(),
                                                     [&](const auto& d) { return int64_t(d.size()) >= seqlen; }));
        QVERIFY(longOnes >= 3 && longOnes < documents.size());  // the draw must skip short documents
        const TextDatasetRef ref = refOf("c4:c4/c4-train.00000-of-01024.json.gz");
        const CalibrationSet a = datasetCalibrationSet(ref, lm_, 40, seqlen, 11);
        QCOMPARE(int64_t(a.windows.size()), int64_t(40));
        QVERIFY(a.source.rfind("c4-train:", 0) == 0);
        std::vector<int> hits(documents.size(), 0);
        int64_t atStart = 0;
        for (const auto& w : a.windows) {
            QVERIFY(int64_t(w.size()) == seqlen && insideOneOf(w, documents, size_t(seqlen)));
            for (size_t d = 0; d < documents.size(); ++d)
                if (std::search(documents[d].begin(), documents[d].end(), w.begin(), w.end()) != documents[d].end()) ++hits[d];
            atStart += w.front() == lm_.tokenizer->bosId();
        }
        // Several documents and several offsets are drawn (not always the first window).
        QVERIFY(std::count_if(hits.begin(), hits.end(), [](int h) { return h > 0; }) >= 3);
        QVERIFY(atStart < int64_t(a.windows.size()));
        QCOMPARE(datasetCalibrationSet(ref, lm_, 40, seqlen, 11).windows, a.windows);
        QVERIFY(datasetCalibrationSet(ref, lm_, 40, seqlen, 12).windows != a.windows);
        // No document long enough: an error naming the file, not an endless draw.
        const QString none = test::errorOf(
            [&] { datasetCalibrationSet(refOf("c4:bad/c4-no-long-train.json.gz"), lm_, 4, seqlen, 0); });
        QVERIFY2(none.contains("c4-no-long-train.json.gz") && none.contains("no document of at least 64 tokens"),
                 qPrintable(none));
    }

    void wrongFormsAreNamed_data() {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < expected_["errors"].size(); ++i) {
            const Json& c = expected_["errors"][i];
            QTest::newRow((c["spec"].get<std::string>() + " " + c["use"].get<std::string>()).c_str()) << int(i);
        }
    }
    void wrongFormsAreNamed() {
        QFETCH(int, index);
        const Json& c = expected_["errors"][size_t(index)];
        const QString message = test::errorOf([&] { readTextDataset(refOf(c["spec"]), useOf(c["use"])); });
        QVERIFY2(!message.isEmpty(), "no error");
        for (const std::string& word : c["contains"].get<std::vector<std::string>>())
            QVERIFY2(message.contains(QString::fromStdString(word)), qPrintable(message + "  (missing: " +
                                                                                 QString::fromStdString(word) + ")"));
    }

    // The real LLaMA-2, Mistral and LLaMA-3 tokenizer.json files on the prepared texts (King James
    // Bible passages in each form, the synthetic test files): npw's ids against transformers.js's
    // (tests/fixtures/make_dataset_token_counts.mjs). README's token-count table is this data.
    void realTokenizersAgree() {
        std::ifstream in(dataDir + "real_tokenizer_ids.json");
        std::stringstream text;
        text << in.rdbuf();
        const Json reference = Json::parse(text.str());
        int compared = 0;
        for (const auto& [name, texts] : reference["tokenizers"].items()) {
            const auto tokenizer = Tokenizer::fromFile(NPW_TEST_DATA "/tokenizers/" + name + "/tokenizer.json");
            for (const auto& [spec, ids] : texts.items()) {
                const TextDataset data = readTextDataset(refOf(spec), TextDatasetUse::Evaluation);
                const std::vector<int32_t> got = tokenizer->encode(preparedText(data, TextDatasetUse::Evaluation), false);
                const auto want = ids.get<std::vector<int32_t>>();
                QVERIFY2(got == want, qPrintable(QString::fromStdString(name + " " + spec + ": npw " +
                                                                        std::to_string(got.size()) + " tokens, reference " +
                                                                        std::to_string(want.size()))));
                ++compared;
            }
        }
        QCOMPARE(compared, 15);
    }

    // A folder of the release stands for its file for the use (or the stated split).
    void releaseFolders() {
        auto pathOf = [](const std::string& spec, TextDatasetUse use) {
            return std::filesystem::path(readTextDataset(refOf(spec), use).ref.path).filename().string();
        };
        QCOMPARE(pathOf("wikitext2:wikitext-2-raw", TextDatasetUse::Evaluation), std::string("wiki.test.raw"));
        QCOMPARE(pathOf("wikitext2:wikitext-2-raw/", TextDatasetUse::Calibration), std::string("wiki.train.raw"));
        QCOMPARE(pathOf("wikitext2-validation:wikitext-2-raw", TextDatasetUse::Evaluation), std::string("wiki.valid.raw"));
        QCOMPARE(pathOf("ptb:ptb", TextDatasetUse::Evaluation), std::string("ptb.test.txt"));
        QCOMPARE(pathOf("ptb-flap:ptb", TextDatasetUse::Evaluation), std::string("ptb.valid.txt"));
        QCOMPARE(pathOf("ptb-flap:ptb", TextDatasetUse::Calibration), std::string("ptb.train.txt"));
        QCOMPARE(pathOf("c4:c4", TextDatasetUse::Evaluation), std::string("c4-validation.00000-of-00008.json.gz"));
        QCOMPARE(pathOf("c4:c4", TextDatasetUse::Calibration), std::string("c4-train.00000-of-01024.json.gz"));
        const QString missing = test::errorOf([] { readTextDataset(refOf("c4:ptb"), TextDatasetUse::Evaluation); });
        QVERIFY2(missing.contains("c4-validation.00000-of-00008.json.gz") && missing.contains("does not exist"),
                 qPrintable(missing));
    }

    // Hostile files (a gzip bomb, rows that cost more than their bytes, NULs, a FIFO) end in an
    // error naming the file, early: never read whole, never held whole.
    void gzipBombIsRefusedAfterSixteenMiB() {
        QTemporaryDir dir;
        const std::string line = "{\"text\": \"" + std::string(1000, 'a') + "\"}\n";
        std::string chunk;
        while (chunk.size() < (size_t(1) << 20)) chunk += line;
        std::string member(compressBound(uLong(chunk.size())) + 64, '\0');
        z_stream zs{};
        deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
        zs.next_in = reinterpret_cast<Bytef*>(chunk.data());
        zs.avail_in = uInt(chunk.size());
        zs.next_out = reinterpret_cast<Bytef*>(member.data());
        zs.avail_out = uInt(member.size());
        QCOMPARE(deflate(&zs, Z_FINISH), Z_STREAM_END);
        member.resize(zs.total_out);
        deflateEnd(&zs);
        const std::string path = dir.filePath("c4-train.00000-of-01024.json.gz").toStdString();
        {
            std::ofstream out(path, std::ios::binary);
            for (int i = 0; i < 2048; ++i) out << member;  // 2 GiB inflated, a few MB on disk
        }
        QElapsedTimer timer;
        timer.start();
        const QString m = test::errorOf([&] { readTextDataset(*parseTextDatasetRef("c4:" + path), TextDatasetUse::Calibration); });
        QVERIFY2(m.contains(QString::fromStdString(path)) && m.contains("inflates more than 100-fold"), qPrintable(m));
        QVERIFY2(timer.elapsed() < 20000, qPrintable(QString::number(timer.elapsed()) + " ms"));
        // C4's evaluation needs the first 1100 documents only: the bomb's first megabyte.
        const std::string validation = dir.filePath("c4-validation.00000-of-00008.json.gz").toStdString();
        std::filesystem::rename(path, validation);
        const TextDataset data = readTextDataset(*parseTextDatasetRef("c4:" + validation), TextDatasetUse::Evaluation);
        QCOMPARE(data.rows.size(), size_t(kC4EvalDocuments));
        QVERIFY(data.fileBytes < (uint64_t(4) << 20));
    }

    // C4's evaluation stops after its documents: what follows is never read (nor judged).
    void c4EvaluationReadsOnlyItsDocuments() {
        QTemporaryDir dir;
        std::string text;
        for (int i = 0; i < kC4EvalDocuments; ++i) text += "{\"text\": \"document " + std::to_string(i) + "\"}\n";
        text += "not JSON\n";
        const std::string validation = dir.filePath("c4-validation.json").toStdString();
        writeTextFile(validation, text);
        const TextDataset data = readTextDataset(*parseTextDatasetRef("c4:" + validation), TextDatasetUse::Evaluation);
        QCOMPARE(data.rows.size(), size_t(kC4EvalDocuments));
        QCOMPARE(data.rows.back(), std::string("document 1099"));
        const std::string train = dir.filePath("c4-train.json").toStdString();
        writeTextFile(train, text);
        const QString m = test::errorOf([&] { readTextDataset(*parseTextDatasetRef("c4:" + train), TextDatasetUse::Calibration); });
        QVERIFY2(m.contains("line 1101"), qPrintable(m));
    }

    // 9 MB of empty lines would be 9 million rows of ~32 bytes each: the rows' bookkeeping
    // counts against the bound, so such a file is refused before it takes gigabytes.
    void rowsAreBoundedWithTheirBookkeeping() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("lines.test.raw").toStdString();
        // NOLINTNEXTLINE(bugprone-string-constructor): nine million empty lines, on purpose
        writeTextFile(path, std::string(9000000, '\n'));
        const QString m = test::errorOf([&] { readTextDataset(*parseTextDatasetRef("wikitext2:" + path), TextDatasetUse::Evaluation); });
        QVERIFY2(m.contains(QString::fromStdString(path)) && m.contains("rows already take more than 256 MiB"), qPrintable(m));
    }

    // A sparse 2 GiB file of NULs: refused at its first byte; a FIFO: refused without opening it
    // for a blocking read.
    void nulsAndFifosAreRefusedAtOnce() {
        QTemporaryDir dir;
        const std::string nul = dir.filePath("nul.test.raw").toStdString();
        {
            std::ofstream out(nul, std::ios::binary);
        }
        std::filesystem::resize_file(nul, uintmax_t(2) << 30);
        QElapsedTimer timer;
        timer.start();
        QString m = test::errorOf([&] { readTextDataset(*parseTextDatasetRef("wikitext2:" + nul), TextDatasetUse::Evaluation); });
        QVERIFY2(m.contains(QString::fromStdString(nul)) && m.contains("NUL byte at offset 0"), qPrintable(m));
        QVERIFY(timer.elapsed() < 10000);
        const std::string fifo = dir.filePath("pipe.test.raw").toStdString();
        QVERIFY(mkfifo(fifo.c_str(), 0644) == 0);
        m = test::errorOf([&] { readTextDataset(*parseTextDatasetRef("wikitext2:" + fifo), TextDatasetUse::Evaluation); });
        QVERIFY2(m.contains(QString::fromStdString(fifo)) && m.contains("a FIFO (named pipe), not a regular file"), qPrintable(m));
    }

    // A stated split decides over the file name (a renamed file), for either use.
    void statedSplitWins() {
        const TextDataset data = readTextDataset(refOf("wikitext2-train:wikitext-2-raw/wiki.test.raw"),
                                                 TextDatasetUse::Calibration);
        QCOMPARE(data.ref.split, DatasetSplit::Train);
        QCOMPARE(data.ref.label(), std::string("wikitext2-train"));
    }
};

QTEST_GUILESS_MAIN(TestTextDatasets)
#include "tst_text_datasets.moc"
