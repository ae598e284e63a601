"""The Numba kit: numba-cuda has no clock64, %globaltimer or cache-operator loads, so these intrinsics emit the
same inline PTX as the CUDA C++ kernels (``mov.u64 %clock64``, ``mov.u64 %globaltimer``, ``ld.global.u64``,
``ld.global.cg.u64``); the loops around them, their counters and their code generation are Numba's."""
from __future__ import annotations

import functools


PTX_LOADS = {"default": "ld.global.u64", "cg": "ld.global.cg.u64"}


@functools.lru_cache(maxsize=None)
def gpu_primitives(flavour: str):
    """``(load, clock64, globaltimer)`` as Numba intrinsics emitting inline PTX."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    i64 = ir.IntType(64)

    def read_register(register: str):
        @intrinsic
        def read(typingctx):
            def codegen(context, builder, sig, args):
                asm = ir.InlineAsm(ir.FunctionType(i64, []), f"mov.u64 $0, %{register};", "=l",
                                   side_effect=True)
                return builder.call(asm, [])

            return types.uint64(), codegen

        return read

    @intrinsic
    def load(typingctx, chain, address):
        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(i64, [i64]), f"{PTX_LOADS[flavour]} $0, [$1];", "=l,l",
                               side_effect=True)
            return builder.call(asm, [args[1]])

        return types.uint64(chain, types.uint64), codegen

    return load, read_register("clock64"), read_register("globaltimer")
