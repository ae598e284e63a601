// Write policies of the caches, three ways.
//
// Store, then reload (wp_chase_*): one thread follows a random single-cycle chain of 64-bit absolute addresses
// that fits the L1, each load's address the previous load's value.  ACCESS 0 only loads (ld.global: every line
// was last touched by a load, so every step is an L1 hit); 1 writes each loaded value straight back into the
// word it came from (st.global of an unchanged word, ordered after the load by its data), so every line was
// last touched by a store when the chain comes round to it again; 2 loads L2-only (ld.global.cg: every step an
// L2 hit).  ACCESS 1 steps at ACCESS 0's latency if the L1 keeps a line a store wrote into (write-back, or
// write-through updating the line), at ACCESS 2's if a store leaves the L1 without the line (write-through,
// the line evicted or never updated).  out = {clock64 cycles, %globaltimer ns, final address (the sink)}.
//
// Write, then read (wp_allocate): every block, round by round, writes its own slice of a fresh buffer with
// plain 16-byte stores, then reads that slice back L2-only (first read), reads it again (second read: L2 hits
// whatever the first did), and reads a slice of a buffer no one has touched since the host flushed the L2
// (cold: HBM), timing each read phase in clock64 cycles between barriers.  The first read costs what the second
// does if the L2 allocated the written lines, what the cold read does if the writes went past it.
// cycles[3 * block + k] = the block's cycles in phase k (first, second, cold), summed over the rounds.
//
// Word per sector (wp_scatter): every thread stores 4-byte words at a stride of stride_words words over the
// span, grid-stride; stride 1 writes whole sectors, stride 8 one word of each 32-byte sector, which the memory
// must merge with the sector's other 28 bytes.

#include "common.cuh"

constexpr int UNROLL = 32;

template <int ACCESS>
__device__ __forceinline__ unsigned long long wp_step(unsigned long long p) {
    const unsigned long long next = chase_load<ACCESS == 2 ? 1 : 0>(p);
    if (ACCESS == 1) asm volatile("st.global.u64 [%0], %1;" :: "l"(p), "l"(next) : "memory");
    return next;
}

CHASE_KERNEL(wp_chase_load, UNROLL, 1, wp_step<0>)
CHASE_KERNEL(wp_chase_store, UNROLL, 1, wp_step<1>)
CHASE_KERNEL(wp_chase_cg, UNROLL, 1, wp_step<2>)

__device__ __forceinline__ unsigned int wp_read_cg(const uint4* slice, long long vectors) {
    unsigned int acc = 0;
#pragma unroll 4
    for (long long i = threadIdx.x; i < vectors; i += blockDim.x) {
        unsigned int x, y, z, w;
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "l"(slice + i) : "memory");
        acc += x + y + z + w;
    }
    return acc;
}

// Word i of the written buffer: i * 0x9E3779B1 + 0x7F4A7C15 (the kit's Golden words), so the host knows its sum.
extern "C" __global__ void wp_allocate(uint4* written, const uint4* cold, long long slice_vectors, int rounds,
                                       unsigned long long* cycles, unsigned int* sink) {
    unsigned long long spent[3] = {0, 0, 0};
    unsigned int acc = 0;
    for (int r = 0; r < rounds; ++r) {
        const long long slice = ((long long)r * gridDim.x + blockIdx.x) * slice_vectors;
        for (long long i = threadIdx.x; i < slice_vectors; i += blockDim.x) {
            const unsigned int w = 4u * (unsigned int)(slice + i);
            uint4 v;
            v.x = w * 0x9E3779B1u + 0x7F4A7C15u;
            v.y = (w + 1u) * 0x9E3779B1u + 0x7F4A7C15u;
            v.z = (w + 2u) * 0x9E3779B1u + 0x7F4A7C15u;
            v.w = (w + 3u) * 0x9E3779B1u + 0x7F4A7C15u;
            asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                         :: "l"(written + slice + i), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
        }
        const uint4* from[3] = {written + slice, written + slice, cold + slice};
        for (int k = 0; k < 3; ++k) {
            __syncthreads();
            const unsigned long long c0 = clock64_fenced();
            acc += wp_read_cg(from[k], slice_vectors);
            __syncthreads();
            spent[k] += clock64_fenced() - c0;
        }
    }
    if (threadIdx.x == 0) {
        for (int k = 0; k < 3; ++k) cycles[3 * blockIdx.x + k] = spent[k];
    }
    publish(acc, sink);
}

extern "C" __global__ void wp_scatter(unsigned int* words, long long count, long long stride_words,
                                      unsigned int value) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        asm volatile("st.global.u32 [%0], %1;" :: "l"(words + i * stride_words), "r"(value) : "memory");
    }
}
