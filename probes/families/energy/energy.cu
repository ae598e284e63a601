// Kernels held for a second or more while NVML's energy counter runs (probes/families/energy): each does a
// known amount of one kind of work per launch, proves it to the host, and records (clock64 cycles,
// %globaltimer ns) of its loop in thread 0 of every block, so each launch carries the SM clock it ran at.
//
// * ffma_chains  -- FP32 FFMA: CHAINS independent chains x = fma(x, a, b) per thread, UNROLL a trip; the host
//                   passes a = -1, so each chain flips between two values, and checks each exactly.
// * read_stream  -- 16-byte ld.global.cg (L2, never L1) of every element of a buffer, `passes` times; the
//                   sum of every word read goes to a sink the host checks against passes x the buffer's sum.
//                   A buffer far larger than L2 reads HBM; one well inside L2, read again and again, the L2.
// * smem_read    -- 16-byte ld.shared of a block's SMEM_VEC-element array, every thread SMEM_UNROLL
//                   elements a trip, a warp's 32 consecutive elements per load (no bank conflict); the sum
//                   of every word read goes to the sink (the host knows the array: word i = i*GOLDEN+OFFSET).
// * mma_bf16, mma_e4m3 -- warp-level mma.sync (m16n8k16 BF16, m16n8k32 E4M3; FP32 accumulate), MMA_ACC
//                   accumulators per warp, for GPUs without wgmma.  Every element of A is `a` and of B is
//                   `b`, so each product element is K*a*b whatever the fragment layout; each trip starts
//                   accumulator j at j (distinct: ptxas would merge identical ones) and adds their value,
//                   truncated, to the sink (exact: small integers).
// The loads are volatile (ld.volatile.shared: ptxas would merge a warp's repeated shared addresses) and every
// asm is volatile: the compiler may neither hoist a trip's loads out of the trip loop nor drop one.

#include "chains.cuh"
#include "loads.cuh"
#include "mma_sync.cuh"

constexpr int VEC_THREADS = 256, CHAINS = 8, UNROLL = 64;
constexpr int STREAM_THREADS = 256;
constexpr int SMEM_THREADS = 256, SMEM_VEC = 1024, SMEM_UNROLL = 16;
constexpr int MMA_THREADS = 256, MMA_ACC = 8, MMA_UNROLL = 16;
constexpr unsigned int GOLDEN = 0x9E3779B1u, OFFSET = 0x7F4A7C15u;

extern "C" __global__ void __launch_bounds__(VEC_THREADS)
ffma_chains(const float* init, float a, float b, int trips, float* out, unsigned long long* clocks) {
    grid_chains<UNROLL, CHAINS>(init, trips, out, clocks, [=](float x) { return fmaf(x, a, b); });
}

LOAD_V4(load_cg, "ld.global.cg", const uint4*, "l")

extern "C" __global__ void __launch_bounds__(STREAM_THREADS)
read_stream(const uint4* words, long long elements, int passes, unsigned int* sink, unsigned long long* clocks) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0;
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int p = 0; p < passes; ++p) {
#pragma unroll 4
        for (long long i = first; i < elements; i += stride) acc += word_sum(load_cg(words + i));
    }
    record_clock(clocks, c0, t0);
    publish(acc, sink);
}

LOAD_V4(load_shared, "ld.volatile.shared", unsigned int, "r")

extern "C" __global__ void __launch_bounds__(SMEM_THREADS)
smem_read(int trips, unsigned int* sink, unsigned long long* clocks) {
    __shared__ uint4 tile[SMEM_VEC];
    for (int i = threadIdx.x; i < SMEM_VEC; i += blockDim.x) {
        const unsigned int w = 4u * i;
        tile[i] = make_uint4(w * GOLDEN + OFFSET, (w + 1) * GOLDEN + OFFSET, (w + 2) * GOLDEN + OFFSET,
                             (w + 3) * GOLDEN + OFFSET);
    }
    __syncthreads();
    const unsigned int base = smem_addr(tile);
    unsigned int acc = 0;
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < SMEM_UNROLL; ++u)
            acc += word_sum(load_shared(base + 16u * ((threadIdx.x + u * SMEM_THREADS) & (SMEM_VEC - 1))));
    }
    record_clock(clocks, c0, t0);
    publish(acc, sink);
}

// ---- mma.sync (GPUs without wgmma): mma_sync.cuh's bf16 and e4m3 shapes --------------------------------
// a_word, b_word: one 32-bit register of the operand (every element the same value).
template <MmaOp OP>
__device__ __forceinline__ void mma_loop(unsigned int a_word, unsigned int b_word, int trips, unsigned int* sink,
                                         unsigned long long* clocks) {
    const unsigned int a[4] = {a_word, a_word, a_word, a_word}, b[2] = {b_word, b_word};
    unsigned int acc = 0;
    const long long c0 = clock64_plain();
    const unsigned long long t0 = globaltimer();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        float c[MMA_ACC][4];
#pragma unroll
        for (int j = 0; j < MMA_ACC; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = (float)j;
#pragma unroll
        for (int u = 0; u < MMA_UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < MMA_ACC; ++j) mma<OP>(c[j], a, b);
        }
#pragma unroll
        for (int j = 0; j < MMA_ACC; ++j) {
#pragma unroll
            for (int i = 0; i < 4; ++i) acc += (unsigned int)(int)c[j][i];
        }
    }
    record_clock(clocks, c0, t0);
    publish(acc, sink);
}

extern "C" __global__ void __launch_bounds__(MMA_THREADS)
mma_bf16(unsigned int a_word, unsigned int b_word, int trips, unsigned int* sink, unsigned long long* clocks) {
    mma_loop<MmaOp::bf16>(a_word, b_word, trips, sink, clocks);
}

#if __CUDA_ARCH__ >= 890
extern "C" __global__ void __launch_bounds__(MMA_THREADS)
mma_e4m3(unsigned int a_word, unsigned int b_word, int trips, unsigned int* sink, unsigned long long* clocks) {
    mma_loop<MmaOp::e4m3>(a_word, b_word, trips, sink, clocks);
}
#endif
