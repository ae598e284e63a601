"""Barriers and fences (probes/families/barriers.py)."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE, LEVELS
from fakes.execution import ATOMIC_LATENCY, BARRIER_BASE, placed
from fakes.hopper import DSMEM
from gpuatlas.probes.kit.harness import Sample

#: Barriers of the simulated GPU: a named barrier or an mbarrier phase costs BARRIER_BASE / MBARRIER_BASE plus
#: one clock per warp it collects; a store issues in STORE_ISSUE clocks and a fence waits for the store to
#: reach its scope (nothing, the SM, the L2, the system past HBM); a grid barrier is two block barriers and a
#: global atomic round trip, plus one clock per block at the counter (one add per address per clock); a relaxed
#: cluster barrier is a block barrier and a round trip across the SM-to-SM network, plus one clock per block,
#: and the default one adds its release fence (a GPU-scope fence's wait).
MBARRIER_BASE, STORE_ISSUE = 12.0, 1.0
FENCE_WAIT = {"none": 0.0, "cta": 4.0, "gpu": LEVELS["l2"], "sys": LEVELS["dram"]}


def barrier_cycles(kind, n, device=DEVICE):
    """The simulated cycles per barrier of (kind, n)."""
    warps = min(device["max_threads_per_block"], 1024) // 32
    if kind == "named_partial":
        return BARRIER_BASE + n
    if kind == "named_ids":
        return BARRIER_BASE + warps / n
    if kind.startswith("fence_"):
        return STORE_ISSUE + FENCE_WAIT[kind.removeprefix("fence_")]
    if kind == "grid":
        return 2 * (BARRIER_BASE + 128 / 32) + ATOMIC_LATENCY + n * device["sm_count"]
    if kind == "mbarrier":
        return MBARRIER_BASE + n
    relaxed = BARRIER_BASE + DSMEM["remote"] + n
    return relaxed if kind == "cluster_relaxed" else relaxed + FENCE_WAIT["gpu"]  # a release fence before arriving


def _exec_barriers(ctx, kind, n):
    if kind in ("fence_gpu", "fence_sys"):  # the wait for the store's home partition
        return placed(ctx, barrier_cycles(kind, int(n), ctx.device), 2)
    return [Sample("latency", barrier_cycles(kind, int(n), ctx.device), "cycles", r, CLOCK_HZ, "clock64")
            for r in range(5)]


#: probe id -> its fake.
FAKES = {"exec.barriers": _exec_barriers}
