// Global selection (eq. 7 and FLAP's budget reading) against a brute-force selector that
// builds Ψ and fully sorts it on every call, plus the cost model, the edge cases and a
// benchmark of re-selection on a LLaMA-7B-sized set of scores.
#include "core/models/llama_config.h"
#include "core/prune/select.h"
#include "core/util/error.h"

#include <QElapsedTimer>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

using namespace npw;

namespace {

struct Entry {
    double value;  // what is ranked (α·score for heads in the paper reading)
    double score;  // the raw score
    bool isHead;
    int layer, index;
};

// The rules of selection.h written the slow, literal way.
Mask bruteForceSelect(const std::vector<LayerScores>& scores, double rho, double alpha, AlphaMode mode,
                      const SelectionOptions& options) {
    Mask mask;
    std::vector<Entry> all;
    const std::set<int64_t> locked(options.protectedLayers.begin(), options.protectedLayers.end());
    for (size_t l = 0; l < scores.size(); ++l) {
        mask.keepHeads.emplace_back(scores[l].heads.size(), true);
        mask.keepChannels.emplace_back(scores[l].channels.size(), true);
        if (locked.count(static_cast<int64_t>(l))) continue;
        if (options.scope != SelectionScope::MlpOnly)
            for (size_t i = 0; i < scores[l].heads.size(); ++i)
                all.push_back({mode == AlphaMode::Paper ? alpha * scores[l].heads[i] : scores[l].heads[i],
                               scores[l].heads[i], true, int(l), int(i)});
        if (options.scope != SelectionScope::AttentionOnly)
            for (size_t i = 0; i < scores[l].channels.size(); ++i)
                all.push_back({scores[l].channels[i], scores[l].channels[i], false, int(l), int(i)});
    }
    auto removeIf = [&](auto pred) {
        for (const Entry& e : all)
            if (pred(e)) (e.isHead ? mask.keepHeads : mask.keepChannels)[e.layer][e.index] = false;
    };
    const int64_t n = static_cast<int64_t>(all.size());
    if (mode == AlphaMode::Paper) {
        std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.value < b.value; });
        const int64_t k = std::llround(rho * static_cast<double>(n));
        if (n == 0) return mask;
        if (k >= n) {
            removeIf([](const Entry&) { return true; });
            return mask;
        }
        const double eta = all[k].value;
        removeIf([eta](const Entry& e) { return e.value < eta; });
        return mask;
    }
    // Budget: sort descending (ties in an arbitrary order), keep while the cumulative weight fits.
    std::shuffle(all.begin(), all.end(), std::mt19937(7));
    std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.score > b.score; });
    int64_t heads = 0, channels = 0;
    for (const Entry& e : all) heads += e.isHead, channels += !e.isHead;
    const double budget = (1.0 - rho) * (alpha * double(heads) + double(channels));
    int64_t keptHeads = 0, keptChannels = 0;
    for (const Entry& e : all) {
        keptHeads += e.isHead;
        keptChannels += !e.isHead;
        if (alpha * double(keptHeads) + double(keptChannels) > budget) {
            const double tau = e.score;
            removeIf([tau](const Entry& x) { return x.score <= tau; });
            return mask;
        }
    }
    return mask;
}

std::vector<LayerScores> randomScores(int layers, int heads, int channels, uint64_t seed, int tieLevels = 0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    auto draw = [&] {
        const double x = normal(rng);
        return tieLevels > 0 ? std::round(x * tieLevels) / tieLevels : x;
    };
    std::vector<LayerScores> s(layers);
    for (auto& l : s) {
        for (int i = 0; i < heads; ++i) l.heads.push_back(0.3 + 0.2 * draw());  // a different scale, as z's are
        for (int i = 0; i < channels; ++i) l.channels.push_back(draw());
    }
    return s;
}

std::vector<LayerUnitCost> uniformCosts(int layers, int64_t head, int64_t channel) {
    return std::vector<LayerUnitCost>(layers, LayerUnitCost{head, channel});
}

int64_t countRemoved(const std::vector<std::vector<bool>>& keep) {
    int64_t n = 0;
    for (const auto& l : keep) n += std::count(l.begin(), l.end(), false);
    return n;
}

LlamaConfig gqaConfig() {
    LlamaConfig c;
    c.vocab_size = 100;
    c.hidden_size = 64;
    c.num_layers = 2;
    c.head_dim = 8;
    c.num_heads = {8, 8};
    c.num_kv_heads = {2, 2};  // g = 4
    c.intermediate_size = {96, 80};
    return c;
}

} // namespace

class TestSelection : public QObject {
    Q_OBJECT
private slots:
    void matchesBruteForce_data() {
        QTest::addColumn<int>("tieLevels");
        QTest::addColumn<int>("scope");
        QTest::addColumn<bool>("protect");
        QTest::newRow("distinct, attention+MLP") << 0 << int(SelectionScope::AttentionAndMlp) << false;
        QTest::newRow("distinct, protected first and last") << 0 << int(SelectionScope::AttentionAndMlp) << true;
        QTest::newRow("distinct, attention only") << 0 << int(SelectionScope::AttentionOnly) << false;
        QTest::newRow("distinct, MLP only, protected") << 0 << int(SelectionScope::MlpOnly) << true;
        QTest::newRow("many ties, attention+MLP") << 4 << int(SelectionScope::AttentionAndMlp) << false;
        QTest::newRow("many ties, protected") << 2 << int(SelectionScope::AttentionAndMlp) << true;
    }
    void matchesBruteForce() {
        QFETCH(int, tieLevels);
        QFETCH(int, scope);
        QFETCH(bool, protect);
        const int layers = 5, heads = 6, channels = 40;
        SelectionOptions options;
        options.scope = SelectionScope(scope);
        if (protect) options.protectedLayers = {0, layers - 1};
        const std::vector<double> rhos = {0.0, 0.01, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999999};
        const std::vector<double> alphas = {0.25, 1.0, 2.5, 4.0 * 8 / 3, 16.0, 1000.0};
        int compared = 0;
        for (uint64_t seed = 1; seed <= 4; ++seed) {
            const auto scores = randomScores(layers, heads, channels, seed, tieLevels);
            const auto costs = uniformCosts(layers, 4 * 8 * 32, 3 * 32);
            const SelectionIndex index(scores, costs, options);
            for (double rho : rhos)
                for (double alpha : alphas)
                    for (AlphaMode mode : {AlphaMode::Paper, AlphaMode::Budget}) {
                        const SelectionResult r = index.select(rho, alpha, mode);
                        const Mask expected = bruteForceSelect(scores, rho, alpha, mode, options);
                        const bool same = r.mask.keepHeads == expected.keepHeads && r.mask.keepChannels == expected.keepChannels;
                        if (!same)
                            QFAIL(qPrintable(QString("mask differs: seed %1 ρ %2 α %3 mode %4")
                                                 .arg(seed).arg(rho).arg(alpha).arg(mode == AlphaMode::Paper ? "paper" : "budget")));
                        QCOMPARE(r.removedHeads, countRemoved(r.mask.keepHeads));
                        QCOMPARE(r.removedChannels, countRemoved(r.mask.keepChannels));
                        QCOMPARE(r.removedParams, removedParameters(r.mask, costs));
                        ++compared;
                    }
        }
        QCOMPARE(compared, 4 * 13 * 6 * 2);
    }

    void paperReadingRemovesExactlyKWithoutTies() {
        const auto scores = randomScores(4, 8, 50, 11);
        const SelectionIndex index(scores, uniformCosts(4, 100, 3));
        for (double rho : {0.1, 0.33, 0.5, 0.8}) {
            const SelectionResult r = index.select(rho, 10.0, AlphaMode::Paper);
            QCOMPARE(r.removedHeads + r.removedChannels, std::llround(rho * (4 * 8 + 4 * 50)));
        }
    }

    void budgetReadingKeepsWithinBudget() {
        // α = the exact parameter ratio: ρ becomes a parameter fraction; the kept parameters
        // never exceed (1 − ρ) of the total and miss it by less than one unit.
        const LlamaConfig c = gqaConfig();
        const auto costs = unitCostsFromConfig(c);
        const double alpha = defaultAlpha(c);
        std::vector<LayerScores> scores = randomScores(2, 2, 96, 5);
        scores[1].channels.resize(80);
        const SelectionIndex index(scores, costs);
        int64_t total = 0;
        for (int l = 0; l < 2; ++l) total += costs[l].headParams * 2 + costs[l].channelParams * int64_t(scores[l].channels.size());
        for (double rho : {0.05, 0.2, 0.5, 0.75}) {
            const SelectionResult r = index.select(rho, alpha, AlphaMode::Budget);
            const double ratio = achievedRatio(r.mask, costs);
            QVERIFY(ratio >= rho - 1e-12);
            QVERIFY(ratio < rho + double(costs[0].headParams) / double(total));
            QCOMPARE(double(r.removedParams) / double(total), ratio);
        }
    }

    void rhoZeroKeepsAll() {
        const auto scores = randomScores(3, 4, 20, 3);
        const SelectionIndex index(scores, uniformCosts(3, 10, 1));
        for (AlphaMode mode : {AlphaMode::Paper, AlphaMode::Budget}) {
            const SelectionResult r = index.select(0.0, 3.0, mode);
            QCOMPARE(r.removedHeads + r.removedChannels, int64_t(0));
            QCOMPARE(r.removedParams, int64_t(0));
        }
    }

    void rhoCloseToOne() {
        const auto scores = randomScores(3, 4, 20, 4);
        const SelectionIndex index(scores, uniformCosts(3, 10, 1));
        // Paper: round(ρ·N) = N, so η = +∞ and everything goes.
        SelectionResult r = index.select(0.999, 3.0, AlphaMode::Paper);
        QCOMPARE(r.removedHeads, int64_t(12));
        QCOMPARE(r.removedChannels, int64_t(60));
        QVERIFY(std::isinf(r.threshold));
        // Budget: a budget of 0.072 weight units keeps nothing either.
        r = index.select(0.999, 3.0, AlphaMode::Budget);
        QCOMPARE(r.removedHeads + r.removedChannels, int64_t(72));
        // Budget of 1.5 (total weight 3·12 + 60 = 96): room for the best unit, a channel, only.
        r = index.select(1.0 - 1.5 / 96.0, 3.0, AlphaMode::Budget);
        QCOMPARE(r.removedHeads + r.removedChannels, int64_t(71));
        QCOMPARE(r.mask.keepChannels, bruteForceSelect(scores, 1.0 - 1.5 / 96.0, 3.0, AlphaMode::Budget, {}).keepChannels);
    }

    void allTiedScores() {
        // Ties at the threshold: the paper reading keeps them (strictly below η goes), the
        // budget reading removes them (FLAP keeps `metric > threshold`).
        std::vector<LayerScores> scores(2);
        for (auto& l : scores) l.heads.assign(3, 0.5), l.channels.assign(10, 0.5);
        const SelectionIndex index(scores, uniformCosts(2, 4, 1));
        QCOMPARE(index.select(0.3, 1.0, AlphaMode::Paper).removedChannels, int64_t(0));
        const SelectionResult b = index.select(0.3, 1.0, AlphaMode::Budget);
        QCOMPARE(b.removedHeads + b.removedChannels, int64_t(26));
        QCOMPARE(b.mask.keepChannels, bruteForceSelect(scores, 0.3, 1.0, AlphaMode::Budget, {}).keepChannels);
    }

    void layerLosesAllHeads() {
        auto scores = randomScores(3, 4, 20, 8);
        for (double& h : scores[1].heads) h = -50;  // far below everything else
        for (AlphaMode mode : {AlphaMode::Paper, AlphaMode::Budget}) {
            const SelectionResult r = selectGlobal(scores, uniformCosts(3, 10, 1), 0.3, 1.0, mode);
            QCOMPARE(r.mask.keepHeads[1], std::vector<bool>(4, false));
            QCOMPARE(r.mask.keepHeads[1], bruteForceSelect(scores, 0.3, 1.0, mode, {}).keepHeads[1]);
            QVERIFY(std::count(r.mask.keepHeads[0].begin(), r.mask.keepHeads[0].end(), true) > 0);
        }
    }

    void protectedLayersAndScopeAreUntouched() {
        const auto scores = randomScores(4, 4, 20, 9);
        SelectionOptions o;
        o.protectedLayers = {2};
        o.scope = SelectionScope::AttentionOnly;
        const SelectionIndex index(scores, uniformCosts(4, 10, 1), o);
        QCOMPARE(index.candidateHeads(), int64_t(12));
        QCOMPARE(index.candidateChannels(), int64_t(0));
        const SelectionResult r = index.select(0.5, 1.0, AlphaMode::Paper);
        QCOMPARE(r.removedHeads, int64_t(6));
        QCOMPARE(r.mask.keepHeads[2], std::vector<bool>(4, true));
        QCOMPARE(countRemoved(r.mask.keepChannels), int64_t(0));
    }

    void invalidInputsThrow() {
        const auto scores = randomScores(2, 2, 5, 1);
        const SelectionIndex index(scores, uniformCosts(2, 10, 1));
        for (double rho : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
            QVERIFY_THROWS_EXCEPTION(Error, index.select(rho, 1.0, AlphaMode::Paper));
            QVERIFY_THROWS_EXCEPTION(Error, index.select(rho, 1.0, AlphaMode::Budget));
            QVERIFY_THROWS_EXCEPTION(Error, selectUniformPerLayer(scores, rho));
        }
        QVERIFY_THROWS_EXCEPTION(Error, index.select(0.5, 0.0, AlphaMode::Paper));
        QVERIFY_THROWS_EXCEPTION(Error, index.select(0.5, -2.0, AlphaMode::Budget));
        auto withNan = scores;
        withNan[1].channels[3] = std::numeric_limits<double>::quiet_NaN();
        QVERIFY_THROWS_EXCEPTION(Error, SelectionIndex(withNan, uniformCosts(2, 10, 1)));
        QVERIFY_THROWS_EXCEPTION(Error, SelectionIndex(scores, uniformCosts(3, 10, 1)));
        SelectionOptions o;
        o.protectedLayers = {2};
        QVERIFY_THROWS_EXCEPTION(Error, SelectionIndex(scores, uniformCosts(2, 10, 1), o));
    }

    void costsAndAlphaFromConfig() {
        LlamaConfig mha = gqaConfig();
        mha.num_kv_heads = {8, 8};
        auto costs = unitCostsFromConfig(mha);
        QCOMPARE(costs[0].headParams, int64_t(4 * 8 * 64));  // q, k, v rows and o columns of one head
        QCOMPARE(costs[0].channelParams, int64_t(3 * 64));
        QCOMPARE(defaultAlpha(mha), 4.0 * 8 / 3);
        const LlamaConfig gqa = gqaConfig();  // g = 4: 4 q heads + 4 o blocks + 1 k + 1 v
        costs = unitCostsFromConfig(gqa);
        QCOMPARE(costs[1].headParams, int64_t(10 * 8 * 64));
        QCOMPARE(defaultAlpha(gqa), 10.0 * 8 / 3);
        LlamaConfig mixed = gqa;
        mixed.num_kv_heads = {2, 4};
        QVERIFY_THROWS_EXCEPTION(Error, defaultAlpha(mixed));
        // The paper's LLaMA-3-8B figure: g = 4, D_h = 128 → α = 1280/3 ≈ 427.
        LlamaConfig l3 = gqa;
        l3.head_dim = 128;
        l3.num_heads = {32};
        l3.num_kv_heads = {8};
        l3.num_layers = 1;
        QCOMPARE(std::round(defaultAlpha(l3)), 427.0);
    }

    void achievedRatios() {
        const LlamaConfig c = gqaConfig();
        const auto costs = unitCostsFromConfig(c);
        Mask m;
        m.keepHeads = {{true, false}, {true, true}};
        m.keepChannels = {std::vector<bool>(96, true), std::vector<bool>(80, true)};
        m.keepChannels[1][0] = m.keepChannels[1][5] = false;
        const int64_t removed = 10 * 8 * 64 + 2 * 3 * 64;
        const int64_t blocks = 2 * (2 * 10 * 8 * 64) + 3 * 64 * (96 + 80);
        QCOMPARE(removedParameters(m, costs), removed);
        QCOMPARE(achievedRatio(m, costs), double(removed) / double(blocks));
        QCOMPARE(achievedRatioModel(m, costs, 100000), double(removed) / 100000.0);
        QVERIFY_THROWS_EXCEPTION(Error, achievedRatioModel(m, costs, 0));
    }

    void uniformPerLayerAsFlap() {
        std::vector<LayerScores> s(2);
        s[0].heads = {0.4, 0.1, 0.3, 0.2};
        s[0].channels = {5, 1, 4, 2, 3, 0, 9, 8, 7, 6};
        s[1].heads = {1, 2, 3, 4};
        s[1].channels = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3};  // ties at the threshold stay
        SelectionOptions o;
        const Mask m = selectUniformPerLayer(s, 0.3, o);  // int(1.2) = 1 head, int(3.0) = 3 channels
        QCOMPARE(m.keepHeads[0], (std::vector<bool>{true, false, true, true}));
        QCOMPARE(m.keepChannels[0], (std::vector<bool>{true, false, true, false, true, false, true, true, true, true}));
        QCOMPARE(m.keepHeads[1], (std::vector<bool>{false, true, true, true}));
        QCOMPARE(m.keepChannels[1], std::vector<bool>(10, true));  // sorted[3] = 1: nothing is below it
        o.protectedLayers = {0};
        QCOMPARE(selectUniformPerLayer(s, 0.3, o).keepHeads[0], std::vector<bool>(4, true));
    }

    void expandsUnitMasks() {
        QCOMPARE(expandUnitMask({true, false}, 3), (std::vector<bool>{true, true, true, false, false, false}));
        QVERIFY_THROWS_EXCEPTION(Error, expandUnitMask({true}, 0));
    }

    // Not a timed test (no time limit is asserted): measures 50 re-selections per reading and
    // prints them. LLaMA-7B sized: 32 layers × (32 heads + 11008 channels).
    void benchmarkReselection7B() {
        const int layers = 32, heads = 32, channels = 11008;
        const auto scores = randomScores(layers, heads, channels, 42);
        const auto costs = uniformCosts(layers, 4 * 128 * 4096, 3 * 4096);
        QElapsedTimer timer;
        timer.start();
        const SelectionIndex index(scores, costs);
        const double buildMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;

        std::vector<double> rhos;
        rhos.reserve(50);
        for (int i = 0; i < 50; ++i) rhos.push_back(0.01 + 0.018 * i);
        std::vector<double> ms[2];
        int64_t sink = 0;
        for (int m = 0; m < 2; ++m)
            for (double rho : rhos) {
                timer.restart();
                const SelectionResult r = index.select(rho, 4.0 * 128 / 3, m == 0 ? AlphaMode::Paper : AlphaMode::Budget);
                ms[m].push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
                sink += r.removedChannels;
            }
        timer.restart();
        const Mask slow = bruteForceSelect(scores, 0.5, 4.0 * 128 / 3, AlphaMode::Paper, {});
        const double bruteMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
        QVERIFY(sink > 0 && !slow.keepHeads.empty());
        auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        auto worst = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
        qInfo("re-selection, %d scores: index built once in %.1f ms; select() incl. mask: paper median %.3f ms "
              "(worst %.3f), budget median %.3f ms (worst %.3f); brute force (full sort) %.1f ms",
              layers * (heads + channels), buildMs, median(ms[0]), worst(ms[0]), median(ms[1]), worst(ms[1]), bruteMs);
    }
};

QTEST_GUILESS_MAIN(TestSelection)
#include "tst_selection.moc"
