// What barriers.cu and barriers_sm90.cu share: the unroll, the timer of thread 0 of block 0, and the checked
// loop of a block-level barrier.
#pragma once

#include "common.cuh"

constexpr int BARRIER_UNROLL = 16;

__device__ __forceinline__ void timed(long long* cycles, unsigned long long c0) {
    const unsigned long long c1 = clock64_fenced();
    if (threadIdx.x == 0 && blockIdx.x == 0) cycles[0] = (long long)(c1 - c0);
}

// trips x BARRIER_UNROLL passes of barrier(step); with CHECK each participant writes the step it reached to
// slots[threadIdx.x] before each barrier and reads slots[next] after it (a neighbour seen behind adds to
// `behind`), then settle() (a second wait: no writer overtakes a reader).  Returns the barriers passed.
template <bool CHECK, typename Barrier, typename Settle>
__device__ __forceinline__ unsigned barrier_loop(int trips, unsigned* slots, unsigned next, unsigned& behind,
                                                 Barrier barrier, Settle settle) {
    unsigned step = 0;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < BARRIER_UNROLL; ++u, ++step) {
            if (CHECK) *(volatile unsigned*)&slots[threadIdx.x] = step;
            barrier(step);
            if (CHECK) {
                behind += *(volatile unsigned*)&slots[next] < step;
                settle();
            }
        }
    }
    return step;
}
