"""Distributed shared memory (Hopper thread-block clusters; kernels in hopper.cu).

* ``hopper.dsmem_latency`` -- pointer chase through another block's shared memory in a thread-block cluster
  (mapa + generic 64-bit loads over the SM-to-SM network), beside the same chase through the block's own
  shared memory by LDS and by the same generic path.  Each block sits alone on its SM (dynamic shared
  memory above half an SM's), so a remote load always leaves the SM.
* ``hopper.dsmem_bandwidth`` -- every block of every cluster reads a 32 KiB buffer of another block (pair:
  rank ^ 1; ring: rank + 1) or its own (local) with 16-byte loads.

Cluster sizes above the portable 8 need an opt-in attribute; where the driver refuses a cluster size, the
config records a ``cluster_refused`` sample (flagged ``invalid``) whose value is the driver's CUresult.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.families.hopper import (CHASE_ELEMENTS, CHASE_MODES, CHASE_THREADS, CLUSTER_AXES, CLUSTER_SIZES,
                                    DSMEM_BUFFER_BYTES, DSMEM_THREADS, HOPPER, LAUNCH_S, READ_PATTERNS, SAMPLE_S,
                                    UNROLL, chase_next_index, checked_bandwidth, hopper_kernel, known_sum)
from gpuatlas.probes.kit.clusters import (ClusterRefused, MAX_DYNAMIC_SHARED_SIZE_BYTES, cluster_launch,
                                          refused_samples, set_attribute)
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import MAX_BYTES_PER_CLK_SM, Sink, steps_for
from gpuatlas.probes.registry import probe


def cluster_sweeps(quick_sizes: list[int], axis: str, values) -> dict:
    """Sweeps of cluster size by one more axis: ``quick_sizes`` (quick) or every CLUSTER_SIZES (full), each with
    every one of ``values``."""
    return {"quick": lambda d: {"cluster_size": quick_sizes, axis: list(values)},
            "full": lambda d: {"cluster_size": list(CLUSTER_SIZES), axis: list(values)}}


@probe("hopper.dsmem_latency",
       sweeps=cluster_sweeps([2, 16], "mode", CHASE_MODES),
       axes={**CLUSTER_AXES,
             "mode": "local (own shared memory, LDS), self (own, through the mapa generic address: LD.E), "
                     "remote (the next rank's block, mapa + LD.E over the SM-to-SM network)"},
       quantities=("dsmem.latency_cycles", "dsmem.self_latency_cycles"), kernels=("hopper.cu",),
       min_cc=HOPPER)
def dsmem_latency(ctx, cluster_size: int, mode: str) -> list[Sample]:
    """Cycles per dependent 64-bit load through another cluster block's shared memory (distributed shared
    memory) or the block's own; each block of the cluster chases at once, one block per SM."""
    import cupy

    cluster_size = int(cluster_size)
    func = hopper_kernel(f"dsmem_chase_{mode}_c{cluster_size}")
    order = ctx.rng(cluster_size, CHASE_MODES.index(mode)).permutation(CHASE_ELEMENTS).astype(np.int64)
    next_gpu = cupy.asarray(chase_next_index(order))
    out = cupy.zeros(3 * cluster_size, dtype=cupy.uint64)
    # More than half an SM's shared memory per block: no two blocks of the cluster share an SM.
    smem = max(CHASE_ELEMENTS * 8, ctx.device.get("smem_per_block_optin_bytes") or 0)
    set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    position = 0

    def run(warm: int, steps: int) -> np.ndarray:
        nonlocal position
        start = int(order[position % CHASE_ELEMENTS])
        func((cluster_size,), (CHASE_THREADS,), (next_gpu, np.int32(CHASE_ELEMENTS), np.int32(start),
                                                 np.int64(warm), np.int64(steps), out), shared_mem=smem)
        result = out.get().reshape(cluster_size, 3)
        position += warm + steps
        expected = int(order[position % CHASE_ELEMENTS])
        bad = [b for b in range(cluster_size) if int(result[b, 2]) != expected]
        if bad:
            raise RuntimeError(f"dsmem {mode} chase, cluster {cluster_size}: blocks {bad} ended at elements "
                               f"{[int(result[b, 2]) for b in bad]}, the chain says {expected}")
        return result

    try:
        first = cluster_launch(func, cluster_size, lambda: run(CHASE_ELEMENTS, 1024))
    except ClusterRefused as exc:
        return refused_samples(exc)
    steps = steps_for(float(np.median(first[:, 1])) * 1e-9 / 1024, UNROLL, sample_s=SAMPLE_S)

    def sample(repeat: int) -> list[Sample]:
        result = run(0, steps).astype(float)
        per_block = result[:, 0] / steps
        hz = float(np.median(result[:, 0] / result[:, 1] * 1e9))
        flag = ctx.throttle_flag(hz)
        return [Sample("latency", float(np.median(per_block)), "cycles", repeat, hz, "clock64", flag),
                Sample("latency_max_block", float(per_block.max()), "cycles", repeat, hz, "clock64", flag),
                Sample("latency_time", float(np.median(result[:, 1])) * 1e-9 / steps, "s", repeat, hz,
                       "globaltimer", flag)]

    return repeat_until_stable(sample, "latency", ctx.budget)


@probe("hopper.dsmem_bandwidth",
       sweeps=cluster_sweeps([2, 8], "pattern", READ_PATTERNS),
       axes={**CLUSTER_AXES,
             "pattern": "local (each block reads its own buffer, LDS.128), pair (rank ^ 1's) or ring "
                        "(rank + 1's), both ld.shared::cluster.v4 over the SM-to-SM network"},
       quantities=("dsmem.bandwidth_bytes_per_s", "dsmem.bandwidth_bytes_per_clk_sm"), kernels=("hopper.cu",),
       min_cc=HOPPER)
def dsmem_bandwidth(ctx, cluster_size: int, pattern: str) -> list[Sample]:
    """Bytes per second (and per clock per SM) read from shared memory of other blocks of the cluster, every
    block of a full grid reading 16 bytes per thread per load."""
    cluster_size = int(cluster_size)
    func = hopper_kernel(f"dsmem_read_{pattern}_c{cluster_size}")
    set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, DSMEM_BUFFER_BYTES)
    per_sm = blocks_per_sm(func, DSMEM_THREADS, DSMEM_BUFFER_BYTES)
    blocks = max(max(CLUSTER_SIZES), ctx.device["sm_count"] * per_sm // max(CLUSTER_SIZES) * max(CLUSTER_SIZES))
    check = Sink(f"dsmem {pattern} read, cluster {cluster_size}", errors=True)
    buffer_sum = known_sum(0, DSMEM_BUFFER_BYTES // 4)

    def run(reps: int):
        def launch():
            func((blocks,), (DSMEM_THREADS,), (np.int64(reps), check.array), shared_mem=DSMEM_BUFFER_BYTES)
            check.add(blocks * reps * buffer_sum)
        return launch

    try:
        cluster_launch(func, cluster_size, run(1))
    except ClusterRefused as exc:
        return refused_samples(exc)
    reps, _ = calibrate(run, 1, LAUNCH_S)
    bound = ctx.device["sm_count"] * ctx.device["sm_clock_max_hz"] * MAX_BYTES_PER_CLK_SM
    return checked_bandwidth(ctx, run(reps), check, blocks * reps * DSMEM_BUFFER_BYTES, bound)
