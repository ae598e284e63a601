// Hopper's new units (sm_90): distributed shared memory (thread-block clusters), the TMA bulk-copy engine
// (cp.async.bulk completing on an mbarrier) against Ampere cp.async and plain loads, and DPX instructions.
//
// Every wait on an mbarrier is bounded by %globaltimer (WAIT_LIMIT_NS): a wrong phase or a copy that never
// lands counts an error and the kernel goes on, so a bug shows as an error count, never a hung GPU.  A
// thread that timed out once stops waiting (so at most one limit per thread).
//
// Kernels:
//   dsmem_chase_<mode>_c<N>   cluster of N blocks (__cluster_dims__): each block writes a random single-cycle
//                             chain into its own shared memory, the cluster syncs, then thread 0 of every
//                             block follows a chain with dependent 64-bit loads, clock64-timed:
//                             local: its own, ld.shared (LDS.64);  self: its own, through the generic
//                             address mapa gives for its own rank (LD.E.64);  remote: the next rank's, through
//                             the generic address mapa gives for that rank (LD.E.64 over the SM-to-SM network).
//                             The cluster syncs again before exit, so no chain is freed while it is read.
//                             out[3 * block + {0,1,2}] = {cycles, globaltimer ns, final element}.
//   dsmem_read_<pattern>_c<N> every block fills 32 KiB of shared memory with known words, the cluster syncs,
//                             then 256 threads read a block's buffer `reps` times with 16-byte loads:
//                             local (own, ld.shared.v4), pair (rank ^ 1) or ring (rank + 1 mod N), remote
//                             ones by ld.shared::cluster.v4; a 32-bit sum of every word read goes to *sink.
//   bulk_latency              one thread: copies of `copy_bytes` global->shared, one at a time, each
//                             cp.async.bulk completing on an mbarrier (expect_tx + try_wait.parity); cycles
//                             from issue to completion summed over the copies; the last copy is summed.
//   tensor_latency            the same for 2-D boxes by cp.async.bulk.tensor through a CUtensorMap.
//   stream_<path>_v<V>        a grid of 256-thread blocks streams chunks of 4096 * V bytes from global into
//                             shared memory and sums them: ldg (16-byte ld.global into registers, stored to
//                             shared; the next chunk's loads in flight while this one is summed), cp_async
//                             (16-byte cp.async.cg + commit/wait_group, STAGES chunks in flight), tma (one
//                             cp.async.bulk of the whole chunk per stage, STAGES in flight, mbarrier per stage).
//   dpx_latency_<op>_<impl>   32 threads, one dependent chain each: x = op(x, b, c), clock64-timed.
//   dpx_throughput_<op>_<impl> full grid, DPX_CHAINS independent chains per thread; event-timed by the host.
//                             op: viaddmax (max(x + b, c)) or vimax3 (max(x, b, c)); impl: dpx (the __vi*
//                             intrinsic) or emu (viaddmax only: IMAD + VIMNMX, see below).

#include "common.cuh"

constexpr int UNROLL = 32;
constexpr unsigned long long WAIT_LIMIT_NS = 100000000ull;  // 0.1 s

// The words every buffer here holds: word i = i * golden + 0x7F4A7C15 (probes/hopper.py mirrors it).
__device__ __forceinline__ unsigned int known_word(unsigned long long i) {
    return (unsigned int)i * 0x9E3779B1u + 0x7F4A7C15u;
}

// ---- thread-block clusters ------------------------------------------------------------------------------

// NAME(): the cluster's 32-bit special register REGISTER (cluster_ctarank: the block's rank in its cluster;
// cluster_nctarank: the blocks in the cluster).
#define CLUSTER_REGISTER(NAME, REGISTER)                                                                     \
    __device__ __forceinline__ unsigned int NAME() {                                                         \
        unsigned int value;                                                                                  \
        asm volatile("mov.u32 %0, %%" REGISTER ";" : "=r"(value));                                           \
        return value;                                                                                        \
    }

CLUSTER_REGISTER(cluster_rank, "cluster_ctarank")
CLUSTER_REGISTER(cluster_size, "cluster_nctarank")

// Every thread of every block of the cluster arrives (release: its shared-memory writes are published)
// and waits (acquire: it sees every other block's).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// The shared::cluster address of the word at shared::cta address `addr` in the block of cluster rank `rank`.
__device__ __forceinline__ unsigned int map_rank(unsigned int addr, unsigned int rank) {
    unsigned int out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
    return out;
}

// The generic address of the word at generic address `p` (this block's shared memory) in block `rank`.
__device__ __forceinline__ unsigned long long map_rank_generic(const void* p, unsigned int rank) {
    unsigned long long out;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
    return out;
}

enum { CHASE_LOCAL = 0, CHASE_SELF = 1, CHASE_REMOTE = 2 };

// One dependent step: local, a 64-bit LDS at the 32-bit shared address the previous load returned; self and
// remote, a generic 64-bit load (LD.E.64) at the mapa-derived generic address the previous load returned.
template <int MODE>
__device__ __forceinline__ void chase_step(unsigned long long& p) {
    if (MODE == CHASE_LOCAL) {
        asm volatile("{\n\t.reg .u32 a;\n\tcvt.u32.u64 a, %0;\n\tld.shared.u64 %0, [a];\n\t}" : "+l"(p)::"memory");
    } else {
        asm volatile("ld.u64 %0, [%0];" : "+l"(p)::"memory");
    }
}

template <int MODE>
__device__ __forceinline__ void dsmem_chase(const unsigned int* next_index, int elements, int start,
                                            long long warm_steps, long long steps, unsigned long long* out) {
    extern __shared__ unsigned long long chain[];
    const unsigned int rank = cluster_rank();
    // Element i holds the address of element next_index[i] in this block, in the form its reader uses.
    const unsigned long long own = MODE == CHASE_LOCAL ? smem_addr(chain) : map_rank_generic(chain, rank);
    for (int i = threadIdx.x; i < elements; i += blockDim.x) chain[i] = own + 8ull * next_index[i];
    cluster_sync();
    if (threadIdx.x == 0) {
        const unsigned int target = MODE == CHASE_REMOTE ? (rank + 1) % cluster_size() : rank;
        const unsigned long long first = MODE == CHASE_LOCAL ? smem_addr(chain) : map_rank_generic(chain, target);
        unsigned long long p = first + 8ull * start;
        for (long long i = 0; i < warm_steps; ++i) chase_step<MODE>(p);
        const unsigned long long t0 = globaltimer_fenced();
        const unsigned long long c0 = clock64_fenced();
#pragma unroll 1
        for (long long i = 0; i < steps; i += UNROLL) {
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) chase_step<MODE>(p);
        }
        const unsigned long long c1 = clock64_fenced();
        const unsigned long long t1 = globaltimer_fenced();
        out[3 * blockIdx.x + 0] = c1 - c0;
        out[3 * blockIdx.x + 1] = t1 - t0;
        out[3 * blockIdx.x + 2] = (p - first) / 8ull;
    }
    cluster_sync();  // the chains stay alive until every block has finished reading
}

constexpr int DSMEM_THREADS = 256;
constexpr int DSMEM_VECS = 8;  // 16-byte loads in flight per thread per pass
constexpr int DSMEM_BUFFER_BYTES = DSMEM_THREADS * DSMEM_VECS * 16;  // 32 KiB per block
enum { READ_LOCAL = 0, READ_PAIR = 1, READ_RING = 2 };

template <int PATTERN>
__device__ __forceinline__ void dsmem_read(long long reps, unsigned int* sink) {
    extern __shared__ uint4 buffer[];
    unsigned int* words = reinterpret_cast<unsigned int*>(buffer);
    for (int i = threadIdx.x; i < DSMEM_BUFFER_BYTES / 4; i += blockDim.x) words[i] = known_word(i);
    cluster_sync();
    const unsigned int rank = cluster_rank();
    const unsigned int target = PATTERN == READ_PAIR ? rank ^ 1u : (rank + 1) % cluster_size();
    const unsigned int base = smem_addr(buffer) + 16u * threadIdx.x;
    const unsigned int src = PATTERN == READ_LOCAL ? base : map_rank(base, target);
    unsigned int acc = 0;
#pragma unroll 1
    for (long long r = 0; r < reps; ++r) {
        uint4 v[DSMEM_VECS];
#pragma unroll
        for (int j = 0; j < DSMEM_VECS; ++j) {
            // Rotated by the rep: every rep reads the same 8 vectors per thread, but at addresses that
            // depend on the loop counter, so ptxas cannot hoist the loads out of the timed loop.
            const unsigned int a = src + 16u * DSMEM_THREADS * ((j + (unsigned int)r) % DSMEM_VECS);
            if (PATTERN == READ_LOCAL) {
                asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w) : "r"(a) : "memory");
            } else {
                asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w) : "r"(a) : "memory");
            }
        }
#pragma unroll
        for (int j = 0; j < DSMEM_VECS; ++j) acc += v[j].x + v[j].y + v[j].z + v[j].w;
    }
    publish(acc, sink);
    cluster_sync();  // no block exits while another still reads its buffer
}

#define DSMEM_KERNELS(N)                                                                                     \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                     \
    dsmem_chase_local_c##N(const unsigned int* n, int e, int s, long long w, long long k, unsigned long long* o) { \
        dsmem_chase<CHASE_LOCAL>(n, e, s, w, k, o);                                                          \
    }                                                                                                        \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                     \
    dsmem_chase_self_c##N(const unsigned int* n, int e, int s, long long w, long long k, unsigned long long* o) { \
        dsmem_chase<CHASE_SELF>(n, e, s, w, k, o);                                                           \
    }                                                                                                        \
    extern "C" __global__ void __cluster_dims__(N, 1, 1)                                                     \
    dsmem_chase_remote_c##N(const unsigned int* n, int e, int s, long long w, long long k, unsigned long long* o) { \
        dsmem_chase<CHASE_REMOTE>(n, e, s, w, k, o);                                                         \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(DSMEM_THREADS) __cluster_dims__(N, 1, 1)                    \
    dsmem_read_local_c##N(long long reps, unsigned int* sink) { dsmem_read<READ_LOCAL>(reps, sink); }        \
    extern "C" __global__ void __launch_bounds__(DSMEM_THREADS) __cluster_dims__(N, 1, 1)                    \
    dsmem_read_pair_c##N(long long reps, unsigned int* sink) { dsmem_read<READ_PAIR>(reps, sink); }          \
    extern "C" __global__ void __launch_bounds__(DSMEM_THREADS) __cluster_dims__(N, 1, 1)                    \
    dsmem_read_ring_c##N(long long reps, unsigned int* sink) { dsmem_read<READ_RING>(reps, sink); }

DSMEM_KERNELS(2)
DSMEM_KERNELS(4)
DSMEM_KERNELS(8)
DSMEM_KERNELS(16)

// ---- mbarriers and the bulk-copy engine -------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(unsigned int bar, unsigned int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Make initialized mbarriers visible to the async proxy (the copy engine) before any copy uses them.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive (the single expected arrival) and announce `bytes` of transactions the phase must also see.
__device__ __forceinline__ void mbar_expect(unsigned int bar, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try(unsigned int bar, unsigned int parity) {
    unsigned int done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

// Wait for the phase of parity `parity` to complete, for at most WAIT_LIMIT_NS; a timeout counts an error
// and sets `failed`, after which this thread never waits again.
__device__ __forceinline__ void mbar_wait(unsigned int bar, unsigned int parity, bool& failed,
                                          unsigned int* errors) {
    if (failed || mbar_try(bar, parity)) return;
    const unsigned long long deadline = globaltimer_fenced() + WAIT_LIMIT_NS;
    while (!mbar_try(bar, parity)) {
        if (globaltimer_fenced() > deadline) {
            failed = true;
            atomicAdd(errors, 1u);
            return;
        }
    }
}

// One bulk copy global -> this block's shared memory of `bytes` (a multiple of 16, both ends 16-aligned),
// completing as `bytes` transactions on the mbarrier.
__device__ __forceinline__ void bulk_copy(unsigned int dst, const void* src, unsigned int bytes,
                                          unsigned int bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// Order this thread's earlier generic-proxy accesses to shared memory before later async-proxy ones.
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The copy-latency kernels' loop, one thread: copy k (from -warm: the warm copies are untimed, then `copies`
// timed ones) fetches item (first + k + warm) * odd mod items (items a power of two: a permutation each
// `items` copies, so successive copies of a footprint beyond L2 find nothing of the previous ones in L2),
// located by where = locate(item) and issued by issue(where) (its expect_tx and its copy onto the mbarrier at
// `bar`) into `landed`, then waited for.  out = {cycles issue->completion summed over the timed copies, ns and
// cycles of the whole timed loop (at out[1], out[4]), sum of the last copy's `bytes`, its item}; errors
// counts timed-out waits.
template <typename Locate, typename Issue>
__device__ __forceinline__ void timed_copies(unsigned int bar, unsigned int first, unsigned int items, long long warm,
                                             long long copies, const void* landed, unsigned int bytes,
                                             unsigned long long* out, unsigned int* errors, Locate locate,
                                             Issue issue) {
    mbar_init(bar, 1);
    mbar_init_fence();
    bool failed = false;
    unsigned int parity = 0, item = 0;
    unsigned long long cycles = 0, t0 = 0, start = 0;
    for (long long k = -warm; k < copies; ++k) {
        if (k == 0) {
            t0 = globaltimer_fenced();
            start = clock64_fenced();
        }
        item = (first + (unsigned int)(k + warm)) * 0x9E3779B1u & (items - 1u);
        const auto where = locate(item);
        const unsigned long long c0 = clock64_fenced();
        issue(where);
        mbar_wait(bar, parity, failed, errors);
        const unsigned long long c1 = clock64_fenced();
        if (k >= 0) cycles += c1 - c0;
        parity ^= 1u;
    }
    const unsigned long long end = clock64_fenced();
    const unsigned long long t1 = globaltimer_fenced();
    const unsigned int* words = reinterpret_cast<const unsigned int*>(landed);
    unsigned int sum = 0;
    for (unsigned int i = 0; i < bytes / 4; ++i) sum += words[i];
    out[0] = cycles;
    out[1] = t1 - t0;
    out[2] = sum;
    out[3] = item;
    out[4] = end - start;
}

// timed_copies of `copy_bytes` from slots of `slot_bytes` of src by cp.async.bulk.
extern "C" __global__ void bulk_latency(const unsigned char* src, unsigned int slots, unsigned int slot_bytes,
                                        unsigned int copy_bytes, unsigned int first, long long warm,
                                        long long copies, unsigned long long* out, unsigned int* errors) {
    extern __shared__ uint4 landing[];
    __shared__ unsigned long long bar_storage;
    const unsigned int bar = smem_addr(&bar_storage);
    const unsigned int dst = smem_addr(landing);
    timed_copies(
        bar, first, slots, warm, copies, landing, copy_bytes, out, errors, [](unsigned int slot) { return slot; },
        [&](unsigned int slot) {
            mbar_expect(bar, copy_bytes);
            bulk_copy(dst, src + (unsigned long long)slot * slot_bytes, copy_bytes, bar);
        });
}

// One 2-D box of a tensor (a CUtensorMap in global memory, encoded by the host with cuTensorMapEncodeTiled)
// into this block's shared memory (128-byte aligned), completing on the mbarrier.  x is the innermost
// coordinate (elements), y the row.
__device__ __forceinline__ void tensor_copy_2d(unsigned int dst, const void* tensor_map, int x, int y,
                                               unsigned int bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"(tensor_map), "r"(x), "r"(y), "r"(bar) : "memory");
}

// timed_copies of 2-D boxes of box_cols x box_rows 32-bit words by cp.async.bulk.tensor: the items are the
// `boxes` (a power of two) of the tensor's grid of boxes, boxes_x of them a row.
extern "C" __global__ void tensor_latency(const unsigned long long* tensor_map, unsigned int boxes_x,
                                          unsigned int boxes, unsigned int box_cols, unsigned int box_rows,
                                          unsigned int first, long long warm, long long copies,
                                          unsigned long long* out, unsigned int* errors) {
    extern __shared__ uint4 raw[];
    __shared__ unsigned long long bar_storage;
    const unsigned int bar = smem_addr(&bar_storage);
    const unsigned int dst = (smem_addr(raw) + 127u) & ~127u;
    const unsigned int box_bytes = box_cols * box_rows * 4u;
    // The map was written by the host before the launch: order that against the tensormap proxy's reads.
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(tensor_map) : "memory");
    timed_copies(
        bar, first, boxes, warm, copies, reinterpret_cast<const unsigned char*>(raw) + (dst - smem_addr(raw)),
        box_bytes, out, errors,
        [&](unsigned int box) {  // the box's corner: x the innermost coordinate (elements), y the row
            return make_int2((int)((box % boxes_x) * box_cols), (int)((box / boxes_x) * box_rows));
        },
        [&](int2 xy) {
            mbar_expect(bar, box_bytes);
            tensor_copy_2d(dst, tensor_map, xy.x, xy.y, bar);
        });
}

// ---- streaming global -> shared: ld.global, cp.async, TMA ---------------------------------------------------

constexpr int STREAM_THREADS = 256;
constexpr int STAGES = 4;
enum { PATH_LDG = 0, PATH_CP_ASYNC = 1, PATH_TMA = 2 };

// Block b handles chunks f + b, f + b + G, f + b + 2G, ... (mod chunks), `per_block` of them: over the grid,
// chunks f .. f + G * per_block - 1 modulo `chunks`, which is what the host's checksum counts.  The host
// moves `first` on by G * per_block each launch, so a launch never re-reads what the last one left in L2.
__device__ __forceinline__ long long chunk_of(long long first, long long k, long long chunks) {
    return (first + (long long)blockIdx.x + k * gridDim.x) % chunks;
}

// Thread t consumes vectors t, t + 256, ... of a chunk in shared memory.
template <int V>
__device__ __forceinline__ unsigned int consume(const uint4* stage) {
    unsigned int acc = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const uint4 v = stage[threadIdx.x + j * STREAM_THREADS];
        acc += v.x + v.y + v.z + v.w;
    }
    return acc;
}

template <int V>
__device__ __forceinline__ void cp_async_chunk(const uint4* src, uint4* stage) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int i = threadIdx.x + j * STREAM_THREADS;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(stage + i)), "l"(src + i)
                     : "memory");
    }
}

template <int PATH, int V>
__device__ __forceinline__ void stream(const uint4* src, long long chunks, long long first, long long per_block,
                                       unsigned int* sink, unsigned int* errors) {
    constexpr int CHUNK_VECS = STREAM_THREADS * V;
    constexpr unsigned int CHUNK_BYTES = CHUNK_VECS * 16;
    extern __shared__ uint4 stages[];
    __shared__ unsigned long long full[STAGES];
    unsigned int acc = 0;
    if (PATH == PATH_LDG) {
        uint4 r[V];
        const uint4* p = src + chunk_of(first, 0, chunks) * CHUNK_VECS;
#pragma unroll
        for (int j = 0; j < V; ++j) r[j] = p[threadIdx.x + j * STREAM_THREADS];
#pragma unroll 1
        for (long long k = 0; k < per_block; ++k) {
#pragma unroll
            for (int j = 0; j < V; ++j) stages[threadIdx.x + j * STREAM_THREADS] = r[j];
            if (k + 1 < per_block) {  // the next chunk's loads fly while this one is summed
                p = src + chunk_of(first, k + 1, chunks) * CHUNK_VECS;
#pragma unroll
                for (int j = 0; j < V; ++j) r[j] = p[threadIdx.x + j * STREAM_THREADS];
            }
            __syncthreads();
            acc += consume<V>(stages);
            __syncthreads();
        }
    } else if (PATH == PATH_CP_ASYNC) {
#pragma unroll 1
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < per_block) cp_async_chunk<V>(src + chunk_of(first, s, chunks) * CHUNK_VECS, stages + s * CHUNK_VECS);
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
#pragma unroll 1
        for (long long k = 0; k < per_block; ++k) {
            const long long next = k + STAGES - 1;  // into the stage consumed at k - 1
            if (next < per_block) {
                cp_async_chunk<V>(src + chunk_of(first, next, chunks) * CHUNK_VECS, stages + (next % STAGES) * CHUNK_VECS);
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");  // chunk k's group is done
            __syncthreads();
            acc += consume<V>(stages + (k % STAGES) * CHUNK_VECS);
            __syncthreads();
        }
    } else {
        bool failed = false;
        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);
            mbar_init_fence();
            for (int s = 0; s < STAGES && s < per_block; ++s) {
                mbar_expect(smem_addr(&full[s]), CHUNK_BYTES);
                bulk_copy(smem_addr(stages + s * CHUNK_VECS), src + chunk_of(first, s, chunks) * CHUNK_VECS, CHUNK_BYTES,
                          smem_addr(&full[s]));
            }
        }
        __syncthreads();
#pragma unroll 1
        for (long long k = 0; k < per_block; ++k) {
            const int s = (int)(k % STAGES);
            mbar_wait(smem_addr(&full[s]), (unsigned int)(k / STAGES) & 1u, failed, errors);
            acc += consume<V>(stages + s * CHUNK_VECS);
            __syncthreads();  // every thread is done with stage s
            if (threadIdx.x == 0 && k + STAGES < per_block) {
                fence_async_shared();
                mbar_expect(smem_addr(&full[s]), CHUNK_BYTES);
                bulk_copy(smem_addr(stages + s * CHUNK_VECS), src + chunk_of(first, k + STAGES, chunks) * CHUNK_VECS,
                          CHUNK_BYTES, smem_addr(&full[s]));
            }
        }
    }
    publish(acc, sink);
}

#define STREAM_KERNEL(PATH_NAME, PATH, V)                                                                    \
    extern "C" __global__ void __launch_bounds__(STREAM_THREADS)                                             \
    stream_##PATH_NAME##_v##V(const uint4* src, long long chunks, long long first, long long per_block,        \
                              unsigned int* sink, unsigned int* errors) {                                    \
        stream<PATH, V>(src, chunks, first, per_block, sink, errors);                                        \
    }
#define STREAM_KERNELS(V) STREAM_KERNEL(ldg, PATH_LDG, V) STREAM_KERNEL(cp_async, PATH_CP_ASYNC, V) \
                          STREAM_KERNEL(tma, PATH_TMA, V)

STREAM_KERNELS(1)
STREAM_KERNELS(2)
STREAM_KERNELS(4)
STREAM_KERNELS(8)

// ---- DPX --------------------------------------------------------------------------------------------------
//
// ptxas on sm_90 turns the plain max(x + b, c) and max(max(x, b), c) into the DPX instructions themselves
// (VIADDMNMX, VIMNMX3), whatever the PTX.  The emulation therefore does the add as a multiply-add by a
// runtime 1 (IMAD), which ptxas cannot fuse: IMAD + VIMNMX, the two-instruction path of a GPU without DPX.
// vimax3 has no such unfusable form and is measured as DPX only.

enum { OP_VIADDMAX = 0, OP_VIMAX3 = 1 };

template <int OP, bool DPX>
__device__ __forceinline__ int dpx_op(int x, int b, int c, int one) {
    if (OP == OP_VIMAX3) return __vimax3_s32(x, b, c);
    if (DPX) return __viaddmax_s32(x, b, c);
    int r;
    asm("{\n\t.reg .s32 s;\n\tmad.lo.s32 s, %1, %4, %2;\n\tmax.s32 %0, s, %3;\n\t}"
        : "=r"(r) : "r"(x), "r"(b), "r"(c), "r"(one));
    return r;
}

// 32 threads, thread t: x = a[t], then x = op(x, b[t], c[t]) `steps` times; out = {cycles, ns}, x -> result.
template <int OP, bool DPX>
__device__ __forceinline__ void dpx_latency(const int* a, const int* b, const int* c, int one, long long steps,
                                            unsigned long long* out, int* result) {
    int x = a[threadIdx.x];
    const int bb = b[threadIdx.x], cc = c[threadIdx.x];
    __syncwarp();
    const unsigned long long t0 = globaltimer_fenced();
    const unsigned long long c0 = clock64_fenced();
#pragma unroll 1
    for (long long i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) x = dpx_op<OP, DPX>(x, bb, cc, one);
    }
    const unsigned long long c1 = clock64_fenced();
    const unsigned long long t1 = globaltimer_fenced();
    result[threadIdx.x] = x;
    if (threadIdx.x == 0) {
        out[0] = c1 - c0;
        out[1] = t1 - t0;
    }
}

constexpr int DPX_CHAINS = 8;
constexpr int DPX_THREADS = 256;
constexpr int DPX_UNROLL = 4;

// Thread g: chains x_j = a[g] + j, each x_j = op(x_j, b[g], c[g]) `steps` times; result[g * CHAINS + j] = x_j.
template <int OP, bool DPX>
__device__ __forceinline__ void dpx_throughput(const int* a, const int* b, const int* c, int one, long long steps,
                                               int* result) {
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int bb = b[g], cc = c[g];
    int x[DPX_CHAINS];
#pragma unroll
    for (int j = 0; j < DPX_CHAINS; ++j) x[j] = a[g] + j;
#pragma unroll 1
    for (long long i = 0; i < steps; i += DPX_UNROLL) {
#pragma unroll
        for (int u = 0; u < DPX_UNROLL; ++u) {
#pragma unroll
            for (int j = 0; j < DPX_CHAINS; ++j) x[j] = dpx_op<OP, DPX>(x[j], bb, cc, one);
        }
    }
#pragma unroll
    for (int j = 0; j < DPX_CHAINS; ++j) result[g * DPX_CHAINS + j] = x[j];
}

#define DPX_KERNELS(NAME, OP, IMPL, DPX)                                                                     \
    extern "C" __global__ void dpx_latency_##NAME##_##IMPL(const int* a, const int* b, const int* c, int one, \
                                                           long long steps, unsigned long long* out, int* r) { \
        dpx_latency<OP, DPX>(a, b, c, one, steps, out, r);                                                   \
    }                                                                                                        \
    extern "C" __global__ void __launch_bounds__(DPX_THREADS)                                                \
    dpx_throughput_##NAME##_##IMPL(const int* a, const int* b, const int* c, int one, long long steps, int* r) { \
        dpx_throughput<OP, DPX>(a, b, c, one, steps, r);                                                     \
    }

DPX_KERNELS(viaddmax, OP_VIADDMAX, dpx, true)
DPX_KERNELS(viaddmax, OP_VIADDMAX, emu, false)
DPX_KERNELS(vimax3, OP_VIMAX3, dpx, true)
