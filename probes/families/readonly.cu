// The read-only (non-coherent) data path against the plain one.
//
// Chase: one thread follows a random single-cycle chain of 64-bit absolute addresses, each load's address the
// previous load's value, so loads cannot overlap and cycles per step is the latency of the level holding the
// chain.  PATH 0: ld.global (the default, L1-caching LDG.E.64); 1: ld.global.nc (the read-only path __ldg takes,
// LDG.E.64.CONSTANT); 2: the two alternating, plain on even steps and nc on odd ones, so a chain of an even
// number of elements walked in even launches has half its elements always read through each path: one array
// behind both paths holds the chain up to its capacity, two separate arrays up to the sum of theirs.
// Loads are volatile inline PTX, kept in order between the timer reads.
// out = {clock64 cycles, %globaltimer ns, final address (the sink)}.
//
// Read: every block reads its region of 16-byte vectors `passes` times (plain ld.global.v4 or ld.global.nc.v4)
// and folds the words into the sink, one atomic per warp.  Regions may overlap (block_stride 0: every block
// reads the same region, starting at its own rotation so the blocks spread over it).

#include "common.cuh"

constexpr int UNROLL = 32;

// Step i of the walk (i counted from the launch's start, which the host keeps even) takes path PATH, or for
// PATH 2 the plain path on even i and the nc path on odd i: a pair of loads a call.
template <int PATH>
__device__ __forceinline__ unsigned long long ro_pair(unsigned long long p) {
    p = chase_load<PATH == 1 ? 2 : 0>(p);
    return chase_load<PATH != 0 ? 2 : 0>(p);
}

CHASE_KERNEL(ro_chase_plain, UNROLL, 2, ro_pair<0>)
CHASE_KERNEL(ro_chase_nc, UNROLL, 2, ro_pair<1>)
CHASE_KERNEL(ro_chase_mixed, UNROLL, 2, ro_pair<2>)

// Texture chase: the chain as 32-bit texel indices in a linear 1-D texture of unsigned ints (a texture object),
// each fetch (tex.1d, TLD) returning the next element's index.  Launched with one thread.
// out = {clock64 cycles, %globaltimer ns, final index (the sink)}.
__device__ __forceinline__ unsigned int tex_step(unsigned long long tex, unsigned int p) {
    unsigned int next, y, z, w;
    asm volatile("tex.1d.v4.u32.s32 {%0, %1, %2, %3}, [%4, {%5}];"
                 : "=r"(next), "=r"(y), "=r"(z), "=r"(w) : "l"(tex), "r"(p) : "memory");
    return next;
}

extern "C" __global__ void ro_chase_tex(unsigned long long tex, unsigned int start, long long warm_steps,
                                        long long steps, unsigned long long* out) {
    out[2] = timed_walk<UNROLL>(start, warm_steps, steps, [tex](unsigned int p) { return tex_step(tex, p); }, out);
}

template <int NC>
__device__ __forceinline__ uint4 ro_vector(const uint4* at) {
    uint4 v;
    if (NC) {
        asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(at));
    } else {
        asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(at));
    }
    return v;
}

template <int NC>
__device__ void ro_read(const uint4* buf, long long region_vectors, long long block_stride_vectors, int passes,
                        unsigned int* sink) {
    const uint4* region = buf + blockIdx.x * block_stride_vectors;
    const long long first = (long long)blockIdx.x * region_vectors / gridDim.x;  // this block's rotation
    unsigned int acc = 0;
    for (int pass = 0; pass < passes; ++pass) {
#pragma unroll 4
        for (long long i = threadIdx.x; i < region_vectors; i += blockDim.x) {
            long long j = first + i;
            if (j >= region_vectors) j -= region_vectors;
            acc += word_sum(ro_vector<NC>(region + j));
        }
    }
    publish(acc, sink);
}

extern "C" __global__ void ro_read_plain(const uint4* buf, long long region_vectors, long long block_stride_vectors,
                                         int passes, unsigned int* sink) {
    ro_read<0>(buf, region_vectors, block_stride_vectors, passes, sink);
}

extern "C" __global__ void ro_read_nc(const uint4* buf, long long region_vectors, long long block_stride_vectors,
                                      int passes, unsigned int* sink) {
    ro_read<1>(buf, region_vectors, block_stride_vectors, passes, sink);
}
