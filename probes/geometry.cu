// Cache-set probing: one thread follows a cyclic chain of 64-bit absolute addresses with the default,
// L1-caching ld.global (LDG.E.64), each load's address being the previous load's value.  After each load it
// stores the loaded value to shared memory (the STS must wait for the load) and then reads %clock, so
// consecutive clock reads bracket exactly one access: an L1 hit and an L1 miss are intervals of different
// size.  The intervals go to shared memory as 16 bits and are copied out after the walk, so the record adds
// no global traffic that could disturb the L1.  The launch may ask for more dynamic shared memory than the
// record needs: that allocation is what moves the L1/shared carve-out.
// out = {clock64 cycles of the recorded walk, %globaltimer ns, final address (the sink)}.
constexpr int UNROLL = 32;

__device__ __forceinline__ unsigned long long load_l1(unsigned long long p) {
    unsigned long long next;
    asm volatile("ld.global.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    return next;
}

__device__ __forceinline__ unsigned int clock_after(unsigned long long p, unsigned int slot) {
    unsigned int t;
    asm volatile("st.shared.u32 [%1], %2;\n\tmov.u32 %0, %%clock;"
                 : "=r"(t) : "r"(slot), "r"((unsigned int)p) : "memory");
    return t;
}

extern "C" __global__ void l1_record(unsigned long long start, long long warm_steps, int steps,
                                     unsigned short* intervals, unsigned long long* out) {
    extern __shared__ unsigned short recorded[];  // steps intervals, then one 32-bit slot
    const unsigned int slot =
        (unsigned int)__cvta_generic_to_shared(recorded) + ((2u * steps + 3u) & ~3u);
    unsigned long long p = start;
    for (long long i = 0; i < warm_steps; ++i) p = load_l1(p);  // the set's steady state
    unsigned long long c0, c1, t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0) :: "memory");
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0) :: "memory");
    unsigned int before = clock_after(p, slot);
#pragma unroll 1
    for (int i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            p = load_l1(p);
            const unsigned int after = clock_after(p, slot);
            recorded[i + u] = (unsigned short)min(after - before, 65535u);
            before = after;
        }
    }
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1) :: "memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1) :: "memory");
    for (int i = 0; i < steps; ++i) intervals[i] = recorded[i];
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    out[2] = p;
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
    unsigned int p = start + threadIdx.x;  // a per-thread index: LDC, not the uniform datapath's ULDC
    for (long long i = 0; i < warm_steps; ++i) p = const_step(p);
    unsigned long long c0, c1, t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0) :: "memory");
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0) :: "memory");
#pragma unroll 1
    for (long long i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) p = const_step(p);
    }
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1) :: "memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1) :: "memory");
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    out[2] = p;
}
