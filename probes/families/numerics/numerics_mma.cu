// Tensor-core numerics through mma.sync: what one m16n8k{16,8,32} computes, case by case.
//
// One warp (one block of 32 threads) per case.  Every case gives the whole A (16 x K), B (K x 8, stored as its
// 8 columns, K contiguous) and C (16 x 8); a row of A or a column of B is 32 bytes for every input type
// (k16 fp16/bf16, k8 tf32 in 32-bit containers, k32 e4m3/e5m2/s8), 8 words.  The fragments (PTX ISA,
// mma.m16n8k*, with g = lane / 4, t = lane % 4):
//   A register r: row g + 8 (r & 1), word t + 4 (r >> 1) of that row;
//   B register r: column g, word t + 4 r of that column;
//   C, D element i: row g + 8 (i >> 1), column 2 t + (i & 1).
// D is stored whole (16 x 8, row-major): the host checks every element, not only (0, 0), so a misread layout
// shows.  No arithmetic is done on C or D outside the tensor instruction (they are only loaded and stored).

constexpr int ROW_WORDS = 8;
constexpr int M = 16, N = 8;

#define NUMERICS_MMA(NAME, INSTRUCTION, ACC, CONSTRAINT)                                                  \
    extern "C" __global__ void __launch_bounds__(32)                                                     \
    NAME(const unsigned int* a, const unsigned int* b, const ACC* c, ACC* d) {                           \
        const int g = threadIdx.x >> 2, t = threadIdx.x & 3;                                             \
        const long long first = blockIdx.x;                                                              \
        const unsigned int* a_case = a + first * M * ROW_WORDS;                                          \
        const unsigned int* b_case = b + first * N * ROW_WORDS;                                          \
        unsigned int ar[4], br[2];                                                                       \
        ACC acc[4];                                                                                      \
        for (int r = 0; r < 4; ++r) ar[r] = a_case[(g + 8 * (r & 1)) * ROW_WORDS + t + 4 * (r >> 1)];    \
        for (int r = 0; r < 2; ++r) br[r] = b_case[g * ROW_WORDS + t + 4 * r];                           \
        for (int i = 0; i < 4; ++i) acc[i] = c[first * M * N + (g + 8 * (i >> 1)) * N + 2 * t + (i & 1)]; \
        asm volatile(INSTRUCTION " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"      \
                     : CONSTRAINT(acc[0]), CONSTRAINT(acc[1]), CONSTRAINT(acc[2]), CONSTRAINT(acc[3])    \
                     : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]));          \
        for (int i = 0; i < 4; ++i) d[first * M * N + (g + 8 * (i >> 1)) * N + 2 * t + (i & 1)] = acc[i]; \
    }

NUMERICS_MMA(numerics_mma_fp16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", float, "+f")
NUMERICS_MMA(numerics_mma_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", float, "+f")
NUMERICS_MMA(numerics_mma_tf32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", float, "+f")
NUMERICS_MMA(numerics_mma_int8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", int, "+r")
// FP8 mma.sync exists from sm_89 on (below it the kernels are left out; the probe sweeps no FP8 there).  On
// sm_90 ptxas emulates it (no FP8 HMMA): what the probe records there is the emulation's numerics.
#if __CUDA_ARCH__ >= 890
NUMERICS_MMA(numerics_mma_e4m3, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", float, "+f")
NUMERICS_MMA(numerics_mma_e5m2, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32", float, "+f")
#endif
