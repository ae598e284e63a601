"""The bank-conflict probe again, in Numba CUDA: the same addresses, forms and sink check as smem_banks.py.

The array is a Numba ``cuda.shared.array`` (dynamic, sized at launch) filled and indexed by Numba code; the
loads themselves, the shared address of the array and clock64/%globaltimer are intrinsics emitting the same
inline PTX as smem_banks.cu (``ld.volatile.shared.{u32,v2.u32,v4.u32}``, ``cvta.to.shared``, ``mov.u64``),
because numba-cuda has no clock reads and its own indexing would put address arithmetic inside the chain.
In the CUDA simulator the kernel is built with Python stand-ins, so its addresses can be tested on a CPU.
"""
from __future__ import annotations

import functools

from gpuatlas.probes.families.smem_banks import (ACCESS_BYTES, AXES, CHAIN_UNROLL, FORMS, LANES, batch, measure_banks,
                                        stride_sweep)
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe

PTX_LOADS = {4: "ld.volatile.shared.u32 $0, [$1];",
             8: "ld.volatile.shared.v2.u32 {$0, $1}, [$2];",
             16: "ld.volatile.shared.v4.u32 {$0, $1, $2, $3}, [$4];"}
#: numba.cuda, bound by make_banks_kernel.  The kernels reach it as a module global because that is where
#: the CUDA simulator swaps in its per-launch API (threadIdx, shared and local arrays); this module is
#: imported without Numba, so it cannot import it at the top.
cuda = None


def make_banks_kernel(numba_cuda, access_bytes: int, form: str, load, shared_base, clock64, globaltimer):
    """A kernel ``k(elements, pitch, offset, xor_mask, trips, out, sink)`` over the given primitives, as
    smem_banks.cu's ``smem_<form>_<access_bytes>``: lane l of every warp reads element
    ``l*pitch + (offset ^ (l & mask))``; out and sink are laid out as there.

    ``numba_cuda`` is ``numba.cuda`` (real or simulated); ``load(words, address)`` returns the first 32-bit
    word of the element at shared byte ``address``; ``shared_base(words)`` is the array's shared address.
    Every word of element i holds its address.
    """
    global cuda
    from numba import uint32

    cuda = numba_cuda

    words_per_element = access_bytes // 4
    loads_per_batch = batch(access_bytes)
    dependent = form == "latency"  # a constant of the closure: Numba compiles only the branch it selects

    @cuda.jit
    def bank_probe(elements, pitch, offset, xor_mask, trips, out, sink):
        words = cuda.shared.array(0, dtype=uint32)
        base = shared_base(words)
        for i in range(cuda.threadIdx.x, elements * words_per_element, cuda.blockDim.x):
            words[i] = base + (i // words_per_element) * access_bytes
        cuda.syncthreads()
        lane = cuda.threadIdx.x % 32
        p = base + (lane * pitch + (offset ^ (lane & xor_mask))) * access_bytes
        if dependent:
            t0 = globaltimer()
            c0 = clock64()
            for _ in range(trips):
                for _ in range(CHAIN_UNROLL):  # constant trip count: LLVM unrolls it fully
                    p = load(words, p)
            c1 = clock64()
            t1 = globaltimer()
            sink[cuda.threadIdx.x] = p
        else:
            ping = cuda.local.array(loads_per_batch, dtype=uint32)
            pong = cuda.local.array(loads_per_batch, dtype=uint32)
            total = uint32(0)
            for k in range(loads_per_batch):
                ping[k] = load(words, p)
            t0 = globaltimer()
            c0 = clock64()
            for _ in range(trips):
                for k in range(loads_per_batch):  # issue a batch, then sum the one before it
                    pong[k] = load(words, p)
                    total = uint32(total + ping[k])
                for k in range(loads_per_batch):
                    ping[k] = load(words, p)
                    total = uint32(total + pong[k])
            c1 = clock64()
            t1 = globaltimer()
            for k in range(loads_per_batch):
                total = uint32(total + ping[k])
            sink[cuda.threadIdx.x] = total
        if cuda.threadIdx.x == 0:
            out[0] = base
        if lane == 0:
            mine = 1 + 4 * (cuda.threadIdx.x // 32)
            out[mine] = c0
            out[mine + 1] = c1
            out[mine + 2] = t0
            out[mine + 3] = t1

    return bank_probe


@functools.lru_cache(maxsize=None)
def gpu_primitives(access_bytes: int):
    """``(load, shared_base, clock64, globaltimer)`` as Numba intrinsics emitting inline PTX."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    from gpuatlas.probes.kit.numba_kit import gpu_primitives as chase_primitives

    i32, i64 = ir.IntType(32), ir.IntType(64)
    words = access_bytes // 4

    def as_i32(builder, value):
        width = value.type.width
        return builder.trunc(value, i32) if width > 32 else builder.zext(value, i32) if width < 32 else value

    @intrinsic
    def load(typingctx, array, address):
        def codegen(context, builder, sig, args):
            returned = i32 if words == 1 else ir.LiteralStructType([i32] * words)
            asm = ir.InlineAsm(ir.FunctionType(returned, [i32]), PTX_LOADS[access_bytes],
                               ",".join(["=r"] * words + ["r"]), side_effect=True)
            value = builder.call(asm, [as_i32(builder, args[1])])
            return value if words == 1 else builder.extract_value(value, 0)

        return types.uint32(array, address), codegen

    @intrinsic
    def shared_base(typingctx, array):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            asm = ir.InlineAsm(ir.FunctionType(i64, [i64]), "cvta.to.shared.u64 $0, $1;", "=l,l")
            return builder.trunc(builder.call(asm, [builder.ptrtoint(data, i64)]), i32)

        return types.uint32(array), codegen

    _, clock64, globaltimer = chase_primitives("default")
    return load, shared_base, clock64, globaltimer


@functools.lru_cache(maxsize=None)
def gpu_kernel(access_bytes: int, form: str):
    from numba import cuda

    return make_banks_kernel(cuda, access_bytes, form, *gpu_primitives(access_bytes))


@probe("smem.banks_numba",
       sweeps={"quick": lambda d: {"access_bytes": [4], "stride_words": stride_sweep(d, "quick"),
                                   "offset_words": [0], "form": list(FORMS)},
               "full": lambda d: {"access_bytes": list(ACCESS_BYTES), "stride_words": stride_sweep(d, "quick"),
                                  "offset_words": [0], "form": list(FORMS)}},
       axes={**AXES, "stride_words": "elements between consecutive lanes' addresses (0: all lanes read one "
                                     "element): 0..8, 16, 32, 33 and 64 in both profiles (smem.banks's quick strides)",
             "offset_words": "elements added to every lane's index (0)"}, backend="numba")
def smem_banks_numba(ctx, access_bytes: int, stride_words: int, offset_words: int, form: str) -> list[Sample]:
    """The bank-conflict probe in Numba CUDA: must agree with smem.banks within 5% at every config."""
    import numpy as np
    from numba import cuda

    from gpuatlas.probes.kit.numba_kit import numba_problem

    problem = numba_problem()
    if problem:
        raise RuntimeError(problem)
    bank_kernel = gpu_kernel(access_bytes, form)

    def launch(elements: int, pitch: int, offset: int, xor_mask: int, trips: int, warps: int):
        out = cuda.device_array(1 + 4 * warps, dtype=np.uint64)
        sink = cuda.device_array(LANES * warps, dtype=np.uint32)
        bank_kernel[1, LANES * warps, 0, elements * access_bytes](np.int32(elements), np.int32(pitch),
                                                                  np.int32(offset), np.int32(xor_mask),
                                                                  np.uint32(trips), out, sink)
        return out.copy_to_host(), sink.copy_to_host()

    return measure_banks(ctx, access_bytes, stride_words, "plain", offset_words, form, launch)
