// Bandwidth of every memory level, and the coalescing stride sweep.
//
// Every kernel is written to reach the hardware's limit, not to be read: 16-byte accesses where the width
// is free, several independent loads issued per thread before any is used (U, a template parameter), a grid
// of several blocks per SM sized by the host from the occupancy API, and loops over the data inside the
// kernel so one launch lasts long against its launch and tail.  Every kernel folds what it loaded into a
// 32-bit sum (wrapping) that one lane per warp adds to *sink; the host knows the buffer's contents and
// checks the sum after every sample, so no load can be dropped by the compiler or skipped by a bug.
//
// Kernels (B = the 16-byte vector, uint4):
//   stride_{2,4,16}      warp load i touches 32 elements at element stride s (one per lane), ld.global.cg
//                        (L2 only: LDG.E.U16/LDG.E/LDG.E.128 .STRONG.GPU); the coalescing sweep and bw.l2.
//   dram_read_u{4,8}     B loads, ld.global (LDG.E.128), U per thread in flight, grid-stride; u4 at full
//                        occupancy, u8 at half (more loads per thread, fewer threads).
//   dram_read_chunk_u{4,8}  the same loads, but a warp's trip reads U x 512 contiguous bytes, with the
//                        L2 told to fetch 256-byte blocks (ld.global.L2::256B): fewer DRAM pages open at once.
//   dram_read_block_u{2,4,8}  the same loads in the order of hopper.cu's stream kernels: a block's trip reads
//                        one contiguous chunk of 256 x U vectors (4-32 KiB), chunks dealt to blocks in turn.
//   dram_write           B stores (STG.E.128) of a per-launch value, grid-stride; dram_write_cs the same
//                        with streaming stores (st.global.cs); dram_write_once_{8,16,16_cs} one 8- or
//                        16-byte store per thread and no loop, a grid of elements / 256 blocks.
//   dram_copy            U B loads then U B stores (each word + seed), grid-stride; dram_copy_chunk_u{4,8}
//                        with the chunked layout and 256-byte L2 fetches.
//                        The host times every bw.dram kernel at its occupancy and at half of it and measures
//                        the fastest (which one is recorded with the samples).
//   smem_read            LDS.128 from a 16 KiB per-block shared buffer, re-read `reps` times.
//   l1_read              LDG.E.128 from one 16 KiB global buffer every block re-reads `reps` times (L1 hits).
//   fill_hash            w[i] = hash(i, seed): known, non-trivial contents for the checksums.
//   sum_elements, count_mismatches: the host's checks, computed on the GPU.

#include "common.cuh"
#include "loads.cuh"

__device__ __forceinline__ unsigned int hash_word(unsigned long long i, unsigned int seed) {
    unsigned int x = (unsigned int)i * 0x9E3779B1u ^ (unsigned int)(i >> 32) * 0x85EBCA77u ^ seed;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return x;
}

extern "C" __global__ void fill_hash(unsigned int* w, long long n, unsigned int seed) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        w[i] = hash_word((unsigned long long)i, seed);
    }
}

// The host's side of the checksums, on the GPU (no CuPy-generated kernel, so nothing to JIT-compile):
// *out += the 32-bit wrapping sum of every word of `count` elements of `element_bytes` (2, 4 or 16) at
// base + i * pitch_bytes -- exactly what the kernels below fold into their sinks for those elements.
extern "C" __global__ void sum_elements(const unsigned char* base, long long count, long long pitch_bytes,
                                        int element_bytes, unsigned int* out) {
    unsigned int acc = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const unsigned char* p = base + i * pitch_bytes;
        if (element_bytes == 2) {
            acc += *(const unsigned short*)p;
        } else if (element_bytes == 4) {
            acc += *(const unsigned int*)p;
        } else {
            acc += word_sum(*(const uint4*)p);
        }
    }
    publish(acc, out);
}

// *out += the number of words with a[i] != (b ? b[i] : 0) + add (a write's or a copy's result check).
extern "C" __global__ void count_mismatches(const unsigned int* a, const unsigned int* b, unsigned int add,
                                            long long n, unsigned int* out) {
    unsigned int bad = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        bad += a[i] != (b ? b[i] : 0u) + add;
    }
    publish(bad, out);
}

// ---- the stride sweep ---------------------------------------------------------------------------------
//
// Elements are numbered in "stride space": element j lives at base + j * stride * sizeof(T).  Warp load
// instruction touches the 32 consecutive elements of one chunk (lane l: element 32 * chunk + l), so its
// lanes are exactly `stride` elements apart.  A tile is U consecutive chunks: each trip, a warp issues its
// tile's U loads (independent, all in flight before any is summed), then moves on by `step` tiles (the
// number of warps in the grid, modulo the tile count), wrapping inside the footprint of `tiles` tiles.
// Over a launch warp w reads tiles w, w + W, w + 2W, ... (mod tiles): the host sizes `tiles` and `trips`
// and knows exactly how many times each tile is read, so it knows the sum.
template <typename T, int U>
__device__ __forceinline__ void stride_read(const T* base, long long stride, long long tiles, long long step,
                                            long long trips, unsigned int* sink) {
    const long long lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long chunk_span = 32 * stride;  // elements of T between consecutive chunks' first lanes
    long long tile = warp % tiles;
    unsigned int acc = 0;
#pragma unroll 1
    for (long long t = 0; t < trips; ++t) {
        const T* p = base + (tile * U * 32 + lane) * stride;
        T v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcg(p + u * chunk_span);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += word_sum(v[u]);
        tile += step;
        if (tile >= tiles) tile -= tiles;
    }
    publish(acc, sink);
}

// U: independent loads in flight per thread.  2- and 4-byte elements need more of them than 16-byte ones
// for the same bytes in flight; every variant stays within 32 registers (full occupancy on sm_90).
constexpr int STRIDE_U_SMALL = 16;
constexpr int STRIDE_U_VECTOR = 4;

extern "C" __global__ void __launch_bounds__(256)
stride_2(const unsigned short* base, long long stride, long long tiles, long long step, long long trips,
         unsigned int* sink) {
    stride_read<unsigned short, STRIDE_U_SMALL>(base, stride, tiles, step, trips, sink);
}

extern "C" __global__ void __launch_bounds__(256)
stride_4(const unsigned int* base, long long stride, long long tiles, long long step, long long trips,
         unsigned int* sink) {
    stride_read<unsigned int, STRIDE_U_SMALL>(base, stride, tiles, step, trips, sink);
}

extern "C" __global__ void __launch_bounds__(256)
stride_16(const uint4* base, long long stride, long long tiles, long long step, long long trips,
          unsigned int* sink) {
    stride_read<uint4, STRIDE_U_VECTOR>(base, stride, tiles, step, trips, sink);
}

// ---- device memory: read, write, copy -------------------------------------------------------------------
//
// vecs is a multiple of U * (threads in the grid), so every thread does the same work and no bounds check
// is needed; `passes` sweeps of the whole buffer per launch.  Thread g's trip reads vectors
// g + k * T + u * T (u < U): each of the U loads is a coalesced 512-byte warp access.
//
// Two layouts of a trip.  Interleaved: thread g's load u reads vector g + u * T, so each warp load is a
// 512-byte piece of a grid-wide row.  Chunked: warp w's trip reads the U x 32 consecutive vectors starting
// at (k * W + w) * U * 32, load u being vectors + u * 32 (still one coalesced 512-byte access per load), and
// asks the L2 to fetch 256 bytes per miss.  Both read every vector exactly once per pass.
struct Trip {
    long long first, step, spacing;  // the thread's first vector, vectors per trip of the grid, between loads
};

template <int U, bool CHUNKED>
__device__ __forceinline__ Trip trip() {
    const long long threads = (long long)gridDim.x * blockDim.x;
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!CHUNKED) return {thread, U * threads, threads};
    const long long warp = thread >> 5, lane = thread & 31;
    return {warp * U * 32 + lane, U * threads, 32};
}

LOAD_V4(load_l2_256, "ld.global.L2::256B", const uint4*, "l")

template <bool CHUNKED>
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
    return CHUNKED ? load_l2_256(p) : *p;
}

// A thread's trips over `passes` sweeps of the buffer: each trip's U vectors (trip()'s layout) are loaded,
// all in flight, then handed to use(v, i, spacing) (vector u of the trip is at i + u * spacing).
template <int U, bool CHUNKED, typename Use>
__device__ __forceinline__ void stream_trips(const uint4* src, long long vecs, long long passes, Use use) {
    const Trip t = trip<U, CHUNKED>();
#pragma unroll 1
    for (long long pass = 0; pass < passes; ++pass) {
#pragma unroll 1
        for (long long i = t.first; i < vecs; i += t.step) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = load_stream<CHUNKED>(src + i + u * t.spacing);
            use(v, i, t.spacing);
        }
    }
}

template <int U, bool CHUNKED>
__device__ __forceinline__ void read_body(const uint4* buf, long long vecs, long long passes,
                                          unsigned int* sink) {
    unsigned int acc = 0;
    stream_trips<U, CHUNKED>(buf, vecs, passes, [&](const uint4(&v)[U], long long, long long) {
#pragma unroll
        for (int u = 0; u < U; ++u) acc += word_sum(v[u]);
    });
    publish(acc, sink);
}

// A read kernel NAME(buf, vecs, passes, sink) under __launch_bounds__ BOUNDS, running the body __VA_ARGS__
// (a read_body or block_read_body instance).
#define READ_KERNEL(NAME, BOUNDS, ...)                                                                       \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                                      \
    NAME(const uint4* buf, long long vecs, long long passes, unsigned int* sink) {                           \
        __VA_ARGS__(buf, vecs, passes, sink);                                                                \
    }

READ_KERNEL(dram_read_u4, (256), read_body<4, false>)
// The ILP variant: 8 loads in flight per thread need 56 registers, so 4 blocks of 256 per SM (without the
// bound, ptxas squeezes into 32 registers by summing early, leaving only 4-5 loads in flight).
READ_KERNEL(dram_read_u8, (256, 4), read_body<8, false>)
READ_KERNEL(dram_read_chunk_u4, (256), read_body<4, true>)
READ_KERNEL(dram_read_chunk_u8, (256, 4), read_body<8, true>)

// Block-contiguous chunks, plain loads: block b's trip k reads the 256 x V consecutive vectors of chunk
// k x G + b (G blocks in the grid), thread t loading vectors t + j x 256 of it (j < V, each a coalesced
// 512-byte warp access, the block's 8 warps together 4 KiB at a time), all V issued before any is summed --
// the order hopper.cu's stream kernels read in, without the trip through shared memory.  The host sizes the
// buffer as a whole number of grid trips, so every block reads the same number of chunks and every pass
// reads every vector once.  Each launch re-reads from the buffer's start: its first chunks were last read
// a whole pass (HBM_FOOTPRINT_L2 x the L2) earlier, so nothing of them is left in the L2.
// The block size is the host's BLOCK_THREADS (256), fixed here so the V loads' offsets are immediates.
constexpr int CHUNK_THREADS = 256;

// SYNC: a block barrier after every trip (as hopper.cu's staged streams have), so a block's warps issue each
// chunk's loads together and its chunk reaches HBM as one burst of requests.
template <int V, bool SYNC>
__device__ __forceinline__ void block_read_body(const uint4* buf, long long vecs, long long passes,
                                                unsigned int* sink) {
    constexpr long long CHUNK = (long long)V * CHUNK_THREADS;
    const long long first = (long long)blockIdx.x * CHUNK + threadIdx.x, step = CHUNK * gridDim.x;
    unsigned int acc = 0;
#pragma unroll 1
    for (long long pass = 0; pass < passes; ++pass) {
#pragma unroll 1
        for (long long i = first; i < vecs; i += step) {
            uint4 v[V];
#pragma unroll
            for (int j = 0; j < V; ++j) v[j] = buf[i + j * CHUNK_THREADS];
#pragma unroll
            for (int j = 0; j < V; ++j) acc += word_sum(v[j]);
            if (SYNC) __syncthreads();
        }
    }
    publish(acc, sink);
}

READ_KERNEL(dram_read_block_u2, (CHUNK_THREADS), block_read_body<2, false>)
READ_KERNEL(dram_read_block_u4, (CHUNK_THREADS), block_read_body<4, false>)
READ_KERNEL(dram_read_block_u8, (CHUNK_THREADS, 4), block_read_body<8, false>)
READ_KERNEL(dram_read_block_sync_u4, (CHUNK_THREADS), block_read_body<4, true>)
READ_KERNEL(dram_read_block_sync_u8, (CHUNK_THREADS, 4), block_read_body<8, true>)

// One trip and no loop (as public stream suites read): block b reads the 256 x ONCE_U vectors from
// b x 256 x ONCE_U on, load u of a thread at u x 256 + its index (each a coalesced 512-byte warp access), so
// the grid is vecs / (256 x ONCE_U) blocks and every vector is read once a launch.  Warp sums go to one of
// SINK_SLOTS words, spread over the L2's slices, so the atomics never queue on one address.
constexpr int ONCE_U = 4, SINK_SLOTS = 1024;

extern "C" __global__ void __launch_bounds__(256)
dram_read_once(const uint4* buf, unsigned int* sinks) {
    const long long first = (long long)blockIdx.x * 256 * ONCE_U + threadIdx.x;
    uint4 v[ONCE_U];
#pragma unroll
    for (int u = 0; u < ONCE_U; ++u) v[u] = buf[first + u * 256];
    unsigned int acc = 0;
#pragma unroll
    for (int u = 0; u < ONCE_U; ++u) acc += word_sum(v[u]);
    acc = __reduce_add_sync(0xffffffffu, acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(sinks + (blockIdx.x * 8 + (threadIdx.x >> 5)) % SINK_SLOTS, acc);
}

constexpr int WRITE_U = 4;

// Write variants: the store width (8 or 16 bytes), the grid (grid-stride at the driver's occupancy, or one
// store per thread over a grid of elements / 256 blocks, as public stream suites write) and the cache hint
// (st.global.cs: evict-first streaming, STG.E.EF.128).  Every warp store covers 256 or 512 aligned
// contiguous bytes, whole 32-byte sectors, so the L2 never has to fetch a sector to merge a partial write.
__device__ __forceinline__ void store_cs(uint4* p, uint4 v) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// Every word of the buffer becomes `seed` (CS: by streaming stores): the host checks the buffer's sum after
// each sample, so every store of the last launch must have landed (the previous launch left a different seed).
template <bool CS>
__device__ __forceinline__ void write_body(uint4* buf, long long vecs, long long passes, unsigned int seed) {
    const long long threads = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4 value = make_uint4(seed, seed, seed, seed);
#pragma unroll 1
    for (long long pass = 0; pass < passes; ++pass) {
#pragma unroll 1
        for (long long i = first; i < vecs; i += WRITE_U * threads) {
#pragma unroll
            for (int u = 0; u < WRITE_U; ++u) {
                if (CS) store_cs(buf + i + u * threads, value);
                else buf[i + u * threads] = value;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
dram_write(uint4* buf, long long vecs, long long passes, unsigned int seed) {
    write_body<false>(buf, vecs, passes, seed);
}

extern "C" __global__ void __launch_bounds__(256)
dram_write_cs(uint4* buf, long long vecs, long long passes, unsigned int seed) {
    write_body<true>(buf, vecs, passes, seed);
}

// One 8-byte store per thread, no loop: the grid has one thread per 8-byte element.
extern "C" __global__ void __launch_bounds__(256)
dram_write_once_8(unsigned long long* buf, unsigned int seed) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    buf[i] = (unsigned long long)seed << 32 | seed;
}

// One 16-byte store per thread, no loop.
extern "C" __global__ void __launch_bounds__(256)
dram_write_once_16(uint4* buf, unsigned int seed) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    buf[i] = make_uint4(seed, seed, seed, seed);
}

// One 16-byte streaming store per thread, no loop.
extern "C" __global__ void __launch_bounds__(256)
dram_write_once_16_cs(uint4* buf, unsigned int seed) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    store_cs(buf + i, make_uint4(seed, seed, seed, seed));
}

constexpr int COPY_U = 4;

// dst = src + seed (per 32-bit word): U loads in flight, then U stores.  The host checks
// dst == src + seed word by word after each sample.
template <int U, bool CHUNKED>
__device__ __forceinline__ void copy_body(const uint4* src, uint4* dst, long long vecs, long long passes,
                                          unsigned int seed) {
    stream_trips<U, CHUNKED>(src, vecs, passes, [&](const uint4(&v)[U], long long i, long long spacing) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            dst[i + u * spacing] = make_uint4(v[u].x + seed, v[u].y + seed, v[u].z + seed, v[u].w + seed);
        }
    });
}

#define COPY_KERNEL(NAME, BOUNDS, ...)                                                                       \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                                      \
    NAME(const uint4* src, uint4* dst, long long vecs, long long passes, unsigned int seed) {                \
        __VA_ARGS__(src, dst, vecs, passes, seed);                                                           \
    }

COPY_KERNEL(dram_copy, (256), copy_body<COPY_U, false>)
COPY_KERNEL(dram_copy_chunk_u4, (256), copy_body<4, true>)
COPY_KERNEL(dram_copy_chunk_u8, (256, 4), copy_body<8, true>)

// ---- on-chip: shared memory and L1 ----------------------------------------------------------------------
//
// A block of ONCHIP_THREADS threads re-reads a 16 KiB buffer `reps` times: in each rep thread t loads
// ONCHIP_U vectors 256 apart, so each warp-wide load is 512 contiguous bytes (conflict-free in shared
// memory, four full lines in L1) and one rep reads every vector of the buffer exactly once.  The loads are
// inline PTX (the intended width, whatever the compiler thinks of the types); the U loads of a rep are
// issued back to back and summed afterwards.
constexpr int ONCHIP_THREADS = 256;
constexpr int ONCHIP_U = 4;
constexpr int ONCHIP_VECS = ONCHIP_THREADS * ONCHIP_U;  // 1024 vectors = 16 KiB

LOAD_V4(lds128, "ld.shared", unsigned int, "r")
LOAD_V4(ldg128, "ld.global", const uint4*, "l")

// The shared buffer is filled from `init` (ONCHIP_VECS vectors in global memory), so its sum is known.
// Rep r: thread t loads vectors ((t + 32 r) mod 256) + 256 u: the same warp-contiguous 512-byte accesses,
// each vector once per rep, but at addresses that change from rep to rep -- loads at fixed addresses would
// be loop-invariant, and ptxas hoists them out of the loop (volatile asm does not stop it).
extern "C" __global__ void __launch_bounds__(ONCHIP_THREADS)
smem_read(const uint4* init, long long reps, unsigned int* sink) {
    __shared__ uint4 buf[ONCHIP_VECS];
    for (int i = threadIdx.x; i < ONCHIP_VECS; i += blockDim.x) buf[i] = init[i];
    __syncthreads();
    const unsigned int base = (unsigned int)__cvta_generic_to_shared(buf);
    unsigned int acc = 0;
#pragma unroll 1
    for (long long r = 0; r < reps; ++r) {
        const unsigned int p = base + ((threadIdx.x + 32u * (unsigned int)r) % ONCHIP_THREADS) * 16u;
        uint4 v[ONCHIP_U];
#pragma unroll
        for (int u = 0; u < ONCHIP_U; ++u) v[u] = lds128(p + u * ONCHIP_THREADS * 16u);
#pragma unroll
        for (int u = 0; u < ONCHIP_U; ++u) acc += word_sum(v[u]);
    }
    publish(acc, sink);
}

extern "C" __global__ void __launch_bounds__(ONCHIP_THREADS)
l1_read(const uint4* buf, long long reps, unsigned int* sink) {
    unsigned int acc = 0;
#pragma unroll 1
    for (long long r = 0; r < reps; ++r) {
        const uint4* p = buf + (threadIdx.x + 32u * (unsigned int)r) % ONCHIP_THREADS;
        uint4 v[ONCHIP_U];
#pragma unroll
        for (int u = 0; u < ONCHIP_U; ++u) v[u] = ldg128(p + u * ONCHIP_THREADS);
#pragma unroll
        for (int u = 0; u < ONCHIP_U; ++u) acc += word_sum(v[u]);
    }
    publish(acc, sink);
}
