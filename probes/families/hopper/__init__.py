"""The Hopper family's shared parts (compute capability 9.0; kernels in hopper.cu): its sweep constants, the
host mirrors of the kernels' arithmetic (known words and their closed-form sums, DPX in numpy, the chase's
next-index table, footprint sizing), and the launch helpers its probes share: thread-block clusters (with
the driver's refusal recorded as a ``cluster_refused`` sample, flagged ``invalid``) and a checked bandwidth.

The probes are by unit: ``probes/families/hopper/dsmem.py`` (distributed shared memory), ``probes/families/hopper/tma.py`` (the TMA copy
engine, cp.async and plain loads; its tensor map from ``probes/kit/tensor_map.py``) and ``probes/families/hopper/dpx.py``.
Every probe proves its data: chases end where the chain says, copied and read bytes are summed and checked
against sums the host computes in closed form, DPX results are checked against numpy.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.kit.samplers import GOLDEN, HBM_FOOTPRINT_L2, MASK32, OFFSET, Sink, bandwidth_samples

HOPPER = (9, 0)
CLUSTER_SIZES = (2, 4, 8, 16)

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
#: Room a stream kernel needs beside its dynamic stages: its static mbarriers (8 B per stage), rounded up.
STREAM_STATIC_SMEM = 1024
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


def stream_chunks(device: dict, chunk_sizes) -> list[int]:
    """The chunk sizes whose STAGES stages, with the kernel's static shared memory, fit in the shared memory
    one block may opt in to on this device."""
    optin = device.get("smem_per_block_optin_bytes") or device["smem_per_block_bytes"]
    return [c for c in chunk_sizes if c * STAGES + STREAM_STATIC_SMEM <= optin]


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
    """next_index[order[i]] = order[i + 1]: one cycle through every element, as the chain kit (chain.py) builds."""
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

def hopper_kernel(name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("hopper.cu", name)


CLUSTER_AXES = {"cluster_size": "blocks per thread-block cluster: 2, 4, 8 (the portable maximum), 16 "
                                "(non-portable, opted into; recorded as refused where the driver says no)"}


def checked_bandwidth(ctx, launch, sink: Sink, bytes_per_launch: float, bound: float | None) -> list[Sample]:
    """``bandwidth`` (B/s) and ``bytes_per_clk_sm`` of ``launch``, checked against ``sink`` after every
    sample; above ``bound`` (B/s) a sample is flagged ``invalid``."""
    # Bandwidths are stable to well under 1%: capped repeats keep the family fast (as bw.stride does).
    budget = dataclasses.replace(ctx.budget, max_repeats=min(ctx.budget.max_repeats, BANDWIDTH_MAX_REPEATS),
                                 time_s=min(ctx.budget.time_s, BANDWIDTH_TIME_S))
    return bandwidth_samples(ctx, launch, sink.reset, sink.check_added, bytes_per_launch, sample_s=2 * LAUNCH_S,
                             bound=bound, per_clk_too=True, budget=budget)
