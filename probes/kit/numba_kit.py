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


# -- whether Numba CUDA compiles here (the doctor's Numba check, and the Numba probes' skip) ---------------

#: Installs every Python package the GPU checks need (CuPy, Numba CUDA, nvidia-ml-py); run in the repository.
GPU_EXTRA = "pip install -e '.[gpu]'"


def _why(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0] if lines else ''}".rstrip(": ")


@functools.lru_cache(maxsize=None)
def numba_problem() -> str | None:
    """Why Numba CUDA cannot compile kernels here, in plain words; None if it can (needs no GPU)."""
    try:
        import numpy as np
        from numba import cuda, types
    except ImportError as exc:
        package = "numba" if exc.name == "numba" else "numba-cuda"
        return (f"the Python package {package} is not installed ({_why(exc)}). Fix: {GPU_EXTRA}   "
                f"(or just this package: pip install {package})")

    def probe(a):
        a[0] = 1

    try:
        cuda.compile_ptx(probe, (types.int64[:],), cc=(9, 0))
    except AttributeError as exc:
        if "row_stack" in str(exc):
            import importlib.metadata

            version = importlib.metadata.version("numba-cuda")
            return (f"numba-cuda {version} cannot compile any kernel with numpy {np.__version__}: numpy 2.5 "
                    "removed np.row_stack, which numba-cuda overloads. Fix: install numpy<2.5 "
                    "(`pip install 'numpy<2.5'`; offline, put a numpy<2.5 wheel's install first on PYTHONPATH)")
        return f"Numba CUDA fails to compile a trivial kernel ({_why(exc)})"
    except Exception as exc:
        return f"Numba CUDA fails to compile a trivial kernel ({_why(exc)})"
    return None
