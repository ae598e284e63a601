// The SM clock, measured: each block spins on %globaltimer (ns) for spin_ns and counts clock64 cycles
// meanwhile; cycles / ns is that SM's effective clock.  One block = one busy SM; a full grid loads them all.

#include "common.cuh"

extern "C" __global__ void clock_witness(long long spin_ns, unsigned long long* out) {
    unsigned long long c0, c1, t0, t1, t;
    t0 = globaltimer();
    c0 = clock64_plain();
    do {
        t = globaltimer();
    } while ((long long)(t - t0) < spin_ns);
    c1 = clock64_plain();
    t1 = globaltimer();
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = c1 - c0;
        out[2 * blockIdx.x + 1] = t1 - t0;
    }
}
