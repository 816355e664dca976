// The crossover of npw's tiled kernel (core/models/gemv_kernel.h) against OpenBLAS's sgemm_ for
// 1–32 rows of x over one generation step's weights of LlamaGen's GPT-B (12 layers of q, k, v, o
// 768², gate and up 2048×768, down 768×2048, and the 16384×768 classifier: 390 MB), one thread,
// CPU time of the thread (a shared machine's other processes do not count, memory contention
// does), best of 3. Not part of the build (it times things); build and run by hand:
//
//   g++ -O2 -std=c++17 -I. -o /tmp/bench-gemm-rows packaging/bench-gemm-rows.cpp
//       core/models/gemv_kernel.cpp /usr/lib/x86_64-linux-gnu/libopenblas.so.0
//   /tmp/bench-gemm-rows
//
// Columns: sgemm ("T", "N": what at::linear calls), the decode kernel (1–2 rows) and tiles of
// R weight rows × V rows of x (gemvF32RowsTiled). Weights 64-byte aligned, as LibTorch's tensors.
#include "core/models/gemv_kernel.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);
extern "C" void openblas_set_num_threads(int);
// 64-byte aligned storage, as LibTorch's tensors (unaligned rows split loads across cache lines).
template <class T>
struct Aligned {
    using value_type = T;
    Aligned() = default;
    template <class U>
    Aligned(const Aligned<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)); }
    void deallocate(T* p, size_t) { std::free(p); }
    bool operator==(const Aligned&) const { return true; }
    bool operator!=(const Aligned&) const { return false; }
};
template <class T>
using vec = std::vector<T, Aligned<T>>;

struct M {
    int out, in;
    vec<float> w;
};

double now() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
    openblas_set_num_threads(1);
    std::vector<M> ms;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0, 0.02f);
    const int dim = 768, ffn = argc > 2 ? atoi(argv[2]) : 2048, layers = argc > 3 ? atoi(argv[3]) : 12;
    for (int l = 0; l < layers; ++l) {
        for (auto [o, i] : std::vector<std::pair<int,int>>{{dim,dim},{dim,dim},{dim,dim},{dim,dim},{ffn,dim},{ffn,dim},{dim,ffn}}) ms.push_back({o, i, vec<float>(size_t(o) * i)});
    }
    ms.push_back({16384, dim, vec<float>(size_t(16384) * dim)});
    double bytes = 0;
    for (auto& m : ms) { for (auto& v : m.w) v = nd(rng); bytes += 4.0 * m.w.size(); }
    vec<float> x(32 * 2048), y(32 * 16384);
    for (auto& v : x) v = nd(rng);
    std::string which = argc > 1 ? argv[1] : "all";
    std::vector<int> ns = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
    std::printf("weights %.1f MB\n", bytes / 1e6);
    for (int n : ns) {
        auto run = [&](int mode, int R, int V) {
            double best = 1e9;
            for (int rep = 0; rep < 3; ++rep) {
                double t0 = now();
                for (auto& m : ms) {
                    if (mode == 0) {
                        const float one = 1, zero = 0;
                        sgemm_("T", "N", &m.out, &n, &m.in, &one, m.w.data(), &m.in, x.data(), &m.in, &zero, y.data(), &m.out);
                    } else if (mode == 1) {
                        npw::gemvF32Rows(m.w.data(), m.in, m.in, x.data(), m.in, n, y.data(), m.out, 0, m.out);
                    } else {
                        npw::gemvF32RowsTiled(m.w.data(), m.in, m.in, x.data(), m.in, n, y.data(), m.out, 0, m.out, R, V);
                    }
                }
                best = std::min(best, now() - t0);
            }
            return best;
        };
        std::printf("n=%2d  sgemm %6.2f ms", n, run(0, 0, 0) * 1e3);
        if (n <= 2) std::printf("  gemv %6.2f ms", run(1, 0, 0) * 1e3);
        for (auto [R, V] : std::vector<std::pair<int,int>>{{1,4},{1,6},{2,4},{2,5},{2,6}})
            std::printf("  %dx%d %6.2f", R, V, run(2, R, V) * 1e3);
        std::printf("\n");
        std::fflush(stdout);
    }
}
