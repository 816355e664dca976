#include "core/prune/stage_bounds.h"

#include "core/prune/dense_kernels.h"
#include "core/prune/report.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace npw {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Repeats `once` (after one warm-up call: the first BLAS/LAPACK call of a process also starts its
// threads) at least twice and until ~0.1 s have passed; the best rate of the runs.
template <class F>
double bestRate(double flopsPerCall, F once) {
    once();
    double best = 0, spent = 0;
    for (int i = 0; i < 50 && (i < 2 || spent < 0.1); ++i) {
        const auto start = std::chrono::steady_clock::now();
        once();
        const double s = secondsSince(start);
        spent += s;
        if (s > 0) best = std::max(best, flopsPerCall / s);
    }
    return best;
}

double gemmRate(at::ScalarType dtype) {
    const int64_t n = 1024;
    const at::Tensor a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
    at::Tensor c = at::empty({n, n}, a.options());
    return bestRate(2.0 * n * n * n, [&] { at::mm_out(c, a, b); });
}

double choleskyRate(int64_t n) {
    n = std::max<int64_t>(n, 64);
    // Symmetric and diagonally dominant (so positive definite) without an n³ product to make it.
    const at::Tensor x = at::rand({n, n}, at::kDouble);
    const at::Tensor source = (x + x.t() + 2.0 * static_cast<double>(n) * at::eye(n, at::kDouble)).contiguous();
    std::vector<double> work(static_cast<size_t>(n * n));
    const double nd = static_cast<double>(n);
    return bestRate(nd * nd * nd / 3, [&] {
        std::copy(source.data_ptr<double>(), source.data_ptr<double>() + n * n, work.begin());
        if (!dense::choleskyLower(work.data(), n, n)) throw Error("machine rates: the test matrix did not factorise");
    });
}

// The better of two writes of 64 MiB, each fsync'ed (a shared disk's rate varies from one second
// to the next; the better one is the bound).
double diskWriteRate(const std::string& scratchTarget) {
    const std::string path = temporaryPathBeside(scratchTarget, "tmp");
    const size_t chunk = size_t(8) << 20, total = size_t(64) << 20;
    std::vector<char> data(chunk, 'n');
    double best = 0;
    for (int run = 0; run < 2; ++run) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) throw Error("machine rates: cannot write the scratch file " + path + ": " + std::strerror(errno));
        const auto start = std::chrono::steady_clock::now();
        bool ok = true;
        for (size_t done = 0; done < total && ok; done += chunk) ok = ::write(fd, data.data(), chunk) == ssize_t(chunk);
        ok = ok && ::fsync(fd) == 0;
        const double s = secondsSince(start);
        const int savedErrno = errno;
        ::close(fd);
        if (!ok) {
            ::unlink(path.c_str());
            throw Error("machine rates: writing the scratch file " + path + " failed: " + std::strerror(savedErrno));
        }
        if (s > 0) best = std::max(best, static_cast<double>(total) / s);
    }
    ::unlink(path.c_str());
    return best;
}

double nan() { return std::numeric_limits<double>::quiet_NaN(); }

} // namespace

MachineRates measureMachineRates(const std::string& scratchTarget, int64_t choleskySize) {
    MachineRates r;
    r.gemm32 = gemmRate(at::kFloat);
    r.gemm64 = gemmRate(at::kDouble);
    r.choleskySize = std::max<int64_t>(choleskySize, 64);
    r.cholesky64 = choleskyRate(r.choleskySize);
    try {
        r.diskWrite = diskWriteRate(scratchTarget);
    } catch (const Error& e) {
        // The export is already written: a disk that refuses a scratch file (full since) leaves the
        // writing stage without a bound, said, rather than failing the run.
        r.diskWrite = 0;
        r.diskNote = e.what();
    }
    return r;
}

int64_t choleskySizeFor(const LlamaConfig& config) {
    int64_t widest = 0;
    for (size_t l = 0; l < static_cast<size_t>(config.num_layers); ++l)
        widest = std::max({widest, config.intermediate_size.at(l), config.num_heads.at(l) * config.head_dim});
    return std::min<int64_t>(widest, 2048);
}

double StageMeasure::boundSeconds(const MachineRates& r) const {
    double s = 0;
    bool any = false;
    auto add = [&](double work, double rate) {
        if (work > 0 && rate > 0) s += work / rate, any = true;
    };
    add(gemm32Flops, r.gemm32);
    add(gemm64Flops, r.gemm64);
    add(choleskyFlops, r.cholesky64);
    add(bytes, r.diskWrite);
    return any ? s : nan();
}

double calibrationForwardFlops(const LlamaConfig& c, int64_t tokens, int64_t seqlen) {
    double flops = 0;
    const double n = static_cast<double>(tokens), t = static_cast<double>(seqlen);
    for (size_t l = 0; l < static_cast<size_t>(c.num_layers); ++l) {
        const double attnWidth = static_cast<double>(c.num_heads[l] * c.head_dim);
        const double kvWidth = static_cast<double>(c.num_kv_heads[l] * c.head_dim);
        const double h = static_cast<double>(c.hidden_size), inter = static_cast<double>(c.intermediate_size[l]);
        const double weights = h * attnWidth * 2 + h * kvWidth * 2 + 3 * h * inter;  // q, o, k, v, gate/up/down
        flops += 2 * n * weights;
        flops += 4 * n * t * attnWidth;  // QKᵀ and AV over whole windows (what a dense kernel does)
    }
    return flops;
}

std::vector<StageMeasure> pruneStageMeasures(const LlamaConfig& config, const PruneStageInputs& in) {
    using dense::WorkStage;
    const dense::StageWork gram = dense::workSoFar(WorkStage::GramAccumulation);
    const dense::StageWork score = dense::workSoFar(WorkStage::Score);
    const dense::StageWork curve = dense::workSoFar(WorkStage::LossCurve);
    const dense::StageWork comp = dense::workSoFar(WorkStage::Compensation);
    std::vector<StageMeasure> out;
    auto fromMeter = [](const char* name, const dense::StageWork& w, const char* note) {
        StageMeasure m;
        m.stage = name;
        m.seconds = w.seconds;
        m.gemm64Flops = w.gemmFlops;
        m.choleskyFlops = w.choleskyFlops;
        m.note = note;
        return m;
    };
    if (in.calibrated) {
        StageMeasure forward;
        forward.stage = "calibration_forward";
        forward.seconds = std::max(in.calibrateSeconds - gram.seconds, 0.0);
        forward.gemm32Flops = calibrationForwardFlops(config, in.tokens, in.seqlen);
        forward.note = "the blocks' float32 forward (weights and attention), without the Gram updates";
        out.push_back(forward);
        out.push_back(fromMeter("gram_accumulation", gram, "float64 symmetric rank-k updates of each site's Gram matrix"));
    }
    out.push_back(fromMeter("scores", score, "per site: WᵀW (syrk), ∘G, one Cholesky, A⁻¹1"));
    out.push_back(fromMeter("cross_layer_ranking", curve, "per site: one Cholesky of the permuted H, one trmm (the L* curve)"));
    StageMeasure other;
    other.stage = "score_bookkeeping";
    other.seconds = std::max(in.scoreSeconds - score.seconds - curve.seconds, 0.0);
    other.note = "finiteness checks, unit reductions, convex minorants: no arithmetic bound";
    out.push_back(other);
    StageMeasure select;
    select.stage = "selection";
    select.seconds = in.selectSeconds;
    select.note = "sorting the units: no arithmetic bound";
    out.push_back(select);
    out.push_back(fromMeter("compensation", comp, "per site: one Cholesky of H[kept+pruned], gemm, trsm, trmm"));
    StageMeasure slicing;
    slicing.stage = "slicing";
    slicing.seconds = std::max(in.applySeconds - comp.seconds, 0.0);
    slicing.note = "copying the kept rows and columns: memory-bound, no arithmetic bound";
    out.push_back(slicing);
    StageMeasure writing;
    writing.stage = "writing";
    writing.seconds = in.saveSeconds;
    writing.bytes = in.bytesWritten;
    writing.note = "the export's files (fsync'ed), against the disk write rate";
    out.push_back(writing);
    return out;
}

nlohmann::json stageBoundsJson(const std::vector<StageMeasure>& stages, const MachineRates& r) {
    nlohmann::json out = nlohmann::json::array();
    for (const StageMeasure& s : stages) {
        nlohmann::json work = nlohmann::json::object();
        if (s.gemm32Flops > 0) work["float32_gemm_flop"] = s.gemm32Flops;
        if (s.gemm64Flops > 0) work["float64_gemm_flop"] = s.gemm64Flops;
        if (s.choleskyFlops > 0) work["float64_cholesky_flop"] = s.choleskyFlops;
        if (s.bytes > 0) work["bytes_written"] = s.bytes;
        const double bound = s.boundSeconds(r);
        nlohmann::json j = {{"stage", s.stage}, {"seconds", s.seconds}, {"work", work}};
        // A stage without a bound (no arithmetic to bound it, or a rate that could not be measured)
        // has neither key, rather than a null.
        if (std::isfinite(bound)) j["bound_s"] = bound;
        if (std::isfinite(bound) && s.seconds > 0) j["ratio"] = bound / s.seconds;
        if (!s.note.empty()) j["note"] = s.note;
        out.push_back(j);
    }
    nlohmann::json rates = {{"float32_gemm_flop_per_s", r.gemm32},
                            {"float64_gemm_flop_per_s", r.gemm64},
                            {"float64_cholesky_flop_per_s", r.cholesky64},
                            {"float64_cholesky_n", r.choleskySize},
                            {"disk_write_bytes_per_s", r.diskWrite}};
    if (!r.diskNote.empty()) rates["disk_write_note"] = r.diskNote;
    return {{"stages", out}, {"rates", rates}};
}

std::string stageBoundsText(const std::vector<StageMeasure>& stages, const MachineRates& r) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(1) << "rates     float32 GEMM " << r.gemm32 / 1e9 << ", float64 GEMM "
      << r.gemm64 / 1e9 << ", Cholesky(" << r.choleskySize << ") " << r.cholesky64 / 1e9 << " GFLOP/s, disk write "
      << r.diskWrite / 1e6 << " MB/s\n";
    for (const StageMeasure& s : stages) {
        const double bound = s.boundSeconds(r);
        o << "  " << std::left << std::setw(22) << s.stage << std::right << std::setprecision(2) << std::setw(8)
          << s.seconds << " s";
        if (std::isfinite(bound))
            o << "   bound " << std::setw(7) << bound << " s   ratio " << std::setprecision(2)
              << (s.seconds > 0 ? bound / s.seconds : 0.0);
        else if (!s.note.empty())
            o << "   (" << s.note << ")";
        o << "\n";
    }
    return o.str();
}

uint64_t regularFileBytesUnder(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
    uint64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_regular_file(ec)) total += it->file_size(ec);
    return total;
}

PruneStageInputs pruneStageInputs(const PruneTimings& timings, double saveSeconds, const std::string& out) {
    PruneStageInputs in;
    in.calibrateSeconds = timings.calibrateSeconds;
    in.scoreSeconds = timings.scoreSeconds;
    in.selectSeconds = timings.selectSeconds;
    in.applySeconds = timings.applySeconds;
    in.saveSeconds = saveSeconds;
    in.bytesWritten = static_cast<double>(regularFileBytesUnder(out));
    return in;
}

} // namespace npw
