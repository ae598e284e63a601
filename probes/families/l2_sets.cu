// How many lines the L2 holds, access by access: one thread per walking block follows a cyclic chain of 64-bit
// absolute addresses with L2-only loads (ld.global.cg, LDG.E.64.STRONG.GPU), each load's address the previous
// load's value.  After each load it stores the value to shared memory (the STS waits for the load) and reads
// %clock, so consecutive clock reads bracket one access; each interval goes into a histogram of BIN_CYCLES-wide
// bins in shared memory (the walk writes nothing to global memory that could take L2 lines), copied out after
// the walk.  The host splits the histogram at the valley after the near-partition hits: those are the hits.
// out = {clock64 cycles of the walk, final address (the sink)} per block.

#include "common.cuh"

constexpr int HIST_BINS = 256;
constexpr unsigned int BIN_SHIFT = 4;  // 16-cycle bins: 4096 cycles, then the last bin holds the rest

__device__ __forceinline__ unsigned long long load_cg(unsigned long long p) {
    unsigned long long next;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    return next;
}

// Block b walks `steps` steps from starts[b]; hist[b * HIST_BINS + k] counts its intervals in bin k.
extern "C" __global__ void l2_sets_walk(const unsigned long long* starts, long long steps, unsigned int* hist,
                                        unsigned long long* out) {
    __shared__ unsigned int counts[HIST_BINS];
    __shared__ unsigned int slot_word;
    for (int k = threadIdx.x; k < HIST_BINS; k += blockDim.x) counts[k] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long p = starts[blockIdx.x];
        const unsigned int slot = smem_addr(&slot_word);
        const unsigned long long c0 = clock64_fenced();
        unsigned int before = clock_after(p, slot);
#pragma unroll 1
        for (long long i = 0; i < steps; ++i) {
            p = load_cg(p);
            const unsigned int after = clock_after(p, slot);
            ++counts[min((after - before) >> BIN_SHIFT, (unsigned int)(HIST_BINS - 1))];
            before = after;
        }
        const unsigned long long c1 = clock64_fenced();
        out[2 * blockIdx.x] = c1 - c0;
        out[2 * blockIdx.x + 1] = p;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < HIST_BINS; k += blockDim.x) hist[(long long)blockIdx.x * HIST_BINS + k] = counts[k];
}
