"""Bandwidth of every memory level, and the coalescing stride sweep (CuPy RawModule, bandwidth.cu).

* ``bw.stride`` -- the lecture's coalescing table (§7.6) as an experiment: each warp-wide load touches one
  element per lane at element stride s (2-, 4- and 16-byte elements, aligned or one element off), from HBM
  (a footprint of sectors far beyond L2) and from L2 (an L2-resident footprint), both with ``ld.global.cg``
  (L2 only, so L1 cannot merge what the L2 moves).  Useful bandwidth against stride says how many bytes the
  memory system moves per useful byte, and so its transfer block (``analysis/coalescing.py``).
* ``bw.dram`` -- HBM read, write and copy (read plus written bytes) over buffers of several times L2, the
  write in several variants (store width, grid-stride or one store per thread, streaming hint), and the
  driver's own device-to-device copy (cudaMemcpyAsync) beside gpuatlas's.
* ``bw.dram_footprint`` -- HBM read bandwidth against the footprint re-read, 4x the L2 to several GiB.
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

from probes.cuda import blocks_per_sm
from probes.harness import Sample, calibrate, launch_seconds
from probes.kit import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, MAX_BYTES_PER_CLK_SM, MEMORY_FRACTION, STRIDE_MAX_REPEATS,
                        STRIDE_WARMUP_S, Filled, Sink, bandwidth_bound, bandwidth_samples, dram_peak_bytes_per_s,
                        fill_hash, flag_for, mismatches, sum32)
from probes.registry import geom, probe

LANES = 32
BLOCK_THREADS = 256  #: bandwidth.cu's __launch_bounds__ for every kernel
#: element bytes -> (kernel, loads per thread per trip = chunks per tile), as bandwidth.cu instantiates them
STRIDE_KERNELS = {2: ("stride_2", 16), 4: ("stride_4", 16), 16: ("stride_16", 4)}
ELEMENT_BYTES = tuple(STRIDE_KERNELS)
FULL_STRIDES = tuple(range(1, 65)) + (128, 256)
QUICK_STRIDES = (1, 2, 4, 8, 16, 32, 64)
ALIGNMENTS = ("aligned", "misaligned")
STRIDE_LEVELS = ("dram", "l2")
DRAM_OPS = ("read", "write", "copy", "memcpy")
ONCHIP_LEVELS = ("smem", "l1")

#: The transfer blocks the sweep must be able to tell apart (analysis/coalescing.py's candidates).
SMALLEST_BLOCK, LARGEST_BLOCK = 32, 128
#: bw.l2 sweeps footprints up to this many times the L2, so the sweep ends on the HBM plateau.
L2_SWEEP_TOP = 4
#: bw.dram buffers: read and write sweep HBM_FOOTPRINT_L2 x L2; copy reads one buffer of half that into another.
#: A launch should last about LAUNCH_S (long against launch gaps and tails) and a sample at least SAMPLE_S.
LAUNCH_S, SAMPLE_S, STRIDE_SAMPLE_S = 1e-3, 2e-3, 1e-3
#: bw.dram_footprint re-reads one buffer of FOOTPRINT_LOW_L2 .. FOOTPRINT_TOP_L2 x L2: from where the L2 may
#: still serve a quarter of the bytes to several GiB, past the address-translation caches' reach.
FOOTPRINT_LOW_L2, FOOTPRINT_TOP_L2 = 4, 128
#: bandwidth.cu's on-chip kernels: 256 threads, 4 loads of 16 B each per rep: a 16 KiB buffer per rep.
ONCHIP_THREADS, ONCHIP_U = 256, 4
ONCHIP_VECS = ONCHIP_THREADS * ONCHIP_U
#: bw.dram kernels: (name, 16-byte accesses in flight per thread, bytes a warp's trip reads contiguously).
#: Interleaved kernels spread a thread's U loads over a grid-wide row (512 contiguous bytes per warp load);
#: chunked ones read U x 512 contiguous bytes per warp and ask the L2 for 256-byte fetches.  Every kernel of
#: an op is tried at its occupancy and at half of it, and the fastest variant on this GPU is measured (its
#: kernel's unroll, contiguous bytes and blocks/SM are recorded with the samples).
WRITE_U, COPY_U = 4, 4
DRAM_KERNELS = {
    "read": (("dram_read_u4", 4, 512), ("dram_read_u8", 8, 512), ("dram_read_chunk_u4", 4, 4 * 512),
             ("dram_read_chunk_u8", 8, 8 * 512)),
    "copy": (("dram_copy", COPY_U, 512), ("dram_copy_chunk_u4", 4, 4 * 512), ("dram_copy_chunk_u8", 8, 8 * 512)),
}
#: bw.dram's write variants: variant -> (kernel, bytes per store, grid-stride loop, streaming store hint).
#: Grid-stride kernels run at the driver's occupancy and at half of it (the faster is measured); the "once"
#: kernels store one element per thread over a grid of elements / BLOCK_THREADS blocks (a public stream
#: suite's plain write), ``passes`` launches per timed launch.  Every warp store covers 256 or 512 aligned
#: contiguous bytes: whole 32-byte sectors, so no variant makes the L2 fetch a sector to merge a partial one.
WRITE_VARIANTS = {
    "grid_stride_16": ("dram_write", 16, True, False),
    "grid_stride_16_cs": ("dram_write_cs", 16, True, True),
    "once_8": ("dram_write_once_8", 8, False, False),
    "once_16": ("dram_write_once_16", 16, False, False),
    "once_16_cs": ("dram_write_once_16_cs", 16, False, True),
}
#: The variant of the other ops: the fastest of their kernels (read, copy) or the driver's copy (memcpy).
OP_VARIANT = {"read": "fastest", "copy": "fastest", "memcpy": "driver"}

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


def dram_vectors(device: dict, buffer_l2: float, threads: int, unroll: int) -> int:
    """16-byte vectors in a bw.dram buffer: ``buffer_l2`` x L2, a whole number of grid-wide trips."""
    per_trip = threads * unroll
    vecs = math.ceil(buffer_l2 * device["l2_bytes"] / 16 / per_trip) * per_trip
    cap = int(device["total_memory_bytes"] * MEMORY_FRACTION) // 16 // per_trip * per_trip
    return max(per_trip, min(vecs, cap))


# -- the GPU side -------------------------------------------------------------------------------------------

def _kernel(name: str):
    from probes.cuda import kernel

    return kernel("bandwidth.cu", name)


def _blocks_per_sm(func, dynamic_smem: int = 0) -> int:
    """Resident blocks of BLOCK_THREADS per SM that the driver grants ``func`` (registers, shared memory)."""
    return blocks_per_sm(func, BLOCK_THREADS, dynamic_smem)


def measure_stride(ctx, element_bytes: int, stride: int, offset_bytes: int, level: str,
                   layout: dict | None = None, budget=None, sample_s: float = STRIDE_SAMPLE_S) -> list[Sample]:
    """Useful bandwidth of stride_<e> over the footprint ``stride_layout`` sizes (or ``layout``)."""
    name, loads = STRIDE_KERNELS[element_bytes]
    func = _kernel(name)
    warps = ctx.device["sm_count"] * _blocks_per_sm(func) * BLOCK_THREADS // LANES
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
    "stride_elements": "elements between consecutive lanes of one warp load (full: 1..64, 128, 256; "
                       "quick: 1, 2, 4, .., 64)",
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
       quantities=("coalescing.efficiency_stride32_fp32", "coalescing.block_bytes", "l2.sector_bytes"),
       kernels=("bandwidth.cu",))
def bw_stride(ctx, element_bytes: int, stride_elements: int, aligned: str, level: str) -> list[Sample]:
    """Useful bandwidth (B/s) when each warp load touches one element per lane at an element stride."""
    return measure_stride(ctx, int(element_bytes), int(stride_elements),
                          misaligned_bytes(int(element_bytes), aligned), level)


@probe("bw.l2",
       sweeps={"quick": lambda d: {"footprint_bytes": l2_footprints(d, per_octave=2, dense_per_octave=3)},
               "full": lambda d: {"footprint_bytes": l2_footprints(d, per_octave=4, dense_per_octave=8,
                                                                   jitter=True)}},
       axes={"footprint_bytes": "bytes re-read, 1 MiB .. 4x the L2's size (quick: 2 per octave, 3 from half "
                                "to twice the L2; full: 4, and 8 there)"},
       quantities=("l2.bandwidth_bytes_per_s", "l2.capacity_bytes"), kernels=("bandwidth.cu",))
def bw_l2(ctx, footprint_bytes: int) -> list[Sample]:
    """L2 read bandwidth (B/s): 16-byte ld.global.cg loads of every SM re-reading a footprint; past the L2's
    capacity the same loads stream from HBM."""
    loads = STRIDE_KERNELS[16][1]
    tiles = max(1, int(footprint_bytes) // (LANES * loads * 16))
    warps = ctx.device["sm_count"] * _blocks_per_sm(_kernel("stride_16")) * BLOCK_THREADS // LANES
    layout = {"tiles": tiles, "step": warps % tiles, "trips_per_pass": math.ceil(tiles / warps),
              "elements": tiles * LANES * loads, "span_bytes": tiles * LANES * loads * 16}
    return measure_stride(ctx, 16, 1, 0, "l2", layout=layout, budget=ctx.budget, sample_s=SAMPLE_S)


def dram_configs(device: dict) -> list[dict]:
    """Every op once, and the write op in each of its variants."""
    return [{"op": op, "variant": v} for op in DRAM_OPS
            for v in (WRITE_VARIANTS if op == "write" else (OP_VARIANT[op],))]


@probe("bw.dram", sweeps={"quick": dram_configs, "full": dram_configs},
       axes={"op": "read (16-byte loads), write (stores), copy (bytes read + written) or memcpy (the "
                   "driver's cudaMemcpyAsync device to device, bytes read + written)",
             "variant": "write: grid_stride_16 / grid_stride_16_cs (16-byte stores, grid-stride, plain or "
                        "st.global.cs), once_8 / once_16 / once_16_cs (one 8- or 16-byte store per thread, no "
                        "loop); read and copy: fastest (of their kernels and occupancies); memcpy: driver"},
       quantities=("dram.read_bandwidth_bytes_per_s", "dram.write_bandwidth_bytes_per_s",
                   "dram.copy_bandwidth_bytes_per_s", "dram.read_bytes_per_clk_sm"),
       kernels=("bandwidth.cu",))
def bw_dram(ctx, op: str, variant: str | None = None) -> list[Sample]:
    """Device-memory bandwidth (B/s) of a read, write or copy stream over buffers of several times L2."""
    if op == "read":
        return _dram_read(ctx)
    if op == "write":
        variant = variant or "grid_stride_16"
        if variant not in WRITE_VARIANTS:
            raise ValueError(f"unknown write variant {variant!r}: choose one of {', '.join(WRITE_VARIANTS)}")
        return _dram_write(ctx, variant)
    if op == "copy":
        return _dram_copy(ctx)
    if op == "memcpy":
        return _dram_memcpy(ctx)
    raise ValueError(f"unknown op {op!r}: choose one of {', '.join(DRAM_OPS)}")


@dataclasses.dataclass(frozen=True)
class _Variant:
    """One way to run a bw.dram kernel: which kernel, its accesses in flight per thread, the bytes a warp's
    trip reads contiguously, and blocks per SM."""

    func: object
    unroll: int
    contiguous_bytes: int
    blocks_per_sm: int


def dram_variants(kernels: list[tuple[object, int, int]], blocks_per_sm: list[int]) -> list[_Variant]:
    """Each ``(func, unroll, contiguous_bytes)`` kernel at the occupancy the driver grants it and at half of
    it: the grid-stride loops need no particular grid, and HBM sometimes streams better with fewer requests
    queued."""
    out = []
    for (func, unroll, contiguous), full in zip(kernels, blocks_per_sm):
        for blocks in sorted({full, max(1, full // 2)}, reverse=True):
            out.append(_Variant(func, unroll, contiguous, blocks))
    return out


def _dram_stream(ctx, kernels: tuple, buffer_l2: float, make_args, verify, reset, bytes_per_vector: float,
                 counted=lambda func: func, extra: tuple = ()) -> list[Sample]:
    """Size the buffers for every variant of ``kernels`` (``DRAM_KERNELS`` entries), time each variant once,
    and measure the fastest until stable.

    ``make_args(vecs, passes)`` returns the kernel's arguments (and allocates on first call); ``counted``
    wraps a kernel to count its launches."""
    sms = ctx.device["sm_count"]
    kernels = [(_kernel(name), unroll, contiguous) for name, unroll, contiguous in kernels]
    variants = dram_variants(kernels, [_blocks_per_sm(func) for func, _, _ in kernels])
    per_trip = math.lcm(*[sms * v.blocks_per_sm * BLOCK_THREADS * v.unroll for v in variants])
    vecs = dram_vectors(ctx.device, buffer_l2, per_trip, 1)
    state = {"variant": variants[0]}

    def run(passes: int):
        def launch():
            v = state["variant"]
            counted(v.func)((sms * v.blocks_per_sm,), (BLOCK_THREADS,), make_args(vecs, passes))
        return launch

    times = {}
    for v in variants:
        state["variant"] = v
        times[v] = launch_seconds(run(1), warmup=2)
    state["variant"] = best = min(times, key=times.get)
    passes, _ = calibrate(run, 1, LAUNCH_S)
    extra = (("loads_in_flight_per_thread", float(best.unroll), "1"),
             ("contiguous_bytes_per_warp_trip", float(best.contiguous_bytes), "B"),
             ("blocks_per_sm", float(best.blocks_per_sm), "1"),
             ("buffer_bytes", float(vecs * 16), "B"), *extra)
    return bandwidth_samples(ctx, run(passes), reset, lambda: verify(vecs, passes), passes * vecs * bytes_per_vector,
                             sample_s=SAMPLE_S, bound=bandwidth_bound(ctx.device, "dram"), extra=extra)


def _dram_read(ctx, buffer_l2: float = HBM_FOOTPRINT_L2) -> list[Sample]:
    """Every pass reads each line of a buffer of ``buffer_l2`` x L2 once, so a line can hit in the L2 only
    if it stayed resident through a whole pass: the L2 serves at most L2 / buffer of the bytes."""
    import cupy

    sink = Sink("dram_read")
    buffers = {}

    def args(vecs: int, passes: int):
        if "words" not in buffers:
            buffers["words"] = cupy.empty(vecs * 4, dtype=cupy.uint32)
            fill_hash(buffers["words"])
            buffers["total"] = sum32(buffers["words"])
        return (buffers["words"], np.int64(vecs), np.int64(passes), sink.array)

    def counted(func):
        def call(grid, block, arguments):
            func(grid, block, arguments)
            sink.launches += 1
        return call

    return _dram_stream(ctx, DRAM_KERNELS["read"], buffer_l2, args,
                        lambda vecs, passes: sink.check(passes * buffers["total"] % 2**32), sink.reset, 16.0,
                        counted)


def footprint_sweep(device: dict, per_octave: int) -> list[int]:
    """bw.dram_footprint's buffers: FOOTPRINT_LOW_L2 x L2 .. FOOTPRINT_TOP_L2 x L2 (capped at MEMORY_FRACTION
    of device memory), ``per_octave`` per doubling, whole MiB."""
    l2 = device["l2_bytes"]
    top = min(FOOTPRINT_TOP_L2 * l2, int(device["total_memory_bytes"] * MEMORY_FRACTION))
    return geom(FOOTPRINT_LOW_L2 * l2, top, per_octave=per_octave, align=1 << 20)


@probe("bw.dram_footprint",
       sweeps={"quick": lambda d: {"footprint_bytes": footprint_sweep(d, 2)},
               "full": lambda d: {"footprint_bytes": footprint_sweep(d, 3)}},
       axes={"footprint_bytes": f"bytes of one buffer re-read pass after pass, {FOOTPRINT_LOW_L2}x .. "
                                f"{FOOTPRINT_TOP_L2}x the L2 (at most {MEMORY_FRACTION:.0%} of device memory); "
                                "quick: 2 per octave, full: 3"},
       quantities=("dram.read_bandwidth_large_footprint_bytes_per_s",), kernels=("bandwidth.cu",))
def bw_dram_footprint(ctx, footprint_bytes: int) -> list[Sample]:
    """HBM read bandwidth (B/s) against the footprint re-read: bw.dram's read kernels (the fastest) over one
    buffer of each size.  Past the reach of the address-translation caches every page's translation is
    fetched again on every pass; below some L2 multiples the L2 serves up to L2 / footprint of the bytes."""
    import cupy

    try:
        return _dram_read(ctx, int(footprint_bytes) / ctx.device["l2_bytes"])
    finally:
        cupy.get_default_memory_pool().free_all_blocks()


def _dram_write(ctx, variant: str) -> list[Sample]:
    """One write variant over a buffer of HBM_FOOTPRINT_L2 x L2; every word is checked after each sample."""
    import cupy

    name, store_bytes, grid_stride, streaming = WRITE_VARIANTS[variant]
    buffers, seed = {}, {"value": 0}
    config = (("store_bytes", float(store_bytes), "B"), ("streaming_store", float(streaming), "1"))

    def next_seed() -> np.uint32:
        seed["value"] = (seed["value"] + 1) % 2**32 or 1
        return np.uint32(seed["value"])

    def verify(vecs: int, passes: int):
        words = buffers["words"]
        wrong = mismatches(words, None, seed["value"])
        if wrong:
            raise RuntimeError(f"{name}: {wrong} of {words.size} words do not hold the last launch's "
                               f"value {seed['value']:#x}")

    if grid_stride:
        def args(vecs: int, passes: int):
            if "words" not in buffers:
                buffers["words"] = cupy.zeros(vecs * 4, dtype=cupy.uint32)
            return (buffers["words"], np.int64(vecs), np.int64(passes), next_seed())

        return _dram_stream(ctx, ((name, WRITE_U, 512),), HBM_FOOTPRINT_L2, args, verify, lambda: None, 16.0,
                            extra=config)

    func = _kernel(name)
    vecs = dram_vectors(ctx.device, HBM_FOOTPRINT_L2, BLOCK_THREADS, 1)
    buffers["words"] = cupy.zeros(vecs * 4, dtype=cupy.uint32)
    blocks = once_blocks(vecs * 16, store_bytes)

    def run(passes: int):
        def launch():
            value = next_seed()
            for _ in range(passes):
                func((blocks,), (BLOCK_THREADS,), (buffers["words"], value))
        return launch

    passes, _ = calibrate(run, 1, LAUNCH_S)
    extra = (*config, ("grid_blocks", float(blocks), "1"))
    return bandwidth_samples(ctx, run(passes), lambda: None, lambda: verify(vecs, passes), passes * vecs * 16.0,
                             sample_s=SAMPLE_S, bound=bandwidth_bound(ctx.device, "dram"), extra=extra)


def once_blocks(buffer_bytes: int, store_bytes: int) -> int:
    """Blocks of a one-store-per-thread grid that writes every ``store_bytes`` element of the buffer once."""
    elements, rest = divmod(buffer_bytes, store_bytes)
    if rest or elements % BLOCK_THREADS:
        raise ValueError(f"{buffer_bytes} B is not a whole number of {BLOCK_THREADS}-thread blocks of "
                         f"{store_bytes}-byte stores")
    return elements // BLOCK_THREADS


def _dram_copy(ctx) -> list[Sample]:
    import cupy

    buffers, seed = {}, {"value": 0}

    def args(vecs: int, passes: int):
        if "src" not in buffers:
            buffers["src"] = cupy.empty(vecs * 4, dtype=cupy.uint32)
            fill_hash(buffers["src"])
            buffers["dst"] = cupy.zeros_like(buffers["src"])
        seed["value"] = (seed["value"] + 1) % 2**32 or 1
        return (buffers["src"], buffers["dst"], np.int64(vecs), np.int64(passes), np.uint32(seed["value"]))

    def verify(vecs: int, passes: int):
        src, dst = buffers["src"], buffers["dst"]
        wrong = mismatches(dst, src, seed["value"])
        if wrong:
            raise RuntimeError(f"dram_copy: {wrong} of {dst.size} words are not source + {seed['value']:#x}")

    return _dram_stream(ctx, DRAM_KERNELS["copy"], HBM_FOOTPRINT_L2 / 2, args, verify, lambda: None, 32.0)


def _dram_memcpy(ctx) -> list[Sample]:
    """The driver's device-to-device copy of a buffer of half the copy kernels' size into another: what a
    framework's tensor copy gets.  The destination is cleared before each sample and checked after it."""
    import cupy

    vecs = dram_vectors(ctx.device, HBM_FOOTPRINT_L2 / 2, 1, 1)
    src = cupy.empty(vecs * 4, dtype=cupy.uint32)
    fill_hash(src)
    dst = cupy.zeros_like(src)
    nbytes = vecs * 16
    kind = cupy.cuda.runtime.memcpyDeviceToDevice

    def run(copies: int):
        def launch():
            stream = cupy.cuda.get_current_stream().ptr
            for _ in range(copies):
                cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind, stream)
        return launch

    def verify():
        wrong = mismatches(dst, src, 0)
        if wrong:
            raise RuntimeError(f"memcpy: {wrong} of {dst.size} words differ from the source")

    copies, _ = calibrate(run, 1, LAUNCH_S)
    return bandwidth_samples(ctx, run(copies), lambda: dst.data.memset_async(0, nbytes), verify,
                             copies * nbytes * 2.0, sample_s=SAMPLE_S, bound=bandwidth_bound(ctx.device, "dram"))


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
    func = _kernel("smem_read" if level == "smem" else "l1_read")
    blocks = ctx.device["sm_count"] * _blocks_per_sm(func)
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
