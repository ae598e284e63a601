// Tensor-core units beside compute.wgmma's (sm_90a only: build with arch="sm_90a").
//
// tu_<op>_n<N>: one warpgroup (128 threads) per CTA, as many CTAs per SM as the driver grants; STEPS
// wgmma.mma_async per commit group into one accumulator, wait_group 1 (the next group always queued).
//   ss  -- bf16 m64nNk16, A and B from shared memory through descriptors (compute.wgmma's form);
//   rs  -- bf16 m64nNk16, A from registers (4 words per thread, the m16n8k16 A fragment of the thread's
//          warp's 16 rows), B from shared memory;
//   s8  -- s8 x s8 -> s32 m64nNk32, A and B from shared memory;
//   sp  -- bf16 m64nNk32 with 2:4 structured sparsity (wgmma.mma_async.sp): A holds the 16 kept values of
//          each row's 32 (2 of every 4), B is N x 32; every thread passes the same metadata word, so every
//          group of 4 keeps the same two positions (the host's reference uses them);
//   sprs -- sp with A from registers: the 64 x 16 kept values as rs's fragment (4 words per thread; the PTX
//          ISA's sparse m64nNk32 register A is the dense m64nNk16 one over the kept values), the same
//          metadata; only B is read from shared memory.
// Shared operands: A 64 x K, B N x K, K-major, copied from row-major host rows into the no-swizzle canonical
// layout: 8-row x 16-byte core matrices, core matrix (row group g, 16-byte chunk h of a row of C chunks) at
// byte (C g + h) x 128, so the leading byte offset (along K) is 128 and the stride byte offset (along M/N)
// C x 128.  Rows are 32 bytes (C = 2), sp's B rows 64 bytes (C = 4).
//
// dmma_<shape>: mma.sync f64 (DMMA), 8 warps per block, DMMA_ACC independent accumulators per warp, one
// mma.sync each per trip; operands in registers, the same per lane in every warp.
//
// Every kernel starts its accumulators at 0 and thread 0 of each block records (clock64 cycles, %globaltimer
// ns) of its loop, so every launch carries the SM clock it ran at.

#include "wgmma.cuh"
#include "wgmma_operands.cuh"

constexpr int STEPS = 4;       // wgmmas per commit group
constexpr int ROW_BYTES = 32;  // K x element bytes of one operand row
constexpr int A_CHUNKS = ROW_BYTES / 16;
constexpr int A_ROWS = 64;
constexpr int DMMA_THREADS = 256;
constexpr int DMMA_ACC = 8;

enum class Op { ss, rs, s8, sp, sprs };

// Words of a_frag per thread: A's 4 register words (rs, sprs), then the sparsity metadata (sp, sprs).
constexpr int FRAG_WORDS = 5;

template <Op OP> struct Acc { using type = float; };
template <> struct Acc<Op::s8> { using type = int; };

// a: the thread's FRAG_WORDS words: A's fragment a[0..3] (rs, sprs), the sparsity metadata a[4] (sp, sprs).
template <int N, Op OP>
__device__ __forceinline__ void gmma(typename Acc<OP>::type* d, unsigned long long da, const unsigned int* a,
                                     unsigned long long db);

// scale-d = 1 (accumulate), scale-a = scale-b = 1, no transpose (K-major as stored): TAIL; ...: the inputs.
#define TU_GMMA(N, OP, C, INSTRUCTION, SHAPE_TYPES, FORM, TAIL, ...)                                       \
    template <>                                                                                          \
    __device__ __forceinline__ void gmma<N, Op::OP>(typename Acc<Op::OP>::type* d, unsigned long long da, \
                                                    const unsigned int* a, unsigned long long db) {      \
        WGMMA_ASM(N, C, INSTRUCTION ".sync.aligned.m64n" #N SHAPE_TYPES, FORM, TAIL, __VA_ARGS__);       \
    }
#define TU_A_REGS "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
#define TU_DEF(N)                                                                                               \
    TU_GMMA(N, ss, "+f", "wgmma.mma_async", "k16.f32.bf16.bf16", WGMMA_SS, ", 1, 1, 0, 0", "l"(da), "l"(db))    \
    TU_GMMA(N, rs, "+f", "wgmma.mma_async", "k16.f32.bf16.bf16", WGMMA_RS, ", 1, 1, 0", TU_A_REGS, "l"(db))     \
    TU_GMMA(N, s8, "+r", "wgmma.mma_async", "k32.s32.s8.s8", WGMMA_SS, "", "l"(da), "l"(db))                    \
    TU_GMMA(N, sp, "+f", "wgmma.mma_async.sp", "k32.f32.bf16.bf16", WGMMA_SP, ", 1, 1, 0, 0", "l"(da), "l"(db), \
            "r"(a[4]))                                                                                          \
    TU_GMMA(N, sprs, "+f", "wgmma.mma_async.sp", "k32.f32.bf16.bf16", WGMMA_SPRS, ", 1, 1, 0", TU_A_REGS,       \
            "l"(db), "r"(a[4]))

TU_DEF(128)
TU_DEF(256)

// a_rows: A row-major (ss, s8, sp); a_frag: FRAG_WORDS words per thread (see gmma);
// out: N/2 accumulators per thread, CTA-major.
template <int N, Op OP>
__device__ __forceinline__ void gmma_loop(const uint4* a_rows, const unsigned int* a_frag, const uint4* b_rows,
                                          long long groups, typename Acc<OP>::type* out,
                                          unsigned long long* clocks) {
    __shared__ __align__(128) uint4 a_tile[A_ROWS * A_CHUNKS];
    constexpr bool SPARSE = OP == Op::sp || OP == Op::sprs, A_REGS = OP == Op::rs || OP == Op::sprs;
    constexpr int B_CHUNKS = (SPARSE ? 2 : 1) * ROW_BYTES / 16;
    __shared__ __align__(128) uint4 b_tile[N * B_CHUNKS];
    const Descriptors desc =
        stage_operands<A_CHUNKS, B_CHUNKS>(a_tile, a_rows, A_REGS ? 0 : A_ROWS, b_tile, b_rows, N);
    unsigned int a[FRAG_WORDS];
#pragma unroll
    for (int i = 0; i < FRAG_WORDS; ++i)
        a[i] = (i < 4 ? A_REGS : SPARSE) ? a_frag[threadIdx.x * FRAG_WORDS + i] : 0u;
    wgmma_groups<N, STEPS>(groups, [&](typename Acc<OP>::type* d) { gmma<N, OP>(d, desc.a, a, desc.b); }, out,
                           clocks);
}

#define TU_KERNEL(OP, N)                                                                                 \
    extern "C" __global__ void __launch_bounds__(WG_THREADS)                                             \
    tu_##OP##_n##N(const uint4* a_rows, const unsigned int* a_frag, const uint4* b_rows, long long groups, \
                   typename Acc<Op::OP>::type* out, unsigned long long* clocks) {                        \
        gmma_loop<N, Op::OP>(a_rows, a_frag, b_rows, groups, out, clocks);                               \
    }

TU_KERNEL(ss, 128)
TU_KERNEL(ss, 256)
TU_KERNEL(rs, 128)
TU_KERNEL(rs, 256)
TU_KERNEL(s8, 256)
TU_KERNEL(sp, 256)
TU_KERNEL(sprs, 256)

// ---- FP64 mma.sync (DMMA) -------------------------------------------------------------------------------

// Fragment registers per lane: (A, B, C) doubles.
template <int M, int K> struct DmmaShape;
template <> struct DmmaShape<8, 4> { static constexpr int A = 1, B = 1, C = 2; };
template <> struct DmmaShape<16, 16> { static constexpr int A = 8, B = 4, C = 4; };

template <int M, int K>
__device__ __forceinline__ void dmma(double* c, const double* a, const double* b);

template <>
__device__ __forceinline__ void dmma<8, 4>(double* c, const double* a, const double* b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(c[0]), "+d"(c[1])
                 : "d"(a[0]), "d"(b[0]));
}

template <>
__device__ __forceinline__ void dmma<16, 16>(double* c, const double* a, const double* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

// a: S::A doubles per lane, b: DMMA_ACC x S::B per lane (each accumulator its own B, the same for every
// warp); out: DMMA_ACC x S::C doubles per thread.
template <int M, int K>
__device__ __forceinline__ void dmma_loop(const double* a_in, const double* b_in, int trips, double* out,
                                          unsigned long long* clocks) {
    using S = DmmaShape<M, K>;
    const int lane = threadIdx.x & 31;
    double a[S::A], b[DMMA_ACC][S::B], c[DMMA_ACC][S::C];
#pragma unroll
    for (int i = 0; i < S::A; ++i) a[i] = a_in[lane * S::A + i];
#pragma unroll
    for (int j = 0; j < DMMA_ACC; ++j) {
#pragma unroll
        for (int i = 0; i < S::B; ++i) b[j][i] = b_in[(lane * DMMA_ACC + j) * S::B + i];
#pragma unroll
        for (int i = 0; i < S::C; ++i) c[j][i] = 0.0;
    }
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int j = 0; j < DMMA_ACC; ++j) dmma<M, K>(c[j], a, b[j]);
    }
    record_clock(clocks, c0, t0);
    double* mine = out + ((long long)blockIdx.x * blockDim.x + threadIdx.x) * DMMA_ACC * S::C;
#pragma unroll
    for (int j = 0; j < DMMA_ACC; ++j) {
#pragma unroll
        for (int i = 0; i < S::C; ++i) mine[j * S::C + i] = c[j][i];
    }
}

extern "C" __global__ void __launch_bounds__(DMMA_THREADS)
dmma_m8n8k4(const double* a, const double* b, int trips, double* out, unsigned long long* clocks) {
    dmma_loop<8, 4>(a, b, trips, out, clocks);
}

extern "C" __global__ void __launch_bounds__(DMMA_THREADS)
dmma_m16n8k16(const double* a, const double* b, int trips, double* out, unsigned long long* clocks) {
    dmma_loop<16, 16>(a, b, trips, out, clocks);
}
