// Warp-level mma.sync with FP32 accumulation (compute.cu, energy.cu): every shape here takes A in 4 and B
// in 2 32-bit registers per thread and accumulates 4 fp32 per thread, c += A B.  Volatile asm: the compiler
// keeps every one, in order.
#pragma once

enum class MmaOp { bf16, fp16, tf32, e4m3 };

template <MmaOp OP>
__device__ __forceinline__ void mma(float* c, const unsigned int* a, const unsigned int* b);

#define MMA_DEF(OP, INSTRUCTION)                                                                         \
    template <>                                                                                          \
    __device__ __forceinline__ void mma<MmaOp::OP>(float* c, const unsigned int* a, const unsigned int* b) { \
        asm volatile(INSTRUCTION " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"      \
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                    \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                \
    }

MMA_DEF(bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
MMA_DEF(fp16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
MMA_DEF(tf32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
// FP8 (e4m3) mma.sync exists from sm_89 on: below it, it is left out (and so are the kernels that use it).
#if __CUDA_ARCH__ >= 890
MMA_DEF(e4m3, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
#endif
