"""HBM bandwidth (CuPy RawModule, bandwidth.cu's stream kernels).

* ``bw.dram`` -- HBM read, write and copy (read plus written bytes) over buffers of several times L2, the
  write in several variants (store width, grid-stride or one store per thread, streaming hint), and the
  driver's own device-to-device copy (cudaMemcpyAsync) beside gpuatlas's.
* ``bw.dram_footprint`` -- HBM read bandwidth against the footprint re-read, 4x the L2 to several GiB.

Every launch is timed with CUDA events and each sample's SM clock is read right after it; every kernel leaves
a 32-bit sum of what it loaded (or the buffer it wrote) that the host checks after every sample.  A bandwidth
above the HBM interface's peak (from the device's properties) is flagged ``invalid``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from gpuatlas.probes.families.bandwidth import BLOCK_THREADS, LAUNCH_S, SAMPLE_S, bandwidth_kernel, resident_blocks
from gpuatlas.probes.kit.harness import Sample, calibrate, launch_seconds
from gpuatlas.probes.kit.samplers import (HBM_FOOTPRINT_L2, MEMORY_FRACTION, Sink, bandwidth_bound, bandwidth_samples,
                                          fill_hash, mismatches, sum32)
from gpuatlas.probes.registry import geom, probe

DRAM_OPS = ("read", "write", "copy", "memcpy")
#: bw.dram buffers: read and write sweep HBM_FOOTPRINT_L2 x L2; copy reads one buffer of half that into another.
#: bw.dram_footprint re-reads one buffer of FOOTPRINT_LOW_L2 .. FOOTPRINT_TOP_L2 x L2: from where the L2 may
#: still serve a quarter of the bytes to several GiB, past the address-translation caches' reach.
FOOTPRINT_LOW_L2, FOOTPRINT_TOP_L2 = 4, 128
#: bw.dram kernels: (name, 16-byte accesses in flight per thread, bytes a warp's trip reads contiguously,
#: bytes a block's trip reads contiguously[, True: a block barrier after every trip]).  Interleaved kernels spread a thread's U loads over grid-wide
#: rows (512 contiguous bytes per warp load, ROW_BYTES per block load); chunked ones read U x 512 contiguous
#: bytes per warp and ask the L2 for 256-byte fetches; block kernels read one contiguous chunk of U x
#: ROW_BYTES per block trip in 512-byte warp loads (hopper.cu's stream order, in registers).  Every kernel of
#: an op is tried at its occupancy and at half of it, and the fastest variant on this GPU is measured (its
#: kernel's unroll, contiguous bytes, block size and blocks/SM are recorded with the samples).
WRITE_U, COPY_U = 4, 4
ROW_BYTES = BLOCK_THREADS * 16
DRAM_KERNELS = {
    "read": (("dram_read_u4", 4, 512, ROW_BYTES), ("dram_read_u8", 8, 512, ROW_BYTES),
             ("dram_read_chunk_u4", 4, 4 * 512, 4 * ROW_BYTES), ("dram_read_chunk_u8", 8, 8 * 512, 8 * ROW_BYTES),
             ("dram_read_block_u2", 2, 512, 2 * ROW_BYTES), ("dram_read_block_u4", 4, 512, 4 * ROW_BYTES),
             ("dram_read_block_u8", 8, 512, 8 * ROW_BYTES),
             ("dram_read_block_sync_u4", 4, 512, 4 * ROW_BYTES, True),
             ("dram_read_block_sync_u8", 8, 512, 8 * ROW_BYTES, True)),
    "copy": (("dram_copy", COPY_U, 512, ROW_BYTES), ("dram_copy_chunk_u4", 4, 4 * 512, 4 * ROW_BYTES),
             ("dram_copy_chunk_u8", 8, 8 * 512, 8 * ROW_BYTES)),
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
#: The variant of the other ops: the fastest of their kernels (read, copy) or the driver's copy (memcpy); the
#: read also as one trip of ONCE_READ_VECTORS 16-byte loads per thread and no loop (dram_read_once).
OP_VARIANT = {"read": ("fastest", "once_64"), "copy": ("fastest",), "memcpy": ("driver",)}
ONCE_READ_VECTORS, SINK_SLOTS = 4, 1024
#: Each variant is timed as the fastest of SELECT_REPEATS launches of SELECT_PASSES passes (after two warm-up
#: launches): variants differ by about a percent, more than one short launch's tail and jitter may hide.
SELECT_PASSES, SELECT_REPEATS = 4, 3


def dram_vectors(device: dict, buffer_l2: float, threads: int, unroll: int) -> int:
    """16-byte vectors in a bw.dram buffer: ``buffer_l2`` x L2, a whole number of grid-wide trips."""
    per_trip = threads * unroll
    vecs = math.ceil(buffer_l2 * device["l2_bytes"] / 16 / per_trip) * per_trip
    cap = int(device["total_memory_bytes"] * MEMORY_FRACTION) // 16 // per_trip * per_trip
    return max(per_trip, min(vecs, cap))


def dram_configs(device: dict) -> list[dict]:
    """Every op once, and the write op in each of its variants."""
    return [{"op": op, "variant": v} for op in DRAM_OPS
            for v in (WRITE_VARIANTS if op == "write" else OP_VARIANT[op])]


@probe("bw.dram", sweeps={"quick": dram_configs, "full": dram_configs},
       axes={"op": "read (16-byte loads), write (stores), copy (bytes read + written) or memcpy (the "
                   "driver's cudaMemcpyAsync device to device, bytes read + written)",
             "variant": "write: grid_stride_16 / grid_stride_16_cs (16-byte stores, grid-stride, plain or "
                        "st.global.cs), once_8 / once_16 / once_16_cs (one 8- or 16-byte store per thread, no "
                        "loop); read: fastest (of its grid-stride kernels and occupancies) or once_64 (one trip of "
                        "four 16-byte loads per thread, no loop); copy: fastest; memcpy: driver"},
       quantities=("dram.read_bandwidth_bytes_per_s", "dram.write_bandwidth_bytes_per_s",
                   "dram.copy_bandwidth_bytes_per_s", "dram.read_bytes_per_clk_sm"),
       kernels=("bandwidth.cu",))
def bw_dram(ctx, op: str, variant: str | None = None) -> list[Sample]:
    """Device-memory bandwidth (B/s) of a read, write or copy stream over buffers of several times L2."""
    if op == "read":
        return _dram_read_once(ctx) if variant == "once_64" else _dram_read(ctx)
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
    and a block's trip read contiguously, and blocks per SM."""

    func: object
    unroll: int
    contiguous_bytes: int
    block_contiguous_bytes: int
    blocks_per_sm: int
    barrier_per_trip: bool = False


def dram_variants(kernels: list[tuple], blocks_per_sm: list[int]) -> list[_Variant]:
    """Each ``(func, unroll, contiguous_bytes, block_contiguous_bytes[, barrier_per_trip])`` kernel at the
    occupancy the driver grants it and at half of it: the grid-stride loops need no particular grid, and HBM
    sometimes streams better with fewer requests queued."""
    out = []
    for (func, unroll, contiguous, block_contiguous, *barrier), full in zip(kernels, blocks_per_sm):
        for blocks in sorted({full, max(1, full // 2)}, reverse=True):
            out.append(_Variant(func, unroll, contiguous, block_contiguous, blocks, *barrier))
    return out


def stream_vectors(device: dict, buffer_l2: float, variants: list[_Variant]) -> int:
    """16-byte vectors in a buffer of ``buffer_l2`` x L2 that is a whole number of every variant's grid trips
    (SMs x blocks/SM x BLOCK_THREADS x unroll vectors): every thread, block and chunk does the same work, and
    each pass reads every vector once."""
    per_trip = math.lcm(*[device["sm_count"] * v.blocks_per_sm * BLOCK_THREADS * v.unroll for v in variants])
    return dram_vectors(device, buffer_l2, per_trip, 1)


def _dram_stream(ctx, kernels: tuple, buffer_l2: float, make_args, verify, reset, bytes_per_vector: float,
                 counted=lambda func: func, extra: tuple = ()) -> list[Sample]:
    """Size the buffers for every variant of ``kernels`` (``DRAM_KERNELS`` entries), time each variant
    (SELECT_REPEATS launches of SELECT_PASSES passes), and measure the fastest until stable.

    ``make_args(vecs, passes)`` returns the kernel's arguments (and allocates on first call); ``counted``
    wraps a kernel to count its launches."""
    sms = ctx.device["sm_count"]
    kernels = [(bandwidth_kernel(name), *layout) for name, *layout in kernels]
    variants = dram_variants(kernels, [resident_blocks(func) for func, *_ in kernels])
    vecs = stream_vectors(ctx.device, buffer_l2, variants)
    state = {"variant": variants[0]}

    def run(passes: int):
        def launch():
            v = state["variant"]
            counted(v.func)((sms * v.blocks_per_sm,), (BLOCK_THREADS,), make_args(vecs, passes))
        return launch

    times = {}
    for v in variants:
        state["variant"] = v
        times[v] = launch_seconds(run(SELECT_PASSES), SELECT_REPEATS, warmup=2)
    state["variant"] = best = min(times, key=times.get)
    passes, _ = calibrate(run, 1, LAUNCH_S)
    extra = (("loads_in_flight_per_thread", float(best.unroll), "1"),
             ("contiguous_bytes_per_warp_trip", float(best.contiguous_bytes), "B"),
             ("contiguous_bytes_per_block_trip", float(best.block_contiguous_bytes), "B"),
             ("threads_per_block", float(BLOCK_THREADS), "1"), ("blocks_per_sm", float(best.blocks_per_sm), "1"),
             ("block_barrier_per_trip", float(best.barrier_per_trip), "1"),
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


def _dram_read_once(ctx) -> list[Sample]:
    """The read as public stream suites write it: a grid of one trip per thread (ONCE_READ_VECTORS 16-byte
    loads, no loop) over the same buffer of HBM_FOOTPRINT_L2 x L2; every launch's sum is checked."""
    import cupy

    func = bandwidth_kernel("dram_read_once")
    per_block = BLOCK_THREADS * ONCE_READ_VECTORS
    vecs = dram_vectors(ctx.device, HBM_FOOTPRINT_L2, per_block, 1)
    words = cupy.empty(vecs * 4, dtype=cupy.uint32)
    fill_hash(words)
    total, blocks = sum32(words), vecs // per_block
    sinks = cupy.zeros(SINK_SLOTS, dtype=cupy.uint32)
    launches = {"n": 0}

    def run(passes: int):
        def launch():
            for _ in range(passes):
                func((blocks,), (BLOCK_THREADS,), (words, sinks))
            launches["n"] += passes
        return launch

    def reset():
        sinks.fill(0)
        launches["n"] = 0

    def verify():
        got, want = int(sinks.get().sum(dtype=np.uint64)) % 2**32, launches["n"] * total % 2**32
        if got != want:
            raise RuntimeError(f"dram_read_once: checksum mismatch after {launches['n']} launches: the kernels "
                               f"summed {got:#010x}, the buffer says {want:#010x}")

    passes, _ = calibrate(run, 1, LAUNCH_S)
    extra = (("loads_in_flight_per_thread", float(ONCE_READ_VECTORS), "1"), ("grid_blocks", float(blocks), "1"),
             ("buffer_bytes", float(vecs * 16), "B"))
    return bandwidth_samples(ctx, run(passes), reset, verify, passes * vecs * 16.0,
                             sample_s=SAMPLE_S, bound=bandwidth_bound(ctx.device, "dram"), extra=extra)


def footprint_sweep(device: dict, per_octave: int) -> list[int]:
    """bw.dram_footprint's buffers: FOOTPRINT_LOW_L2 x L2 .. FOOTPRINT_TOP_L2 x L2 (capped at MEMORY_FRACTION
    of device memory), ``per_octave`` per doubling, whole MiB."""
    l2 = device["l2_bytes"]
    top = min(FOOTPRINT_TOP_L2 * l2, int(device["total_memory_bytes"] * MEMORY_FRACTION))
    return geom(FOOTPRINT_LOW_L2 * l2, top, per_octave=per_octave, align=1 << 20)


@probe("bw.dram_footprint",
       sweeps={"quick": lambda d: {"footprint_bytes": footprint_sweep(d, 1)},
               "full": lambda d: {"footprint_bytes": footprint_sweep(d, 3)}},
       axes={"footprint_bytes": f"bytes of one buffer re-read pass after pass, {FOOTPRINT_LOW_L2}x .. "
                                f"{FOOTPRINT_TOP_L2}x the L2 (at most {MEMORY_FRACTION:.0%} of device memory); "
                                "quick: 1 per octave, full: 3"},
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

        return _dram_stream(ctx, ((name, WRITE_U, 512, ROW_BYTES),), HBM_FOOTPRINT_L2, args, verify, lambda: None, 16.0,
                            extra=config)

    func = bandwidth_kernel(name)
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
