#include "core/prune/dense_kernels.h"

#include "core/util/error.h"

#include <array>
#include <chrono>
#include <climits>
#include <mutex>
#include <string>

// The Fortran interfaces (LP64: 32-bit integers, as Debian's OpenBLAS and reference BLAS use).
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
void dtrmm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
}

namespace npw::dense {

namespace {

int lapackInt(int64_t v) {
    if (v < 0 || v > INT_MAX)
        throw Error("dense kernels: a dimension of " + std::to_string(v) + " exceeds the 32-bit BLAS/LAPACK interface");
    return static_cast<int>(v);
}

int leading(int64_t ld) { return lapackInt(ld < 1 ? 1 : ld); }

std::mutex meterMutex;
std::array<StageWork, static_cast<size_t>(WorkStage::Count)> meter;

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

bool choleskyLower(double* a, int64_t n, int64_t lda) {
    if (n == 0) return true;
    const int nn = lapackInt(n), ld = leading(lda);
    int info = 0;
    dpotrf_("L", &nn, a, &ld, &info);
    if (info < 0) throw Error("dense kernels: dpotrf rejected argument " + std::to_string(-info));
    return info == 0;
}

void choleskySolve(const double* l, int64_t n, int64_t ldl, double* b, int64_t nrhs, int64_t ldb) {
    if (n == 0 || nrhs == 0) return;
    const int nn = lapackInt(n), nr = lapackInt(nrhs), la = leading(ldl), lb = leading(ldb);
    int info = 0;
    dpotrs_("L", &nn, &nr, l, &la, b, &lb, &info);
    if (info != 0) throw Error("dense kernels: dpotrs rejected argument " + std::to_string(-info));
}

void syrkLower(int64_t n, int64_t k, double alpha, const double* a, int64_t lda, double beta, double* c, int64_t ldc) {
    if (n == 0) return;
    const int nn = lapackInt(n), kk = lapackInt(k), la = leading(lda), lc = leading(ldc);
    dsyrk_("L", "N", &nn, &kk, &alpha, a, &la, &beta, c, &lc);
}

void multiplyLowerTransposed(int64_t m, int64_t n, const double* l, int64_t ldl, double* b, int64_t ldb) {
    if (m == 0 || n == 0) return;
    const int mm = lapackInt(m), nn = lapackInt(n), la = leading(ldl), lb = leading(ldb);
    const double one = 1.0;
    dtrmm_("L", "L", "T", "N", &mm, &nn, &one, l, &la, b, &lb);
}

void solveLowerTransposed(int64_t m, int64_t n, const double* l, int64_t ldl, double* b, int64_t ldb) {
    if (m == 0 || n == 0) return;
    const int mm = lapackInt(m), nn = lapackInt(n), la = leading(ldl), lb = leading(ldb);
    const double one = 1.0;
    dtrsm_("L", "L", "T", "N", &mm, &nn, &one, l, &la, b, &lb);
}

void gemmTransposedA(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                     double* c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    const int mm = lapackInt(m), nn = lapackInt(n), kk = lapackInt(k), la = leading(lda), lb = leading(ldb),
              lc = leading(ldc);
    const double one = 1.0, zero = 0.0;
    dgemm_("T", "N", &mm, &nn, &kk, &one, a, &la, b, &lb, &zero, c, &lc);
}

void addWork(WorkStage stage, const StageWork& work) {
    std::lock_guard<std::mutex> lock(meterMutex);
    StageWork& m = meter.at(static_cast<size_t>(stage));
    m.seconds += work.seconds;
    m.gemmFlops += work.gemmFlops;
    m.choleskyFlops += work.choleskyFlops;
}

StageWork workSoFar(WorkStage stage) {
    std::lock_guard<std::mutex> lock(meterMutex);
    return meter.at(static_cast<size_t>(stage));
}

StageTimer::StageTimer(WorkStage stage) : stage_(stage), start_(now()) {}

StageTimer::~StageTimer() {
    StageWork w;
    w.seconds = now() - start_;
    addWork(stage_, w);
}

} // namespace npw::dense
