// Kernels of the lecture's own methods (probes/lecture.py).
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
    unsigned int j = start;
    for (long long i = 0; i < warm_steps; ++i) j = v[j * stride_words];
    unsigned long long c0, c1, t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0) :: "memory");
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0) :: "memory");
#pragma unroll 1
    for (long long i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) j = v[j * stride_words];
    }
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1) :: "memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1) :: "memory");
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    out[2] = j;
}
