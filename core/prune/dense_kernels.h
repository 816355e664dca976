#pragma once
// The float64 kernels of the per-site arithmetic (numerical score, L* curve, Theorem 3), called
// straight on explicitly owned buffers: LAPACK's Cholesky and BLAS's symmetric rank-k update,
// triangular multiply/solve and GEMM, from the same BLAS/LAPACK LibTorch itself links (OpenBLAS
// on Debian). Chained tensor expressions would allocate a D×D temporary per step (seven of them
// per MLP site before); these work in place on one D×D buffer per site.
//
// Every matrix here is column-major with a leading dimension (LAPACK's convention). A symmetric
// row-major D×D matrix is the same array; its row-major upper triangle is the column-major lower
// one, which is the triangle these kernels read and write ("lower" below is column-major).
//
// Alongside, a process-wide meter of the work they did (floating-point operations by kind and
// seconds by stage), so that `npw prune --json` can set each stage against the rate this machine
// reaches for that kind of work (stage_bounds.h).
#include <cstdint>

namespace npw::dense {

// In place: the lower Cholesky factor L (A = L Lᵀ) of the n×n matrix whose lower triangle is `a`
// (the strict upper triangle is neither read nor written). False when A is not positive definite
// (then `a`'s lower triangle is partly overwritten).
bool choleskyLower(double* a, int64_t n, int64_t lda);

// B ← A⁻¹B for the factor from choleskyLower; B is n×nrhs.
void choleskySolve(const double* l, int64_t n, int64_t ldl, double* b, int64_t nrhs, int64_t ldb);

// Lower triangle of C (n×n) ← alpha·A Aᵀ + beta·C, A n×k (dsyrk 'L', 'N').
void syrkLower(int64_t n, int64_t k, double alpha, const double* a, int64_t lda, double beta, double* c, int64_t ldc);

// B ← Lᵀ B (trmm) and B ← L⁻ᵀ B (trsm), L lower triangular m×m, B m×n.
void multiplyLowerTransposed(int64_t m, int64_t n, const double* l, int64_t ldl, double* b, int64_t ldb);
void solveLowerTransposed(int64_t m, int64_t n, const double* l, int64_t ldl, double* b, int64_t ldb);

// C ← Aᵀ B, A k×m, B k×n, C m×n (dgemm 'T', 'N').
void gemmTransposedA(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                     double* c, int64_t ldc);

// Which pruning stage the work belongs to.
enum class WorkStage { GramAccumulation, Score, LossCurve, Compensation, Count };

struct StageWork {
    double seconds = 0;
    double gemmFlops = 0;      // float64 GEMM-like work (syrk, trmm, trsm, gemm), multiply-adds × 2
    double choleskyFlops = 0;  // float64 Cholesky factorisations, n³/3 each
};

// Adds to the process-wide meter (thread-safe) / reads it.
void addWork(WorkStage stage, const StageWork& work);
StageWork workSoFar(WorkStage stage);

// Times a scope into a stage's seconds (its flops are added by the code that knows them).
class StageTimer {
public:
    explicit StageTimer(WorkStage stage);
    ~StageTimer();
    StageTimer(const StageTimer&) = delete;
    StageTimer& operator=(const StageTimer&) = delete;

private:
    WorkStage stage_;
    double start_;
};

} // namespace npw::dense
