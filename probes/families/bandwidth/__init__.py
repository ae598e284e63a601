"""Bandwidth of L2 and the on-chip levels, and the coalescing stride sweep (CuPy RawModule, bandwidth.cu);
HBM's streams are in ``probes/families/bandwidth/dram.py``, which shares this module's kernel file and launch helpers.

* ``bw.stride`` -- the lecture's coalescing table (§7.6) as an experiment: each warp-wide load touches one
  element per lane at element stride s (2-, 4- and 16-byte elements, aligned or one element off), from HBM
  (a footprint of sectors far beyond L2) and from L2 (an L2-resident footprint), both with ``ld.global.cg``
  (L2 only, so L1 cannot merge what the L2 moves).  Useful bandwidth against stride says how many bytes the
  memory system moves per useful byte, and so its transfer block (``analysis/coalescing.py``).
* ``bw.l2`` -- L2-only 16-byte reads over footprints from 1 MiB to the L2's size.
* ``bw.onchip`` -- shared memory (LDS.128) and L1 hits (LDG.E.128) per SM per clock.

Every launch is timed with CUDA events (``EventTimer``, several launches per sample where they are short),
and each sample's SM clock is read right after it.  Every kernel leaves a 32-bit sum of what it loaded (or
the buffer it wrote) that the host checks after every sample.  A bandwidth above what the device's own
properties allow is flagged ``invalid``: kept, and left out of fits.

Sizes come from the device's properties (``l2_bytes``, ``sm_count``, ``total_memory_bytes``, the occupancy
the driver grants), never from a GPU model.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Sample, calibrate
from gpuatlas.probes.kit.samplers import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, MAX_BYTES_PER_CLK_SM, MEMORY_FRACTION,
                                 STRIDE_MAX_REPEATS, STRIDE_WARMUP_S, Filled, Sink, bandwidth_bound, bandwidth_samples,
                                 fill_hash, sum32)
from gpuatlas.probes.registry import geom, probe

LANES = 32
BLOCK_THREADS = 256  #: bandwidth.cu's __launch_bounds__ for every kernel
#: element bytes -> (kernel, loads per thread per trip = chunks per tile), as bandwidth.cu instantiates them
STRIDE_KERNELS = {2: ("stride_2", 16), 4: ("stride_4", 16), 16: ("stride_16", 4)}
ELEMENT_BYTES = tuple(STRIDE_KERNELS)
#: full: 1, 2, 3, then every fourth stride to 64, 128 and 256 -- an even spread over 1..64, so no stretch of
#: strides weighs more in the block-model fit than in a sweep of every stride.
FULL_STRIDES = (1, 2, 3, *range(4, 65, 4), 128, 256)
QUICK_STRIDES = (1, 2, 4, 8, 16, 32, 64)
ALIGNMENTS = ("aligned", "misaligned")
STRIDE_LEVELS = ("dram", "l2")
ONCHIP_LEVELS = ("smem", "l1")

#: The transfer blocks the sweep must be able to tell apart (analysis/coalescing.py's candidates).
SMALLEST_BLOCK, LARGEST_BLOCK = 32, 128
#: bw.l2 sweeps footprints up to this many times the L2, so the sweep ends on the HBM plateau.
L2_SWEEP_TOP = 4
#: A launch should last about LAUNCH_S (long against launch gaps and tails) and a sample at least SAMPLE_S.
LAUNCH_S, SAMPLE_S, STRIDE_SAMPLE_S = 1e-3, 2e-3, 1e-3
#: bandwidth.cu's on-chip kernels: 256 threads, 4 loads of 16 B each per rep: a 16 KiB buffer per rep.
ONCHIP_THREADS, ONCHIP_U = 256, 4
ONCHIP_VECS = ONCHIP_THREADS * ONCHIP_U

# -- sizing (pure: the CPU tests check it on device dicts) ---------------------------------------------------

def full_occupancy_warps(device: dict) -> int:
    """Warps in a grid that fills every SM's thread slots (the host uses the driver's occupancy instead)."""
    return device["sm_count"] * (device["max_threads_per_sm"] // BLOCK_THREADS) * BLOCK_THREADS // LANES


def misaligned_bytes(element_bytes: int, aligned: str) -> int:
    """A misaligned start is one element past an aligned one (a[i + 1]): natural alignment is kept."""
    if aligned not in ALIGNMENTS:
        raise ValueError(f"aligned must be one of {ALIGNMENTS}, got {aligned!r}")
    return 0 if aligned == "aligned" else element_bytes


def stride_layout(device: dict, element_bytes: int, stride: int, level: str, warps: int) -> dict:
    """Tiles, warp step and trips per pass of a stride-sweep footprint, and the bytes it spans.

    A chunk is one warp load's 32 elements; a tile is U chunks (one trip of one warp).  ``touched_bytes``
    counts the 32-byte sectors the footprint touches (n x min(stride x e, 32)).  HBM: at least
    HBM_FOOTPRINT_L2 x L2 of sectors, tiles a multiple of the grid's warps (so a pass of trips_per_pass trips
    reads every tile once), unless the span must be capped at MEMORY_FRACTION of device memory (a GPU with
    little memory for its L2: then the last trip of a pass wraps, which the checksum accounts for).  L2: at
    most L2_TOUCH_FRACTION x L2 counted in LARGEST_BLOCK-byte blocks, so it stays resident whatever the
    block."""
    if element_bytes not in STRIDE_KERNELS or stride < 1 or level not in STRIDE_LEVELS:
        raise ValueError(f"bad stride config: {element_bytes} B, stride {stride}, level {level!r}")
    loads = STRIDE_KERNELS[element_bytes][1]
    tile_elements = LANES * loads
    pitch = stride * element_bytes  # bytes between consecutive lanes' elements
    if level == "dram":
        elements = math.ceil(HBM_FOOTPRINT_L2 * device["l2_bytes"] / min(pitch, SMALLEST_BLOCK))
        tiles = math.ceil(math.ceil(elements / tile_elements) / warps) * warps
        cap = int(device["total_memory_bytes"] * MEMORY_FRACTION) - 2 * element_bytes
        tiles = max(1, min(tiles, cap // (tile_elements * pitch)))
    else:
        elements = int(L2_TOUCH_FRACTION * device["l2_bytes"] / min(pitch, LARGEST_BLOCK))
        tiles = max(1, elements // tile_elements)
    trips_per_pass = math.ceil(tiles / warps)
    n = tiles * tile_elements
    return {"tiles": tiles, "step": warps % tiles, "trips_per_pass": trips_per_pass, "elements": n,
            "span_bytes": n * pitch, "touched_bytes": n * min(pitch, SMALLEST_BLOCK),
            "loads_per_trip": loads}


def tile_reads(tiles: int, warps: int, trips: int) -> tuple[int, int]:
    """``(q, r)``: over a launch every tile is read q times and tiles 0..r-1 once more.

    Warp w reads tiles w, w + W, w + 2W, ... modulo ``tiles``, ``trips`` of them: together the warps read
    tiles 0 .. W x trips - 1 modulo ``tiles``."""
    return divmod(warps * trips, tiles)


def l2_footprints(device: dict, per_octave: int, dense_per_octave: int, jitter: bool = False) -> list[int]:
    """1 MiB .. L2_SWEEP_TOP x the L2's size, log-spaced, whole tiles of stride_16 (2 KiB): ``per_octave``
    points per doubling, ``dense_per_octave`` from half to twice the L2, where the read bandwidth falls from
    the L2's to HBM's (the L2 capacity knee)."""
    tile = LANES * STRIDE_KERNELS[16][1] * 16
    l2 = device["l2_bytes"]
    seed = l2 if jitter else None
    edges = (1 << 20, l2 // 2, 2 * l2, L2_SWEEP_TOP * l2)
    points = set()
    for (lo, hi), density in zip(zip(edges, edges[1:]), (per_octave, dense_per_octave, per_octave)):
        points.update(geom(lo, hi, per_octave=density, jitter_seed=seed, align=tile))
    return sorted(points)


# -- the GPU side -------------------------------------------------------------------------------------------

def bandwidth_kernel(name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("bandwidth.cu", name)


def resident_blocks(func, dynamic_smem: int = 0) -> int:
    """Resident blocks of BLOCK_THREADS per SM that the driver grants ``func`` (registers, shared memory)."""
    return blocks_per_sm(func, BLOCK_THREADS, dynamic_smem)


def measure_stride(ctx, element_bytes: int, stride: int, offset_bytes: int, level: str,
                   layout: dict | None = None, budget=None, sample_s: float = STRIDE_SAMPLE_S) -> list[Sample]:
    """Useful bandwidth of stride_<e> over the footprint ``stride_layout`` sizes (or ``layout``)."""
    name, loads = STRIDE_KERNELS[element_bytes]
    func = bandwidth_kernel(name)
    warps = ctx.device["sm_count"] * resident_blocks(func) * BLOCK_THREADS // LANES
    blocks = warps * LANES // BLOCK_THREADS
    layout = layout or stride_layout(ctx.device, element_bytes, stride, level, warps)
    tiles, step, n = layout["tiles"], layout["step"], layout["elements"]
    words = Filled.at_least(offset_bytes + layout["span_bytes"] + element_bytes, ctx.device)
    tile_elements = LANES * loads
    pitch = stride * element_bytes

    def elements_sum(count: int) -> int:
        return sum32(words, offset_bytes, count, pitch, element_bytes)

    total = elements_sum(n)
    base = np.uint64(words.data.ptr + offset_bytes)
    sink = Sink(f"stride_{element_bytes} stride {stride} at +{offset_bytes} B ({level})")

    def per_launch(trips: int) -> int:
        q, r = tile_reads(tiles, warps, trips)
        return (q * total + (elements_sum(r * tile_elements) if r else 0)) % 2**32

    def run(trips: int):
        def launch():
            func((blocks,), (BLOCK_THREADS,), (base, np.int64(stride), np.int64(tiles), np.int64(step),
                                              np.int64(trips), sink.array))
            sink.launches += 1
        return launch

    # HBM: whole passes over the footprint (each tile read equally often); L2: any number of trips.
    trips, _ = calibrate(run, max(1, layout["trips_per_pass"]), LAUNCH_S)
    expected = per_launch(trips)
    useful = warps * trips * loads * LANES * element_bytes
    bound = bandwidth_bound(ctx.device, level)
    # The calibration launches already warmed caches and clocks: a short warm-up, and capped repeats.
    budget = budget or dataclasses.replace(ctx.budget, warmup_s=min(ctx.budget.warmup_s, STRIDE_WARMUP_S),
                                           max_repeats=min(ctx.budget.max_repeats, STRIDE_MAX_REPEATS))
    return bandwidth_samples(ctx, run(trips), sink.reset, lambda: sink.check(expected), useful, bound=bound,
                             sample_s=sample_s, budget=budget)


STRIDE_AXES = {
    "element_bytes": "bytes per element: 2 (fp16), 4 (fp32), 16 (a 16-byte vector)",
    "stride_elements": "elements between consecutive lanes of one warp load (full: 1, 2, 3, every "
                       "4th to 64, 128, 256; quick: 1, 2, 4, .., 64)",
    "aligned": "aligned: each warp load starts on a boundary of the bytes it spans (the buffer is 512-byte "
               "aligned); misaligned: the whole pattern starts one element later",
    "level": f"dram (sectors touched per pass >= {HBM_FOOTPRINT_L2}x L2) or l2 (footprint <= L2/4 in 128-byte blocks); "
             "both ld.global.cg",
}


def _stride_sweep(strides) -> callable:
    return lambda device: {"element_bytes": list(ELEMENT_BYTES), "stride_elements": list(strides),
                           "aligned": list(ALIGNMENTS), "level": list(STRIDE_LEVELS)}


@probe("bw.stride", sweeps={"quick": _stride_sweep(QUICK_STRIDES), "full": _stride_sweep(FULL_STRIDES)},
       axes=STRIDE_AXES,
       quantities=("coalescing.efficiency_stride32_fp32", "coalescing.block_bytes", "l2.sector_bytes",
                   "coalescing.efficiency_stride2_fp32", "coalescing.efficiency_misaligned_fp32",
                   "coalescing.efficiency_stride64_fp16"),
       kernels=("bandwidth.cu",))
def bw_stride(ctx, element_bytes: int, stride_elements: int, aligned: str, level: str) -> list[Sample]:
    """Useful bandwidth (B/s) when each warp load touches one element per lane at an element stride."""
    return measure_stride(ctx, int(element_bytes), int(stride_elements),
                          misaligned_bytes(int(element_bytes), aligned), level)


@probe("bw.l2",
       sweeps={"quick": lambda d: {"footprint_bytes": l2_footprints(d, per_octave=2, dense_per_octave=3)},
               "full": lambda d: {"footprint_bytes": l2_footprints(d, per_octave=2, dense_per_octave=4,
                                                                   jitter=True)}},
       axes={"footprint_bytes": "bytes re-read, 1 MiB .. 4x the L2's size (quick: 2 per octave, 3 from half "
                                "to twice the L2; full: 2, and 4 there, jittered)"},
       quantities=("l2.bandwidth_bytes_per_s", "l2.capacity_bytes"), kernels=("bandwidth.cu",))
def bw_l2(ctx, footprint_bytes: int) -> list[Sample]:
    """L2 read bandwidth (B/s): 16-byte ld.global.cg loads of every SM re-reading a footprint; past the L2's
    capacity the same loads stream from HBM."""
    loads = STRIDE_KERNELS[16][1]
    tiles = max(1, int(footprint_bytes) // (LANES * loads * 16))
    warps = ctx.device["sm_count"] * resident_blocks(bandwidth_kernel("stride_16")) * BLOCK_THREADS // LANES
    layout = {"tiles": tiles, "step": warps % tiles, "trips_per_pass": math.ceil(tiles / warps),
              "elements": tiles * LANES * loads, "span_bytes": tiles * LANES * loads * 16}
    return measure_stride(ctx, 16, 1, 0, "l2", layout=layout, budget=ctx.budget, sample_s=SAMPLE_S)


@probe("bw.onchip", sweeps={"quick": lambda d: {"level": list(ONCHIP_LEVELS)},
                            "full": lambda d: {"level": list(ONCHIP_LEVELS)}},
       axes={"level": "smem (LDS.128 from a 16 KiB shared buffer per block) or l1 (LDG.E.128 hits in a "
                      "16 KiB global buffer every block re-reads)"},
       quantities=("smem.bandwidth_bytes_per_clk_sm", "l1.bandwidth_bytes_per_clk_sm"),
       kernels=("bandwidth.cu",))
def bw_onchip(ctx, level: str) -> list[Sample]:
    """Bytes per clock per SM (and B/s) of 16-byte loads from shared memory or from L1, every SM full."""
    import cupy

    if level not in ONCHIP_LEVELS:
        raise ValueError(f"unknown level {level!r}: choose one of {', '.join(ONCHIP_LEVELS)}")
    func = bandwidth_kernel("smem_read" if level == "smem" else "l1_read")
    blocks = ctx.device["sm_count"] * resident_blocks(func)
    words = cupy.empty(ONCHIP_VECS * 4, dtype=cupy.uint32)
    fill_hash(words, seed=0x0C41)
    total = sum32(words)
    sink = Sink(f"{level}_read")

    def run(reps: int):
        def launch():
            func((blocks,), (ONCHIP_THREADS,), (words, np.int64(reps), sink.array))
            sink.launches += 1
        return launch

    reps, _ = calibrate(run, 64, LAUNCH_S)
    return bandwidth_samples(ctx, run(reps), sink.reset, lambda: sink.check(blocks * reps * total % 2**32),
                             float(blocks) * reps * ONCHIP_VECS * 16, sample_s=SAMPLE_S,
                             per_clk_bound=MAX_BYTES_PER_CLK_SM)
