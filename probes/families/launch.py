"""Kernel launch overhead: back-to-back launches of an empty kernel, plain and replayed from a CUDA graph.

``launch_interval`` is GPU time per launch (CUDA events around a batch of launches): what a stream of tiny
kernels costs.  ``host_call`` is host wall time per Python launch call.  A launch costs the larger of the two.
"""
from __future__ import annotations

import time

from gpuatlas.probes.kit.harness import EventTimer, Sample, repeat_until_stable
from gpuatlas.probes.registry import probe

#: Launches per timed batch (a CUDA graph holds this many kernel nodes).
BATCH = 1000
_SWEEP = lambda device: {"mode": ["plain", "graph"]}  # noqa: E731


@probe("launch.overhead", sweeps={"quick": _SWEEP, "full": _SWEEP},
       axes={"mode": "plain launches, or a CUDA graph of them"},
       quantities=("launch.overhead_s", "launch.graph_overhead_s"), kernels=("launch.cu",))
def launch_overhead(ctx, mode: str) -> list[Sample]:
    """Time per launch of an empty kernel (s), plain or replayed from a CUDA graph."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel, replayed

    empty = kernel("launch.cu", "empty_kernel")
    stream = cupy.cuda.Stream(non_blocking=True)
    args = ((1,), (1,), ())

    def plain():
        for _ in range(BATCH):
            empty(*args, stream=stream)

    timer = EventTimer(replayed(plain, stream, mode), ctx.budget.min_sample_s, stream=stream)

    def sample(repeat: int) -> list[Sample]:
        t0 = time.perf_counter()
        per_launch = timer.seconds_per_launch() / BATCH
        host = (time.perf_counter() - t0) / (timer.batch * BATCH)
        hz = ctx.sm_clock()
        flag = ctx.throttle_flag(hz)
        return [Sample("launch_interval", per_launch, "s", repeat, hz, "cuda_event", flag),
                Sample("host_call", host, "s", repeat, hz, "perf_counter", flag)]

    return repeat_until_stable(sample, "launch_interval", ctx.budget)
