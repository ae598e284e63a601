"""Execution (probes/families/execution/): the pipes' depths and widths, warp scheduling, divergence,
mma.sync latency, global atomics and __syncthreads."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ, FAR_L2, LEVELS, far_homed
from gpuatlas.probes.kit.harness import Sample

#: The execution chapter's simulated SM: SCHEDULERS sub-partitions, each issuing one warp instruction a clock
#: to 32 lanes; an op's latency is its pipeline's depth, and a unit with fewer lanes than 32 per sub-partition
#: takes 32 / lanes clocks per warp instruction.  (depth, lanes per sub-partition) by the op's name prefix.
SCHEDULERS, FFMA_DEPTH = 4, 4.0
PIPES = (("mufu", 23.0, 4), ("d", 8.0, 16), ("shfl", 24.0, 16), ("vote", 12.0, 16), ("redux", 30.0, 16),
         ("match", 40.0, 8), ("ld", 33.0, 8), ("sts", 0.0, 8), ("f2", 6.0, 16), ("i2f", 6.0, 16),
         ("", FFMA_DEPTH, 32))


def _pipe(op):
    return next((depth, lanes) for prefix, depth, lanes in PIPES if op.startswith(prefix))


def _exec_inst(ctx, op):
    depth, lanes = _pipe(op)
    out = [Sample("ops_per_clk_sm", float(SCHEDULERS * lanes), "1/cycle", r, CLOCK_HZ, "cuda_event")
           for r in range(5)]
    return out + ([Sample("latency", depth, "cycles", r, CLOCK_HZ, "clock64") for r in range(5)] if depth else [])


def _exec_schedule(ctx, resident_warps_per_sm, ilp):
    """Warp w sits on scheduler w mod SCHEDULERS; a warp issues one FFMA per FFMA_DEPTH clocks per chain."""
    per_scheduler = np.bincount(np.arange(resident_warps_per_sm) % SCHEDULERS, minlength=SCHEDULERS)
    ipc = float(sum(min(1.0, n * ilp / FFMA_DEPTH) for n in per_scheduler))
    return [Sample("warp_ipc_sm", ipc, "1/cycle", r, CLOCK_HZ, "clock64") for r in range(5)]


def _exec_diverge(ctx, ways):
    """The branches of a split warp run one after another: each lane's work takes ``ways`` times the issue."""
    return [Sample("lane_ffma_per_clk_sm", SCHEDULERS * 32.0 / ways, "1/cycle", r, CLOCK_HZ, "clock64")
            for r in range(5)]


#: mma.sync latency of the simulated tensor core: a pipeline of this many clocks per K step of a 16-bit shape.
MMA_CYCLES_PER_K = 2.0
MMA_K = {"bf16": 16, "fp16": 16, "tf32": 8, "int8": 32, "fp64": 4}


def _exec_mma_latency(ctx, dtype):
    return [Sample("latency", MMA_CYCLES_PER_K * MMA_K[dtype], "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


#: Global atomics of the simulated GPU: a round trip to the L2 per dependent atomic; the L2 applies one add
#: per address per clock and ATOMIC_UNITS adds per clock over distinct addresses.
ATOMIC_LATENCY, ATOMIC_UNITS = 600.0, 64


#: What an address homed across the chip adds to a one-thread atomic's or fence's wait: the far partition's
#: L2 hit over the near one's.
CROSSING = FAR_L2 - LEVELS["l2"]


def placed(ctx, near: float, salt: int) -> list[Sample]:
    """One sample per random line (as the probe draws them): ``near`` where the line is homed near, plus
    CROSSING where it is homed far (the simulated L2's partition hash)."""
    from gpuatlas.probes.kit.samplers import PLACEMENTS, random_lines

    offsets = random_lines(ctx, PLACEMENTS, salt)
    cycles = np.where(far_homed(offsets), near + CROSSING, near)
    return [s for r, (o, c) in enumerate(zip(offsets, cycles))
            for s in (Sample("latency", float(c), "cycles", r, CLOCK_HZ, "clock64"),
                      Sample("address_offset", float(o), "B", r, None, "config"))]


def _exec_atomics(ctx, dtype, mode):
    if mode == "latency":
        return placed(ctx, ATOMIC_LATENCY, 1)
    per_clk = {"same": 1.0, "warp": float(ATOMIC_UNITS), "distinct": float(ATOMIC_UNITS)}[mode]
    return [s for r in range(5) for s in (Sample("ops_per_s", per_clk * CLOCK_HZ, "1/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("ops_per_clk", per_clk, "1/cycle", r, CLOCK_HZ, "cuda_event"))]


#: A barrier of the simulated SM: a fixed cost plus one clock per warp to collect.
BARRIER_BASE = 20.0


def _exec_sync(ctx, threads):
    return [Sample("latency", BARRIER_BASE + threads / 32, "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


#: probe id -> its fake.
FAKES = {"exec.inst": _exec_inst, "exec.schedule": _exec_schedule, "exec.diverge": _exec_diverge,
         "exec.mma_latency": _exec_mma_latency, "exec.atomics": _exec_atomics, "exec.sync": _exec_sync}
