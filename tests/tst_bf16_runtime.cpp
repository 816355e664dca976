// bfloat16 / float16 weights on the CPU runtime, used as a checkpoint stores them (mapped
// safetensors) without a float32 copy of the model:
//  - the widening itself against LibTorch's own conversions, every one of the 65,536 bit patterns
//    (infinities, NaN and float16 subnormals included), AVX2 and portable versions;
//  - the GEMV kernel on 16-bit weights against a float64 product of the same widened weights
//    (the float32 dot-product bound γ_n·Σ|w||x|, as tst_gemv), and bit for bit against the float32
//    kernel on the widened weights (the same loads, products and order by construction), both
//    versions, one to 33 vectors, odd shapes;
//  - the widened GEMM (prefill) against float64 and against at::linear on the widened weights
//    (twice the bound: both are within it of the exact value), blocks of one row to the whole;
//  - whole models saved as BF16 and F16 safetensors and loaded Mapped: the runtime keeps the
//    file's views (same addresses, 16-bit dtype); logits against the float32 model of the same
//    rounded weights — bit for bit where both take the GEMV path (decode, prompts up to 16
//    tokens), 1e-5 of the largest logit where they take GEMM — and against the original float32
//    model, loosely: bfloat16 keeps 8 bits of mantissa, float16 11, and on demo:lm the logits
//    moved by 0.25–0.32 % resp. 0.02–0.05 % of the largest one (measured), held to 1 % resp.
//    0.15 %; greedy decoding equal to the float32 model's at every step whose top-two margin
//    exceeds twice that step's largest logit difference (then rounding cannot swap them); the
//    KV-cached decode against a full forward; and layer-wise evaluation of the mapped 16-bit
//    file against whole-model evaluation of it.
#include "core/eval/generate.h"
#include "core/eval/layerwise_perplexity.h"
#include "core/eval/perplexity.h"
#include "core/io/safetensors.h"
#include "bf16_checkpoint_copy.h"
#include "core/models/gemv.h"
#include "core/models/gemv_kernel.h"
#include "core/models/llama.h"
#include "core/models/model_loader.h"
#include "core/models/widened_linear.h"
#include "error_of.h"
#include "tiny_llama.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace npw;
namespace fs = std::filesystem;

namespace {

// The dot-product bound of tst_gemv: |fl(Σ wx) − Σ wx| ≤ γ_n Σ|w||x|, γ_n ≈ (n + 2)·2⁻²⁴, the
// widened weights being exact float32 values. `factor` 2: two float32 results, each within it.
void checkAgainstFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& wWidened, const char* what,
                         double factor = 1) {
    const at::Tensor xd = x.to(at::kDouble), wd = wWidened.to(at::kDouble);
    const at::Tensor exact = at::matmul(xd, wd.t());
    const at::Tensor scale = at::matmul(xd.abs(), wd.abs().t());
    const double gamma = factor * double(wWidened.size(1) + 2) * std::ldexp(1.0, -24);
    const at::Tensor excess = (y.to(at::kDouble) - exact).abs() - gamma * scale;
    QVERIFY2(excess.max().item<double>() <= 0, what);
}

GemvWeights formatOf(at::ScalarType t) { return t == at::kBFloat16 ? GemvWeights::BF16 : GemvWeights::F16; }

// y = x · wᵀ by the kernel (`portable` or the dispatched version) for w in any of the formats.
at::Tensor kernel(const at::Tensor& x, const at::Tensor& w, bool portable) {
    at::Tensor y = at::full({x.size(0), w.size(0)}, std::nanf(""));  // every output must be written
    const GemvWeights format = w.scalar_type() == at::kFloat ? GemvWeights::F32 : formatOf(w.scalar_type());
    gemvRows(format, w.data_ptr(), w.size(1), w.size(1), x.data_ptr<float>(), x.size(1), static_cast<int>(x.size(0)),
             y.data_ptr<float>(), w.size(0), 0, w.size(0), portable);
    return y;
}

// Every 16-bit pattern once, as a tensor of `dtype`.
at::Tensor allPatterns(at::ScalarType dtype) {
    at::Tensor bits = at::arange(0, 65536, at::kInt).to(at::kShort);  // wraps to the int16 patterns
    return bits.view(dtype);
}

// Bit patterns of float32 tensors equal (NaN payloads included).
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
    return a.sizes() == b.sizes() && at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

using npw::test::saveAs;

double maxAbs(const at::Tensor& t) { return t.abs().max().item<double>(); }
double relativeGap(const at::Tensor& a, const at::Tensor& b) { return maxAbs(a - b) / maxAbs(b); }

at::Tensor ids(const std::vector<int32_t>& v) { return test::idsTensor({v}); }

} // namespace

class TestBf16Runtime : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string bf16Lm_, f16Lm_, bf16Tiny_;

    std::string modelIn(at::ScalarType dtype) const { return dtype == at::kBFloat16 ? bf16Lm_ : f16Lm_; }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        const LlamaCheckpoint lm = loadLlamaCheckpoint("demo:lm");
        bf16Lm_ = saveAs(lm, dir_.filePath("lm-bf16").toStdString(), at::kBFloat16);
        f16Lm_ = saveAs(lm, dir_.filePath("lm-f16").toStdString(), at::kHalf);
        // GQA, q/k/v biases, an untied classifier, a layer without MLP (tinyLlama's weights).
        LlamaCheckpoint tiny = test::tinyLlama({4, 2, 4}, {2, 1, 1}, {24, 16, 0}, 11);
        for (LlamaLayerWeights& L : tiny.weights.layers) {
            L.wq_bias = 0.1 * at::randn({L.wq.size(0)});
            L.wk_bias = 0.1 * at::randn({L.wk.size(0)});
            L.wv_bias = 0.1 * at::randn({L.wv.size(0)});
        }
        tiny.config.qkv_bias = true;
        bf16Tiny_ = saveAs(tiny, dir_.filePath("tiny-bf16").toStdString(), at::kBFloat16);
    }
    void init() { at::set_num_threads(1); }

    // Widening, every pattern: LibTorch's c10::BFloat16 / c10::Half conversions are the reference.
    void wideningEveryPattern_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("bfloat16") << int(at::kBFloat16);
        QTest::newRow("float16") << int(at::kHalf);
    }
    void wideningEveryPattern() {
        QFETCH(int, dtype);
        const at::Tensor patterns = allPatterns(at::ScalarType(dtype));
        const at::Tensor reference = patterns.to(at::kFloat);
        for (bool portable : {false, true}) {
            at::Tensor out = at::empty({65536});
            widenToF32(formatOf(at::ScalarType(dtype)), patterns.data_ptr(), out.data_ptr<float>(), 65536, portable);
            // NaN payloads may differ between conversions (quieting); every other value exactly.
            const at::Tensor bothNan = at::isnan(out) & at::isnan(reference);
            QCOMPARE(bothNan.sum().item<int64_t>(), at::isnan(reference).sum().item<int64_t>());
            QVERIFY(sameBits(out.masked_fill(bothNan, 0), reference.masked_fill(bothNan, 0)));
        }
        if (dtype == int(at::kHalf)) {
            const auto* p = static_cast<const uint16_t*>(patterns.data_ptr());
            for (int i = 0; i < 65536; i += 997)
                QCOMPARE(std::isnan(halfBitsToFloat(p[i])) ? 0.0f : halfBitsToFloat(p[i]),
                         std::isnan(reference[i].item<float>()) ? 0.0f : reference[i].item<float>());
        }
    }

    // The decode kernel on 16-bit weights: odd shapes (column tails of 1–31, 1–3 leftover rows),
    // one and two vectors (decode) and 3–33 (the tiled kernel of LlamaGen's guided batches).
    void gemvKernel_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("nvec");
        for (int dtype : {int(at::kBFloat16), int(at::kHalf)})
            for (auto [r, c, n] : std::vector<std::tuple<int, int, int>>{{1, 1, 1},     {7, 13, 1},   {5, 17, 2},
                                                                         {33, 31, 1},   {3, 40, 2},   {768, 200, 1},
                                                                         {200, 768, 2}, {9, 8, 3},    {33, 31, 5},
                                                                         {64, 256, 8},  {11, 300, 33}, {130, 64, 16}})
                QTest::newRow(qPrintable(QString("%1 %2x%3, %4 vector(s)")
                                             .arg(dtype == int(at::kBFloat16) ? "bf16" : "f16")
                                             .arg(r).arg(c).arg(n)))
                    << dtype << r << c << n;
    }
    void gemvKernel() {
        QFETCH(int, dtype);
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, nvec);
        at::manual_seed(rows * 131 + cols * 7 + nvec + dtype);
        const at::Tensor w = at::randn({rows, cols}).to(at::ScalarType(dtype));
        const at::Tensor widened = w.to(at::kFloat);  // exact
        const at::Tensor x = at::randn({nvec, cols});
        // Each version this machine has (AVX-512, AVX2, portable: the limit set process-wide).
        for (GemvIsaLimit limit : {GemvIsaLimit::Best, GemvIsaLimit::Avx2, GemvIsaLimit::Portable}) {
            setGemvIsaLimit(limit);
            for (bool portable : {false, true}) {
                const QString version = QString(portable ? "portable" : gemvIsa(GemvWeights::BF16));
                const at::Tensor y = kernel(x, w, portable);
                checkAgainstFloat64(y, x, widened, qPrintable(version + " kernel vs float64"));
                // The float32 kernel of the same version on the widened weights: the same operations.
                QVERIFY2(at::equal(y, kernel(x, widened, portable)),
                         qPrintable(version + ": not the float32 kernel's result on the widened weights"));
            }
        }
        setGemvIsaLimit(GemvIsaLimit::Best);
        // The ATen entry the forward calls: threads split rows, each row one thread's sum.
        if (gemvApplies(x, w)) {
            const at::Tensor y = gemv(x, w);
            QVERIFY(at::equal(y, kernel(x, w, false)));
            at::set_num_threads(2);
            QVERIFY(at::equal(gemv(x, w), y));
        }
    }

    // gemv's refusals: what it does not take is the caller's to route elsewhere, never misread.
    void gemvRefuses() {
        const at::Tensor w = at::randn({6, 5}).to(at::kBFloat16), x = at::randn({1, 5});
        QVERIFY(gemvApplies(x, w) && gemvApplies(x, w.to(at::kHalf)) && gemvApplies(x, w.to(at::kFloat)));
        QVERIFY(!gemvF32Applies(x, w));
        QVERIFY(!gemvApplies(x.to(at::kBFloat16), w));  // activations are float32
        QVERIFY(!gemvApplies(x, w.to(at::kDouble)));
        QVERIFY(!gemvApplies(at::randn({1, 4}), w));
        const QString message = test::errorOf([&] { gemv(x.to(at::kDouble), w); });
        QVERIFY2(message.contains("bfloat16 or float16"), qPrintable(message));
    }

    // Prefill's GEMM: one block of rows widened at a time, against float64 and at::linear on the
    // widened weights; blocks of one row, a ragged last block, and the whole matrix at once.
    void widenedGemm_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<int>("blockRows");
        for (int dtype : {int(at::kBFloat16), int(at::kHalf)})
            for (int block : {1, 7, 64, 0})
                QTest::newRow(qPrintable(QString("%1, blocks of %2").arg(dtype == int(at::kBFloat16) ? "bf16" : "f16")
                                             .arg(block ? QString::number(block) + " rows" : "the default size")))
                    << dtype << block;
    }
    void widenedGemm() {
        QFETCH(int, dtype);
        QFETCH(int, blockRows);
        at::manual_seed(17 + blockRows);
        const int64_t out = 45, in = 77;
        const at::Tensor w = at::randn({out, in}).to(at::ScalarType(dtype));
        const at::Tensor widened = w.to(at::kFloat);
        const at::Tensor x = at::randn({3, 11, in}), bias = at::randn({out});
        const int64_t bytes = blockRows * in * int64_t(sizeof(float));
        const at::Tensor y = linearWidened(x, w, {}, bytes);
        QCOMPARE(y.sizes().vec(), (std::vector<int64_t>{3, 11, out}));
        checkAgainstFloat64(y.reshape({-1, out}), x.reshape({-1, in}), widened, "widened GEMM vs float64");
        const at::Tensor reference = at::linear(x, widened);
        const at::Tensor scale = at::matmul(x.abs().reshape({-1, in}).to(at::kDouble), widened.abs().t().to(at::kDouble));
        const double gamma = 2.0 * double(in + 2) * std::ldexp(1.0, -24);
        QVERIFY(((y - reference).abs().reshape({-1, out}).to(at::kDouble) - gamma * scale).max().item<double>() <= 0);
        // The bias is added after the product: within one more rounding of at::linear's.
        const at::Tensor withBias = linearWidened(x, w, bias, bytes);
        QVERIFY(at::allclose(withBias, at::linear(x, widened, bias), 1e-5, 1e-5));
        // Two threads widen the block's rows in two halves: the same numbers.
        at::set_num_threads(2);
        QVERIFY(at::equal(linearWidened(x, w, {}, bytes), y));
        // No rows: an empty result of the right shape.
        QCOMPARE(linearWidened(at::randn({0, in}), w).sizes().vec(), (std::vector<int64_t>{0, out}));
        QVERIFY(!linearWidenedApplies(x.to(at::kBFloat16), w));
        QVERIFY(!linearWidenedApplies(x, widened));
    }

    // The runtime keeps a mapped 16-bit checkpoint's matrices where they are: the model's tensors
    // are the loader's views (same addresses), 16-bit; vectors are float32; nothing float32 of the
    // matrices' size exists.
    void mappedWeightsAreUsedInPlace_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("bf16") << int(at::kBFloat16);
        QTest::newRow("f16") << int(at::kHalf);
    }
    void mappedWeightsAreUsedInPlace() {
        QFETCH(int, dtype);
        LlamaCheckpoint mapped = loadLlamaCheckpoint(modelIn(at::ScalarType(dtype)), WeightStorage::Mapped);
        QVERIFY(mapped.weightsMapped);
        const void* wq = mapped.weights.layers.at(2).wq.data_ptr();
        const void* embed = mapped.weights.embed.data_ptr();
        const LlamaModel model(std::move(mapped), chooseRuntime("cpu"));
        const LlamaWeights& w = model.deviceWeights();
        QCOMPARE(w.layers.at(2).wq.scalar_type(), at::ScalarType(dtype));
        QCOMPARE(w.layers.at(2).wq.data_ptr(), wq);
        QCOMPARE(w.embed.data_ptr(), embed);
        QVERIFY(w.lm_head.is_same(w.embed));  // demo:lm ties them: still one table
        QCOMPARE(w.layers.at(2).attn_norm.scalar_type(), at::kFloat);
        QCOMPARE(w.final_norm.scalar_type(), at::kFloat);
        QCOMPARE(model.logits(ids({1, 2, 3})).scalar_type(), at::kFloat);
    }

    // `npw bench`'s weight memory is what the model holds, in the dtypes it holds: a 16-bit file's
    // matrices at 2 bytes an element (the norms widened to float32), not parameters × 4.
    void benchCountsTheWeightsAsHeld() {
        const LlamaModel model(loadLlamaCheckpoint(bf16Lm_, WeightStorage::Mapped), chooseRuntime("cpu"));
        const BenchResult b = benchmarkGeneration(model, 4, 2, 1);
        LlamaWeights handles = model.deviceWeights();
        double bf16 = 0, f32 = 0;
        for (const auto& [name, t] : namedTensors(handles))
            (t->scalar_type() == at::kBFloat16 ? bf16 : f32) += double(t->numel()) * (t->scalar_type() == at::kBFloat16 ? 2 : 4);
        const double mib = 1024.0 * 1024.0;
        QCOMPARE(b.weightsMiBByDtype.size(), size_t(2));
        QCOMPARE(b.weightsMiBByDtype.at("BFloat16"), bf16 / mib);
        QCOMPARE(b.weightsMiBByDtype.at("Float"), f32 / mib);
        QCOMPARE(b.weightsMiB, (bf16 + f32) / mib);
        QVERIFY(b.weightsMiB < 0.6 * double(model.parameters()) * 4 / mib);  // about half the float32 size
    }

    // Logits of the mapped 16-bit model against (a) the float32 model of the same rounded weights
    // (the file loaded with Copy: widened on loading) and (b) the original float32 demo:lm.
    void logitsAgainstFloat32_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<double>("loose");
        QTest::newRow("bf16 (loose bound 1 %)") << int(at::kBFloat16) << 0.01;
        QTest::newRow("f16 (loose bound 0.15 %)") << int(at::kHalf) << 0.0015;
    }
    void logitsAgainstFloat32() {
        QFETCH(int, dtype);
        QFETCH(double, loose);
        const std::string path = modelIn(at::ScalarType(dtype));
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaModel half(loadLlamaCheckpoint(path, WeightStorage::Mapped), cpu);
        const LlamaModel rounded(loadLlamaCheckpoint(path), cpu);  // float32 of the rounded weights
        QCOMPARE(rounded.deviceWeights().layers.at(0).wq.scalar_type(), at::kFloat);
        const LlamaModel original(loadLlamaCheckpoint("demo:lm"), cpu);
        const int64_t vocab = half.config().vocab_size;
        for (int64_t length : {1, 2, 9, 16, 80}) {
            const at::Tensor input = ids(test::randomIds(length, vocab, 40 + length));
            const at::Tensor a = half.logits(input), b = rounded.logits(input), c = original.logits(input);
            if (length <= 16)  // GEMV on both sides: the same operations, bit for bit
                QVERIFY2(at::equal(a, b), qPrintable(QString("%1 tokens: not bit-identical").arg(length)));
            else  // GEMM on both sides, blocked differently: float32 rounding
                QVERIFY2(relativeGap(a, b) <= 1e-5, qPrintable(QString::number(relativeGap(a, b))));
            QVERIFY2(relativeGap(a, c) <= loose,
                     qPrintable(QString("%1 tokens: %2 of the largest logit").arg(length).arg(relativeGap(a, c))));
            qInfo("%d tokens: %.2e of the largest logit from the original float32 model", int(length), relativeGap(a, c));
            QVERIFY(relativeGap(a, c) > 0);  // the rounding is there (this is not the float32 model)
        }
        // Two windows at once (evaluation's batches): each window as alone.
        const at::Tensor two = test::idsTensor({test::randomIds(40, vocab, 1), test::randomIds(40, vocab, 2)});
        const at::Tensor both = half.logits(two);
        QVERIFY(relativeGap(both[1], half.logits(two.narrow(0, 1, 1))[0]) <= 1e-5);
    }

    // The tiny GQA model with q/k/v biases and a layer without MLP, bf16: the same checks.
    void tinyModelWithBiases() {
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaModel half(loadLlamaCheckpoint(bf16Tiny_, WeightStorage::Mapped), cpu);
        const LlamaModel rounded(loadLlamaCheckpoint(bf16Tiny_), cpu);
        QCOMPARE(half.deviceWeights().layers.at(0).wq.scalar_type(), at::kBFloat16);
        QCOMPARE(half.deviceWeights().layers.at(0).wq_bias.scalar_type(), at::kFloat);
        for (int64_t length : {1, 5, 40}) {
            const at::Tensor input = ids(test::randomIds(length, half.config().vocab_size, length));
            const at::Tensor a = half.logits(input), b = rounded.logits(input);
            QVERIFY2(length <= 16 ? at::equal(a, b) : relativeGap(a, b) <= 1e-5, qPrintable(QString::number(length)));
        }
    }

    // Greedy decoding (KV cache, one token per step) of the mapped bf16 / f16 model: the same
    // tokens as the float32 model of the rounded weights (bit-identical steps), and as the
    // original float32 model at every step whose float32 top-two margin exceeds twice the step's
    // largest logit difference (a smaller margin may flip: the comparison stops at the first).
    void greedyDecode_data() { logitsAgainstFloat32_data(); }
    void greedyDecode() {
        QFETCH(int, dtype);
        QFETCH(double, loose);
        const std::string path = modelIn(at::ScalarType(dtype));
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaModel half(loadLlamaCheckpoint(path, WeightStorage::Mapped), cpu);
        const LlamaModel rounded(loadLlamaCheckpoint(path), cpu);
        const LlamaModel original(loadLlamaCheckpoint("demo:lm"), cpu);
        const std::vector<int32_t> prompt = test::randomIds(12, half.config().vocab_size, 5);
        const int steps = 32;
        // Each model's greedy run: tokens and each step's logits.
        auto run = [&](const LlamaModel& m, std::vector<at::Tensor>* logits) {
            KvCache cache;
            at::Tensor last = m.logits(ids(prompt), &cache)[0][-1];
            std::vector<int32_t> out;
            for (int i = 0; i < steps; ++i) {
                if (logits) logits->push_back(last);
                out.push_back(static_cast<int32_t>(last.argmax().item<int64_t>()));
                last = m.logits(ids({out.back()}), &cache)[0][-1];
            }
            return out;
        };
        std::vector<at::Tensor> halfLogits, originalLogits;
        const std::vector<int32_t> a = run(half, &halfLogits), b = run(rounded, nullptr), c = run(original, &originalLogits);
        QCOMPARE(a, b);
        // Along the common prefix: each step's logits within the loose bound of the float32
        // model's, and the same token wherever the float32 top-two margin exceeds twice the
        // step's largest difference (then no rounding can swap them); the first step whose
        // margin is smaller is a near tie that may flip, after which the continuations differ.
        int compared = 0;
        for (int i = 0; i < steps; ++i) {
            const at::Tensor& f32 = originalLogits[size_t(i)];
            const double gap = maxAbs(halfLogits[size_t(i)] - f32);
            QVERIFY2(gap <= loose * maxAbs(f32), qPrintable(QString("step %1: %2").arg(i).arg(gap / maxAbs(f32))));
            const at::Tensor top = std::get<0>(f32.topk(2));
            if ((top[0] - top[1]).item<double>() <= 2 * gap) break;
            QCOMPARE(a[size_t(i)], c[size_t(i)]);
            ++compared;
        }
        qInfo("greedy: %d of %d steps equal to the original float32 model's (then a near tie, or the end)", compared, steps);
        QVERIFY(compared >= 8);
    }

    // The KV-cached decode of the bf16 model against a full forward over the same tokens: the
    // cached path runs the GEMV kernel on one row, the full forward GEMM on all of them.
    void cachedDecodeEqualsFullForward() {
        const LlamaModel half(loadLlamaCheckpoint(bf16Lm_, WeightStorage::Mapped), chooseRuntime("cpu"));
        const std::vector<int32_t> sequence = test::randomIds(60, half.config().vocab_size, 8);
        const at::Tensor full = half.logits(ids(sequence))[0];
        KvCache cache;
        std::vector<at::Tensor> steps{half.logits(ids({sequence.begin(), sequence.begin() + 20}), &cache)[0]};
        for (size_t i = 20; i < sequence.size(); ++i) steps.push_back(half.logits(ids({sequence[i]}), &cache)[0]);
        const at::Tensor cached = at::cat(steps, 0);
        QVERIFY2(relativeGap(cached, full) <= 1e-5, qPrintable(QString::number(relativeGap(cached, full))));
    }

    // Layer-wise evaluation of the mapped bf16 file (16-bit blocks, widened as the GEMMs read
    // them) against whole-model evaluation of it: the same windows, the same perplexity.
    void layerwiseEvaluation() {
        const Runtime cpu = chooseRuntime("cpu");
        const LlamaCheckpoint mapped = loadLlamaCheckpoint(bf16Lm_, WeightStorage::Mapped);
        const LlamaModel whole(loadLlamaCheckpoint(bf16Lm_, WeightStorage::Mapped), cpu);
        const std::vector<int32_t> tokens = test::randomIds(5 * 48 + 3, mapped.config.vocab_size, 9);
        PerplexityOptions options;
        options.seqlen = 48;
        options.batchWindows = 2;
        const PerplexityResult a = evaluatePerplexityLayerwise(mapped, cpu, tokens, options);
        const PerplexityResult b = evaluatePerplexity(whole, tokens, options);
        QVERIFY2(std::abs(a.ppl / b.ppl - 1) <= 1e-6,
                 qPrintable(QString("%1 vs %2").arg(a.ppl).arg(b.ppl)));
    }
};

QTEST_GUILESS_MAIN(TestBf16Runtime)
#include "tst_bf16_runtime.moc"
