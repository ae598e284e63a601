// Vector-unit and mma.sync throughput, and the FP32 dependent-chain latency.
//
// Throughput kernels (fp32_fma, fp64_fma, fp16x2_hfma2, int32_imad): every thread runs CHAINS independent
// chains x <- x * a + b (one FFMA / DFMA / HFMA2 / IMAD per step), CHAINS x UNROLL steps per trip of the
// loop, so the loop's own three instructions take under 0.6% of the issue slots and every SM sub-partition
// always has independent work to issue; the host fills each SM with as many 256-thread blocks as the
// driver grants.  x starts at random host values and a, b are random kernel parameters (never zero, never
// constants the compiler could fold); every chain's final x is stored, and the host recomputes it: floating
// point chains converge to b / (1 - a) (0.5 <= a <= 0.9), checked to a tolerance of the precision; the
// integer chain is checked exactly (the n-fold affine map mod 2^32).
//
// mma_<type> kernels: each warp keeps MMA_ACC independent m16n8 fp32 accumulators and issues MMA_ACC
// mma.sync per trip, operands in registers loaded once from random host data (the same for every warp):
// m16n8k16 bf16 and fp16, m16n8k8 tf32, m16n8k32 e4m3, all with fp32 accumulation.  Each accumulator has
// its own B fragment: with one shared product, ptxas computes an emulated (e4m3) product once and adds it
// MMA_ACC times.  Every accumulator is stored; the host checks that they are finite, non-zero and
// identical in every warp.
//
// Thread 0 of every block records clock64 and %globaltimer around its loop: each launch carries the SM
// clock it ran at.  latency_fp32: one warp, one dependent FFMA chain timed with clock64.

#include "chains.cuh"
#include "mma_sync.cuh"

// The host (compute/__init__.py) launches with the same values.
constexpr int VEC_THREADS = 256, CHAINS = 8, UNROLL = 64, LATENCY_UNROLL = 64;
constexpr int MMA_THREADS = 256, MMA_ACC = 8;

__device__ __forceinline__ float step(float x, float a, float b) { return fmaf(x, a, b); }
__device__ __forceinline__ double step(double x, double a, double b) { return fma(x, a, b); }
// The integer step is written as the PTX it compiles to (the same SASS on sm_90): written in C++, a chain of
// CHAINS x UNROLL dependent multiply-adds keeps NVRTC's optimizer busy for most of a minute on sm_100 and later.
__device__ __forceinline__ unsigned int step(unsigned int x, unsigned int a, unsigned int b) {
    unsigned int y;
    asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(y) : "r"(x), "r"(a), "r"(b));
    return y;
}

// Two fp16 lanes per 32-bit word (HFMA2); a type of its own so it does not collide with the integer step.
struct Half2 {
    unsigned int bits;
};

__device__ __forceinline__ Half2 step(Half2 x, Half2 a, Half2 b) {
    Half2 y;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(y.bits) : "r"(x.bits), "r"(a.bits), "r"(b.bits));
    return y;
}

template <typename T>
__device__ __forceinline__ void chains(const T* init, T a, T b, int trips, T* out, unsigned long long* clocks) {
    grid_chains<UNROLL, CHAINS>(init, trips, out, clocks, [=](T x) { return step(x, a, b); });
}

extern "C" __global__ void __launch_bounds__(VEC_THREADS)
fp32_fma(const float* init, float a, float b, int trips, float* out, unsigned long long* clocks) {
    chains<float>(init, a, b, trips, out, clocks);
}

extern "C" __global__ void __launch_bounds__(VEC_THREADS)
fp64_fma(const double* init, double a, double b, int trips, double* out, unsigned long long* clocks) {
    chains<double>(init, a, b, trips, out, clocks);
}

// a and b arrive as the bits of two fp16 lanes each.
extern "C" __global__ void __launch_bounds__(VEC_THREADS)
fp16x2_hfma2(const Half2* init, unsigned int a, unsigned int b, int trips, Half2* out,
             unsigned long long* clocks) {
    chains<Half2>(init, Half2{a}, Half2{b}, trips, out, clocks);
}

extern "C" __global__ void __launch_bounds__(VEC_THREADS)
int32_imad(const unsigned int* init, unsigned int a, unsigned int b, int trips, unsigned int* out,
           unsigned long long* clocks) {
    chains<unsigned int>(init, a, b, trips, out, clocks);
}

// One warp, one chain per thread: each FFMA needs the previous one's result.  cycles[0] = clock64 cycles
// of trips x LATENCY_UNROLL dependent FFMAs (the loop's counter and branch issue in their shadow).
extern "C" __global__ void latency_fp32(const float* init, float a, float b, int trips, float* out,
                                        long long* cycles) {
    float x = init[threadIdx.x];
    const long long elapsed = timed_chain<LATENCY_UNROLL>(trips, [&] { x = fmaf(x, a, b); });
    out[threadIdx.x] = x;
    if (threadIdx.x == 0) cycles[0] = elapsed;
}

// ---- mma.sync ------------------------------------------------------------------------------------------
// The shapes are mma_sync.cuh's; FP8 (e4m3) exists from sm_89 on: below it the kernel is left out (the
// compute probe sweeps no e4m3 there).
// a_words: 4 words per lane, b_words: MMA_ACC x 2 per lane (the same fragments for every warp); out:
// MMA_ACC x 4 floats per thread.
template <MmaOp OP>
__device__ __forceinline__ void mma_loop(const unsigned int* a_words, const unsigned int* b_words, int trips,
                                         float* out, unsigned long long* clocks) {
    const int lane = threadIdx.x & 31;
    unsigned int a[4], b[MMA_ACC][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = a_words[lane * 4 + i];
#pragma unroll
    for (int j = 0; j < MMA_ACC; ++j) {
#pragma unroll
        for (int i = 0; i < 2; ++i) b[j][i] = b_words[(lane * MMA_ACC + j) * 2 + i];
    }
    float c[MMA_ACC][4];
#pragma unroll
    for (int j = 0; j < MMA_ACC; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) c[j][i] = 0.0f;
    }
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int j = 0; j < MMA_ACC; ++j) mma<OP>(c[j], a, b[j]);
    }
    record_clock(clocks, c0, t0);
    float* mine = out + ((long long)blockIdx.x * blockDim.x + threadIdx.x) * MMA_ACC * 4;
#pragma unroll
    for (int j = 0; j < MMA_ACC; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) mine[j * 4 + i] = c[j][i];
    }
}

#define MMA_KERNEL(OP)                                                                                   \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS)                                            \
    mma_##OP(const unsigned int* a_words, const unsigned int* b_words, int trips, float* out,            \
             unsigned long long* clocks) {                                                               \
        mma_loop<MmaOp::OP>(a_words, b_words, trips, out, clocks);                                       \
    }

MMA_KERNEL(bf16)
MMA_KERNEL(fp16)
MMA_KERNEL(tf32)
#if __CUDA_ARCH__ >= 890
MMA_KERNEL(e4m3)
#endif
