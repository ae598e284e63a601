// Misses in flight per SM: one block on one chosen SM keeps n = warps x L x lines-per-warp-load distinct
// lines in flight, every one an L1 miss (each line read once per launch from a footprint far past the L1),
// and times P passes with clock64.  Lines per cycle rise as n / latency until a per-SM limit binds: the
// L1's miss registers (plain ld.global), or whatever bounds the L2-only requests (ld.global.cg).
//
// Kernels mshr_<plain|cg>_s<1|4>_l<L>.  s1: each lane loads 4 bytes from a line of its own (32 lines per warp
// load, one 32-byte sector each); s4: 8 lanes load 16 bytes each from one line (4 lines per warp load, every
// sector of each).  Each thread issues its L loads of a pass before it sums any, so a warp keeps 32/G x L
// lines in flight and waits for all of them before its next pass; warps run their passes independently.
//
// Line of (pass p, load u, warp w, lane): first + p n + (u warps + w) (32 / G) + lane / G, mod `lines`; the
// host advances `first` by (warm + passes) n every launch, so no line is read twice before the whole
// footprint has been read.  The block launches as one of a grid of many; only a block on SM `target` that
// wins the ticket (claim goes ticket -> ticket + 1, once per launch) measures, the rest exit at once.
// out = {clock64 cycles, %globaltimer ns, %smid} of the timed passes; the loaded words' sum goes to *sink.

#include "common.cuh"

// Plain loads (ld.global: LDG.E, cached in the L1 as the through-L1 chase finds) and L2-only ones
// (ld.global.cg: LDG.E.STRONG.GPU); volatile, so the timed region holds exactly the loads written in it.
template <bool CG>
__device__ __forceinline__ unsigned int load(const unsigned int* p) {
    unsigned int v;
    if (CG) asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    else asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

template <bool CG>
__device__ __forceinline__ uint4 load(const uint4* p) {
    uint4 v;
    if (CG)
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else
        asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

template <typename T, int L, bool CG, int G>
__device__ __forceinline__ void misses_in_flight(const char* base, unsigned int lines,
                                                 unsigned int first, int warm, int passes,
                                                 unsigned int target, unsigned int ticket,
                                                 unsigned int* claim, unsigned int* sink,
                                                 unsigned long long* out) {
    __shared__ unsigned int won;
    if (threadIdx.x == 0) won = smid() == target && atomicCAS(claim, ticket, ticket + 1u) == ticket;
    __syncthreads();
    if (!won) return;
    constexpr unsigned int PER_WARP = 32 / G;  // lines per warp load
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const unsigned int n = warps * L * PER_WARP;  // lines per pass (the host keeps n <= lines)
    const unsigned int mine = warp * PER_WARP + lane / G;
    const unsigned int column = (lane % G) * sizeof(T);
    unsigned int pass_first = first;
    unsigned int acc = 0;
    unsigned long long c0 = 0, t0 = 0;
#pragma unroll 1
    for (int p = 0; p < warm + passes; ++p) {
        if (p == warm) {
            __syncthreads();
            if (threadIdx.x == 0) {
                t0 = globaltimer_fenced();
                c0 = clock64_fenced();
            }
        }
        T v[L];
#pragma unroll
        for (int u = 0; u < L; ++u) {
            unsigned int line = pass_first + u * warps * PER_WARP + mine;
            if (line >= lines) line -= lines;
            const T* at = reinterpret_cast<const T*>(base + (size_t)line * 128u + column);
            v[u] = load<CG>(at);
        }
#pragma unroll
        for (int u = 0; u < L; ++u) acc += word_sum(v[u]);
        pass_first += n;
        if (pass_first >= lines) pass_first -= lines;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned long long c1 = clock64_fenced();
        const unsigned long long t1 = globaltimer_fenced();
        out[0] = c1 - c0;
        out[1] = t1 - t0;
        out[2] = smid();
    }
    publish(acc, sink);
}

// (1024, 1): without the explicit one block per SM, ptxas holds the widest kernels to 32 registers and sums
// each 16-byte load before it issues the next, one line in flight per thread (tests/test_mshr.py checks).
#define MISSES(OP, CG, S, T, G, L)                                                                           \
    extern "C" __global__ void __launch_bounds__(1024, 1)                                                    \
    mshr_##OP##_s##S##_l##L(const char* base, unsigned int lines, unsigned int first, int warm, int passes,  \
                            unsigned int target, unsigned int ticket, unsigned int* claim, unsigned int* sink, \
                            unsigned long long* out) {                                                      \
        misses_in_flight<T, L, CG, G>(base, lines, first, warm, passes, target, ticket, claim, sink, out);   \
    }

#define EVERY_L(OP, CG, S, T, G) \
    MISSES(OP, CG, S, T, G, 1) MISSES(OP, CG, S, T, G, 2) MISSES(OP, CG, S, T, G, 4) MISSES(OP, CG, S, T, G, 8)

EVERY_L(plain, false, 1, unsigned int, 1)
EVERY_L(cg, true, 1, unsigned int, 1)
EVERY_L(plain, false, 4, uint4, 8)
EVERY_L(cg, true, 4, uint4, 8)

// Which SMs exist: every block records its %smid (launched with many blocks per SM).
extern "C" __global__ void mshr_sm_ids(unsigned int* ids) {
    if (threadIdx.x == 0) ids[blockIdx.x] = smid();
}
