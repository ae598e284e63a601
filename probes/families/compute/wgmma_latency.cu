// wgmma latency (sm_90a only: build with arch="sm_90a"): one warpgroup (one CTA of 128 threads) runs a
// dependent chain of wgmma.mma_async into one accumulator, each step fenced, committed and waited for
// (wait_group 0) before the next is issued, so each step costs one wgmma's full latency.  Operands and
// descriptors are wgmma.cu's (wgmma.cuh's no-swizzle canonical layout, K x element = 32 bytes); the host
// passes every element 1, so every accumulator element must come out exactly steps x K.  Thread 0 times trips
// x WG_LAT_UNROLL steps with clock64; the host differences two trip counts.

#include "wgmma.cu"

constexpr int WG_LAT_UNROLL = 8;

template <int N, Op OP>
__device__ __forceinline__ void wgmma_chain(const uint4* a_rows, const uint4* b_rows, int trips, float* out,
                                            long long* cycles) {
    __shared__ __align__(128) uint4 a_tile[A_ROWS * CHUNKS];
    __shared__ __align__(128) uint4 b_tile[N * CHUNKS];
    const Descriptors desc = stage_operands<CHUNKS, CHUNKS>(a_tile, a_rows, A_ROWS, b_tile, b_rows, N);
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
    const long long elapsed = timed_chain<WG_LAT_UNROLL, true>(trips, [&] {
        wgmma_fence();
        wgmma<N, OP>(d, desc.a, desc.b);
        wgmma_commit();
        wgmma_wait<0>();
    });
    float* mine = out + threadIdx.x * (N / 2);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) mine[i] = d[i];
    if (threadIdx.x == 0) cycles[0] = elapsed;
}

#define WGMMA_LAT_KERNEL(OP, N)                                                                          \
    extern "C" __global__ void __launch_bounds__(WG_THREADS)                                             \
    wgmma_lat_##OP##_n##N(const uint4* a_rows, const uint4* b_rows, int trips, float* out, long long* cycles) { \
        wgmma_chain<N, Op::OP>(a_rows, b_rows, trips, out, cycles);                                      \
    }

#define WGMMA_LAT_KERNELS(OP) WGMMA_LAT_KERNEL(OP, 64) WGMMA_LAT_KERNEL(OP, 256)

WGMMA_LAT_KERNELS(bf16)
WGMMA_LAT_KERNELS(fp16)
WGMMA_LAT_KERNELS(tf32)
WGMMA_LAT_KERNELS(e4m3)
