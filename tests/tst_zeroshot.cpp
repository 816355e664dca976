// Zero-shot multiple choice: each task's prompt and choices from a hand-written line in its
// dataset's public layout (expected strings written out from lm-evaluation-harness's task
// code), lm-eval's context/continuation token split, the batched and padded scorer against a
// brute-force one (one unpadded forward per scored token), left truncation at the context
// length, acc / acc_norm / standard errors on hand-made scores, the demo task, and errors.
#include "core/eval/zeroshot.h"
#include "core/models/runtime.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>

#include "error_of.h"

#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

using namespace npw;
using npw::test::errorOf;

namespace {

const LanguageModel& demoModel() {
    static const LanguageModel lm = openLanguageModel("demo:lm", chooseRuntime("cpu"));
    return lm;
}

// Σ log p(continuation token | everything before it), each prefix run alone, unpadded.
double bruteForceLogProb(const LlamaModel& model, std::vector<int32_t> whole, size_t continuationTokens) {
    const int64_t context = model.config().max_position_embeddings;
    if (int64_t(whole.size()) > context + 1) whole.erase(whole.begin(), whole.end() - (context + 1));
    continuationTokens = std::min(continuationTokens, whole.size() - 1);
    double sum = 0;
    for (size_t i = whole.size() - continuationTokens; i < whole.size(); ++i) {
        std::vector<int64_t> prefix(whole.begin(), whole.begin() + int64_t(i));
        at::Tensor ids = at::tensor(prefix, at::kLong).unsqueeze(0);
        at::Tensor logits = model.logits(ids).select(1, -1).squeeze(0).to(at::kDouble);
        sum += at::log_softmax(logits, -1)[whole[i]].item<double>();
    }
    return sum;
}

} // namespace

class TestZeroShot : public QObject {
    Q_OBJECT
private slots:
    void promptsFollowLmEvalPerTask() {
        // BoolQ (Hugging Face super_glue layout: label) and Google's release (answer: bool).
        MultipleChoiceItem b = parseZeroShotItem("boolq", R"({"passage":"Sky is blue.","question":"is the sky blue","label":1})");
        QCOMPARE(QString::fromStdString(b.context(0)), QString("Sky is blue.\nQuestion: is the sky blue?\nAnswer:"));
        QCOMPARE(QString::fromStdString(b.continuation(0)), QString(" no"));
        QCOMPARE(QString::fromStdString(b.continuation(1)), QString(" yes"));
        QCOMPARE(b.gold, 1);
        QCOMPARE(parseZeroShotItem("boolq", R"({"passage":"p","question":"q","answer":false,"title":"t"})").gold, 0);

        MultipleChoiceItem p = parseZeroShotItem("piqa", R"({"goal":"Open a jar","sol1":"Twist the lid.","sol2":"Eat the lid.","label":0})");
        QCOMPARE(QString::fromStdString(p.context(1)), QString("Question: Open a jar\nAnswer:"));
        QCOMPARE(QString::fromStdString(p.continuation(1)), QString(" Eat the lid."));
        QCOMPARE(QString::fromStdString(p.choices[0]), QString("Twist the lid."));

        // HellaSwag: ctx_b capitalised (Python's capitalize lowers the rest), tags removed,
        // " [title]" → ". ", double spaces collapsed once, endings preprocessed too.
        MultipleChoiceItem h = parseZeroShotItem(
            "hellaswag",
            R"({"activity_label":"Baking cookies","ctx_a":"A woman [header] mixes flour.","ctx_b":"she THEN adds eggs","endings":[" Stirs it [title] Done ","bakes  it","eats it","leaves"],"label":"3"})");
        QCOMPARE(QString::fromStdString(h.context(0)), QString("Baking cookies: A woman mixes flour. She then adds eggs"));
        QCOMPARE(QString::fromStdString(h.choices[0]), QString("Stirs it. Done"));
        QCOMPARE(QString::fromStdString(h.choices[1]), QString("bakes it"));
        QCOMPARE(QString::fromStdString(h.continuation(3)), QString(" leaves"));
        QCOMPARE(h.gold, 3);

        // WinoGrande: partial scoring — the option fills the blank, the rest is shared.
        MultipleChoiceItem w = parseZeroShotItem(
            "winogrande", R"({"sentence":"The trophy did not fit in the case because the _ was too big.","option1":"trophy","option2":"case","answer":"1"})");
        QCOMPARE(w.contexts.size(), size_t(2));
        QCOMPARE(QString::fromStdString(w.context(0)), QString("The trophy did not fit in the case because the trophy"));
        QCOMPARE(QString::fromStdString(w.context(1)), QString("The trophy did not fit in the case because the case"));
        QCOMPARE(QString::fromStdString(w.continuation(0)), QString(" was too big."));
        QCOMPARE(QString::fromStdString(w.continuation(1)), QString(" was too big."));
        QCOMPARE(w.gold, 0);

        // ARC in AI2's release layout and in Hugging Face's; OpenBookQA: the stem alone.
        MultipleChoiceItem a = parseZeroShotItem(
            "arc", R"({"id":"x","question":{"stem":"What melts ice?","choices":[{"text":"heat","label":"A"},{"text":"cold","label":"B"}]},"answerKey":"A"})");
        QCOMPARE(QString::fromStdString(a.context(0)), QString("Question: What melts ice?\nAnswer:"));
        QCOMPARE(QString::fromStdString(a.continuation(1)), QString(" cold"));
        QCOMPARE(a.gold, 0);
        MultipleChoiceItem a2 = parseZeroShotItem(
            "arc", R"({"id":"x","question":"Q?","choices":{"text":["one","two","three"],"label":["1","2","3"]},"answerKey":"3"})");
        QCOMPARE(a2.gold, 2);
        MultipleChoiceItem o = parseZeroShotItem(
            "openbookqa", R"({"id":"7","question_stem":"The sun is","choices":{"text":["hot","cold"],"label":["A","B"]},"answerKey":"A"})");
        QCOMPARE(QString::fromStdString(o.context(0)), QString("The sun is"));
        QCOMPARE(QString::fromStdString(o.continuation(0)), QString(" hot"));
    }

    void encodePairMovesTrailingSpaceAndSplitsTheWhole() {
        const Tokenizer& tok = *demoModel().tokenizer;
        for (const auto& [context, continuation] : std::vector<std::pair<std::string, std::string>>{
                 {"Question: who\nAnswer:", " Moses"}, {"And he said ", "unto them"}, {"In the beginning", " God created"}}) {
            const EncodedPair pair = encodeContinuationPair(tok, context, continuation);
            std::string ctx = context, cont = continuation;
            while (!ctx.empty() && ctx.back() == ' ') {
                cont.insert(cont.begin(), ' ');
                ctx.pop_back();
            }
            std::vector<int32_t> joined = pair.context;
            joined.insert(joined.end(), pair.continuation.begin(), pair.continuation.end());
            QVERIFY(joined == tok.encode(ctx + cont, false));
            QVERIFY(pair.context == tok.encode(ctx, false));
            QVERIFY(!pair.continuation.empty());
        }
        // An empty context: BOS stands for it.
        const EncodedPair empty = encodeContinuationPair(tok, "", "Jesus wept.");
        QCOMPARE(empty.context.size(), size_t(1));
        QCOMPARE(empty.context[0], tok.bosId());
    }

    void batchedScoresEqualBruteForce() {
        const LanguageModel& lm = demoModel();
        std::vector<MultipleChoiceItem> items = {
            parseZeroShotItem("mc", R"({"context":"And God said, Let there be","choices":["light: and there was light.","a king over Israel.","bread"],"gold":0})"),
            parseZeroShotItem("winogrande", R"({"sentence":"Moses spoke to Aaron because _ had the word.","option1":"Moses","option2":"Aaron","answer":"1"})"),
            parseZeroShotItem("piqa", R"({"goal":"Make bread","sol1":"Bake the dough.","sol2":"Freeze the water.","label":0})")};
        // A context longer than the model's 512 positions: scored on the last 513 tokens.
        std::string longContext;
        for (int i = 0; i < 120; ++i) longContext += "and the LORD spake unto Moses, saying, ";
        items.push_back(parseZeroShotItem("mc", "{\"context\":\"" + longContext + "Speak\",\"choices\":[\"unto the children\",\"of Egypt and all\"],\"gold\":0}"));
        ZeroShotOptions options;
        options.batchRows = 3;  // batches mix items and lengths: padding must not leak
        const auto scores = scoreChoices(lm, items, options);
        QCOMPARE(scores.size(), items.size());
        double worst = 0;
        for (size_t i = 0; i < items.size(); ++i)
            for (size_t c = 0; c < items[i].choiceCount(); ++c) {
                const EncodedPair pair = encodeContinuationPair(*lm.tokenizer, items[i].context(c), items[i].continuation(c));
                std::vector<int32_t> whole = pair.context;
                whole.insert(whole.end(), pair.continuation.begin(), pair.continuation.end());
                if (i == 3) QVERIFY(whole.size() > 513);
                const double reference = bruteForceLogProb(*lm.model, whole, pair.continuation.size());
                QVERIFY(reference < 0);
                worst = std::max(worst, std::abs(scores[i][c] - reference) / std::max(1.0, std::abs(reference)));
            }
        // float32 batched matmuls vs one row at a time: agreement to ~1e-6 relative seen.
        QVERIFY2(worst < 1e-4, qPrintable(QString::number(worst)));
    }

    void accuracyAndStandardErrors() {
        ZeroShotTask task;
        task.name = "hand";
        task.kind = "mc";
        // Choices "a" (1 char) and "bbbb" (4 chars): acc picks the higher sum, acc_norm the
        // higher sum per character.
        for (int gold : {0, 1, 1, 0}) task.items.push_back(parseZeroShotItem("mc", "{\"context\":\"x\",\"choices\":[\"a\",\"bbbb\"],\"gold\":" + std::to_string(gold) + "}"));
        const std::vector<std::vector<double>> lp = {{-1.0, -2.0},   // acc 0 ✓, norm: -1 vs -0.5 → 1 ✗
                                                     {-3.0, -8.0},   // acc 0 ✗, norm: -3 vs -2 → 1 ✓
                                                     {-5.0, -4.0},   // acc 1 ✓, norm 1 ✓
                                                     {-2.0, -2.0}};  // tie → first (0) ✓; norm 1 ✗
        const ZeroShotResult r = summariseZeroShot(task, lp);
        QCOMPARE(r.items, int64_t(4));
        QCOMPARE(r.acc, 0.75);
        QCOMPARE(r.accNorm, 0.5);
        // Sample std of {1,1,1,0} is 0.5, of {0,1,1,0} is √(1/3); each over √4.
        QVERIFY(std::abs(r.accStderr - 0.25) < 1e-12);
        QVERIFY(std::abs(r.accNormStderr - std::sqrt(1.0 / 3.0) / 2.0) < 1e-12);
        task.kind = "winogrande";
        task.reportsAccNorm = false;
        QVERIFY(std::isnan(summariseZeroShot(task, lp).accNorm));
    }

    void verseTaskIsSeededAndWellFormed() {
        const std::string text = readTextFile(std::string(NPW_TEST_DATA) + "/../../resources/demo/data/kjv-nt.txt");
        std::string verses;  // each line's words joined by single spaces, as the task joins them
        for (const QString& line : QString::fromStdString(text).split('\n'))
            verses += " " + line.simplified().toStdString() + "\n";
        const auto a = buildVerseEndingTask(text, 50, 3), b = buildVerseEndingTask(text, 50, 3), c = buildVerseEndingTask(text, 50, 4);
        QVERIFY(a == b);
        QVERIFY(a != c);
        std::vector<int> goldCounts(4, 0);
        for (const std::string& line : a) {
            const MultipleChoiceItem item = parseZeroShotItem("mc", line);
            QCOMPARE(item.choiceCount(), size_t(4));
            // The context and the gold ending are one verse of the text.
            QVERIFY(verses.find(" " + item.context(0) + " " + item.choices[size_t(item.gold)] + "\n") != std::string::npos);
            for (size_t i = 0; i < 4; ++i) {
                // Every choice ends a verse and has as many words as the true ending.
                QVERIFY(verses.find(" " + item.choices[i] + "\n") != std::string::npos);
                QCOMPARE(QString::fromStdString(item.choices[i]).count(' '),
                         QString::fromStdString(item.choices[size_t(item.gold)]).count(' '));
                for (size_t j = i + 1; j < 4; ++j) QVERIFY(item.choices[i] != item.choices[j]);
            }
            ++goldCounts[size_t(item.gold)];
        }
        for (int n : goldCounts) QVERIFY(n > 0);  // the gold position varies
    }

    void demoModelBeatsChanceOnTheVerseTask() {
        // A scorer that misaligns positions or tokens lands at chance (0.25); 200 items put the
        // standard error at ~0.03, so 0.31 is chance + 2σ (demo:lm measured: acc_norm ≈ 0.4).
        ZeroShotTask task;
        task.name = "nt-verse-endings";
        task.kind = "mc";
        const std::string text = readTextFile(std::string(NPW_TEST_DATA) + "/../../resources/demo/data/kjv-nt.txt");
        for (const std::string& line : buildVerseEndingTask(text, 200, 1)) task.items.push_back(parseZeroShotItem("mc", line));
        const ZeroShotResult r = evaluateZeroShot(demoModel(), task);
        QVERIFY2(r.accNorm > 0.31, qPrintable(QString("acc_norm %1 (acc %2)").arg(r.accNorm).arg(r.acc)));
    }

    void errorsNameFileLineAndField() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("piqa.jsonl").toStdString();
        writeTextAtomically(path, "{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\",\"label\":0}\n{\"goal\":\"g\",\"sol1\":\"a\",\"label\":1}\n");
        QString m = errorOf([&] { loadZeroShotTask("piqa", path); });
        QVERIFY2(m.contains(QString::fromStdString(path)) && m.contains("line 2") && m.contains("sol2"), qPrintable(m));
        writeTextAtomically(path, "{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\",\"label\":2}\n");
        m = errorOf([&] { loadZeroShotTask("piqa", path); });
        QVERIFY2(m.contains("label") && m.contains("[0, 2)"), qPrintable(m));
        writeTextAtomically(path, "\n\n");
        QVERIFY(errorOf([&] { loadZeroShotTask("piqa", path); }).contains("no items"));
        QVERIFY(errorOf([&] { loadZeroShotTask("sciq", path); }).contains("unknown zero-shot task 'sciq'"));
        QVERIFY(errorOf([&] { loadZeroShotTasks("piqa"); }).contains("NAME:FILE"));
        QVERIFY(errorOf([&] { parseZeroShotItem("winogrande", R"({"sentence":"no blank","option1":"a","option2":"b","answer":"1"})"); })
                    .contains("blank"));
    }

    // The supported tasks have 2 to 5 choices: more than kMaxZeroShotChoices is refused (100,000
    // would take hours), and a choice without text would be scored on the context alone.
    void choicesAreBoundedAndHaveText() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("mc.jsonl").toStdString();
        std::string many = "{\"context\":\"c\",\"gold\":0,\"choices\":[";
        for (int i = 0; i < 100000; ++i) many += std::string(i ? "," : "") + "\"x" + std::to_string(i) + "\"";
        writeTextAtomically(path, "{\"context\":\"c\",\"choices\":[\"a\",\"b\"],\"gold\":0}\n" + many + "]}\n");
        QString m = errorOf([&] { loadZeroShotTask("mc", path); });
        QVERIFY2(m.contains(QString::fromStdString(path)) && m.contains("line 2") && m.contains("100000 choices") &&
                     m.contains("at most 16"),
                 qPrintable(m));
        std::string sixteen = "{\"context\":\"c\",\"gold\":15,\"choices\":[";
        for (int i = 0; i < kMaxZeroShotChoices; ++i) sixteen += std::string(i ? "," : "") + "\"x" + std::to_string(i) + "\"";
        QCOMPARE(parseZeroShotItem("mc", sixteen + "]}").choiceCount(), size_t(kMaxZeroShotChoices));
        QVERIFY(errorOf([&] { parseZeroShotItem("mc", sixteen + ",\"one more\"]}"); }).contains("17 choices"));

        writeTextAtomically(path, "{\"context\":\"c\",\"choices\":[\"a\",\"b\"],\"gold\":0}\n"
                                  "{\"context\":\"c\",\"choices\":[\"a\",\"\"],\"gold\":1}\n");
        m = errorOf([&] { loadZeroShotTask("mc", path); });
        QVERIFY2(m.contains(QString::fromStdString(path)) && m.contains("line 2") && m.contains("choice 1") &&
                     m.contains("the empty string"),
                 qPrintable(m));
        m = errorOf([&] { parseZeroShotItem("piqa", R"({"goal":"g","sol1":"  ","sol2":"b","label":0})"); });
        QVERIFY2(m.contains("choice 0") && m.contains("only whitespace"), qPrintable(m));
        m = errorOf([&] {
            parseZeroShotItem("hellaswag", R"({"activity_label":"A","ctx_a":"x","ctx_b":"y","endings":["e1","","e3","e4"],"label":"0"})");
        });
        QVERIFY2(m.contains("choice 1"), qPrintable(m));
    }
};

QTEST_APPLESS_MAIN(TestZeroShot)
#include "tst_zeroshot.moc"
