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

// The timed walk every chase shares: `warm_steps` untimed steps (bring the chain into the cache), then
// `steps` timed ones (a multiple of N), N unrolled per trip; out = {clock64 cycles, %globaltimer ns} of the
// timed steps.  Returns where the walk ended (the sink the host checks).
template <int N, typename P, typename Step>
__device__ __forceinline__ P timed_walk(P p, long long warm_steps, long long steps, Step step,
                                        unsigned long long* out) {
    for (long long i = 0; i < warm_steps; ++i) p = step(p);
    unsigned long long c0, c1, t0, t1;
    t0 = globaltimer_fenced();
    c0 = clock64_fenced();
#pragma unroll 1
    for (long long i = 0; i < steps; i += N) {
#pragma unroll
        for (int u = 0; u < N; ++u) p = step(p);
    }
    c1 = clock64_fenced();
    t1 = globaltimer_fenced();
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    return p;
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

// The clock a block ran at: thread 0 stores the clock64 cycles and %globaltimer ns since (c0, t0) as the
// block's pair in `clocks` (the host takes cycles / ns over the blocks).
__device__ __forceinline__ void record_clock(unsigned long long* clocks, long long c0, unsigned long long t0) {
    const long long c1 = clock64();
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
