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
    const unsigned long long p = timed_walk<UNROLL>(start, warm_steps, steps, [](unsigned long long p) {
        asm volatile("ld.global.cg.u64 %0, [%0];" : "+l"(p) :: "memory");
        return p;
    }, out);
    out[2] = p;
}
