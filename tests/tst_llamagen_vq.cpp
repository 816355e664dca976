// LlamaGen's VQ tokenizer against an independent reference: decoded pixels for given codes and
// codes of given images, from a checkpoint in LlamaGen's layout ({"model": state dict (F16),
// "optimizer", "discriminator", "steps", "args"}, GroupNorm 32) and from an npw directory
// (GroupNorm 4, three levels: downsampling 4 like the demo). Expectations: tests/fixtures/
// make_llamagen_fixtures.py (plain PyTorch, float64).
#include "core/io/safetensors.h"
#include "core/models/vq_model.h"

#include "core/util/error.h"

#include <ATen/ATen.h>
#include "llamagen_fixture.h"
#include <ATen/Parallel.h>
#include "error_of.h"
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <string>

using namespace npw;
using npw::test::errorOf;

namespace {

// Pixels: max|actual − expected| / max|expected|; float32 convolutions measure 5e-7…1e-6
// here (printed by the test); a wrong upsampling, padding side, GroupNorm eps or a missing L2
// normalisation of the codebook all give errors above 1e-2.
constexpr double kPixelTolerance = 1e-5;

std::string dataFile(const std::string& name) { return npw::test::llamagenDataFile(name); }
using npw::test::normalisedError;

} // namespace

class TestLlamaGenVq : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { at::set_num_threads(2); }

    void matchesReference_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("expected");
        QTest::addColumn<int>("downsample");
        QTest::addColumn<int>("groups");
        QTest::newRow("LlamaGen .pt (F16, GroupNorm 32)") << "vq_ddp.pt" << "vq_expected.safetensors" << 2 << 32;
        QTest::newRow("npw directory (GroupNorm 4)") << "vq_npw" << "vq_npw_expected.safetensors" << 4 << 4;
    }
    void matchesReference() {
        QFETCH(QString, model);
        QFETCH(QString, expected);
        QFETCH(int, downsample);
        QFETCH(int, groups);
        auto vq = VqModel::load(dataFile(model.toStdString()));
        auto want = SafeTensorsFile::open(dataFile(expected.toStdString()));
        QCOMPARE(vq->config().downsample(), int64_t(downsample));
        QCOMPARE(vq->config().normGroups, int64_t(groups));
        QCOMPARE(vq->config().codebookSize, int64_t(16));
        QCOMPARE(vq->config().embedDim, int64_t(4));
        QCOMPARE(vq->config().encoderResBlocks, int64_t(1));
        QCOMPARE(vq->config().decoderResBlocks, int64_t(2));
        const at::Tensor codes = want->load("codes");
        const at::Tensor pixels = vq->decodeRaw(codes);
        QCOMPARE(pixels.sizes(), want->info("pixels").shape);
        const double err = normalisedError(pixels, want->loadFloat("pixels"));
        qInfo("%s: decoded pixels, normalised error %.2e", qPrintable(model), err);
        QVERIFY2(err <= kPixelTolerance, qPrintable(QString::number(err)));
        // decode() is LlamaGen's save_image mapping of [-1, 1] to [0, 1].
        QVERIFY(at::allclose(vq->decode(codes), ((pixels + 1) / 2).clamp(0, 1)));
        const at::Tensor encoded = vq->encode(want->loadFloat("images"));
        QVERIFY2(at::equal(encoded, want->load("encoded")), qPrintable(model));
    }

    void saveReloads() {
        auto vq = VqModel::load(dataFile("vq_npw"));
        QTemporaryDir dir;
        const std::string out = (dir.path() + "/vq").toStdString();
        vq->save(out);
        auto back = VqModel::load(out);
        QCOMPARE(back->config().normGroups, int64_t(4));
        const at::Tensor codes = at::randint(0, 16, {1, 4, 4}, at::kLong);
        QVERIFY(at::equal(vq->decodeRaw(codes), back->decodeRaw(codes)));
        QVERIFY(!errorOf([&] { back->save(out); }).isEmpty());  // never over its source
    }

    void badInputs() {
        auto vq = VqModel::load(dataFile("vq_npw"));
        QVERIFY(errorOf([&] { vq->decodeRaw(at::full({1, 2, 2}, 16, at::kLong)); }).contains("codebook"));
        QVERIFY(errorOf([&] { vq->decodeRaw(at::zeros({4}, at::kLong)); }).contains("[4]"));
        QVERIFY(errorOf([&] { vq->encode(at::zeros({1, 3, 6, 6})); }).contains("multiple"));
        QVERIFY(errorOf([&] { vq->encode(at::zeros({1, 1, 8, 8})); }).contains("[1, 1, 8, 8]"));
    }

    void badCheckpoints() {
        auto file = SafeTensorsFile::open(dataFile("vq_npw/model.safetensors"));
        auto all = [&] {
            std::map<std::string, at::Tensor> m;
            for (const std::string& n : file->names()) m[n] = file->loadFloat(n);
            return m;
        };
        auto m = all();
        m.erase("decoder.conv_blocks.1.res.1.conv2.bias");
        QString e = errorOf([&] { VqModel::fromTensors(m, "vq.pt", Runtime{}, 4); });
        QVERIFY2(e.contains("vq.pt") && e.contains("decoder.conv_blocks.1.res.1.conv2.bias") && e.contains("missing") &&
                     e.contains("[8]"),
                 qPrintable(e));
        m = all();
        m["decoder.mid.1.q.weight"] = at::zeros({8, 8, 3, 3});
        e = errorOf([&] { VqModel::fromTensors(m, "vq.pt", Runtime{}, 4); });
        QVERIFY2(e.contains("decoder.mid.1.q.weight") && e.contains("[8, 8, 3, 3]") && e.contains("[8, 8, 1, 1]"),
                 qPrintable(e));
        m = all();
        m["decoder.conv_blocks.9.extra.weight"] = at::zeros({1});
        e = errorOf([&] { VqModel::fromTensors(m, "vq.pt", Runtime{}, 4); });
        QVERIFY2(e.contains("unexpected") && e.contains("decoder.conv_blocks.9.extra.weight"), qPrintable(e));
        // LlamaGen's GroupNorm has 32 groups: 4- and 8-channel layers do not divide.
        e = errorOf([&] { VqModel::fromTensors(all(), "vq.pt", Runtime{}, 32); });
        QVERIFY2(e.contains("32") && e.contains("GroupNorm"), qPrintable(e));
        m = all();
        m.erase("quantize.embedding.weight");
        QVERIFY(errorOf([&] { VqModel::fromTensors(m, "vq.pt"); }).contains("quantize.embedding.weight"));
        // A GPT checkpoint is not a VQ model.
        e = errorOf([&] { VqModel::load(dataFile("gpt_fsdp.pt")); });
        QVERIFY2(e.contains("gpt_fsdp.pt") && e.contains("quantize.embedding.weight"), qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestLlamaGenVq)
#include "tst_llamagen_vq.moc"
