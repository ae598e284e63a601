// The execution chapter: instruction latency and throughput, warp-scheduler issue, branch divergence.
//
// Instruction table.  Every op is one struct (OP_* macros) whose step(x, a, b) issues the instruction
// through inline PTX (so the compiler can neither fold nor reassociate a chain), and two kernels come from
// one template each:
//   lat_<op>:  one warp; each thread runs one dependent chain x <- step(x, a, b), LAT_UNROLL steps a trip,
//              timed with clock64.  The host differences two trip counts, so the clock reads, the loads
//              before the loop and the store after it cancel: cycles per step is the instruction's latency.
//   thr_<op>:  every SM full of THR_THREADS-thread blocks; each thread runs CHAINS independent chains,
//              UNROLL steps each per trip.  Thread 0 of every block records clock64 and %globaltimer around
//              its loop, so each launch carries the SM clock it ran at.
// x starts at host values (per lane and chain), a and b are kernel parameters, and every chain's final x is
// stored: a launch of the throughput kernel with LAT_UNROLL / UNROLL times the trips must reproduce the
// latency kernel's chain bit for bit, and every warp of the grid holds the same values.
// Loads chase self-pointers (each word holds its own address: LDS in shared memory, LDG in a small global
// table that stays in L1); STS has no result to chain, so it has a throughput kernel only.
//
// Warp scheduling (sched_ffma<ILP>): blocks of warps each running ILP independent FFMA chains; every block
// records its SM, clock64 at start and end, so the host sums the warp instructions each SM issued over its
// own span of cycles.  Divergence (diverge_ffma): lane l of every warp runs branch l mod ways; branch k of a
// trip is taken only by its lanes, so a warp split `ways` ways issues `ways` bodies for one body's useful
// work.

#include "chains.cuh"

constexpr int LAT_UNROLL = 64;
constexpr int THR_THREADS = 256;
constexpr int CHAINS = 8;
constexpr int UNROLL = 16;
constexpr int LDS_WORDS = 256;
constexpr int DIVERGE_ILP = 4;
constexpr int DIVERGE_UNROLL = 32;

typedef unsigned int u32;
typedef unsigned long long u64;

// Shared memory every op may use: LDS and STS chase or store into it.
__device__ __forceinline__ u32 smem_base() {
    __shared__ u32 words[LDS_WORDS];
    return (u32)__cvta_generic_to_shared(words);
}

// The default op: x is used as the host gave it, no shared memory.
struct Plain {
    __device__ static void setup() {}
};

// LDS: every word holds its own shared address; x is an offset the host gave, made an address.
struct SharedSelf {
    __device__ static void setup() {
        const u32 base = smem_base();
#pragma unroll
        for (int i = threadIdx.x & 31; i < LDS_WORDS; i += 32)  // every warp writes the same words: no loop
            asm volatile("st.shared.u32 [%0], %0;" ::"r"(base + 4 * i));
        __syncthreads();
    }
};

#define OP(NAME, T, CONSTRAINT, BASE, START, PTX)                                                   \
    struct NAME##_op : BASE {                                                                      \
        typedef T type;                                                                            \
        __device__ __forceinline__ static T start(T v) { return START; }                           \
        __device__ __forceinline__ static T step(T x, T a, T b) {                                  \
            T y;                                                                                   \
            asm volatile(PTX : "=" CONSTRAINT(y) : CONSTRAINT(x), CONSTRAINT(a), CONSTRAINT(b));   \
            return y;                                                                              \
        }                                                                                          \
    };

#define OP_U32(NAME, PTX) OP(NAME, u32, "r", Plain, v, PTX)
#define OP_U64(NAME, PTX) OP(NAME, u64, "l", Plain, v, PTX)
#define OP_F32(NAME, PTX) OP(NAME, float, "f", Plain, v, PTX)
#define OP_F64(NAME, PTX) OP(NAME, double, "d", Plain, v, PTX)

// FP32
OP_F32(fadd, "add.f32 %0, %1, %2;")
OP_F32(fmul, "mul.f32 %0, %1, %2;")
OP_F32(ffma, "fma.rn.f32 %0, %1, %2, %3;")
// FP16 / BF16, two lanes in a 32-bit register
OP_U32(hadd2, "add.f16x2 %0, %1, %2;")
OP_U32(hmul2, "mul.f16x2 %0, %1, %2;")
OP_U32(hfma2, "fma.rn.f16x2 %0, %1, %2, %3;")
OP_U32(hfma2_bf16, "fma.rn.bf16x2 %0, %1, %2, %3;")
// FP64
OP_F64(dadd, "add.f64 %0, %1, %2;")
OP_F64(dmul, "mul.f64 %0, %1, %2;")
OP_F64(dfma, "fma.rn.f64 %0, %1, %2, %3;")
// Integer
// IADD3: a three-input add z <- z1 + z2 + a over the last two values (the state's two words), which no
// reassociation can shorten; a one-register chain x + a + a ... would be folded to x + n a.
OP_U64(iadd3, "{ .reg .u32 lo, hi, s, alo; mov.b64 {lo, hi}, %1; cvt.u32.u64 alo, %2; add.u32 s, lo, hi; "
              "add.u32 s, s, alo; mov.b64 %0, {s, lo}; }")
OP_U32(imad, "mad.lo.u32 %0, %1, %2, %3;")
// IMAD.WIDE: the high word of one 32x32->64 product is the next multiplicand (a 64-bit addend would add
// an IADD3 pair after it).
OP_U64(imad_wide, "{ .reg .u32 lo, hi, alo; mov.b64 {lo, hi}, %1; cvt.u32.u64 alo, %2; mul.wide.u32 %0, hi, alo; }")
OP_U32(lop3, "lop3.b32 %0, %1, %2, %3, 0x96;")
OP_U32(shf, "shf.l.wrap.b32 %0, %1, %1, %2;")
// Integer min/max: a min then a max (two steps of one min would fuse into one three-input VIMNMX3)
OP_U32(imnmx, "min.s32 %0, %1, %2; max.s32 %0, %0, %3;")
OP_U32(popc, "popc.b32 %0, %1;")
OP_U32(flo, "bfind.u32 %0, %1;")
OP_U32(brev, "brev.b32 %0, %1;")
OP_U64(add64, "add.u64 %0, %1, %2;")
OP_U64(mul64, "mul.lo.u64 %0, %1, %2;")
// Special functions (the multi-function unit); .ftz: no denormal fix-up around the MUFU
OP_F32(mufu_ex2, "ex2.approx.ftz.f32 %0, %1;")
OP_F32(mufu_lg2, "lg2.approx.ftz.f32 %0, %1;")
// rcp(rcp(x)) would fold to x: the negated operand (a free modifier) keeps every step
OP_F32(mufu_rcp, "{ .reg .f32 t; neg.f32 t, %1; rcp.approx.ftz.f32 %0, t; }")
OP_F32(mufu_rsq, "rsqrt.approx.ftz.f32 %0, %1;")
OP_F32(mufu_sin, "sin.approx.ftz.f32 %0, %1;")
OP_F32(mufu_cos, "cos.approx.ftz.f32 %0, %1;")
OP_F32(mufu_sqrt, "sqrt.approx.ftz.f32 %0, %1;")
// Conversions; the result's bits are the next step's input
OP_U32(f2f_f32_f16, "{ .reg .f32 f; mov.b32 f, %1; cvt.rn.f16x2.f32 %0, f, f; }")
OP_U32(f2f_f32_bf16, "{ .reg .f32 f; mov.b32 f, %1; cvt.rn.bf16x2.f32 %0, f, f; }")
OP_U32(f2f_f16_f32, "{ .reg .f16 h, g; .reg .f32 f; mov.b32 {h, g}, %1; cvt.f32.f16 f, h; mov.b32 %0, f; }")
OP_U32(f2i, "{ .reg .f32 f; mov.b32 f, %1; cvt.rzi.s32.f32 %0, f; }")
OP_U32(i2f, "{ .reg .f32 f; cvt.rn.f32.s32 f, %1; mov.b32 %0, f; }")
// Warp-level; vote compares x with a
// shfl.idx reads the source lane from the value itself (a fixed lane twice would fold to once)
OP_U32(shfl_idx, "shfl.sync.idx.b32 %0, %1, %1, 0x1f, 0xffffffff;")
OP_U32(shfl_up, "shfl.sync.up.b32 %0, %1, 1, 0, 0xffffffff;")
OP_U32(shfl_down, "shfl.sync.down.b32 %0, %1, 1, 0x1f, 0xffffffff;")
OP_U32(shfl_bfly, "shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;")
OP_U32(vote, "{ .reg .pred p; setp.ne.u32 p, %1, %2; vote.sync.ballot.b32 %0, p, 0xffffffff; }")
OP_U32(redux, "redux.sync.add.u32 %0, %1, 0xffffffff;")
OP_U32(match, "match.any.sync.b32 %0, %1, 0xffffffff;")
// Memory: loads chase self-pointers; the store keeps x and writes it where it points
OP(lds, u32, "r", SharedSelf, smem_base() + 4 * (v % LDS_WORDS), "ld.volatile.shared.u32 %0, [%1];")
OP_U64(ldg, "ld.global.u64 %0, [%1];")
OP(sts, u32, "r", SharedSelf, smem_base() + 4 * (v % LDS_WORDS), "st.volatile.shared.u32 [%1], %2; mov.b32 %0, %1;")

template <class Op>
__device__ __forceinline__ void latency(const typename Op::type* init, typename Op::type a, typename Op::type b,
                                        int trips, typename Op::type* out, long long* cycles) {
    Op::setup();
    typename Op::type x = Op::start(init[(threadIdx.x & 31) * CHAINS]);
    const long long elapsed = timed_chain<LAT_UNROLL>(trips, [&] { x = Op::step(x, a, b); });
    out[threadIdx.x] = x;
    if (threadIdx.x == 0) cycles[0] = elapsed;
}

template <class Op>
__device__ __forceinline__ void throughput(const typename Op::type* init, typename Op::type a,
                                           typename Op::type b, int trips, typename Op::type* out, u64* clocks) {
    Op::setup();
    typename Op::type x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = Op::start(init[(threadIdx.x & 31) * CHAINS + c]);
    timed_chains<UNROLL>(x, trips, clocks, [=](typename Op::type v) { return Op::step(v, a, b); });
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * CHAINS;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) out[first + c] = x[c];
}

#define KERNELS(NAME)                                                                                    \
    extern "C" __global__ void lat_##NAME(const NAME##_op::type* init, NAME##_op::type a,              \
                                          NAME##_op::type b, int trips, NAME##_op::type* out,          \
                                          long long* cycles) {                                         \
        latency<NAME##_op>(init, a, b, trips, out, cycles);                                            \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(THR_THREADS)                                          \
        thr_##NAME(const NAME##_op::type* init, NAME##_op::type a, NAME##_op::type b, int trips,       \
                   NAME##_op::type* out, u64* clocks) {                                                \
        throughput<NAME##_op>(init, a, b, trips, out, clocks);                                         \
    }

KERNELS(fadd) KERNELS(fmul) KERNELS(ffma)
KERNELS(hadd2) KERNELS(hmul2) KERNELS(hfma2) KERNELS(hfma2_bf16)
KERNELS(dadd) KERNELS(dmul) KERNELS(dfma)
KERNELS(iadd3) KERNELS(imad) KERNELS(imad_wide) KERNELS(lop3) KERNELS(shf) KERNELS(imnmx) KERNELS(popc)
KERNELS(flo) KERNELS(brev) KERNELS(add64) KERNELS(mul64)
KERNELS(mufu_ex2) KERNELS(mufu_lg2) KERNELS(mufu_rcp) KERNELS(mufu_rsq) KERNELS(mufu_sin) KERNELS(mufu_cos)
KERNELS(mufu_sqrt)
KERNELS(f2f_f32_f16) KERNELS(f2f_f32_bf16) KERNELS(f2f_f16_f32) KERNELS(f2i) KERNELS(i2f)
KERNELS(shfl_idx) KERNELS(shfl_up) KERNELS(shfl_down) KERNELS(shfl_bfly) KERNELS(vote) KERNELS(redux)
KERNELS(match)
KERNELS(lds) KERNELS(ldg) KERNELS(sts)

// ---- warp scheduling and divergence ------------------------------------------------------------------
// rec: five words per block: SM id, clock64 at start and end (after a barrier, so the block's slowest warp
// ends it), %globaltimer at start and end.
__device__ __forceinline__ void record_block(u64* rec, long long c0, u64 t0) {
    __syncthreads();
    const long long c1 = clock64_plain();
    const u64 t1 = globaltimer();
    if (threadIdx.x == 0) {
        u64* r = rec + 5 * blockIdx.x;
        r[0] = smid();
        r[1] = (u64)c0;
        r[2] = (u64)c1;
        r[3] = t0;
        r[4] = t1;
    }
}

__device__ __forceinline__ float fma_step(float x, float a, float b) {
    float y;
    asm volatile("fma.rn.f32 %0, %1, %2, %3;" : "=f"(y) : "f"(x), "f"(a), "f"(b));
    return y;
}

// The frame of the scheduling kernels: each thread's ILP chains start from its lane's row of init; after a
// barrier (every warp starts together) body(x) runs, timed as record_block records it; then the chains are
// stored, ILP words per thread.
template <int ILP, typename Body>
__device__ __forceinline__ void block_timed(const float* init, float* out, u64* rec, Body body) {
    float x[ILP];
#pragma unroll
    for (int c = 0; c < ILP; ++c) x[c] = init[(threadIdx.x & 31) * CHAINS + c];
    __syncthreads();
    const long long c0 = clock64_plain();
    const u64 t0 = globaltimer();
    body(x);
    record_block(rec, c0, t0);
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * ILP;
#pragma unroll
    for (int c = 0; c < ILP; ++c) out[first + c] = x[c];
}

// Each warp: ILP independent FFMA chains, SCHED_FFMA FFMAs a trip whatever the ILP.
constexpr int SCHED_FFMA = 256;

template <int ILP>
__device__ __forceinline__ void sched(const float* init, float a, float b, int trips, float* out, u64* rec) {
    block_timed<ILP>(init, out, rec, [&](float* x) {
#pragma unroll 1
        for (int t = 0; t < trips; ++t) {
#pragma unroll
            for (int u = 0; u < SCHED_FFMA / ILP; ++u) {
#pragma unroll
                for (int c = 0; c < ILP; ++c) x[c] = fma_step(x[c], a, b);
            }
        }
    });
}

#define SCHED(ILP)                                                                                       \
    extern "C" __global__ void sched_ffma_ilp##ILP(const float* init, float a, float b, int trips, float* out, \
                                                  u64* rec) {                                            \
        sched<ILP>(init, a, b, trips, out, rec);                                                         \
    }
SCHED(1) SCHED(2) SCHED(4) SCHED(8)

// A warp split `ways` ways (a power of two): lane l runs branch l mod ways of every trip, a body of
// DIVERGE_ILP x DIVERGE_UNROLL FFMAs that only its lanes take.
extern "C" __global__ void __launch_bounds__(THR_THREADS)
diverge_ffma(const float* init, float a, float b, int ways, int trips, float* out, u64* rec) {
    const int branch = threadIdx.x & (ways - 1);
    block_timed<DIVERGE_ILP>(init, out, rec, [&](float* x) {
#pragma unroll 1
        for (int t = 0; t < trips; ++t) {
#pragma unroll 1
            for (int k = 0; k < ways; ++k) {
                if (branch == k) {
#pragma unroll
                    for (int u = 0; u < DIVERGE_UNROLL; ++u) {
#pragma unroll
                        for (int c = 0; c < DIVERGE_ILP; ++c) x[c] = fma_step(x[c], a, b);
                    }
                }
            }
        }
    });
}

// ---- mma.sync latency --------------------------------------------------------------------------------
// One warp, one accumulator: each mma.sync adds A B to the accumulator the previous one wrote (a dependent
// chain through C/D).  A and B hold the same word in every register (1 in every element), so after n steps
// every accumulator element is n K exactly (K: the shape's depth), which the host checks.
#define MMA_LATENCY(NAME, SHAPE, CT, CC)                                                                    \
    extern "C" __global__ void mma_lat_##NAME(u32 a, u32 b, int trips, CT* out, long long* cycles) {      \
        CT d[4] = {0, 0, 0, 0};                                                                         \
        const long long elapsed = timed_chain<MMA_UNROLL>(trips, [&] {                                  \
            asm volatile("mma.sync.aligned." SHAPE " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "      \
                         "{%0, %1, %2, %3};"                                                            \
                         : "+" CC(d[0]), "+" CC(d[1]), "+" CC(d[2]), "+" CC(d[3])                       \
                         : "r"(a), "r"(a), "r"(a), "r"(a), "r"(b), "r"(b));                             \
        });                                                                                             \
        for (int i = 0; i < 4; ++i) out[4 * threadIdx.x + i] = d[i];                                    \
        if (threadIdx.x == 0) cycles[0] = elapsed;                                                      \
    }

constexpr int MMA_UNROLL = 32;
MMA_LATENCY(bf16, "m16n8k16.row.col.f32.bf16.bf16.f32", float, "f")
MMA_LATENCY(fp16, "m16n8k16.row.col.f32.f16.f16.f32", float, "f")
MMA_LATENCY(tf32, "m16n8k8.row.col.f32.tf32.tf32.f32", float, "f")
MMA_LATENCY(int8, "m16n8k32.row.col.s32.s8.s8.s32", int, "r")

// FP64 m8n8k4: A and B one double per lane, two accumulators per lane.
extern "C" __global__ void mma_lat_fp64(double a, double b, int trips, double* out, long long* cycles) {
    double d[2] = {0, 0};
    const long long elapsed = timed_chain<MMA_UNROLL>(trips, [&] {
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                     : "+d"(d[0]), "+d"(d[1])
                     : "d"(a), "d"(b));
    });
    out[2 * threadIdx.x] = d[0];
    out[2 * threadIdx.x + 1] = d[1];
    if (threadIdx.x == 0) cycles[0] = elapsed;
}

// ---- global atomics ------------------------------------------------------------------------------------
// atom_lat_<t>: one thread; each atom.add's operand is the value the previous one returned (a dependent
// chain at one address, no contention).  The address is p + threadIdx.x (p with one thread): an address
// ptxas cannot prove uniform, else it wraps an integer atomic in a warp aggregation (SHFL scan, one lane).  red_<t>: every thread of a full grid issues `reps` red.add
// (no value returned) to one address for the whole grid (mode 0), one per warp (1) or its own (2).
#define ATOMICS(NAME, T, CC, TYPE)                                                                          \
    extern "C" __global__ void atom_lat_##NAME(T* p, T v, int trips, T* out, long long* cycles) {           \
        T x = v;                                                                                            \
        T* q = p + threadIdx.x;                                                                             \
        const long long elapsed = timed_chain<ATOM_UNROLL>(trips, [&] {                                     \
            asm volatile("atom.global.add." TYPE " %0, [%1], %2;" : "=" CC(x) : "l"(q), CC(x) : "memory");  \
        });                                                                                                 \
        out[0] = x;                                                                                         \
        cycles[0] = elapsed;                                                                                \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(THR_THREADS)                                               \
        red_##NAME(T* p, T v, int mode, int reps, u64* clocks) {                                            \
        const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;                          \
        T* q = p + (mode == 0 ? 0 : mode == 1 ? thread / 32 : thread);                                      \
        const long long c0 = clock64_plain();                                                                     \
        const u64 t0 = globaltimer();                                                                       \
        _Pragma("unroll 1") for (int r = 0; r < reps; ++r)                                                  \
            asm volatile("red.global.add." TYPE " [%0], %1;" ::"l"(q), CC(v) : "memory");                  \
        record_clock(clocks, c0, t0);                                                                             \
    }

constexpr int ATOM_UNROLL = 32;
ATOMICS(i32, u32, "r", "u32")
ATOMICS(f32, float, "f", "f32")
ATOMICS(f64, double, "d", "f64")

// ---- __syncthreads --------------------------------------------------------------------------------------
// One block of blockDim threads passes SYNC_UNROLL barriers a trip; thread 0 times them with clock64.  Each
// thread adds its barriers to a shared count, read after the last barrier: every thread must have passed them.
constexpr int SYNC_UNROLL = 16;
extern "C" __global__ void sync_lat(int trips, u32* passed, long long* cycles) {
    __shared__ u32 count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    const long long elapsed = timed_chain<SYNC_UNROLL>(trips, [] { __syncthreads(); });
    atomicAdd(&count, (u32)(trips * SYNC_UNROLL));
    __syncthreads();
    if (threadIdx.x == 0) {
        passed[0] = count;
        cycles[0] = elapsed;
    }
}
