"""Hopper's new units (compute capability 9.0): distributed shared memory, the TMA copy engine, DPX.

* ``hopper.dsmem_latency`` -- pointer chase through another block's shared memory in a thread-block cluster
  (mapa + generic 64-bit loads over the SM-to-SM network), beside the same chase through the block's own
  shared memory by LDS and by the same generic path.  Each block sits alone on its SM (dynamic shared
  memory above half an SM's), so a remote load always leaves the SM.
* ``hopper.dsmem_bandwidth`` -- every block of every cluster reads a 32 KiB buffer of another block (pair:
  rank ^ 1; ring: rank + 1) or its own (local) with 16-byte loads.
* ``hopper.tma_latency`` -- one ``cp.async.bulk`` global->shared at a time, cycles from issue to the
  mbarrier's completion, from an L2-resident and an HBM footprint.
* ``hopper.tma_tensor`` -- the same for one 2-D box through a tensor map (``cp.async.bulk.tensor``); the
  128-byte CUtensorMap is encoded by the driver's ``cuTensorMapEncodeTiled`` (libcuda via ctypes) and kept
  in global memory.
* ``hopper.copy_bandwidth`` -- a grid streams chunks from global into shared memory and sums them: by TMA
  (one bulk copy per chunk, 4 in flight), by Ampere ``cp.async`` (16 B per thread, 4 chunks in flight) and by
  plain 16-byte ``ld.global`` through registers; L2-resident and HBM footprints.
* ``hopper.dpx`` -- latency (dependent chain) and throughput (full grid, 8 chains per thread) of DPX
  instructions against the two-instruction sequence a GPU without DPX runs.

Every probe proves its data: chases end where the chain says, copied and read bytes are summed and checked
against sums the host computes in closed form, DPX results are checked against numpy.  Cluster sizes above
the portable 8 need an opt-in attribute; where the driver refuses a cluster size, the config records a
``cluster_refused`` sample (flagged ``invalid``) whose value is the driver's CUresult, instead of failing.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from probes.cuda import blocks_per_sm
from probes.harness import EventTimer, Sample, calibrate, repeat_until_stable
from probes.kit import (GOLDEN, HBM_FOOTPRINT_L2, MASK32, MAX_BYTES_PER_CLK_SM, OFFSET, Golden, Sink, bandwidth_bound,
                        bandwidth_samples, clock_samples, steps_for)
from probes.registry import probe

HOPPER = (9, 0)
CLUSTER_SIZES = (2, 4, 8, 16)
PORTABLE_CLUSTER = 8
#: CUfunction_attribute values the installed CuPy does not name.
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


CHASE_MODES = ("local", "self", "remote")
CHASE_ELEMENTS = 1024  # 8 KiB chain of 64-bit addresses
CHASE_THREADS = 32
UNROLL = 32
READ_PATTERNS = ("local", "pair", "ring")
DSMEM_THREADS, DSMEM_BUFFER_BYTES = 256, 32 << 10
COPY_SIZES = (16, 128, 1024, 4096, 16384)
LEVELS = ("l2", "dram")
COPY_PATHS = ("tma", "cp_async", "ldg")
STREAM_THREADS, STAGES = 256, 4
CHUNK_BYTES = tuple(STREAM_THREADS * 16 * v for v in (1, 2, 4, 8))  # hopper.cu's stream_<path>_v{1,2,4,8}
DPX_CONFIGS = ({"op": "viaddmax", "impl": "dpx"}, {"op": "viaddmax", "impl": "emu"},
               {"op": "vimax3", "impl": "dpx"})
DPX_CHAINS, DPX_THREADS, DPX_UNROLL = 8, 256, 4
#: Latency samples should last about this long; copy and DPX launches about LAUNCH_S.
SAMPLE_S, LAUNCH_S = 1e-3, 1e-3
BANDWIDTH_MAX_REPEATS, BANDWIDTH_TIME_S = 11, 0.25


# -- host mirrors of the kernels' arithmetic (pure: the CPU tests check them) ---------------------------------

def known_words(start: int, count: int) -> np.ndarray:
    """hopper.cu's known_word(i) for i in [start, start + count), as uint32."""
    i = np.arange(start, start + count, dtype=np.uint64)
    return ((i * GOLDEN + OFFSET) & MASK32).astype(np.uint32)


def known_sum(start_word: int, count: int) -> int:
    """32-bit sum of known_word(i) over [start_word, start_word + count), in closed form."""
    indices = count * start_word + count * (count - 1) // 2
    return (GOLDEN * indices + OFFSET * count) & MASK32


def stream_checksum(first: int, visits: int, chunks: int, chunk_bytes: int) -> int:
    """Sum of every word of chunks first, first + 1, ..., first + visits - 1 (mod ``chunks``) of a buffer of
    known words: what a stream launch folds into its sink (each block's chunk order only permutes these)."""
    words = chunk_bytes // 4
    passes, rest = divmod(visits, chunks)
    total = passes * known_sum(0, chunks * words)
    start = first % chunks
    head = min(rest, chunks - start)
    total += known_sum(start * words, head * words) + known_sum(0, (rest - head) * words)
    return total & MASK32


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def dpx_reference(op: str, x: np.ndarray, b: np.ndarray, c: np.ndarray, steps: int) -> np.ndarray:
    """``steps`` applications of ``op`` to int32 ``x`` (elementwise, 32-bit wrapping adds), as hopper.cu."""
    x, b, c = (np.asarray(v, dtype=np.int64) for v in (x, b, c))
    for _ in range(steps):
        x = np.maximum(wrap32(x + b), c) if op == "viaddmax" else np.maximum(np.maximum(x, b), c)
    return x.astype(np.int32)


def chase_next_index(order: np.ndarray) -> np.ndarray:
    """next_index[order[i]] = order[i + 1]: one cycle through every element, as probes/chase.py builds."""
    nxt = np.empty(len(order), dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    return nxt


def latency_slots(device: dict, copy_bytes: int, level: str) -> tuple[int, int]:
    """``(slots, slot_bytes)`` of a bulk_latency footprint: a power of two of slots of max(copy, 256) bytes;
    L2: 1 MiB in all (resident once written); HBM: HBM_FOOTPRINT_L2 x the L2, so a random slot is rarely in it."""
    slot = max(copy_bytes, 256)
    span = 1 << 20 if level == "l2" else HBM_FOOTPRINT_L2 * device["l2_bytes"]
    return 1 << max(1, math.ceil(math.log2(max(span // slot, 2)))), slot


def stream_footprint(device: dict, chunk_bytes: int, level: str) -> int:
    """Chunks in a stream footprint: a quarter of the L2 (resident) or HBM_FOOTPRINT_L2 x the L2 (HBM)."""
    span = device["l2_bytes"] // 4 if level == "l2" else HBM_FOOTPRINT_L2 * device["l2_bytes"]
    return max(1, span // chunk_bytes)


# -- the GPU side -------------------------------------------------------------------------------------------

def _kernel(name: str):
    from probes.cuda import kernel

    return kernel("hopper.cu", name)


def _set_attribute(func, attribute: int, value: int) -> None:
    import cupy

    cupy.cuda.driver.funcSetAttribute(getattr(func, "kernel", func).ptr, attribute, value)


class ClusterRefused(Exception):
    """The driver would not launch a cluster of this size; ``status`` is its CUresult."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _cluster_launch(func, cluster_size: int, launch):
    """Run ``launch()`` (the first launch of a cluster kernel); a cluster size the driver refuses (or above
    the portable size without the opt-in) raises ClusterRefused with the driver's words."""
    import cupy

    try:
        if cluster_size > PORTABLE_CLUSTER:
            _set_attribute(func, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        result = launch()
        cupy.cuda.get_current_stream().synchronize()
        return result
    except cupy.cuda.driver.CUDADriverError as exc:
        if any(word in str(exc).upper() for word in ("CLUSTER", "INVALID_VALUE", "OUT_OF_RESOURCES")):
            raise ClusterRefused(str(exc), int(getattr(exc, "status", -1))) from None
        raise


def _refused(exc: ClusterRefused) -> list[Sample]:
    """The record of a refused cluster size: one sample holding the driver's CUresult, flagged so no fit
    uses it."""
    return [Sample("cluster_refused", float(exc.status), "CUresult", 0, None, "driver", "invalid")]


CLUSTER_AXES = {"cluster_size": "blocks per thread-block cluster: 2, 4, 8 (the portable maximum), 16 "
                                "(non-portable, opted into; recorded as refused where the driver says no)"}


@probe("hopper.dsmem_latency",
       sweeps={"quick": lambda d: {"cluster_size": [2, 16], "mode": list(CHASE_MODES)},
               "full": lambda d: {"cluster_size": list(CLUSTER_SIZES), "mode": list(CHASE_MODES)}},
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
    func = _kernel(f"dsmem_chase_{mode}_c{cluster_size}")
    order = ctx.rng(cluster_size, CHASE_MODES.index(mode)).permutation(CHASE_ELEMENTS).astype(np.int64)
    next_gpu = cupy.asarray(chase_next_index(order))
    out = cupy.zeros(3 * cluster_size, dtype=cupy.uint64)
    # More than half an SM's shared memory per block: no two blocks of the cluster share an SM.
    smem = max(CHASE_ELEMENTS * 8, ctx.device.get("smem_per_block_optin_bytes") or 0)
    _set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
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
        first = _cluster_launch(func, cluster_size, lambda: run(CHASE_ELEMENTS, 1024))
    except ClusterRefused as exc:
        return _refused(exc)
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


def _bandwidth(ctx, launch, sink: Sink, bytes_per_launch: float, bound: float | None) -> list[Sample]:
    """``bandwidth`` (B/s) and ``bytes_per_clk_sm`` of ``launch``, checked against ``sink`` after every
    sample; above ``bound`` (B/s) a sample is flagged ``invalid``."""
    # Bandwidths are stable to well under 1%: capped repeats keep the family fast (as bw.stride does).
    budget = dataclasses.replace(ctx.budget, max_repeats=min(ctx.budget.max_repeats, BANDWIDTH_MAX_REPEATS),
                                 time_s=min(ctx.budget.time_s, BANDWIDTH_TIME_S))
    return bandwidth_samples(ctx, launch, sink.reset, sink.check_added, bytes_per_launch, sample_s=2 * LAUNCH_S,
                             bound=bound, per_clk_too=True, budget=budget)


@probe("hopper.dsmem_bandwidth",
       sweeps={"quick": lambda d: {"cluster_size": [2, 8], "pattern": list(READ_PATTERNS)},
               "full": lambda d: {"cluster_size": list(CLUSTER_SIZES), "pattern": list(READ_PATTERNS)}},
       axes={**CLUSTER_AXES,
             "pattern": "local (each block reads its own buffer, LDS.128), pair (rank ^ 1's) or ring "
                        "(rank + 1's), both ld.shared::cluster.v4 over the SM-to-SM network"},
       quantities=("dsmem.bandwidth_bytes_per_s", "dsmem.bandwidth_bytes_per_clk_sm"), kernels=("hopper.cu",),
       min_cc=HOPPER)
def dsmem_bandwidth(ctx, cluster_size: int, pattern: str) -> list[Sample]:
    """Bytes per second (and per clock per SM) read from shared memory of other blocks of the cluster, every
    block of a full grid reading 16 bytes per thread per load."""
    cluster_size = int(cluster_size)
    func = _kernel(f"dsmem_read_{pattern}_c{cluster_size}")
    _set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, DSMEM_BUFFER_BYTES)
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
        _cluster_launch(func, cluster_size, run(1))
    except ClusterRefused as exc:
        return _refused(exc)
    reps, _ = calibrate(run, 1, LAUNCH_S)
    bound = ctx.device["sm_count"] * ctx.device["sm_clock_max_hz"] * MAX_BYTES_PER_CLK_SM
    return _bandwidth(ctx, run(reps), check, blocks * reps * DSMEM_BUFFER_BYTES, bound)


def _prepare_level(words, nbytes: int, level: str, device: dict) -> None:
    """Put the first ``nbytes`` of ``words`` in L2 (level l2: read by a copy, which fits beside it), or
    evict everything from L2 (level dram)."""
    import cupy

    if level == "l2":
        words[: nbytes // 4].copy()
        cupy.cuda.get_current_stream().synchronize()
    else:
        _evict_l2(device)


def _evict_l2(device: dict) -> None:
    """Write a buffer of twice the L2, so nothing of an HBM footprint stays in it."""
    import cupy

    scratch = cupy.empty(2 * device["l2_bytes"] // 4, dtype=cupy.uint32)
    scratch.fill(1)
    cupy.cuda.get_current_stream().synchronize()


@probe("hopper.tma_latency",
       sweeps={"quick": lambda d: {"copy_bytes": [16, 4096], "level": list(LEVELS)},
               "full": lambda d: {"copy_bytes": list(COPY_SIZES), "level": list(LEVELS)}},
       axes={"copy_bytes": "bytes of one cp.async.bulk global->shared copy (multiples of 16)",
             "level": f"l2 (a 1 MiB footprint, resident) or dram ({HBM_FOOTPRINT_L2}x the L2, random slots)"},
       quantities=("tma.latency_cycles", "tma.dram_latency_cycles"), kernels=("hopper.cu",), min_cc=HOPPER)
def tma_latency(ctx, copy_bytes: int, level: str) -> list[Sample]:
    """Cycles from issuing one bulk copy (TMA) to its mbarrier's completion, one copy in flight at a time."""
    import cupy

    copy_bytes = int(copy_bytes)
    slots, slot_bytes = latency_slots(ctx.device, copy_bytes, level)
    words = Golden.at_least(slots * slot_bytes)
    _prepare_level(words, slots * slot_bytes, level, ctx.device)
    func = _kernel("bulk_latency")
    _set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, max(copy_bytes, 16))
    out = cupy.zeros(5, dtype=cupy.uint64)
    errors = cupy.zeros(1, dtype=cupy.uint32)
    first = 0

    def run(warm: int, copies: int) -> np.ndarray:
        nonlocal first
        func((1,), (1,), (words, np.uint32(slots), np.uint32(slot_bytes), np.uint32(copy_bytes),
                          np.uint32(first & MASK32), np.int64(warm), np.int64(copies), out, errors),
             shared_mem=max(copy_bytes, 16))
        result = out.get()
        last = (first + warm + copies - 1) * GOLDEN & MASK32 & (slots - 1)
        first += warm + copies
        if int(errors.get()[0]):
            raise RuntimeError(f"bulk copy of {copy_bytes} B: mbarrier waits timed out")
        want = known_sum(last * slot_bytes // 4, copy_bytes // 4)
        if int(result[3]) != last or int(result[2]) != want:
            raise RuntimeError(f"bulk copy of {copy_bytes} B: the last copy (slot {int(result[3])}, the host "
                               f"says {last}) summed {int(result[2]):#010x}, its source sums {want:#010x}")
        return result

    first_run = run(16, 256)
    copies = steps_for(float(first_run[1]) * 1e-9 / 256, 1, sample_s=SAMPLE_S)
    copies = min(copies, 1 << 16)

    def sample(repeat: int) -> list[Sample]:
        result = run(0, copies).astype(float)
        hz = result[4] / result[1] * 1e9
        return clock_samples(ctx, result[0], copies, repeat, "clock64", hz=hz)

    return repeat_until_stable(sample, "latency", ctx.budget)


#: 2-D tensor for hopper.tma_tensor: rows of TENSOR_COLS 32-bit words; boxes (cols x rows) of 1, 4, 16 KiB.
TENSOR_COLS = 4096
TENSOR_BOXES = ((16, 16), (64, 16), (64, 64))
CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2


def tensor_shape(device: dict, level: str) -> int:
    """Rows of the tensor: a power of two, 1 MiB in all (L2) or at least HBM_FOOTPRINT_L2 x the L2 (HBM)."""
    span = 1 << 20 if level == "l2" else HBM_FOOTPRINT_L2 * device["l2_bytes"]
    return 1 << math.ceil(math.log2(max(span // (TENSOR_COLS * 4), 64)))


def tensor_map_args(cols: int, rows: int, box_cols: int, box_rows: int) -> dict:
    """cuTensorMapEncodeTiled's shape arguments for a row-major uint32 tensor, checked against its rules:
    dims innermost first, rank - 1 byte strides (multiples of 16), box sides of 1..256 elements with the
    inner side a multiple of 16 bytes."""
    if not (0 < box_cols <= 256 and 0 < box_rows <= 256) or box_cols * 4 % 16 or cols * 4 % 16:
        raise ValueError(f"box {box_cols} x {box_rows} of a {cols}-column uint32 tensor breaks TMA's rules")
    if cols % box_cols or rows % box_rows:
        raise ValueError(f"box {box_cols} x {box_rows} does not tile a {cols} x {rows} tensor")
    return {"dims": [cols, rows], "strides": [cols * 4], "box": [box_cols, box_rows], "element_strides": [1, 1]}


def encode_tensor_map(address: int, cols: int, rows: int, box_cols: int, box_rows: int) -> bytes:
    """The 128-byte CUtensorMap of a row-major uint32 tensor at ``address``, tiled in boxes, from the
    driver's cuTensorMapEncodeTiled (libcuda through ctypes: CuPy does not wrap it); no interleave, swizzle,
    L2 promotion or out-of-bounds fill."""
    import ctypes

    args = tensor_map_args(cols, rows, box_cols, box_rows)
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64),
                       ctypes.POINTER(u64), ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int]
    encode.restype = ctypes.c_int
    tensor_map = (u64 * 16)()
    status = encode(ctypes.addressof(tensor_map), CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, address,
                    (u64 * 2)(*args["dims"]), (u64 * 1)(*args["strides"]), (u32 * 2)(*args["box"]),
                    (u32 * 2)(*args["element_strides"]), 0, 0, 0, 0)
    if status:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status}")
    return bytes(tensor_map)


def box_sum(box: int, cols: int, box_cols: int, box_rows: int) -> tuple[int, int, int]:
    """(x, y, 32-bit sum of the words) of box number ``box`` of a tensor of known words, as tensor_latency
    numbers them (row-major over the grid of boxes)."""
    boxes_x = cols // box_cols
    x, y = box % boxes_x * box_cols, box // boxes_x * box_rows
    return x, y, sum(known_sum(row * cols + x, box_cols) for row in range(y, y + box_rows)) & MASK32


@probe("hopper.tma_tensor",
       sweeps={"quick": lambda d: [{"box_cols": 16, "box_rows": 16, "level": level} for level in LEVELS],
               "full": lambda d: [{"box_cols": c, "box_rows": r, "level": level} for c, r in TENSOR_BOXES
                                  for level in LEVELS]},
       axes={"box_cols": "box width in 32-bit words (innermost dimension)", "box_rows": "box height in rows",
             "level": f"l2 (a 1 MiB tensor, resident) or dram (at least {HBM_FOOTPRINT_L2}x the L2, random boxes)"},
       quantities=("tma.tensor_latency_cycles",), kernels=("hopper.cu",), min_cc=HOPPER)
def tma_tensor(ctx, box_cols: int, box_rows: int, level: str) -> list[Sample]:
    """Cycles from issuing one 2-D box copy (cp.async.bulk.tensor through a CUtensorMap) to its mbarrier's
    completion, one box in flight at a time; the last box's words are checked."""
    import cupy

    box_cols, box_rows = int(box_cols), int(box_rows)
    rows = tensor_shape(ctx.device, level)
    words = Golden.at_least(rows * TENSOR_COLS * 4)
    _prepare_level(words, rows * TENSOR_COLS * 4, level, ctx.device)
    tensor_map = cupy.asarray(np.frombuffer(encode_tensor_map(words.data.ptr, TENSOR_COLS, rows, box_cols,
                                                              box_rows), dtype=np.uint64))
    boxes_x, boxes = TENSOR_COLS // box_cols, TENSOR_COLS // box_cols * (rows // box_rows)
    smem = box_cols * box_rows * 4 + 128  # room to align the landing zone to 128 bytes
    func = _kernel("tensor_latency")
    _set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    out = cupy.zeros(5, dtype=cupy.uint64)
    errors = cupy.zeros(1, dtype=cupy.uint32)
    first = 0

    def run(warm: int, copies: int) -> np.ndarray:
        nonlocal first
        func((1,), (1,), (tensor_map, np.uint32(boxes_x), np.uint32(boxes), np.uint32(box_cols),
                          np.uint32(box_rows), np.uint32(first & MASK32), np.int64(warm), np.int64(copies), out,
                          errors), shared_mem=smem)
        result = out.get()
        last = (first + warm + copies - 1) * GOLDEN & MASK32 & (boxes - 1)
        first += warm + copies
        if int(errors.get()[0]):
            raise RuntimeError(f"tensor box {box_cols} x {box_rows}: mbarrier waits timed out")
        x, y, want = box_sum(last, TENSOR_COLS, box_cols, box_rows)
        if int(result[3]) != last or int(result[2]) != want:
            raise RuntimeError(f"tensor box {box_cols} x {box_rows}: the last box (number {int(result[3])}, the "
                               f"host says {last} at x={x}, y={y}) summed {int(result[2]):#010x}, the tensor "
                               f"says {want:#010x}")
        return result

    first_run = run(16, 256)
    copies = min(steps_for(float(first_run[1]) * 1e-9 / 256, 1, sample_s=SAMPLE_S), 1 << 16)

    def sample(repeat: int) -> list[Sample]:
        result = run(0, copies).astype(float)
        hz = result[4] / result[1] * 1e9
        return clock_samples(ctx, result[0], copies, repeat, "clock64", hz=hz)

    return repeat_until_stable(sample, "latency", ctx.budget)


@probe("hopper.copy_bandwidth",
       sweeps={"quick": lambda d: {"path": list(COPY_PATHS), "chunk_bytes": [16384], "level": list(LEVELS)},
               "full": lambda d: {"path": list(COPY_PATHS), "chunk_bytes": [CHUNK_BYTES[0], *CHUNK_BYTES[2:]],
                                  "level": list(LEVELS)}},
       axes={"path": "tma (cp.async.bulk per chunk, mbarrier per stage), cp_async (Ampere: 16 B per thread, "
                     "commit/wait_group), ldg (plain 16-byte ld.global into registers, stored to shared)",
             "chunk_bytes": "bytes per chunk (per stage): quick 16 KiB; full 4, 16 and 32 KiB (8 KiB kernels exist "
                            "for -a); tma and cp_async keep 4 in flight",
             "level": f"l2 (footprint a quarter of the L2, re-read) or dram ({HBM_FOOTPRINT_L2}x the L2)"},
       quantities=("tma.bandwidth_bytes_per_s", "cp_async.bandwidth_bytes_per_s", "ldg_smem.bandwidth_bytes_per_s",
                   "tma.l2_bandwidth_bytes_per_s", "cp_async.l2_bandwidth_bytes_per_s",
                   "ldg_smem.l2_bandwidth_bytes_per_s"),
       kernels=("hopper.cu",), min_cc=HOPPER)
def copy_bandwidth(ctx, path: str, chunk_bytes: int, level: str) -> list[Sample]:
    """Bytes per second moved from global into shared memory (and summed there) by TMA, cp.async or plain
    loads, over a grid of 256-thread blocks at the occupancy the driver grants."""
    chunk_bytes = int(chunk_bytes)
    func = _kernel(f"stream_{path}_v{chunk_bytes // (STREAM_THREADS * 16)}")
    smem = chunk_bytes * (1 if path == "ldg" else STAGES)
    _set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, STREAM_THREADS, smem)
    chunks = stream_footprint(ctx.device, chunk_bytes, level)
    words = Golden.at_least(chunks * chunk_bytes)
    _prepare_level(words, chunks * chunk_bytes, level, ctx.device)
    check = Sink(f"{path} stream of {chunk_bytes} B chunks ({level})", errors=True)
    first = 0

    def run(per_block: int):
        def launch():
            nonlocal first
            func((blocks,), (STREAM_THREADS,), (words, np.int64(chunks), np.int64(first), np.int64(per_block),
                                                check.array, check.errors), shared_mem=smem)
            check.add(stream_checksum(first, blocks * per_block, chunks, chunk_bytes))
            first = (first + blocks * per_block) % chunks
        return launch

    per_block, _ = calibrate(run, 1, LAUNCH_S)
    return _bandwidth(ctx, run(per_block), check, blocks * per_block * chunk_bytes, bandwidth_bound(ctx.device, level))


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

    lat_func = _kernel(f"dpx_latency_{op}_{impl}")
    tp_func = _kernel(f"dpx_throughput_{op}_{impl}")
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
