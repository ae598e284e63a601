// Barriers and fences that exist on every target: named barriers (bar.sync id, count), memory fences, and a
// grid-wide barrier of a cooperative launch.  (mbarrier and cluster barriers, sm_90: barriers_sm90.cu.)
//
// Every kernel takes (n, trips, scratch, passed, cycles): thread 0 of block 0 times `trips` x BARRIER_UNROLL
// barriers with clock64, so the host differences two trip counts and the loop's own cost cancels.  After the
// loop every participating thread adds its barriers to passed[0]; the *_check variants also verify the
// barrier's ordering, each thread (or block) writing the step it reached before the barrier and reading a
// neighbour's after it, and count a neighbour seen behind in passed[1], which must stay 0.
//
//   named_partial:  bar.sync 1, n x 32 -- the first n warps of the block take part, the rest exit.
//   named_ids:      the block's warps split round-robin over n barrier ids (0 .. n-1), bar.sync id,
//                   blockDim / n each: n barriers in use at once.
//   fence_<f>:      one thread: a volatile global store then the fence (none, __threadfence_block,
//                   __threadfence, __threadfence_system), each store's value the step's number.
//   grid_sync:      a cooperative launch's blocks (all co-resident) pass a grid barrier: __syncthreads, thread
//                   0 adds 1 to a global counter (atom.add.release.gpu) and spins until it reaches
//                   generation x blocks (ld.acquire.gpu), __syncthreads.  scratch[0] is the counter (zeroed by
//                   the host), scratch[1 ..] one flag word per block for the check.

#include "barriers.cuh"

constexpr int GRID_UNROLL = 4;

// The kernel NAME times NAME<false>(args...) from thread 0 of block 0; NAME_check runs NAME<true>(args...) untimed.
#define TIMED_AND_CHECKED(NAME, ...)                                                                            \
    extern "C" __global__ void NAME(int n, int trips, unsigned* scratch, unsigned* passed, long long* cycles) { \
        const unsigned long long c0 = clock64_fenced();                                                         \
        NAME<false>(__VA_ARGS__);                                                                               \
        timed(cycles, c0);                                                                                      \
    }                                                                                                           \
    extern "C" __global__ void NAME##_check(int n, int trips, unsigned* scratch, unsigned* passed,              \
                                            long long* cycles) {                                                \
        NAME<true>(__VA_ARGS__);                                                                                \
    }

// ---- named barriers ---------------------------------------------------------------------------------------

template <bool CHECK>
__device__ __forceinline__ void named_partial(int n, int trips, unsigned* passed) {
    __shared__ unsigned slots[1024];
    if ((int)threadIdx.x >= n * 32) return;
    const unsigned count = n * 32;
    const unsigned next = (threadIdx.x + 32) % count;
    const auto sync = [&] { asm volatile("bar.sync 1, %0;" ::"r"(count) : "memory"); };
    unsigned behind = 0;
    const unsigned step = barrier_loop<CHECK>(trips, slots, next, behind, [&](unsigned) { sync(); }, sync);
    atomicAdd(passed, step);
    if (CHECK) atomicAdd(passed + 1, behind);
}

TIMED_AND_CHECKED(named_partial, n, trips, passed)

template <bool CHECK>
__device__ __forceinline__ void named_ids(int n, int trips, unsigned* passed) {
    __shared__ unsigned slots[1024];
    const unsigned id = (threadIdx.x / 32) % n;
    const unsigned count = blockDim.x / n;
    const unsigned next = (threadIdx.x + 32 * n) % blockDim.x;  // a thread of the next warp on the same id
    const auto sync = [&] { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); };
    unsigned behind = 0;
    const unsigned step = barrier_loop<CHECK>(trips, slots, next, behind, [&](unsigned) { sync(); }, sync);
    atomicAdd(passed, step);
    if (CHECK) atomicAdd(passed + 1, behind);
}

TIMED_AND_CHECKED(named_ids, n, trips, passed)

// ---- fences -----------------------------------------------------------------------------------------------

#define FENCE(NAME, FENCE_CALL)                                                                                 \
    extern "C" __global__ void fence_##NAME(int n, int trips, unsigned* scratch, unsigned* passed,              \
                                            long long* cycles) {                                                \
        volatile unsigned* word = scratch + threadIdx.x;                                                        \
        unsigned step = 0;                                                                                      \
        const unsigned long long c0 = clock64_fenced();                                                         \
        _Pragma("unroll 1") for (int t = 0; t < trips; ++t) {                                                   \
            _Pragma("unroll") for (int u = 0; u < BARRIER_UNROLL; ++u, ++step) {                                \
                *word = step;                                                                                   \
                FENCE_CALL;                                                                                     \
            }                                                                                                   \
        }                                                                                                       \
        timed(cycles, c0);                                                                                      \
        atomicAdd(passed, step);                                                                                \
    }

FENCE(none, )
FENCE(cta, __threadfence_block())
FENCE(gpu, __threadfence())
FENCE(sys, __threadfence_system())

// ---- grid barrier (cooperative launch) --------------------------------------------------------------------

__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned seen;
        asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(seen) : "l"(counter) : "memory");
        while (seen < target) asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    }
    __syncthreads();
}

template <bool CHECK>
__device__ __forceinline__ void grid_sync(int trips, unsigned* scratch, unsigned* passed) {
    volatile unsigned* flags = scratch + 1;
    const unsigned next = (blockIdx.x + 1) % gridDim.x;
    unsigned step = 0, behind = 0;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < GRID_UNROLL; ++u) {
            ++step;
            if (CHECK && threadIdx.x == 0) flags[blockIdx.x] = step;
            grid_barrier(scratch, step * gridDim.x);
            if (CHECK && threadIdx.x == 0) behind += flags[next] < step;
        }
    }
    if (threadIdx.x == 0) {
        atomicAdd(passed, step);
        if (CHECK) atomicAdd(passed + 1, behind);
    }
}

TIMED_AND_CHECKED(grid_sync, trips, scratch, passed)
