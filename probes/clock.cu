// The SM clock, measured: each block spins on %globaltimer (ns) for spin_ns and counts clock64 cycles
// meanwhile; cycles / ns is that SM's effective clock.  One block = one busy SM; a full grid loads them all.
extern "C" __global__ void clock_witness(long long spin_ns, unsigned long long* out) {
    unsigned long long c0, c1, t0, t1, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < spin_ns);
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = c1 - c0;
        out[2 * blockIdx.x + 1] = t1 - t0;
    }
}
