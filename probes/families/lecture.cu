// Kernels of the lecture's own methods (probes/lecture.py).

#include "common.cuh"

#define UNROLL 32

// Shared-memory chase that computes each address from an index, as published chases do (j = chain[j]): the
// chain holds element numbers, and each step scales the loaded number by the stride (an integer multiply-add)
// before the next LDS, so one step is that instruction's latency plus the load's.  out = {cycles, ns, final
// element}.
extern "C" __global__ void chase_shared_index(const unsigned int* next_index, int elements, int stride_words,
                                              int start, long long warm_steps, long long steps,
                                              unsigned long long* out) {
    extern __shared__ unsigned int chain[];
    volatile unsigned int* v = chain;
    for (int i = threadIdx.x; i < elements; i += blockDim.x) {
        chain[i * stride_words] = next_index[i];
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    out[2] = timed_walk<UNROLL>((unsigned int)start, warm_steps, steps, [&](unsigned int j) {
        return (unsigned int)v[j * stride_words];
    }, out);
}

// §7.8's naive matmul: one thread per element of C, no tiling, each thread reading its whole row of A and
// column of B from global memory (bf16 as 16-bit patterns: the compile-only path has no CUDA headers) and
// accumulating in fp32.  A warp is 32 adjacent columns of one row: its B loads are one 64-byte run per k, its A
// load one element for all 32 lanes.
__device__ __forceinline__ float bf16_bits_to_float(unsigned short h) {
    return __uint_as_float((unsigned int)h << 16);
}

extern "C" __global__ void naive_matmul(const unsigned short* a, const unsigned short* b, float* c, int n) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= n || col >= n) return;
    const unsigned short* a_row = a + (size_t)row * n;
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) {
        acc = fmaf(bf16_bits_to_float(a_row[k]), bf16_bits_to_float(b[(size_t)k * n + col]), acc);
    }
    c[(size_t)row * n + col] = acc;
}

// One small kernel of a decode step's chain: every block adds 1 to its own counter, so after L launches in stream
// order each counter is L (the host's check that every launch ran).
extern "C" __global__ void step_kernel(unsigned long long* counters) {
    if (threadIdx.x == 0) counters[blockIdx.x] += 1;
}
