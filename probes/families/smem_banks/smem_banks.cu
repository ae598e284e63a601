// Shared-memory bank conflicts: every warp of the block, lane l loading ACCESS-byte element
//     index(l) = l * pitch + (offset ^ (l & xor_mask))
// of a dynamic shared array (plain layout: pitch = stride, xor_mask = 0; +1 padding: pitch = stride + 1;
// XOR swizzle: pitch = stride, xor_mask = stride - 1).  Every 32-bit word of element i holds the element's
// own shared-window address, so a load returns the address it was loaded from and each lane stays at its
// own element for the whole kernel.
//
// Loads are inline PTX ld.volatile.shared (.u32 / .v2.u32 / .v4.u32 -> LDS / LDS.64 / LDS.128), kept full
// width and in order by volatile.  Two forms:
//   latency:    one warp; p = load(p), CHAIN_UNROLL dependent loads per trip: one warp-wide load in flight,
//               so cycles per load = the load-to-use latency, which grows with each extra way of conflict;
//   throughput: 2 x BATCH independent loads per trip into two register sets in turn (ping-pong): each
//               batch is issued before the previous batch's values are summed, so up to 2 x BATCH loads
//               are in flight and the bank pipeline, not the latency, sets the rate.  A batch is
//               BATCH_BYTES per lane (32 loads of 4 B, 16 of 8 B, 8 of 16 B): 32 registers each.  The
//               block has several warps, so the SM's shared-memory pipeline, not one warp's issue, is
//               the bottleneck.
// clock64 brackets the timed loop and %globaltimer brackets clock64, so each launch reports its SM clock.
// out = {shared address of the array, then per warp: clock64 start, end, globaltimer start, end};
// sink[thread] = final p (latency) or the 32-bit sum of every loaded value (throughput): the host checks
// both against the lane's address.

#include "common.cuh"

constexpr int CHAIN_UNROLL = 32;
constexpr int BATCH_BYTES = 128;

template <int ACCESS>
__device__ __forceinline__ unsigned int load(unsigned int address) {
    unsigned int x, y, z, w;
    if (ACCESS == 4) {
        asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(x) : "r"(address) : "memory");
    } else if (ACCESS == 8) {
        asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%2];" : "=r"(x), "=r"(y) : "r"(address) : "memory");
    } else {
        asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(address) : "memory");
    }
    return x;
}

template <int ACCESS, bool DEPENDENT>
__device__ void bank_probe(int elements, int pitch, int offset, int xor_mask, unsigned int trips,
                           unsigned long long* out, unsigned int* sink) {
    extern __shared__ unsigned int words[];
    constexpr int WORDS = ACCESS / 4;
    constexpr int BATCH = BATCH_BYTES / ACCESS;
    const unsigned int base = (unsigned int)__cvta_generic_to_shared(words);
    for (int i = threadIdx.x; i < elements * WORDS; i += blockDim.x) words[i] = base + (i / WORDS) * ACCESS;
    __syncthreads();
    const int lane = threadIdx.x % 32;
    unsigned int p = base + (unsigned int)(lane * pitch + (offset ^ (lane & xor_mask))) * ACCESS;
    unsigned long long c0, c1, t0, t1;
    if (DEPENDENT) {
        t0 = globaltimer_fenced();
        c0 = clock64_fenced();
#pragma unroll 1
        for (unsigned int t = 0; t < trips; ++t) {
#pragma unroll
            for (int u = 0; u < CHAIN_UNROLL; ++u) p = load<ACCESS>(p);
        }
        c1 = clock64_fenced();
        t1 = globaltimer_fenced();
        sink[threadIdx.x] = p;
    } else {
        unsigned int ping[BATCH], pong[BATCH], sum = 0;
#pragma unroll
        for (int k = 0; k < BATCH; ++k) ping[k] = load<ACCESS>(p);
        t0 = globaltimer_fenced();
        c0 = clock64_fenced();
#pragma unroll 1
        for (unsigned int t = 0; t < trips; ++t) {
#pragma unroll
            for (int k = 0; k < BATCH; ++k) {
                pong[k] = load<ACCESS>(p);
                sum += ping[k];
            }
#pragma unroll
            for (int k = 0; k < BATCH; ++k) {
                ping[k] = load<ACCESS>(p);
                sum += pong[k];
            }
        }
        c1 = clock64_fenced();
        t1 = globaltimer_fenced();
#pragma unroll
        for (int k = 0; k < BATCH; ++k) sum += ping[k];
        sink[threadIdx.x] = sum;
    }
    if (threadIdx.x == 0) out[0] = base;
    if (lane == 0) {
        unsigned long long* mine = out + 1 + 4 * (threadIdx.x / 32);
        mine[0] = c0;
        mine[1] = c1;
        mine[2] = t0;
        mine[3] = t1;
    }
}

#define BANK_KERNEL(NAME, ACCESS, DEPENDENT)                                                             \
    extern "C" __global__ void NAME(int elements, int pitch, int offset, int xor_mask, unsigned int trips, \
                                    unsigned long long* out, unsigned int* sink) {                     \
        bank_probe<ACCESS, DEPENDENT>(elements, pitch, offset, xor_mask, trips, out, sink);            \
    }

BANK_KERNEL(smem_latency_4, 4, true)
BANK_KERNEL(smem_latency_8, 8, true)
BANK_KERNEL(smem_latency_16, 16, true)
BANK_KERNEL(smem_throughput_4, 4, false)
BANK_KERNEL(smem_throughput_8, 8, false)
BANK_KERNEL(smem_throughput_16, 16, false)
