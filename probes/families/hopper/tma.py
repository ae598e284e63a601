"""The TMA copy engine against cp.async and plain loads (Hopper; kernels in hopper.cu).

* ``hopper.tma_latency`` -- one ``cp.async.bulk`` global->shared at a time, cycles from issue to the
  mbarrier's completion, from an L2-resident and an HBM footprint.
* ``hopper.tma_tensor`` -- the same for one 2-D box through a tensor map (``cp.async.bulk.tensor``; the
  128-byte CUtensorMap from ``probes/kit/tensor_map.py``), kept in global memory.
* ``hopper.copy_bandwidth`` -- a grid streams chunks from global into shared memory and sums them: by TMA
  (one bulk copy per chunk, 4 in flight), by Ampere ``cp.async`` (16 B per thread, 4 chunks in flight) and by
  plain 16-byte ``ld.global`` through registers; L2-resident and HBM footprints.

Every copy's bytes are summed on the GPU and checked against sums of the known words in closed form.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from gpuatlas.probes.families.hopper import (CHUNK_BYTES, COPY_PATHS, COPY_SIZES, HOPPER, LAUNCH_S, LEVELS, SAMPLE_S,
                                             STAGES, STREAM_THREADS, checked_bandwidth, hopper_kernel, known_sum,
                                             latency_slots, stream_checksum, stream_chunks, stream_footprint)
from gpuatlas.probes.kit.clusters import MAX_DYNAMIC_SHARED_SIZE_BYTES, set_attribute
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import (GOLDEN, Golden, HBM_FOOTPRINT_L2, MASK32, Sink, bandwidth_bound,
                                          clock_samples, steps_for)
from gpuatlas.probes.kit.tensor_map import encode_tensor_map
from gpuatlas.probes.registry import probe


def prepare_level(words, nbytes: int, level: str, device: dict) -> None:
    """Put the first ``nbytes`` of ``words`` in L2 (level l2: read by a copy, which fits beside it), or
    evict everything from L2 (level dram)."""
    import cupy

    if level == "l2":
        words[: nbytes // 4].copy()
        cupy.cuda.get_current_stream().synchronize()
    else:
        evict_l2(device)


def evict_l2(device: dict) -> None:
    """Write a buffer of twice the L2, so nothing of an HBM footprint stays in it."""
    import cupy

    scratch = cupy.empty(2 * device["l2_bytes"] // 4, dtype=cupy.uint32)
    scratch.fill(1)
    cupy.cuda.get_current_stream().synchronize()


def copy_chain(func, args: tuple, smem: int, slots: int, what: str, check: Callable) -> Callable:
    """``run(warm, copies)`` of a one-thread kernel copying one slot at a time, copy k (counted on from the last
    run) from slot k x GOLDEN mod ``slots`` (a power of two): launches ``func`` with ``args``, the first copy's
    number, ``warm``, ``copies``, its out (5 words) and error count and ``smem`` bytes of shared memory; raises
    where an mbarrier wait timed out, then ``check(out, last)`` with the slot the host says came last."""
    import cupy

    set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    out = cupy.zeros(5, dtype=cupy.uint64)
    errors = cupy.zeros(1, dtype=cupy.uint32)
    first = 0

    def run(warm: int, copies: int) -> np.ndarray:
        nonlocal first
        func((1,), (1,), (*args, np.uint32(first & MASK32), np.int64(warm), np.int64(copies), out, errors),
             shared_mem=smem)
        result = out.get()
        last = (first + warm + copies - 1) * GOLDEN & MASK32 & (slots - 1)
        first += warm + copies
        if int(errors.get()[0]):
            raise RuntimeError(f"{what}: mbarrier waits timed out")
        check(result, last)
        return result

    return run


def copy_latency_samples(ctx, run: Callable) -> list[Sample]:
    """Cycles per copy of a chain of copies, one in flight at a time: ``run(warm, copies)`` (``copy_chain``)
    returns the kernel's (issue-to-completion cycles summed, ns of the timed loop, the last copy's sum, its
    slot, cycles of the timed loop); a first run of 256 sizes the chain to SAMPLE_S, at most 2^16 copies."""
    first_run = run(16, 256)
    copies = min(steps_for(float(first_run[1]) * 1e-9 / 256, 1, sample_s=SAMPLE_S), 1 << 16)

    def sample(repeat: int) -> list[Sample]:
        result = run(0, copies).astype(float)
        hz = result[4] / result[1] * 1e9
        return clock_samples(ctx, result[0], copies, repeat, "clock64", hz=hz)

    return repeat_until_stable(sample, "latency", ctx.budget)


@probe("hopper.tma_latency",
       sweeps={"quick": lambda d: {"copy_bytes": [16, 4096], "level": list(LEVELS)},
               "full": lambda d: {"copy_bytes": list(COPY_SIZES), "level": list(LEVELS)}},
       axes={"copy_bytes": "bytes of one cp.async.bulk global->shared copy (multiples of 16)",
             "level": f"l2 (a 1 MiB footprint, resident) or dram ({HBM_FOOTPRINT_L2}x the L2, random slots)"},
       quantities=("tma.latency_cycles", "tma.dram_latency_cycles"), kernels=("hopper.cu",), min_cc=HOPPER)
def tma_latency(ctx, copy_bytes: int, level: str) -> list[Sample]:
    """Cycles from issuing one bulk copy (TMA) to its mbarrier's completion, one copy in flight at a time."""
    copy_bytes = int(copy_bytes)
    slots, slot_bytes = latency_slots(ctx.device, copy_bytes, level)
    words = Golden.at_least(slots * slot_bytes)
    prepare_level(words, slots * slot_bytes, level, ctx.device)

    def check(result: np.ndarray, last: int) -> None:
        want = known_sum(last * slot_bytes // 4, copy_bytes // 4)
        if int(result[3]) != last or int(result[2]) != want:
            raise RuntimeError(f"bulk copy of {copy_bytes} B: the last copy (slot {int(result[3])}, the host "
                               f"says {last}) summed {int(result[2]):#010x}, its source sums {want:#010x}")

    run = copy_chain(hopper_kernel("bulk_latency"),
                     (words, np.uint32(slots), np.uint32(slot_bytes), np.uint32(copy_bytes)), max(copy_bytes, 16),
                     slots, f"bulk copy of {copy_bytes} B", check)
    return copy_latency_samples(ctx, run)


#: 2-D tensor for hopper.tma_tensor: rows of TENSOR_COLS 32-bit words; boxes (cols x rows) of 1, 4, 16 KiB.
TENSOR_COLS = 4096
TENSOR_BOXES = ((16, 16), (64, 16), (64, 64))


def tensor_shape(device: dict, level: str) -> int:
    """Rows of the tensor: a power of two, 1 MiB in all (L2) or at least HBM_FOOTPRINT_L2 x the L2 (HBM)."""
    span = 1 << 20 if level == "l2" else HBM_FOOTPRINT_L2 * device["l2_bytes"]
    return 1 << math.ceil(math.log2(max(span // (TENSOR_COLS * 4), 64)))


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
    prepare_level(words, rows * TENSOR_COLS * 4, level, ctx.device)
    tensor_map = cupy.asarray(np.frombuffer(encode_tensor_map(words.data.ptr, TENSOR_COLS, rows, box_cols,
                                                              box_rows), dtype=np.uint64))
    boxes_x, boxes = TENSOR_COLS // box_cols, TENSOR_COLS // box_cols * (rows // box_rows)
    smem = box_cols * box_rows * 4 + 128  # room to align the landing zone to 128 bytes

    def check(result: np.ndarray, last: int) -> None:
        x, y, want = box_sum(last, TENSOR_COLS, box_cols, box_rows)
        if int(result[3]) != last or int(result[2]) != want:
            raise RuntimeError(f"tensor box {box_cols} x {box_rows}: the last box (number {int(result[3])}, the "
                               f"host says {last} at x={x}, y={y}) summed {int(result[2]):#010x}, the tensor "
                               f"says {want:#010x}")

    run = copy_chain(hopper_kernel("tensor_latency"),
                     (tensor_map, np.uint32(boxes_x), np.uint32(boxes), np.uint32(box_cols), np.uint32(box_rows)),
                     smem, boxes, f"tensor box {box_cols} x {box_rows}", check)
    return copy_latency_samples(ctx, run)


@probe("hopper.copy_bandwidth",
       sweeps={"quick": lambda d: {"path": list(COPY_PATHS), "chunk_bytes": stream_chunks(d, [16384]),
                                   "level": list(LEVELS)},
               "full": lambda d: {"path": list(COPY_PATHS),
                                  "chunk_bytes": stream_chunks(d, [CHUNK_BYTES[0], *CHUNK_BYTES[2:]]),
                                  "level": list(LEVELS)}},
       axes={"path": "tma (cp.async.bulk per chunk, mbarrier per stage), cp_async (Ampere: 16 B per thread, "
                     "commit/wait_group), ldg (plain 16-byte ld.global into registers, stored to shared)",
             "chunk_bytes": "bytes per chunk (per stage): quick 16 KiB; full 4, 16 and 32 KiB (8 KiB kernels exist "
                            "for -a); tma and cp_async keep 4 in flight; sizes whose 4 stages exceed a block's "
                            "opt-in shared memory are left out",
             "level": f"l2 (footprint a quarter of the L2, re-read) or dram ({HBM_FOOTPRINT_L2}x the L2)"},
       quantities=("tma.bandwidth_bytes_per_s", "cp_async.bandwidth_bytes_per_s", "ldg_smem.bandwidth_bytes_per_s",
                   "tma.l2_bandwidth_bytes_per_s", "cp_async.l2_bandwidth_bytes_per_s",
                   "ldg_smem.l2_bandwidth_bytes_per_s"),
       kernels=("hopper.cu",), min_cc=HOPPER)
def copy_bandwidth(ctx, path: str, chunk_bytes: int, level: str) -> list[Sample]:
    """Bytes per second moved from global into shared memory (and summed there) by TMA, cp.async or plain
    loads, over a grid of 256-thread blocks at the occupancy the driver grants."""
    chunk_bytes = int(chunk_bytes)
    func = hopper_kernel(f"stream_{path}_v{chunk_bytes // (STREAM_THREADS * 16)}")
    smem = chunk_bytes * (1 if path == "ldg" else STAGES)
    set_attribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, STREAM_THREADS, smem)
    chunks = stream_footprint(ctx.device, chunk_bytes, level)
    words = Golden.at_least(chunks * chunk_bytes)
    prepare_level(words, chunks * chunk_bytes, level, ctx.device)
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
    return checked_bandwidth(ctx, run(per_block), check, blocks * per_block * chunk_bytes,
                             bandwidth_bound(ctx.device, level))
