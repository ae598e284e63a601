// Kernels that reach another GPU's memory through a peer pointer (cudaDeviceEnablePeerAccess): every load
// or store to such an address crosses the link (NVLink, else PCIe) to the peer's L2 and HBM.
//
// peer_read: every thread streams 16-byte loads over the buffer, grid-stride, `passes` times; the XOR of
// the data goes to a sink written only if it equals a value the data never produces, so the loads stay.
// peer_write: the same walk, 16-byte stores.  peer_chase: one thread follows a dependent chain of 64-bit
// absolute addresses that live in the peer's memory (ld.global.cg: past the L1), timed by %clock64 and
// %globaltimer, so cycles / steps is the remote load-to-use latency.  out = {cycles, ns, final address}.

#include "common.cuh"

extern "C" __global__ void peer_read(const uint4* __restrict__ src, long long n16, int passes,
                                     unsigned int* sink) {
    unsigned int acc = 0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int pass = 0; pass < passes; ++pass) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
            uint4 v = src[i];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0xFFFFFFFFu) sink[0] = acc;
}

extern "C" __global__ void peer_write(uint4* __restrict__ dst, long long n16, int passes, unsigned int value) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int pass = 0; pass < passes; ++pass) {
        uint4 v = make_uint4(value, value + pass, value, value + pass);
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) dst[i] = v;
    }
}

constexpr int UNROLL = 16;

extern "C" __global__ void peer_chase(unsigned long long start, long long warm_steps, long long steps,
                                      unsigned long long* out) {
    unsigned long long p = start;
    for (long long i = 0; i < warm_steps; ++i) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p) :: "memory");
    unsigned long long c0, c1, t0, t1;
    t0 = globaltimer_fenced();
    c0 = clock64_fenced();
#pragma unroll 1
    for (long long i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p) :: "memory");
    }
    c1 = clock64_fenced();
    t1 = globaltimer_fenced();
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    out[2] = p;
}
