// Throughput against occupancy (lecture §7.4-7.5): a streaming read whose loads in flight per SM are set by
// two knobs the host controls exactly -- resident warps per SM (block size, and a dynamic shared-memory
// spoiler that limits resident blocks) and ILP, the independent loads each thread issues before it uses any.
//
// Kernels stream_<W>b_ilp<N>: W-byte loads per lane (4: one 128-byte warp load, the lecture's; 16: one
// 512-byte warp load, LDG.E.128), N of them per thread per trip, all issued before the first is summed, so a
// warp keeps exactly N loads in flight and waits for them (the sum depends on every one) before the next trip.
// Loads are ld.global.cg (L2 only): an SM re-reading an L2-resident footprint must not be served by its L1.
//
// The footprint is `tiles` tiles of N warp loads (N * 32 * W bytes, contiguous).  Each trip, warp w reads tile
// (first + w + trip * warps) mod tiles: over a launch the warps together read tiles first, first + 1, ...,
// first + warps * trips - 1 (mod tiles), so consecutive trips stream through memory and the host, advancing
// `first` from launch to launch, reads every tile once before any tile again (a footprint far beyond the L2
// then comes from HBM) and knows exactly which tiles each launch summed.  Every lane folds the words it loaded
// into a 32-bit sum; one lane per warp adds the warp's total to *sink, which the host checks.

#include "common.cuh"

template <typename T, int ILP>
__device__ __forceinline__ void stream(const T* __restrict__ base, unsigned int tiles, unsigned int first,
                                       long long trips, unsigned int* sink) {
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const unsigned int step = ((gridDim.x * blockDim.x) >> 5) % tiles;  // tiles < 2^31 (the host checks)
    unsigned int tile = (unsigned int)(((unsigned long long)first + warp) % tiles);
    unsigned int acc = 0;
#pragma unroll 1
    for (long long t = 0; t < trips; ++t) {
        const T* p = base + (size_t)tile * (ILP * 32) + lane;
        T v[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u) v[u] = __ldcg(p + u * 32);
#pragma unroll
        for (int u = 0; u < ILP; ++u) acc += word_sum(v[u]);
        tile += step;
        if (tile >= tiles) tile -= tiles;
    }
    acc = __reduce_add_sync(0xffffffffu, acc);
    if (lane == 0) atomicAdd(sink, acc);
}

// Every variant but the widest fits 32 registers, so 64 warps (two blocks of 1024 threads) can be resident
// on sm_90.  Eight 16-byte loads in flight need 32 destination registers alone: that variant is allowed 64,
// and the register budget caps its residency (the sweep leaves out what it cannot hold).
#define STREAM(W, T, N, MIN_BLOCKS)                                                                         \
    extern "C" __global__ void __launch_bounds__(1024, MIN_BLOCKS)                                          \
    stream_##W##b_ilp##N(const T* base, unsigned int tiles, unsigned int first, long long trips,            \
                         unsigned int* sink) {                                                              \
        stream<T, N>(base, tiles, first, trips, sink);                                                      \
    }

STREAM(4, unsigned int, 1, 2)
STREAM(4, unsigned int, 2, 2)
STREAM(4, unsigned int, 4, 2)
STREAM(4, unsigned int, 8, 2)
STREAM(16, uint4, 1, 2)
STREAM(16, uint4, 2, 2)
STREAM(16, uint4, 4, 2)
STREAM(16, uint4, 8, 1)
