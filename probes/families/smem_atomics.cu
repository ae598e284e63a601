// Shared-memory atomic add (atom/red.shared.add) on int32 and fp32.
//
// sm_90 has a native shared add for 32-bit integers only (ATOMS.ADD).  An fp32 add on shared memory compiles
// to a compare-and-swap loop: LDS the old word, FADD, ATOMS.CAST.SPIN, retry while another thread got there
// first; fp64 likewise (ATOMS.CAST.SPIN.64), which is why this file has no fp64 kernels.
//
// atoms_lat_<t>: one thread; each atom.shared.add's operand is the value the previous one returned (a
//   dependent chain at one word, no contention), ATOMS_UNROLL a trip, timed with clock64.  The host differences
//   two trip counts and replays the recurrence exactly: out[0] the last return, out[1] the word.  The address
//   is words + threadIdx.x, which ptxas cannot prove uniform (else it could aggregate a warp's adds).
// atoms_thr_<t>: one block; every thread issues reps x ATOMS_THR_UNROLL red.shared.add of v (unrolled, so the
//   loop's own instructions do not limit issue) to one word for the block (mode 0),
//   one per warp (1) or its own (2: lane l on bank l, no bank conflict).  Thread 0 records clock64 and
//   %globaltimer between barriers around every thread's loop; then every word is copied out for the host to
//   check against the adds it received.

#include "common.cuh"

constexpr int ATOMS_UNROLL = 32;
constexpr int ATOMS_WORDS = 1024;
constexpr int ATOMS_THR_UNROLL = 8;

#define SMEM_ATOMICS(NAME, T, CC, TYPE)                                                                      \
    extern "C" __global__ void atoms_lat_##NAME(T v, int trips, T* out, long long* cycles) {                \
        __shared__ T words[32];                                                                              \
        words[threadIdx.x & 31] = 0;                                                                         \
        __syncthreads();                                                                                     \
        const unsigned int q = smem_addr(words + threadIdx.x);                                               \
        T x = v;                                                                                             \
        const long long elapsed = timed_chain<ATOMS_UNROLL, true>(trips, [&] {                               \
            asm volatile("atom.shared.add." TYPE " %0, [%1], %0;" : "+" CC(x) : "r"(q) : "memory");          \
        });                                                                                                  \
        out[0] = x;                                                                                          \
        out[1] = words[threadIdx.x];                                                                         \
        cycles[0] = elapsed;                                                                                 \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATOMS_WORDS)                                                \
        atoms_thr_##NAME(T v, int mode, int reps, T* out, unsigned long long* clocks) {                     \
        __shared__ T words[ATOMS_WORDS];                                                                     \
        for (int i = threadIdx.x; i < ATOMS_WORDS; i += blockDim.x) words[i] = 0;                            \
        const int index = mode == 0 ? 0 : mode == 1 ? (int)threadIdx.x / 32 : (int)threadIdx.x;              \
        const unsigned int q = smem_addr(words + index);                                                     \
        __syncthreads();                                                                                     \
        const unsigned long long c0 = clock64_fenced();                                                      \
        const unsigned long long t0 = globaltimer_fenced();                                                  \
        _Pragma("unroll 1") for (int r = 0; r < reps; ++r) {                                                 \
            _Pragma("unroll") for (int u = 0; u < ATOMS_THR_UNROLL; ++u)                                     \
                asm volatile("red.shared.add." TYPE " [%0], %1;" ::"r"(q), CC(v) : "memory");               \
        }                                                                                                    \
        __syncthreads();                                                                                     \
        const unsigned long long c1 = clock64_fenced();                                                      \
        const unsigned long long t1 = globaltimer_fenced();                                                  \
        if (threadIdx.x == 0) {                                                                              \
            clocks[0] = c1 - c0;                                                                             \
            clocks[1] = t1 - t0;                                                                             \
        }                                                                                                    \
        for (int i = threadIdx.x; i < ATOMS_WORDS; i += blockDim.x) out[i] = words[i];                       \
    }

SMEM_ATOMICS(i32, unsigned int, "r", "u32")
SMEM_ATOMICS(f32, float, "f", "f32")
