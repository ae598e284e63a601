// What every wgmma kernel shares (sm_90a only): the operands in shared memory, read through matrix
// descriptors, and the fences, commits and waits around wgmma.mma_async.
//
// One CTA is one warpgroup (WG_THREADS threads).  An operand arrives row-major (a row = `chunks` 16-byte
// chunks of K, K-major) and is copied into the no-swizzle canonical layout: 8-row x 16-byte core matrices of
// 128 contiguous bytes, core matrix (row group g, chunk h) at byte (chunks g + h) x 128, so the descriptor's
//   leading-dimension byte offset (next core matrix along K)   = 128,
//   stride-dimension byte offset  (next 8-row group along M/N) = chunks x 128.
// Generic-proxy stores (the copy) must be made visible to the async proxy wgmma reads shared memory through
// before the first wgmma; wgmma.fence orders the accumulator's registers before the wgmmas that read them.
#pragma once

#include "common.cuh"

constexpr int WG_THREADS = 128;

constexpr int log2_of(int x) { return x > 1 ? 1 + log2_of(x / 2) : 0; }

// Row r's 16-byte chunk h (row-major source) goes to core matrix (r / 8, h), line r % 8 (CHUNKS a power of 2).
template <int CHUNKS>
__device__ __forceinline__ void to_core_matrices(uint4* dst, const uint4* src, int rows) {
    static_assert(CHUNKS == 1 << log2_of(CHUNKS), "CHUNKS: a power of 2");
    for (int i = threadIdx.x; i < rows * CHUNKS; i += WG_THREADS) {
        const int r = i >> log2_of(CHUNKS), h = i & (CHUNKS - 1);
        dst[((r >> 3) * CHUNKS + h) * 8 + (r & 7)] = src[i];
    }
}

// The matrix descriptor of a tile in the layout above; swizzle bits 62-63 = 0 (none).
template <int CHUNKS>
__device__ __forceinline__ unsigned long long descriptor(const void* smem) {
    const unsigned long long address = (unsigned int)__cvta_generic_to_shared(smem);
    const unsigned long long lbo = 128, sbo = 128ull * CHUNKS;
    return ((address & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

// The descriptors of A (64 rows of A_CHUNKS, none when A comes from registers: a_rows = 0) and B (b_rows rows
// of B_CHUNKS) once both are copied into their tiles and visible to the async proxy.
struct Descriptors {
    unsigned long long a, b;
};

template <int A_CHUNKS, int B_CHUNKS>
__device__ __forceinline__ Descriptors stage_operands(uint4* a_tile, const uint4* a_src, int a_rows, uint4* b_tile,
                                                      const uint4* b_src, int b_rows) {
    if (a_rows > 0) to_core_matrices<A_CHUNKS>(a_tile, a_src, a_rows);
    to_core_matrices<B_CHUNKS>(b_tile, b_src, b_rows);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    return {descriptor<A_CHUNKS>(a_tile), descriptor<B_CHUNKS>(b_tile)};
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most PENDING committed groups are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// The throughput loop: `groups` commit groups of STEPS calls of issue(d), one wgmma each into the one
// accumulator d (N/2 registers per thread, from 0); after each commit, wait until at most one group is
// pending (wait_group 1), so the tensor core always has the next group queued.  Thread 0 records the loop's
// clock (record_clock); every thread stores d at out, N/2 per thread, CTA-major.
template <int N, int STEPS, typename T, typename Issue>
__device__ __forceinline__ void wgmma_groups(long long groups, Issue issue, T* out, unsigned long long* clocks) {
    T d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0;
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (long long g = 0; g < groups; ++g) {
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < STEPS; ++s) issue(d);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    record_clock(clocks, c0, t0);
    T* mine = out + ((long long)blockIdx.x * WG_THREADS + threadIdx.x) * (N / 2);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) mine[i] = d[i];
}
