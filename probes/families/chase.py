"""Load-to-use latency of each memory level, by pointer chase (CuPy RawModule, chase.cu).

One thread follows a random single-cycle chain of absolute addresses laid one per ``stride_bytes`` through
a buffer of ``footprint_bytes``.  Each load's address is the previous load's value, so no two loads
overlap: cycles per step is the latency of whichever level holds the footprint.  The random order defeats
prefetching and spreads the chain over every line, page and L2 slice of the footprint.

The probe proves its own result: the chain is one cycle through every line by construction
(``chain_order``/``fill_chain``), and after ``k`` steps the kernel's final address (the sink) must be the
``k``-th element of that cycle -- the host checks it on every launch.
"""
from __future__ import annotations

import dataclasses

from gpuatlas.probes.kit.chain import (cupy_launcher, measure_chase, measure_shared_chase, smem_footprints,
                                       three_footprints)
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.kit.samplers import STRIDE_WARMUP_S
from gpuatlas.probes.registry import geom, probe, quick_and_full


def footprint_sweep(device: dict) -> list[int]:
    """1 KiB to 4x L2, 4 jittered points per octave (about 70 points on a 50 MiB L2), and the three footprints
    the Numba chase measures, so that the two front ends are compared at the same footprints."""
    sweep = geom(1 << 10, 4 * device["l2_bytes"], per_octave=4, jitter_seed=device["l2_bytes"], align=128)
    return sorted(set(sweep) | set(three_footprints(device)))


def sweep_ctx(ctx):
    """``ctx`` with the short warm-up of the sweeps of hundreds of configs: the calibration launch and every
    timed launch walk the chain warm before their timed steps, and cycles count on the SM's own clock."""
    return dataclasses.replace(ctx, budget=dataclasses.replace(ctx.budget, warmup_s=min(ctx.budget.warmup_s,
                                                                                         STRIDE_WARMUP_S)))


#: Strides of the capacity-in-lines sweeps: a cache of L-byte lines holds one element per line when the stride
#: is L or more, and L/stride elements per line below, so the capacity knee's footprint is flat up to L and
#: grows with the stride past it.
LINE_STRIDES = (32, 64, 256)


def latency_configs(device: dict) -> list[dict]:
    """The full staircase at 128-byte stride, through L1 and L2-only; the through-L1 chase again at 32, 64 and
    256 bytes around the L1's capacity (1/16..8x shared memory per SM, 4 per octave), and the L2-only one at 64
    and 256 bytes around the L2 (L2/16..4x L2, 2 per octave), for each cache's line size."""
    configs = [{"footprint_bytes": f, "stride_bytes": 128, "flavour": flavour}
               for flavour in ("default", "cg") for f in footprint_sweep(device)]
    smem, l2 = device["smem_per_sm_bytes"], device["l2_bytes"]
    for stride in LINE_STRIDES:
        configs += [{"footprint_bytes": f, "stride_bytes": stride, "flavour": "default"}
                    for f in geom(smem // 16, 8 * smem, per_octave=4, jitter_seed=smem + stride, align=stride)]
    for stride in (64, 256):
        configs += [{"footprint_bytes": f, "stride_bytes": stride, "flavour": "cg"}
                    for f in geom(l2 // 16, 4 * l2, per_octave=2, jitter_seed=l2 + stride, align=stride)]
    return configs


@probe("chase.latency",
       sweeps={"quick": lambda d: {"footprint_bytes": three_footprints(d), "stride_bytes": [128],
                                   "flavour": ["default"]},
               "full": latency_configs},
       axes={"footprint_bytes": "quick: one footprint in L1, L2 and HBM; full: 1 KiB..4x L2, 4/octave, and the "
                                "line-size sweeps around each cache's capacity",
             "stride_bytes": "bytes between chain elements: 128 (one per line); full adds 32, 64 and 256 around the "
                             "L1 and 64 and 256 around the L2 (capacity counted in lines)",
             "flavour": "default (ld.global, through L1) or cg (ld.global.cg, L2 only)"},
       quantities=("l1.latency_cycles", "l1.capacity_bytes", "l1.line_bytes", "l1.line_lower_bound_bytes",
                   "l2.latency_cycles", "l2.partition_bytes", "l2.far_plateau_cycles", "l2.far_reach_bytes",
                   "l2.line_bytes", "l2.line_lower_bound_bytes"),
       kernels=("chase.cu",))
def chase_latency(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per dependent 64-bit load over a random single-cycle chain of the given footprint."""
    return measure_chase(sweep_ctx(ctx), footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64")


SECTOR_SPAN = 32  # bytes: the smallest block a cache fills, so the smallest block the sweep must overflow


def line_configs(device: dict, strides: list[int]) -> list[dict]:
    """Address-order chases at every stride: through L1 with a chain that overflows L1 but stays in L2,
    and L2-only with one that overflows L2.

    A chain must touch more blocks than the cache holds even when each element fills one sector, so its
    footprint grows with the stride: span / 32 B * stride, at least span = 4x shared memory per SM (L1) or
    2x L2 (L2); the L1 chain is capped at half the L2 so that its misses still hit L2."""
    def footprint(span: int, stride: int, cap: float) -> int:
        return int(min(max(span, span // SECTOR_SPAN * stride), cap)) // stride * stride

    l1_span, l2_span = 4 * device["smem_per_sm_bytes"], 2 * device["l2_bytes"]
    return ([{"footprint_bytes": footprint(l1_span, s, device["l2_bytes"] / 2), "stride_bytes": s,
              "flavour": "default"} for s in strides]
            + [{"footprint_bytes": footprint(l2_span, s, float("inf")), "stride_bytes": s, "flavour": "cg"}
               for s in strides])


@probe("chase.line",
       sweeps={"quick": lambda d: line_configs(d, [16, 32, 64, 128, 256]),
               "full": lambda d: line_configs(d, [8, 16, 32, 48, 64, 96, 128, 192, 256, 512])},
       axes={"footprint_bytes": "through L1: beyond L1 but inside L2; L2-only: beyond L2; grown with the stride "
                                "so the chain always overflows the cache",
             "stride_bytes": "bytes between consecutive chain elements, walked in address order",
             "flavour": "default (through L1: the L1 fill block) or cg (L2 only: the L2 fill block from HBM)"},
       quantities=("l1.fill_bytes", "l1.sector_bytes", "l2.dram_fetch_bytes"), kernels=("chase.cu",))
def chase_line(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load of a chase walked in address order at a given stride: a load hits while it stays in
    the block the previous miss brought in, so latency rises with stride until the stride reaches that
    fill block (a sector where the cache fills sector by sector; not the line, whose span only a capacity
    count shows) and is flat beyond."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         order="sequential")


def page_footprints(device: dict, stride_bytes: int, per_octave: int = 4, memory_fraction: float = 0.25) -> list[int]:
    """Chains of 2 blocks to ``memory_fraction`` of device memory at one element per ``stride_bytes`` block."""
    top = int(device["total_memory_bytes"] * memory_fraction) // stride_bytes * stride_bytes
    return sorted({f // stride_bytes * stride_bytes for f in geom(2 * stride_bytes, top, per_octave=per_octave)})


#: The block one chain element sits in (at a random sector of it): 2 MiB, the page of large cudaMalloc
#: allocations by the driver's documentation.  The sweep measures the page instead of trusting it: the
#: footprint where a TLB level overflows is (entries) x max(page, stride), so the knee stays put at strides
#: below the page and moves with the stride above it.
PAGE_STRIDE = 2 << 20


PAGE_STRIDES = tuple(PAGE_STRIDE * 2**k // 4 for k in (0, 1, 3, 4, 5, 6, 7, 8, 9))  # 0.5 MiB .. 256 MiB


#: The 2 MiB-block sweep reaches this share of device memory: past the first TLB level's reach by decades, so
#: that a last level reaching tens of GiB shows too (device memory is otherwise idle during the probe; a
#: footprint the free memory cannot hold when its turn comes is recorded as one flagged sample).
TLB_MEMORY_FRACTION = 0.8


def tlb_configs(device: dict, quick: bool = False) -> list[dict]:
    """One element per 2 MiB block to TLB_MEMORY_FRACTION of device memory, 2 footprints per octave (full: 4),
    and in ``full`` the same chase at block strides of 1/4 to 128 pages, 1 per octave to a quarter of it, to
    measure the span one TLB entry covers."""
    configs = [{"footprint_bytes": f, "stride_bytes": PAGE_STRIDE, "flavour": "cg"}
               for f in page_footprints(device, PAGE_STRIDE, 2 if quick else 4, TLB_MEMORY_FRACTION)]
    if not quick:
        configs += [{"footprint_bytes": f, "stride_bytes": s, "flavour": "cg"} for s in PAGE_STRIDES
                    for f in page_footprints(device, s, 1) if f >= 32 * PAGE_STRIDE]
    return configs


@probe("chase.tlb",
       sweeps=quick_and_full(tlb_configs),
       axes={"footprint_bytes": "2 blocks .. 0.8 of device memory, 2 per octave at 2 MiB blocks (full: 4); 1 per "
                                "octave from 64 MiB to a quarter of it at the other block sizes (full only)",
             "stride_bytes": "one chain element per block of this size, at a random sector of it: 2 MiB; full adds "
                             "0.5 MiB..256 MiB blocks (the page size from how the reach moves)",
             "flavour": "cg: L2 only, so the few lines touched always hit L2"},
       quantities=("tlb.l1.reach_bytes", "tlb.l1.miss_cycles", "tlb.l2.reach_bytes", "tlb.l2.miss_cycles",
                   "tlb.reach_lower_bound_bytes", "tlb.l2.reach_lower_bound_bytes", "tlb.page_bytes"),
       kernels=("chase.cu",))
def chase_tlb(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load with one chain element per large block: the lines touched fit in L2 at every
    footprint, so latency rises only where the pages touched outgrow a TLB's reach, by that TLB's miss
    penalty times the share of pages it misses.  Each element sits at a random sector of its block, so no two
    share a set by their low bits; every sample lays the chain at a new random placement, since the mean of a
    few elements' L2 hits depends on the slices they land in."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()  # the last config's chain, cached by CuPy, is free too
    free, _ = cupy.cuda.runtime.memGetInfo()
    if footprint_bytes > FREE_MEMORY_USE * free:
        return [Sample("latency", float("nan"), "cycles", 0, None, "clock64", flag="no_memory")]
    return measure_chase(sweep_ctx(ctx), footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         placements=True)


#: A chase.tlb chain may take at most this share of the device memory free when its config starts.
FREE_MEMORY_USE = 0.95


@probe("chase.smem",
       sweeps={"quick": lambda d: {"footprint_bytes": smem_footprints(d)[:1], "stride_bytes": [4]},
               "full": lambda d: {"footprint_bytes": smem_footprints(d), "stride_bytes": [4, 128]}},
       axes={"footprint_bytes": "bytes of shared memory the chain spans (1 KiB .. half a block's limit)",
             "stride_bytes": "bytes between chain elements"},
       quantities=("smem.latency_cycles",), kernels=("chase.cu",))
def chase_smem(ctx, footprint_bytes: int, stride_bytes: int) -> list[Sample]:
    """Cycles per dependent 32-bit shared-memory load (LDS) over a random single-cycle chain."""
    from gpuatlas.probes.kit.cuda import kernel

    return measure_shared_chase(ctx, footprint_bytes, stride_bytes, kernel("chase.cu", "chase_shared"),
                                "shared chase")


def miss_footprints(device: dict, per_octave: int = 2) -> list[int]:
    """2x the L2 up to 128x (capped by a quarter of memory), ``per_octave`` per doubling: where every access
    of a cold path misses the L2, inside and past the TLBs' reach."""
    top = min(128 * device["l2_bytes"], device["total_memory_bytes"] // 4)
    return geom(2 * device["l2_bytes"], top, per_octave=per_octave, align=128)


@probe("chase.miss",
       sweeps={"quick": lambda d: {"footprint_bytes": miss_footprints(d)[:1], "stride_bytes": [128],
                                   "flavour": ["default"]},
               "full": lambda d: {"footprint_bytes": miss_footprints(d), "stride_bytes": [128],
                                  "flavour": ["default", "cg"]}},
       axes={"footprint_bytes": "2x..128x the L2 (2 per octave; quick: 2x the L2): the span the path's elements "
                                "are drawn from",
             "stride_bytes": "one element per 128-byte block, at a random sector of it",
             "flavour": "default (ld.global, the plain load) or cg (ld.global.cg, L2 only)"},
       quantities=("dram.latency_cycles", "dram.latency_ns", "dram.latency_tlb_miss_cycles",
                   "dram.latency_tlb_miss_ns", "dram.latency_cg_cycles"),
       kernels=("chase.cu",))
def chase_miss(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per dependent load that misses the L2: a random path through distinct lines of a footprint
    larger than the L2, walked cold (the L2 flushed, no line visited twice), so every access goes to HBM.
    Small footprints keep the path's pages inside the TLBs' reach; large ones add translation misses."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         order="path")
