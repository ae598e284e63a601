"""``hopper.dpx`` -- latency (dependent chain) and throughput (full grid, 8 chains per thread) of Hopper's DPX
instructions against the two-instruction sequence a GPU without DPX runs (kernels in hopper.cu); every
result is checked against numpy."""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.families.hopper import (CHASE_THREADS, DPX_CHAINS, DPX_CONFIGS, DPX_THREADS, DPX_UNROLL, HOPPER,
                                             LAUNCH_S, SAMPLE_S, UNROLL, dpx_reference, hopper_kernel, wrap32)
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import EventTimer, Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import steps_for
from gpuatlas.probes.registry import probe


@probe("hopper.dpx",
       sweeps={"quick": lambda d: list(DPX_CONFIGS), "full": lambda d: list(DPX_CONFIGS)},
       axes={"op": "viaddmax: max(a + b, c); vimax3: max(a, b, c) (32-bit signed)",
             "impl": "dpx (the __vi* intrinsic: VIADDMNMX, VIMNMX3) or emu (viaddmax as IMAD + VIMNMX, the "
                     "two instructions of a GPU without DPX; ptxas fuses a plain add + max into VIADDMNMX)"},
       quantities=("dpx.viaddmax_latency_cycles", "dpx.viaddmax_emulated_latency_cycles",
                   "dpx.vimax3_latency_cycles", "dpx.viaddmax_ops_per_clk_sm",
                   "dpx.viaddmax_emulated_ops_per_clk_sm", "dpx.vimax3_ops_per_clk_sm", "dpx.viaddmax_speedup",
                   "dpx.viaddmax_latency_speedup"),
       kernels=("hopper.cu",), min_cc=HOPPER)
def dpx(ctx, op: str, impl: str) -> list[Sample]:
    """Latency (cycles per dependent operation) and throughput (operations per clock per SM) of a DPX
    instruction or its emulation, results checked against numpy."""
    import cupy

    lat_func = hopper_kernel(f"dpx_latency_{op}_{impl}")
    tp_func = hopper_kernel(f"dpx_throughput_{op}_{impl}")
    blocks = ctx.device["sm_count"] * blocks_per_sm(tp_func, DPX_THREADS, 0)
    threads = blocks * DPX_THREADS
    rng = ctx.rng(DPX_CONFIGS.index({"op": op, "impl": impl}))
    a, b, c = (cupy.asarray(rng.integers(-2**31, 2**31, threads, dtype=np.int64).astype(np.int32))
               for _ in range(3))
    one = np.int32(1)
    out = cupy.zeros(2, dtype=cupy.uint64)
    lat_result = cupy.zeros(CHASE_THREADS, dtype=cupy.int32)
    tp_result = cupy.zeros(threads * DPX_CHAINS, dtype=cupy.int32)

    def latency_run(steps: int) -> np.ndarray:
        lat_func((1,), (CHASE_THREADS,), (a, b, c, one, np.int64(steps), out, lat_result))
        return out.get()

    # Results first: a short chain of each kernel against numpy.
    steps = 2 * UNROLL
    latency_run(steps)
    ha, hb, hc = a.get(), b.get(), c.get()
    want = dpx_reference(op, ha[:CHASE_THREADS], hb[:CHASE_THREADS], hc[:CHASE_THREADS], steps)
    if not np.array_equal(lat_result.get(), want):
        raise RuntimeError(f"dpx {op} ({impl}) latency chain disagrees with numpy")
    tp_func((1,), (DPX_THREADS,), (a, b, c, one, np.int64(steps), tp_result))
    x0 = (ha[:DPX_THREADS, None].astype(np.int64) + np.arange(DPX_CHAINS)).astype(np.int64)
    want = dpx_reference(op, wrap32(x0), hb[:DPX_THREADS, None], hc[:DPX_THREADS, None], steps)
    if not np.array_equal(tp_result.get()[:DPX_THREADS * DPX_CHAINS].reshape(DPX_THREADS, DPX_CHAINS), want):
        raise RuntimeError(f"dpx {op} ({impl}) throughput chains disagree with numpy")

    first = latency_run(1024)
    lat_steps = steps_for(float(first[1]) * 1e-9 / 1024, UNROLL, sample_s=SAMPLE_S)

    def run(tp_steps: int):
        return lambda: tp_func((blocks,), (DPX_THREADS,), (a, b, c, one, np.int64(tp_steps), tp_result))

    tp_steps, _ = calibrate(run, DPX_UNROLL, LAUNCH_S)
    timer = EventTimer(run(tp_steps), max(ctx.budget.min_sample_s, 2 * LAUNCH_S))
    ops = threads * DPX_CHAINS * tp_steps
    sms = ctx.device["sm_count"]

    def sample(repeat: int) -> list[Sample]:
        result = latency_run(lat_steps).astype(float)
        hz = result[0] / result[1] * 1e9
        seconds = timer.seconds_per_launch()
        grid_hz = ctx.sm_clock()
        return [Sample("latency", result[0] / lat_steps, "cycles", repeat, hz, "clock64", ctx.throttle_flag(hz)),
                Sample("ops_per_clk_sm", ops / seconds / sms / grid_hz, "1/cycle", repeat, grid_hz, "cuda_event",
                       ctx.throttle_flag(grid_hz))]

    return repeat_until_stable(sample, "latency", ctx.budget)
