"""Barriers and fences (CuPy RawModule, barriers.cu and barriers_sm90.cu): ``exec.barriers``.

Cycles per barrier (or per store + fence) of a dependent loop, thread 0 of block 0's clock64 over a loop twice
as long less one as long, for each ``kind``:

* ``named_partial`` -- bar.sync 1, n x 32: the first n warps of a largest block take part (partial count);
* ``named_ids`` -- a largest block's warps split over n barrier ids at once (bar.sync id, blockDim / n);
* ``fence_none`` / ``fence_cta`` / ``fence_gpu`` / ``fence_sys`` -- one thread: a volatile global store, then
  nothing, __threadfence_block, __threadfence or __threadfence_system; one sample per random line the store
  goes to (a fence waits for the store's home L2 partition, near the SM or across the chip);
* ``grid`` -- a grid barrier of a cooperative launch (n blocks per SM, every SM), thread 0 of each block
  meeting the others at a global counter (the algorithm of cooperative groups' grid sync);
* ``mbarrier`` (sm_90) -- one block of n warps arriving on one shared-memory mbarrier and waiting for its phase;
* ``cluster`` (sm_90) -- one thread-block cluster of n blocks on barrier.cluster.arrive + wait (16: the
  non-portable size, opted into; recorded as refused where the driver says no); ``cluster_relaxed`` the same
  with arrive.relaxed, the barrier without the release fence ptxas puts before a default arrive.

Before timing, each barrier kind runs once in its checking variant: every participant writes the step it
reached before the barrier and reads a neighbour's after it; a neighbour seen behind fails the probe, as does
any barrier count short of participants x steps.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.clusters import ClusterRefused, cluster_launch, refused_samples
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.chains import chain_latency, chain_latency_samples
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.kit.samplers import PLACEMENTS, random_lines
from gpuatlas.probes.registry import probe

LANES = 32
#: barriers.cu's and barriers_sm90.cu's constants.
BARRIER_UNROLL, GRID_UNROLL, SLOTS = 16, 4, 1024
#: Trips of the shorter chain (the longer runs twice as many).
BARRIER_TRIPS, GRID_TRIPS = 16, 8
GRID_THREADS, CLUSTER_THREADS = 128, 128
NAMED_IDS = (1, 2, 4, 8, 16)  # a block has 16 named barriers
FENCES = ("none", "cta", "gpu", "sys")
#: The fences' placements' salt (beside the run's seed and the fence).
FENCE_SALT = 0xFE4
CLUSTER_SIZES = (2, 4, 8, 16)
SM90 = (9, 0)
KINDS = ("named_partial", "named_ids", *(f"fence_{f}" for f in FENCES), "grid", "mbarrier", "cluster",
         "cluster_relaxed")


def _doubling(top: int) -> list[int]:
    """1, 2, 4, ... below ``top``, and ``top``."""
    out, n = [], 1
    while n < top:
        out.append(n)
        n *= 2
    return out + [top]


def block_threads(device: dict) -> int:
    """The largest block, whole warps, at most SLOTS threads (the check's shared slots)."""
    return min(device["max_threads_per_block"], SLOTS) // LANES * LANES


def grid_blocks_per_sm(device: dict) -> list[int]:
    """Blocks of GRID_THREADS per SM for the grid barrier: doubling up to what the SM holds."""
    return _doubling(min(device["max_blocks_per_sm"], device["max_threads_per_sm"] // GRID_THREADS))


def barrier_configs(device: dict) -> list[dict]:
    """Every (kind, n) of the device: n warps, barrier ids, blocks per SM or cluster blocks; the mbarrier and
    cluster kinds from compute capability 9.0."""
    warps = block_threads(device) // LANES
    configs = [{"kind": "named_partial", "n": w} for w in _doubling(warps)]
    configs += [{"kind": "named_ids", "n": k} for k in NAMED_IDS if warps % k == 0]  # equal groups
    configs += [{"kind": f"fence_{f}", "n": 1} for f in FENCES]
    configs += [{"kind": "grid", "n": b} for b in grid_blocks_per_sm(device)]
    cc = tuple(int(x) for x in str(device.get("compute_capability", "0.0")).split("."))
    if cc >= SM90:
        configs += [{"kind": "mbarrier", "n": w} for w in _doubling(warps)]
        configs += [{"kind": kind, "n": c} for kind in ("cluster", "cluster_relaxed") for c in CLUSTER_SIZES]
    return configs


def _kernel(filename: str, name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel(filename, name)


def cooperative_launch(func, blocks: int, threads: int, args: tuple) -> None:
    """Launch ``func`` with cuLaunchCooperativeKernel (every block co-resident, or the driver refuses);
    ``args`` are numpy int32 scalars or device arrays."""
    import ctypes

    import cupy

    values = [ctypes.c_int32(int(a)) if isinstance(a, (int, np.integer)) else ctypes.c_void_p(a.data.ptr)
              for a in args]
    pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    cupy.cuda.driver.launchCooperativeKernel(getattr(func, "kernel", func).ptr, blocks, 1, 1, threads, 1, 1, 0,
                                             cupy.cuda.get_current_stream().ptr, ctypes.addressof(pointers))


def layout(kind: str, n: int, device: dict) -> dict:
    """How a (kind, n) launches: kernel file and name, blocks, threads per block, the threads counting barriers
    (participants), barriers per trip, trips of the shorter chain."""
    if kind == "named_partial":
        threads = block_threads(device)
        return dict(file="barriers.cu", name=kind, blocks=1, threads=threads, participants=n * LANES,
                    unroll=BARRIER_UNROLL, trips=BARRIER_TRIPS)
    if kind == "named_ids":
        threads = block_threads(device)
        return dict(file="barriers.cu", name=kind, blocks=1, threads=threads, participants=threads,
                    unroll=BARRIER_UNROLL, trips=BARRIER_TRIPS)
    if kind.startswith("fence_"):
        return dict(file="barriers.cu", name=kind, blocks=1, threads=1, participants=1, unroll=BARRIER_UNROLL,
                    trips=BARRIER_TRIPS)
    if kind == "grid":
        blocks = n * device["sm_count"]
        return dict(file="barriers.cu", name="grid_sync", blocks=blocks, threads=GRID_THREADS, participants=blocks,
                    unroll=GRID_UNROLL, trips=GRID_TRIPS)
    if kind == "mbarrier":
        return dict(file="barriers_sm90.cu", name="mbar_rt", blocks=1, threads=n * LANES, participants=n * LANES,
                    unroll=BARRIER_UNROLL, trips=BARRIER_TRIPS)
    if kind in ("cluster", "cluster_relaxed"):
        name = f"cluster_bar_c{n}" if kind == "cluster" else f"cluster_bar_relaxed_c{n}"
        return dict(file="barriers_sm90.cu", name=name, blocks=n, threads=CLUSTER_THREADS,
                    participants=n * CLUSTER_THREADS, unroll=BARRIER_UNROLL, trips=BARRIER_TRIPS)
    raise ValueError(f"unknown barrier kind {kind!r}: choose one of {', '.join(KINDS)}")


def _sweep(device):
    return barrier_configs(device)


@probe("exec.barriers", sweeps={"quick": _sweep, "full": _sweep},
       axes={"kind": "named_partial, named_ids, fence_none/cta/gpu/sys, grid, mbarrier (sm_90), cluster and "
                     "cluster_relaxed (sm_90)",
             "n": "warps taking part (named_partial, mbarrier), barrier ids at once (named_ids: 1..16), blocks per "
                  "SM (grid), blocks per cluster (cluster, cluster_relaxed: 2, 4, 8, 16); 1 for the fences"},
       quantities=("sync.named_barrier_cycles_one_warp", "sync.named_barrier_cycles_all_warps",
                   "sync.named_barrier_cycles_16_ids", "sync.fence_none_cycles", "sync.fence_cta_cycles",
                   "sync.fence_gpu_near_cycles", "sync.fence_gpu_far_cycles", "sync.fence_sys_near_cycles",
                   "sync.fence_sys_far_cycles", "sync.grid_sync_cycles_one_block_per_sm",
                   "sync.grid_sync_cycles_full", "sync.mbarrier_cycles_one_warp", "sync.mbarrier_cycles_all_warps",
                   *(f"sync.cluster_barrier_cycles_c{c}" for c in CLUSTER_SIZES),
                   *(f"sync.cluster_barrier_relaxed_cycles_c{c}" for c in CLUSTER_SIZES)),
       kernels=("barriers.cu", "barriers_sm90.cu"))
def exec_barriers(ctx, kind: str, n: int) -> list[Sample]:
    """Cycles per barrier (named, mbarrier, grid, cluster) or per store + memory fence, in a dependent loop."""
    import cupy

    n = int(n)
    if {"kind": kind, "n": n} not in barrier_configs(ctx.device):
        raise ValueError(f"bad barrier config {kind!r}, n={n}: see `gpuatlas list` for this device's configs")
    spec = layout(kind, n, ctx.device)
    func = _kernel(spec["file"], spec["name"])
    unchecked = kind.startswith("fence_") or kind == "cluster_relaxed"  # nothing to order, or orders no memory
    check = None if unchecked else _kernel(spec["file"], spec["name"] + "_check")
    if kind == "grid" and blocks_per_sm(func, GRID_THREADS) < n:
        raise RuntimeError(f"the driver grants fewer than {n} blocks of {GRID_THREADS} threads per SM")
    scratch = cupy.zeros(1 + max(spec["blocks"], 1), dtype=cupy.uint32)
    passed = cupy.zeros(2, dtype=cupy.uint32)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def launch(f, trips: int) -> None:
        scratch.fill(0)
        passed.fill(0)
        args = (np.int32(n), np.int32(trips), scratch, passed, cycles)
        if kind == "grid":
            cooperative_launch(f, spec["blocks"], spec["threads"], args)
        else:
            f((spec["blocks"],), (spec["threads"],), args)

    def counted(what: str, trips: int) -> None:
        got, behind = (int(v) for v in passed.get())
        want = spec["participants"] * trips * spec["unroll"]
        if got != want or behind:
            raise RuntimeError(f"{what} ({kind}, n={n}): {got} barriers passed (expected {want}), {behind} "
                               "neighbours seen behind the barrier")
        if kind.startswith("fence_") and int(scratch.get()[0]) != want - 1:
            raise RuntimeError(f"{what}: the stored word holds {int(scratch.get()[0])}, the last step was {want - 1}")

    try:
        if check is not None:
            if kind == "cluster":  # the first launch of each cluster kernel: a size the driver refuses is recorded
                cluster_launch(check, n, lambda: launch(check, spec["trips"]))
            else:
                launch(check, spec["trips"])
            counted(spec["name"] + "_check", spec["trips"])
        if kind.startswith("cluster"):
            cluster_launch(func, n, lambda: launch(func, spec["trips"]))
    except ClusterRefused as exc:
        return refused_samples(exc)

    def chain(trips: int) -> float:
        launch(func, trips)
        counted(spec["name"], trips)
        return float(cycles.get()[0])

    if not kind.startswith("fence_"):
        return chain_latency_samples(ctx, chain, spec["trips"], spec["unroll"])
    # a fence waits for its store's home L2 partition: one sample per random line the store goes to
    offsets = random_lines(ctx, PLACEMENTS, FENCE_SALT, FENCES.index(kind.removeprefix("fence_")))
    span = cupy.zeros(int(offsets.max()) // 4 + 1, dtype=cupy.uint32)
    samples = []
    for placement, offset in enumerate(offsets):
        scratch = span[int(offset) // 4:][:1]  # the word launch() and counted() read from now on
        samples += [chain_latency(ctx, chain, spec["trips"], spec["unroll"], placement),
                    Sample("address_offset", float(offset), "B", placement, None, "config")]
    return samples
