// Tensor-core numerics through wgmma.mma_async (sm_90a only: build with arch="sm_90a"): what one
// m64n8k{16,8,32} computes, case by case.
//
// One warpgroup (one CTA of 128 threads) per case.  Every case gives the whole A (64 x K), B (8 x K: B's
// columns, K contiguous) and C (64 x 8); a row is 32 bytes for every input type (k16 fp16/bf16, k8 tf32 in
// 32-bit containers, k32 e4m3/e5m2/s8).  A and B are copied into shared memory in the no-swizzle canonical
// layout (8-row x 16-byte core matrices of 128 contiguous bytes, core matrix (row group q, K half h) at byte
// (2 q + h) x 128: leading byte offset 128 along K, stride byte offset 256 along M/N) and read through matrix
// descriptors, K-major (no transpose).  The accumulator starts as C (scale-d = 1), its fragment the m16n8 one
// per warp w: element i of lane l is row 16 w + l / 4 + 8 (i >> 1), column 2 (l % 4) + (i & 1).  D is stored
// whole (64 x 8, row-major), so the host checks every element and a misread layout shows.

#include "wgmma.cuh"

constexpr int A_ROWS = 64, N = 8;

// SHAPE_TYPES: "k16.f32.bf16.bf16" etc.; TAIL: the immediates after scale-d (scale-a, scale-b and, for
// fp16/bf16, the transposes).
#define NUMERICS_WGMMA(NAME, SHAPE_TYPES, TAIL, ACC, CONSTRAINT)                                          \
    extern "C" __global__ void __launch_bounds__(WG_THREADS)                                             \
    NAME(const uint4* a, const uint4* b, const ACC* c, ACC* d) {                                         \
        __shared__ __align__(128) uint4 a_tile[A_ROWS * 2];                                              \
        __shared__ __align__(128) uint4 b_tile[N * 2];                                                   \
        const long long first = blockIdx.x;                                                              \
        const Descriptors desc =                                                                         \
            stage_operands<2, 2>(a_tile, a + first * A_ROWS * 2, A_ROWS, b_tile, b + first * N * 2, N);  \
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;                                      \
        const int row = 16 * warp + (lane >> 2), col = 2 * (lane & 3);                                   \
        ACC acc[4];                                                                                      \
        for (int i = 0; i < 4; ++i) acc[i] = c[first * A_ROWS * N + (row + 8 * (i >> 1)) * N + col + (i & 1)]; \
        wgmma_fence();                                                                                   \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                         \
                     "wgmma.mma_async.sync.aligned.m64n8" SHAPE_TYPES " {%0, %1, %2, %3}, %4, %5, p" TAIL \
                     ";\n}\n"                                                                            \
                     : CONSTRAINT(acc[0]), CONSTRAINT(acc[1]), CONSTRAINT(acc[2]), CONSTRAINT(acc[3])    \
                     : "l"(desc.a), "l"(desc.b), "r"(1));                                                \
        wgmma_commit();                                                                                  \
        wgmma_wait<0>();                                                                                 \
        for (int i = 0; i < 4; ++i) d[first * A_ROWS * N + (row + 8 * (i >> 1)) * N + col + (i & 1)] = acc[i]; \
    }

NUMERICS_WGMMA(numerics_wgmma_fp16, "k16.f32.f16.f16", ", 1, 1, 0, 0", float, "+f")
NUMERICS_WGMMA(numerics_wgmma_bf16, "k16.f32.bf16.bf16", ", 1, 1, 0, 0", float, "+f")
NUMERICS_WGMMA(numerics_wgmma_tf32, "k8.f32.tf32.tf32", ", 1, 1", float, "+f")
NUMERICS_WGMMA(numerics_wgmma_e4m3, "k32.f32.e4m3.e4m3", ", 1, 1", float, "+f")
NUMERICS_WGMMA(numerics_wgmma_e5m2, "k32.f32.e5m2.e5m2", ", 1, 1", float, "+f")
NUMERICS_WGMMA(numerics_wgmma_int8, "k32.s32.s8.s8", "", int, "+r")
