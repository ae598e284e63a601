// What every kernel file shares: the timer reads and the small device helpers (probes/cuda.py's source()
// inlines this file where a kernel file includes it, so every compile path sees the same text).
//
// Timers.  %globaltimer counts nanoseconds (updated every ~µs on some parts, so time long loops only);
// %clock64 counts SM cycles.  The _fenced reads also clobber memory: the compiler moves no load or store
// across them, so a timed region holds exactly the accesses written inside it.  The plain reads only stay
// in program order with other volatile asm.
#pragma once

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// The SM a thread runs on (%smid: not necessarily dense over 0..SMs-1).
__device__ __forceinline__ unsigned int smid() {
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

__device__ __forceinline__ unsigned long long clock64_plain() {
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}

__device__ __forceinline__ unsigned long long globaltimer_fenced() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned long long clock64_fenced() {
    unsigned long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}

// %clock (32-bit SM cycles) read right after storing `value` to shared memory at `slot`: the store must wait
// for whatever produced `value` (a load), so the read times that load's arrival.
__device__ __forceinline__ unsigned int clock_after(unsigned long long p, unsigned int slot) {
    unsigned int t;
    asm volatile("st.shared.u32 [%1], %2;\n\tmov.u32 %0, %%clock;"
                 : "=r"(t) : "r"(slot), "r"((unsigned int)p) : "memory");
    return t;
}

// One step of a global pointer chase: the 64-bit word at p (the next address), loaded with LOAD: 0 ld.global
// (default caching, through L1: LDG.E.64), 1 ld.global.cg (L2 only: LDG.E.64.STRONG.GPU), 2 ld.global.nc (the
// read-only path: LDG.E.64.CONSTANT).  Volatile inline PTX: the compiler keeps every load, in order.
template <int LOAD>
__device__ __forceinline__ unsigned long long chase_load(unsigned long long p) {
    unsigned long long next;
    if (LOAD == 1) {
        asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    } else if (LOAD == 2) {
        asm volatile("ld.global.nc.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    } else {
        asm volatile("ld.global.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    }
    return next;
}

// The timed walk every chase shares: `warm_steps` untimed steps (bring the chain into the cache), then
// `steps` timed ones (a multiple of N), N unrolled per trip, PER steps a call of step() (warm_steps and N
// multiples of it); out = {clock64 cycles, %globaltimer ns} of the timed steps.  Returns where the walk ended
// (the sink the host checks).
template <int N, int PER = 1, typename P, typename Step>
__device__ __forceinline__ P timed_walk(P p, long long warm_steps, long long steps, Step step,
                                        unsigned long long* out) {
    for (long long i = 0; i < warm_steps; i += PER) p = step(p);
    unsigned long long c0, c1, t0, t1;
    t0 = globaltimer_fenced();
    c0 = clock64_fenced();
#pragma unroll 1
    for (long long i = 0; i < steps; i += N) {
#pragma unroll
        for (int u = 0; u < N; u += PER) p = step(p);
    }
    c1 = clock64_fenced();
    t1 = globaltimer_fenced();
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    return p;
}

// A one-thread chase kernel NAME(start, warm_steps, steps, out), the arguments every chase launcher passes
// (probes/kit/chain.py's chase_launcher): timed_walk<N, PER> over STEP (address -> address, PER steps a
// call); out = {clock64 cycles, %globaltimer ns, where the walk ended}.
#define CHASE_KERNEL(NAME, N, PER, STEP)                                                                      \
    extern "C" __global__ void NAME(unsigned long long start, long long warm_steps, long long steps,          \
                                    unsigned long long* out) {                                                \
        out[2] = timed_walk<N, PER>(start, warm_steps, steps, [](unsigned long long p) { return STEP(p); },   \
                                    out);                                                                     \
    }

// The recorded walk: as timed_walk, with each timed step's interval (clock_after to clock_after: the step's
// latency plus the constant cost of the STS and the clock read) kept as 16 bits in shared memory `recorded`
// (slot: a 32-bit shared address past it) and copied to `intervals` after the walk, so the record adds no
// global traffic while it runs.
template <int N, typename P, typename Step>
__device__ __forceinline__ P recorded_walk(P p, long long warm_steps, int steps, Step step,
                                           unsigned short* recorded, unsigned int slot,
                                           unsigned short* intervals, unsigned long long* out) {
    for (long long i = 0; i < warm_steps; ++i) p = step(p);
    unsigned long long c0, c1, t0, t1;
    t0 = globaltimer_fenced();
    c0 = clock64_fenced();
    unsigned int before = clock_after(p, slot);
#pragma unroll 1
    for (int i = 0; i < steps; i += N) {
#pragma unroll
        for (int u = 0; u < N; ++u) {
            p = step(p);
            const unsigned int after = clock_after(p, slot);
            recorded[i + u] = (unsigned short)min(after - before, 65535u);
            before = after;
        }
    }
    c1 = clock64_fenced();
    t1 = globaltimer_fenced();
    for (int i = 0; i < steps; ++i) intervals[i] = recorded[i];
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    return p;
}

// The timed dependent chain every latency kernel shares: `trips` trips of N unrolled calls of step() (each
// step consumes what the last produced), bracketed by clock64 reads (FENCED: reads that also clobber memory,
// where the steps are memory operations the compiler must not move out).  Returns the loop's cycles; the host
// differences two trip counts (probes/kit/chains.py), so the loop's own cost and the clock reads cancel.
template <int N, bool FENCED = false, typename Step>
__device__ __forceinline__ long long timed_chain(int trips, Step step) {
    const unsigned long long c0 = FENCED ? clock64_fenced() : clock64_plain();
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < N; ++u) step();
    }
    const unsigned long long c1 = FENCED ? clock64_fenced() : clock64_plain();
    return (long long)(c1 - c0);
}

// The clock a block ran at: thread 0 stores the clock64 cycles and %globaltimer ns since (c0, t0) as the
// block's pair in `clocks` (the host takes cycles / ns over the blocks).
__device__ __forceinline__ void record_clock(unsigned long long* clocks, long long c0, unsigned long long t0) {
    const long long c1 = clock64_plain();
    const unsigned long long t1 = globaltimer();
    if (threadIdx.x == 0) {
        clocks[2 * blockIdx.x] = (unsigned long long)(c1 - c0);
        clocks[2 * blockIdx.x + 1] = t1 - t0;
    }
}

// The 32-bit sum of a loaded element's words: what the checksums fold.
__device__ __forceinline__ unsigned int word_sum(unsigned short v) { return v; }
__device__ __forceinline__ unsigned int word_sum(unsigned int v) { return v; }
__device__ __forceinline__ unsigned int word_sum(uint4 v) { return v.x + v.y + v.z + v.w; }

// One atomic per warp: the warp's sum of every lane's accumulator, added to the sink the host checks.
__device__ __forceinline__ void publish(unsigned int acc, unsigned int* sink) {
    acc = __reduce_add_sync(0xffffffffu, acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(sink, acc);
}

// The shared-memory address (a 32-bit offset in the shared window) of a generic pointer into shared memory.
__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}
