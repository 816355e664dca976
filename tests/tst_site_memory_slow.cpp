// Peak memory of the per-site arithmetic at Llama-2-7B's MLP size (down_proj: D_inter = 11,008
// input channels, 4,096 outputs, bf16 weight): the numerical solve, the L* curve and Theorem 3
// each factorise once in one owned D×D float64 buffer, so each call's peak beyond its inputs is
// one D_inter² × 8 bytes (969 MB) plus blocks of 256 weight rows and the bf16 result. Measured
// as the rise of the resident high-water mark (VmHWM, reset through /proc/self/clear_refs) over
// the resident size before the call. NPW_SITE_MEMORY_D / _OUT choose another shape. Only the
// buffer's lower triangle is written, so its untouched half is never resident; the first GEMM
// (Theorem 3) also allocates OpenBLAS's per-process work pool once (~45 MB measured).
// Slow: three float64 factorisations of 11,008² (about 1.3 TFLOP in all).
#include "core/prune/compensation.h"
#include "core/prune/numerical_score.h"

#include <ATen/ATen.h>
#include <QtTest>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

using namespace npw;

namespace {

int64_t statusKb(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
    return -1;
}

bool resetPeak() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    return static_cast<bool>(out);
}

int64_t envOr(const char* name, int64_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoll(v) : fallback;
}

} // namespace

class TestSiteMemory : public QObject {
    Q_OBJECT
private slots:
    void peakPerSiteIsOneBuffer() {
        const int64_t d = envOr("NPW_SITE_MEMORY_D", 11008), out = envOr("NPW_SITE_MEMORY_OUT", 4096);
        at::manual_seed(1);
        // A positive definite Gram without a D×D temporary beyond itself: U Uᵀ/k + I.
        at::Tensor gram;
        {
            const at::Tensor u = at::randn({d, 64}, at::kDouble);
            gram = at::matmul(u, u.t()).div_(64.0);
        }
        gram.diagonal().add_(1.0);
        const at::Tensor weight = (at::randn({out, d}) / std::sqrt(double(d))).to(at::kBFloat16);
        std::vector<bool> keep(static_cast<size_t>(d), true);
        std::vector<int64_t> order;
        for (int64_t i = 0; i < d; ++i) order.push_back(i);
        for (int64_t i = 0; i < d; i += 5) keep[static_cast<size_t>(i)] = false;
        const double unitMb = double(d) * double(d) * 8 / 1e6;
        std::cout << "site D = " << d << ", out = " << out << ": D² × 8 bytes = " << unitMb << " MB\n";

        if (!resetPeak()) QSKIP("cannot reset the high-water mark (/proc/self/clear_refs)");
        auto measure = [&](const char* what, const std::function<void()>& call) -> double {
            resetPeak();
            const int64_t before = statusKb("VmRSS"), anonBefore = statusKb("RssAnon");
            const auto start = std::chrono::steady_clock::now();
            call();
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double riseMb = double(statusKb("VmHWM") - before) / 1e3;
            std::cout << what << ": peak rise " << riseMb << " MB = " << riseMb / unitMb << " × D²·8 (RssAnon before "
                      << anonBefore / 1000 << " MB), " << seconds << " s\n";
            return riseMb / unitMb;
        };
        NumericalSolve solve;
        const double score = measure("numerical solve", [&] { solve = solveNumericalSite(weight, gram); });
        QVERIFY(solve.c > 0);
        std::vector<double> curve;
        const double lstar = measure("L* curve", [&] { curve = compensatedLossCurve(weight, gram, order, 0.01); });
        QCOMPARE(curve.size(), static_cast<size_t>(d));
        CompensationResult r;
        const double comp = measure("Theorem 3", [&] { r = compensatePrunedChannels(weight, gram, keep, 0.01); });
        QVERIFY(r.optimalLoss > 0);
        // One D×D float64 buffer each; the rest (weight blocks, the bf16 result) is ≤ 0.15 D²·8 here.
        for (double rise : {score, lstar, comp}) QVERIFY2(rise < 1.2, qPrintable(QString::number(rise)));
    }
};

QTEST_GUILESS_MAIN(TestSiteMemory)
#include "tst_site_memory_slow.moc"
