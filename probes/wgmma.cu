// Hopper tensor-core throughput through wgmma.mma_async (sm_90a only: build with arch="sm_90a").
//
// One CTA is one warpgroup (128 threads); the host fills each SM with as many CTAs as the driver grants
// (3 at N=256, where the 64 x N fp32 accumulator takes N/2 = 128 registers per thread; more at smaller N),
// so several warpgroups keep the SM's four tensor cores fed.  Operands live in shared memory and are read
// through matrix descriptors: A is 64 x K, B is N x K (both K-major), K x element = 32 bytes for every type
// (k16 bf16/fp16, k8 tf32, k32 e4m3).  The host passes them row-major (row = 32 bytes of K) with random
// non-zero values; the kernel copies them into the no-swizzle canonical layout: 8-row x 16-byte core
// matrices of 128 contiguous bytes, core matrix (row group g, K half h) at byte (2 g + h) x 128, so
//   leading-dimension byte offset (next core matrix along K)   = 128,
//   stride-dimension byte offset  (next 8-row group along M/N) = 256.
// The loop issues STEPS wgmmas into the one accumulator per group, commits the group and waits until at
// most one group is pending (wait_group 1): the tensor core always has the next group queued.  Every
// thread stores its accumulator fragment; the host checks a one-group launch exactly against its own
// matmul (the layout read right) and every launch for finite, identical results in every CTA.  Thread 0
// records clock64 and %globaltimer around the loop: each launch carries the SM clock it ran at.

#include "common.cuh"

constexpr int WG_THREADS = 128;
constexpr int STEPS = 4;          // wgmmas per commit group
constexpr int ROW_BYTES = 32;     // K x element bytes of one operand row, every type
constexpr int A_ROWS = 64;
constexpr int MAX_N = 256;

enum class Op { bf16, fp16, tf32, e4m3 };

// Inline PTX needs literal operand lists: the accumulator's N/2 registers per N, written out.
#define WGMMA_REGS_64 "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
    "}"
#define WGMMA_AB_64 "%32, %33"
#define WGMMA_SCALE_64 "%34"
#define WGMMA_OUT_64 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WGMMA_REGS_128 "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
    "}"
#define WGMMA_AB_128 "%64, %65"
#define WGMMA_SCALE_128 "%66"
#define WGMMA_OUT_128 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_REGS_192 "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
    "}"
#define WGMMA_AB_192 "%96, %97"
#define WGMMA_SCALE_192 "%98"
#define WGMMA_OUT_192 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),\
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),\
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),\
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),\
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define WGMMA_REGS_256 "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
    "}"
#define WGMMA_AB_256 "%128, %129"
#define WGMMA_SCALE_256 "%130"
#define WGMMA_OUT_256 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),\
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),\
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),\
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),\
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),\
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),\
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),\
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),\
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

template <int N, Op OP>
__device__ __forceinline__ void wgmma(float* d, unsigned long long a, unsigned long long b);

// scale-d = 1 (accumulate; %SCALE is the 1 passed as "r"), scale-a = scale-b = 1; bf16/fp16 also take
// the transpose flags (0: K-major, as stored); tf32 and e4m3 are K-major only.
#define WGMMA_DEF(N, OP, SHAPE_TYPES, TAIL)                                                              \
    template <>                                                                                          \
    __device__ __forceinline__ void wgmma<N, Op::OP>(float* d, unsigned long long a, unsigned long long b) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " WGMMA_SCALE_##N ", 0;\n"                        \
                     "wgmma.mma_async.sync.aligned.m64n" #N SHAPE_TYPES " " WGMMA_REGS_##N ", "          \
                     WGMMA_AB_##N ", p" TAIL ";\n}\n"                                                    \
                     : WGMMA_OUT_##N                                                                     \
                     : "l"(a), "l"(b), "r"(1));                                                          \
    }

#define WGMMA_DEF_ALL_N(OP, SHAPE_TYPES, TAIL) \
    WGMMA_DEF(64, OP, SHAPE_TYPES, TAIL)       \
    WGMMA_DEF(128, OP, SHAPE_TYPES, TAIL)      \
    WGMMA_DEF(192, OP, SHAPE_TYPES, TAIL)      \
    WGMMA_DEF(256, OP, SHAPE_TYPES, TAIL)

WGMMA_DEF_ALL_N(bf16, "k16.f32.bf16.bf16", ", 1, 1, 0, 0")
WGMMA_DEF_ALL_N(fp16, "k16.f32.f16.f16", ", 1, 1, 0, 0")
WGMMA_DEF_ALL_N(tf32, "k8.f32.tf32.tf32", ", 1, 1")
WGMMA_DEF_ALL_N(e4m3, "k32.f32.e4m3.e4m3", ", 1, 1")

__device__ __forceinline__ unsigned long long descriptor(const void* smem) {
    const unsigned long long address = (unsigned int)__cvta_generic_to_shared(smem);
    const unsigned long long lbo = 128, sbo = 256;  // see the layout above; swizzle bits 62-63 = 0 (none)
    return ((address & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32);
}

// Row r's 16-byte half h (row-major source) goes to core matrix (r / 8, h), line r % 8.
__device__ __forceinline__ void to_core_matrices(uint4* dst, const uint4* src, int rows) {
    for (int i = threadIdx.x; i < rows * 2; i += WG_THREADS) {
        const int r = i >> 1, h = i & 1;
        dst[((r >> 3) * 2 + h) * 8 + (r & 7)] = src[i];
    }
}

// out: N/2 floats per thread, CTA-major; clocks: (cycles, ns) of the loop per CTA.
template <int N, Op OP>
__device__ __forceinline__ void wgmma_loop(const uint4* a_rows, const uint4* b_rows, long long groups,
                                           float* out, unsigned long long* clocks) {
    __shared__ __align__(128) uint4 a_tile[A_ROWS * ROW_BYTES / 16];
    __shared__ __align__(128) uint4 b_tile[MAX_N * ROW_BYTES / 16];
    to_core_matrices(a_tile, a_rows, A_ROWS);
    to_core_matrices(b_tile, b_rows, N);
    // Generic-proxy stores must be made visible to the async proxy that wgmma reads shared memory through.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const unsigned long long da = descriptor(a_tile), db = descriptor(b_tile);
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
    const long long c0 = clock64();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (long long g = 0; g < groups; ++g) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int s = 0; s < STEPS; ++s) wgmma<N, OP>(d, da, db);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const long long c1 = clock64();
    const unsigned long long t1 = globaltimer();
    float* mine = out + ((long long)blockIdx.x * WG_THREADS + threadIdx.x) * (N / 2);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) mine[i] = d[i];
    if (threadIdx.x == 0) {
        clocks[2 * blockIdx.x] = (unsigned long long)(c1 - c0);
        clocks[2 * blockIdx.x + 1] = t1 - t0;
    }
}

#define WGMMA_KERNEL(OP, N)                                                                              \
    extern "C" __global__ void __launch_bounds__(WG_THREADS)                                             \
    wgmma_##OP##_n##N(const uint4* a_rows, const uint4* b_rows, long long groups, float* out,            \
                      unsigned long long* clocks) {                                                      \
        wgmma_loop<N, Op::OP>(a_rows, b_rows, groups, out, clocks);                                      \
    }

#define WGMMA_KERNELS(OP) WGMMA_KERNEL(OP, 64) WGMMA_KERNEL(OP, 128) WGMMA_KERNEL(OP, 192) WGMMA_KERNEL(OP, 256)

WGMMA_KERNELS(bf16)
WGMMA_KERNELS(fp16)
WGMMA_KERNELS(tf32)
WGMMA_KERNELS(e4m3)
