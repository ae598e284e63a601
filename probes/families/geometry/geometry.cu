// Cache-set probing: one thread follows a cyclic chain of 64-bit absolute addresses with the default,
// L1-caching ld.global (LDG.E.64), each load's address being the previous load's value.  After each load it
// stores the loaded value to shared memory (the STS must wait for the load) and then reads %clock, so
// consecutive clock reads bracket exactly one access: an L1 hit and an L1 miss are intervals of different
// size.  The intervals go to shared memory as 16 bits and are copied out after the walk, so the record adds
// no global traffic that could disturb the L1.  The launch may ask for more dynamic shared memory than the
// record needs: that allocation is what moves the L1/shared carve-out.
// out = {clock64 cycles of the recorded walk, %globaltimer ns, final address (the sink)}.

#include "common.cuh"

constexpr int UNROLL = 32;

__device__ __forceinline__ unsigned long long load_l1(unsigned long long p) {
    unsigned long long next;
    asm volatile("ld.global.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    return next;
}

extern "C" __global__ void l1_record(unsigned long long start, long long warm_steps, int steps,
                                     unsigned short* intervals, unsigned long long* out) {
    extern __shared__ unsigned short recorded[];  // steps intervals, then one 32-bit slot
    const unsigned int slot =
        (unsigned int)__cvta_generic_to_shared(recorded) + ((2u * steps + 3u) & ~3u);
    out[2] = recorded_walk<UNROLL>(start, warm_steps, steps, load_l1, recorded, slot, intervals, out);
}

// The L2 partition map as each SM sees it: launched with one block per SM (each block asks for more than half
// an SM's shared memory), the block on SM `target` walks a chain with L2-only loads (ld.global.cg), each access
// timed alone as in l1_record; the other blocks exit at once.  out[3] = the walking block's %smid.
__device__ __forceinline__ unsigned long long load_l2(unsigned long long p) {
    unsigned long long next;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    return next;
}

extern "C" __global__ void l2_record_on_sm(unsigned long long start, int steps, unsigned int target,
                                           unsigned short* intervals, unsigned long long* out) {
    extern __shared__ unsigned short recorded[];
    if (threadIdx.x != 0 || smid() != target) return;
    const unsigned int slot =
        (unsigned int)__cvta_generic_to_shared(recorded) + ((2u * steps + 3u) & ~3u);
    out[2] = recorded_walk<UNROLL>(start, 0, steps, load_l2, recorded, slot, intervals, out);
    out[3] = smid();
}

// Which SM each block of a one-block-per-SM launch ran on.
extern "C" __global__ void sm_ids(unsigned int* ids) {
    if (threadIdx.x == 0) ids[blockIdx.x] = smid();
}

// Constant-cache chase: one thread follows a random single-cycle chain of byte offsets into __constant__
// memory, each offset the previous load's value, so every step is one dependent LDC through the constant
// caches; the footprint the chain spans picks the level that holds it.  Launched with one thread.  64 KiB is
// the constant space a kernel may use.  out = {clock64 cycles, %globaltimer ns, final offset (the sink)}.
__constant__ unsigned int const_chain[16384];

__device__ __forceinline__ unsigned int const_step(unsigned int offset) {
    return *reinterpret_cast<const unsigned int*>(reinterpret_cast<const char*>(const_chain) + offset);
}

extern "C" __global__ void const_chase(unsigned int start, long long warm_steps, long long steps,
                                       unsigned long long* out) {
    // a per-thread start: LDC, not the uniform datapath's ULDC
    out[2] = timed_walk<UNROLL>(start + threadIdx.x, warm_steps, steps, const_step, out);
}

// L2 persistence: every thread of the grid reads its share of a hot buffer, then its share of one slice of a
// cold buffer (the streaming aggressor, plain loads), ``rounds`` times, so between two reads of a hot line a
// whole slice streams through the L2.  The hot loads carry an L2 eviction-priority policy (createpolicy):
// MODE 0 evict_normal (the hot set competes with the stream), 1 evict_last (the persisting priority an access
// policy window gives), 2 evict_first (demotes the hot lines again after a persisting run).  Each thread adds
// the words it read to *sink, so the host checks that every word was read.
template <int MODE>
__device__ __forceinline__ unsigned long long hot_policy() {
    unsigned long long policy;
    if (MODE == 1) {
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    } else if (MODE == 2) {
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    } else {
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
    }
    return policy;
}

template <int MODE>
__device__ void persist_read(const uint4* hot, long long hot_vectors, const uint4* cold, long long slice_vectors,
                             int rounds, unsigned int* sink) {
    const unsigned long long policy = hot_policy<MODE>();
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    unsigned int sum = 0;
    for (int r = 0; r < rounds; ++r) {
        for (long long i = thread; i < hot_vectors; i += threads) {
            unsigned int x, y, z, w;
            asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                         : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "l"(hot + i), "l"(policy));
            sum += x + y + z + w;
        }
        const uint4* slice = cold + (long long)r * slice_vectors;
        for (long long i = thread; i < slice_vectors; i += threads) {
            const uint4 v = slice[i];
            sum += v.x + v.y + v.z + v.w;
        }
    }
    atomicAdd(sink, sum);
}

extern "C" __global__ void persist_normal(const uint4* hot, long long hot_vectors, const uint4* cold,
                                          long long slice_vectors, int rounds, unsigned int* sink) {
    persist_read<0>(hot, hot_vectors, cold, slice_vectors, rounds, sink);
}

extern "C" __global__ void persist_evict_last(const uint4* hot, long long hot_vectors, const uint4* cold,
                                              long long slice_vectors, int rounds, unsigned int* sink) {
    persist_read<1>(hot, hot_vectors, cold, slice_vectors, rounds, sink);
}

extern "C" __global__ void persist_evict_first(const uint4* hot, long long hot_vectors, const uint4* cold,
                                               long long slice_vectors, int rounds, unsigned int* sink) {
    persist_read<2>(hot, hot_vectors, cold, slice_vectors, rounds, sink);
}
