// The timed loop of every throughput kernel of independent arithmetic chains (compute.cu, energy.cu,
// execution.cu): each thread carries CHAINS chains x <- step(x), UNROLL steps of each a trip, the CHAINS
// steps of one u independent of each other, so every SM sub-partition always has work to issue and the
// loop's counter and branch take a small share of the issue slots.  Thread 0 of every block records the
// clock64 cycles and %globaltimer ns of the loop (record_clock): each launch carries the SM clock it ran at.
#pragma once

#include "common.cuh"

template <int UNROLL, int CHAINS, typename T, typename Step>
__device__ __forceinline__ void timed_chains(T (&x)[CHAINS], int trips, unsigned long long* clocks, Step step) {
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) x[c] = step(x[c]);
        }
    }
    record_clock(clocks, c0, t0);
}

// The grid's chains: thread g's chains start at init[g * CHAINS + c] and end in out[g * CHAINS + c].
template <int UNROLL, int CHAINS, typename T, typename Step>
__device__ __forceinline__ void grid_chains(const T* init, int trips, T* out, unsigned long long* clocks, Step step) {
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * CHAINS;
    T x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = init[first + c];
    timed_chains<UNROLL>(x, trips, clocks, step);
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) out[first + c] = x[c];
}
