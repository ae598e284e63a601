// Barriers that start at sm_90: the shared-memory mbarrier (arrive, then try_wait on the phase's parity) and
// the thread-block-cluster barrier (barrier.cluster.arrive + barrier.cluster.wait).  Same conventions as
// barriers.cu: (n, trips, scratch, passed, cycles), thread 0 of block 0 times trips x BARRIER_UNROLL
// barriers with clock64, passed[0] counts barriers passed, the *_check variants count in passed[1] a
// neighbour seen behind the step the barrier should have ordered.
//
//   mbar_rt:         one block of n warps; one mbarrier expecting blockDim arrivals; every thread arrives
//                    (mbarrier.arrive.shared::cta.b64) and waits (mbarrier.try_wait.parity.shared::cta.b64,
//                    retried until the phase completes) -- the round trip of one phase.
//   cluster_bar_c<N>: one cluster of N blocks (__cluster_dims__); every thread arrives and waits on the
//                    cluster barrier (arrive.release: ptxas puts a GPU-scope MEMBAR before it; wait.acquire);
//                    the check reads the next block's step through distributed shared memory.
//   cluster_bar_relaxed_c<N>: the same with arrive.relaxed (no fence): the barrier alone; no check variant,
//                    as a relaxed arrive orders no memory.

#include "barriers.cuh"

// ---- mbarrier ---------------------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

template <bool CHECK>
__device__ __forceinline__ void mbar_rt(int trips, unsigned* passed, unsigned long long c0, long long* cycles) {
    __shared__ unsigned long long barrier;
    __shared__ unsigned slots[1024];
    const unsigned bar = smem_addr(&barrier);
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(blockDim.x) : "memory");
    __syncthreads();
    const unsigned next = (threadIdx.x + 32) % blockDim.x;
    unsigned behind = 0;
    const auto round_trip = [&](unsigned step) {
        asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.shared::cta.b64 state, [%0];\n\t}" ::"r"(bar)
                     : "memory");
        mbar_wait(bar, step & 1);
    };
    // the settling __syncthreads: nobody overwrites a slot before its reader has read it
    const unsigned step = barrier_loop<CHECK>(trips, slots, next, behind, round_trip, [] { __syncthreads(); });
    timed(cycles, c0);
    atomicAdd(passed, step);
    if (CHECK) atomicAdd(passed + 1, behind);
}

extern "C" __global__ void mbar_rt(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) {
    mbar_rt<false>(trips, passed, clock64_fenced(), cycles);
}

extern "C" __global__ void mbar_rt_check(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) {
    mbar_rt<true>(trips, passed, clock64_fenced(), cycles);
}

// ---- cluster barrier --------------------------------------------------------------------------------------

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The arrive without its release fence: the barrier alone (it orders no memory, so it has no check).
__device__ __forceinline__ void cluster_sync_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

template <bool CHECK, bool RELAXED = false>
__device__ __forceinline__ void cluster_bar(int trips, unsigned* passed, long long* cycles) {
    __shared__ unsigned slot;
    unsigned rank, size, remote;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(&slot)), "r"((rank + 1) % size));
    if (threadIdx.x == 0) slot = 0;
    cluster_sync();
    unsigned step = 0, behind = 0;
    const unsigned long long c0 = clock64_fenced();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < BARRIER_UNROLL; ++u) {
            ++step;
            if (CHECK && threadIdx.x == 0) *(volatile unsigned*)&slot = step;
            if (RELAXED)
                cluster_sync_relaxed();
            else
                cluster_sync();
            if (CHECK && threadIdx.x == 0) {
                unsigned seen;
                asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(seen) : "r"(remote) : "memory");
                behind += seen < step;
            }
        }
    }
    timed(cycles, c0);
    cluster_sync();  // no block leaves while another may still read its shared memory
    atomicAdd(passed, step);
    if (CHECK) atomicAdd(passed + 1, behind);
}

#define CLUSTER_BAR(N)                                                                                          \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                       \
        cluster_bar_c##N(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) {           \
        cluster_bar<false>(trips, passed, cycles);                                                             \
    }                                                                                                          \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                       \
        cluster_bar_c##N##_check(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) {   \
        cluster_bar<true>(trips, passed, cycles);                                                              \
    }                                                                                                          \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                       \
        cluster_bar_relaxed_c##N(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) {   \
        cluster_bar<false, true>(trips, passed, cycles);                                                       \
    }

CLUSTER_BAR(2)
CLUSTER_BAR(4)
CLUSTER_BAR(8)
CLUSTER_BAR(16)
