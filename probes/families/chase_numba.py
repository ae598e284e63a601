"""The pointer chase again, written in Numba CUDA: the same chain, warm-up and sink check as chase.py (from
the chain kit, chain.py).

numba-cuda has no clock64, %globaltimer or cache-operator loads; the Numba kit (numba_kit.py) adds them as
intrinsics that emit the same inline PTX as chase.cu (``mov.u64 %clock64``, ``ld.global.u64``,
``ld.global.cg.u64``): the loop, its counters and its code generation are Numba's.  In the CUDA simulator (no PTX) the kernel is
built with Python stand-ins, so its control flow can be tested on a CPU.
"""
from __future__ import annotations

import functools

from gpuatlas.probes.kit.chain import FLAVOURS, UNROLL, measure_chase, three_footprints
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.kit.numba_kit import gpu_primitives
from gpuatlas.probes.registry import probe


def make_chase_kernel(cuda, load, clock64, globaltimer):
    """A kernel ``chase(chain, start, warm_steps, steps, out)`` over the given primitives.

    ``load(chain, p)`` returns the chain word at address ``p``; out = {cycles, ns, final address}.
    ``steps`` is a multiple of UNROLL: the timed loop does UNROLL loads per trip, as chase.cu does, so the
    loop's counter and branch cost the same share of each step in both front ends.
    """

    @cuda.jit
    def chase(chain, start, warm_steps, steps, out):
        p = start
        for _ in range(warm_steps):
            p = load(chain, p)
        t0 = globaltimer()
        c0 = clock64()
        for _ in range(steps // UNROLL):
            for _ in range(UNROLL):  # constant trip count: LLVM unrolls it fully
                p = load(chain, p)
        c1 = clock64()
        t1 = globaltimer()
        out[0] = c1 - c0
        out[1] = t1 - t0
        out[2] = p

    return chase


@functools.lru_cache(maxsize=None)
def gpu_kernel(flavour: str):
    from numba import cuda

    return make_chase_kernel(cuda, *gpu_primitives(flavour))


def _three(device: dict) -> dict:
    return {"footprint_bytes": three_footprints(device), "stride_bytes": [128], "flavour": ["default"]}


@probe("chase.latency_numba", sweeps={"quick": _three, "full": _three},
       axes={"footprint_bytes": "one footprint in L1, L2 and HBM (as chase.latency's quick profile)",
             "stride_bytes": "bytes between chain elements",
             "flavour": "default (ld.global, the one swept) or cg (ld.global.cg, with -a flavour=cg)"},
       backend="numba")
def chase_latency_numba(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """The pointer chase in Numba CUDA: must agree with chase.latency within 5% at every footprint."""
    import numpy as np
    from numba import cuda

    from gpuatlas.probes.kit.numba_kit import numba_problem

    problem = numba_problem()
    if problem:
        raise RuntimeError(problem)
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r}")
    chase = gpu_kernel(flavour)
    out = cuda.device_array(3, dtype=np.uint64)
    chain = cuda.device_array(1, dtype=np.uint64)  # the chain is addressed by value; this keeps a typed arg

    def launch(start: int, warm: int, steps: int):
        chase[1, 1](chain, np.uint64(start), np.int64(warm), np.int64(steps), out)
        return out.copy_to_host()

    return measure_chase(ctx, footprint_bytes, stride_bytes, launch, timer="clock64")
