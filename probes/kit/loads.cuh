// 16-byte loads written as the PTX instruction a kernel measures (the width and the path through the caches,
// whatever the compiler would make of the types).  LOAD_V4(NAME, INSTRUCTION, ADDRESS, CONSTRAINT) defines
// uint4 NAME(ADDRESS address): one INSTRUCTION.v4.u32 (INSTRUCTION: ld.<space>[.<qualifiers>]) at a pointer
// ("l") or a 32-bit shared address ("r").  Volatile asm: none is dropped, and they stay in order with the
// kernel's other volatile asm; one at a loop-invariant address may still be hoisted out of a loop by ptxas.
#pragma once

#define LOAD_V4(NAME, INSTRUCTION, ADDRESS, CONSTRAINT)                                                      \
    __device__ __forceinline__ uint4 NAME(ADDRESS address) {                                                 \
        uint4 v;                                                                                             \
        asm volatile(INSTRUCTION ".v4.u32 {%0, %1, %2, %3}, [%4];"                                           \
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : CONSTRAINT(address));                    \
        return v;                                                                                            \
    }
