// Global-memory pointer chase: one thread follows a single-cycle random chain of 64-bit absolute
// addresses, each load's address being the previous load's value, so loads cannot overlap and the time
// per step is the load-to-use latency of the level that holds the chain.
//
// Loads are inline PTX marked volatile, so the compiler keeps them between the two timer reads and in
// order.  FLAVOUR 0: ld.global (default caching, through L1: LDG.E.64); 1: ld.global.cg (L2 only:
// LDG.E.64.STRONG.GPU).  out = {clock64 cycles, %globaltimer ns, final address (the sink)}.

#include "common.cuh"

constexpr int UNROLL = 32;

CHASE_KERNEL(chase_default, UNROLL, 1, chase_load<0>)
CHASE_KERNEL(chase_cg, UNROLL, 1, chase_load<1>)

// The L2-only chase from every SM at once: one thread of block b follows the chain from starts[b], so the
// chain's lines are read through both L2 partitions as every SM sees them.  out[3b..3b+2] as above.
extern "C" __global__ void chase_cg_every_sm(const unsigned long long* starts, long long warm_steps,
                                             long long steps, unsigned long long* out) {
    if (threadIdx.x != 0) return;
    unsigned long long* mine = out + 3 * blockIdx.x;
    mine[2] = timed_walk<UNROLL>(starts[blockIdx.x], warm_steps, steps,
                                 [](unsigned long long p) { return chase_load<1>(p); }, mine);
}

// Per-access latency of the L2-only chase: the same dependent chain, but after each load the thread stores
// the loaded address to shared memory (STS must wait for the load) and then reads %clock, so consecutive
// clock reads bracket exactly one load.  The interval per access (load latency plus the constant cost of
// the STS and the clock read) goes to shared memory as 16 bits and is copied out after the timed walk, so
// the record itself adds no global traffic.  Levels that a mixed chain hits (near L2, far L2, HBM) show as
// separate clusters of intervals.  out = {clock64 cycles, %globaltimer ns, final address (the sink)}.
extern "C" __global__ void chase_cg_record(unsigned long long start, long long warm_steps, int steps,
                                           unsigned short* intervals, unsigned long long* out) {
    extern __shared__ unsigned short recorded[];  // steps intervals, then one 32-bit slot
    const unsigned int slot =
        (unsigned int)__cvta_generic_to_shared(recorded) + ((2u * steps + 3u) & ~3u);
    out[2] = recorded_walk<UNROLL>(start, warm_steps, steps, [](unsigned long long p) { return chase_load<1>(p); },
                                   recorded, slot, intervals, out);
}

// Read every 32-byte sector of a buffer from the whole grid, so a chain no larger than the L2 starts resident
// in L2 (a chain written 8 bytes at a time holds partial sectors a load does not hit), without one thread
// walking the chain to get there.
extern "C" __global__ void touch(const unsigned long long* buf, long long words, long long stride_words,
                                 unsigned long long* sink) {
    unsigned long long acc = 0;
    for (long long i = (long long)(blockIdx.x * blockDim.x + threadIdx.x) * stride_words; i < words;
         i += (long long)gridDim.x * blockDim.x * stride_words) {
        acc ^= buf[i];
    }
    if (acc == 0x5a5a5a5a5a5a5a5aull) *sink = acc;  // never true for a chain of addresses; keeps the loads
}


// Shared-memory chase: the chain of 32-bit shared-window addresses is built in dynamic shared memory from
// next_index (element i is followed by element next_index[i]), then one thread follows it with
// ld.shared.u32 (LDS), each address being the previous load's value.  out = {cycles, ns, final element}.
extern "C" __global__ void chase_shared(const unsigned int* next_index, int elements, int stride_words,
                                        int start, long long warm_steps, long long steps,
                                        unsigned long long* out) {
    extern __shared__ unsigned int chain[];
    const unsigned int base = (unsigned int)__cvta_generic_to_shared(chain);
    for (int i = threadIdx.x; i < elements; i += blockDim.x) {
        chain[i * stride_words] = base + 4u * next_index[i] * stride_words;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const unsigned int p = timed_walk<UNROLL>(base + 4u * start * stride_words, warm_steps, steps,
                                              [](unsigned int p) {
                                                  asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p) :: "memory");
                                                  return p;
                                              }, out);
    out[2] = (p - base) / (4u * stride_words);
}

// Lay a chain (probes/kit/chain.py's fill_chain, on the GPU): element order[i] sits at byte at(i) =
// order[i] * stride_bytes + offsets[i] (offsets null: + 0) and holds base + at(i + 1), the last element the
// first's address, so the chain is one cycle through all `count` elements.  Other words are left alone.
extern "C" __global__ void lay_chain(unsigned long long* words, const long long* order, const long long* offsets,
                                     long long count, long long stride_bytes, unsigned long long base) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const long long j = i + 1 == count ? 0 : i + 1;
        const unsigned long long at = (unsigned long long)order[i] * stride_bytes + (offsets ? offsets[i] : 0);
        const unsigned long long next = (unsigned long long)order[j] * stride_bytes + (offsets ? offsets[j] : 0);
        words[at / 8] = base + next;
    }
}
