"""Shared-memory bank conflicts (CuPy RawModule, smem_banks.cu).

Shared memory is split into banks that each serve one word per cycle.  A warp-wide load whose lanes ask one
bank for k different words is served in k passes (a k-way conflict); lanes asking for the same word share
one read (broadcast).  Each lane loads, over and over, element ``lane * stride + offset`` of 4-, 8- or
16-byte elements, and clock64 times it in the kernel: one warp's dependent chain (latency: each extra way
adds the cost of a pass) and several warps' independent loads (throughput: how long each warp-wide access
occupies the SM's bank pipeline; one warp alone cannot issue loads fast enough to show 2-way conflicts).  Which
strides are slow, and by how much, is the bank structure; ``analysis/banks.py`` derives the number and width
of the banks from these curves without assuming either.

``smem.banks_fix`` measures the two classic fixes on the column read of a warp-wide tile (stride = one
warp): a row pitch padded by one element, and an XOR swizzle of the column by the row.

Each element holds its own shared address, so every load returns where it loaded from: the host checks each
lane's final value (latency) or 32-bit sum of values (throughput) against the address that lane claims to
read, on every launch.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.kit.samplers import STRIDE_WARMUP_S
from gpuatlas.probes.registry import probe

LANES = 32  #: one warp
ACCESS_BYTES = (4, 8, 16)
MAX_STRIDE = 64  #: the issue's sweep: strides 0 (broadcast) .. 64 elements
CHAIN_UNROLL, BATCH_BYTES = 32, 128  #: smem_banks.cu's constants
FORMS = ("latency", "throughput")
#: Warps per block: the latency form times one warp's chain; the throughput form runs several warps, the
#: same addresses in each, so that the SM's shared-memory pipeline is busy every cycle.
WARPS = {"latency": 1, "throughput": 8}
LAYOUTS = ("plain", "pad1", "xor")
#: A timed launch should last about this long (long against %globaltimer's tick, so its SM clock is exact).
SAMPLE_S = 5e-4
CALIBRATION_TRIPS, MIN_TRIPS, MAX_TRIPS = 64, 64, 1 << 24


#: quick's strides: every conflict degree 1..32 of 32 banks appears (the powers of two), with odd strides
#: between them and past the warp.
QUICK_STRIDES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 33, 64)


#: full adds every stride up to this one: each conflict degree 1..16 of 32 banks at 4 bytes, and each
#: element size's pattern over the first half warp of banks.
FULL_DENSE_STRIDE = 16


def stride_sweep(device: dict, profile: str) -> list[int]:
    """quick: a spread of strides up to 64; full: every stride up to FULL_DENSE_STRIDE and the spread above.
    Capped so that a warp's 16-byte elements at the stride, padded by one element and offset by one, fit a
    block's shared memory."""
    cap = min(MAX_STRIDE, device["smem_per_block_bytes"] // (LANES * max(ACCESS_BYTES)) - 1)
    strides = [s for s in QUICK_STRIDES if s <= cap] + [cap]
    if profile == "full":
        strides += range(min(cap, FULL_DENSE_STRIDE) + 1)
    return sorted(set(strides))


def layout_params(stride_words: int, layout: str, offset_words: int) -> tuple[int, int]:
    """``(pitch, xor_mask)`` of smem_banks.cu for a layout: lane l reads ``l*pitch + (offset ^ (l & mask))``.

    plain: pitch = stride; pad1: pitch = stride + 1 (the row pitch of a tile padded by one element); xor:
    pitch = stride, column XOR row (a power-of-two stride, the column inside the row)."""
    if layout == "plain":
        return stride_words, 0
    if layout == "pad1":
        return stride_words + 1, 0
    if layout == "xor":
        if stride_words < 1 or stride_words & (stride_words - 1) or not 0 <= offset_words < stride_words:
            raise ValueError(f"xor layout needs a power-of-two stride and an offset inside the row, got "
                             f"stride {stride_words}, offset {offset_words}")
        return stride_words, stride_words - 1
    raise ValueError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")


def lane_elements(pitch: int, offset_words: int, xor_mask: int, lanes: int = LANES) -> np.ndarray:
    """The element each lane loads, as the kernels compute it."""
    lane = np.arange(lanes, dtype=np.int64)
    return lane * pitch + (offset_words ^ (lane & xor_mask))


def batch(access_bytes: int) -> int:
    """Independent loads per batch of the throughput form (smem_banks.cu's BATCH)."""
    return BATCH_BYTES // access_bytes


def loads_per_trip(form: str, access_bytes: int) -> int:
    return CHAIN_UNROLL if form == "latency" else 2 * batch(access_bytes)


def trips_for(seconds_per_trip: float) -> int:
    return int(min(MAX_TRIPS, max(MIN_TRIPS, math.ceil(SAMPLE_S / max(seconds_per_trip, 1e-12)))))


def expected_sink(addresses: np.ndarray, form: str, access_bytes: int, trips: int) -> np.ndarray:
    """What each lane must leave in ``sink``: its address (latency), or the 32-bit sum of every value it
    loaded, each being its address (throughput: a batch before the timed loop, two per trip)."""
    if form == "latency":
        return addresses.astype(np.uint64)
    loads = batch(access_bytes) + trips * loads_per_trip(form, access_bytes)
    return np.array([(loads * int(a)) % 2**32 for a in addresses], dtype=np.uint64)


def measure_banks(ctx, access_bytes: int, stride_words: int, layout: str, offset_words: int, form: str,
                  launch) -> list[Sample]:
    """Time ``launch(elements, pitch, offset, xor_mask, trips, warps) -> (out, sink)`` until stable,
    checking every thread's sink.  Shared by the CuPy and Numba front ends, so both time the same addresses.

    Cycles per warp-wide access = (last warp's clock64 end - first warp's start) / loads of all warps."""
    if access_bytes not in ACCESS_BYTES or form not in FORMS:
        raise ValueError(f"access_bytes must be one of {ACCESS_BYTES} and form one of {FORMS}")
    pitch, xor_mask = layout_params(stride_words, layout, offset_words)
    elements_of_lane = lane_elements(pitch, offset_words, xor_mask)
    elements = int(elements_of_lane.max()) + 1
    if elements * access_bytes > ctx.device["smem_per_block_bytes"]:
        raise ValueError(f"{elements} elements of {access_bytes} B exceed a block's shared memory")
    per_trip, warps = loads_per_trip(form, access_bytes), WARPS[form]

    def run(trips: int) -> tuple[float, float]:
        out, sink = launch(elements, pitch, offset_words, xor_mask, trips, warps)
        addresses = int(out[0]) + elements_of_lane * access_bytes
        expected = np.tile(expected_sink(addresses, form, access_bytes, trips), warps)
        sink = np.asarray(sink, dtype=np.uint64)
        if not np.array_equal(sink, expected):
            thread = int(np.flatnonzero(sink != expected)[0])
            raise RuntimeError(f"smem bank probe sink mismatch ({form}, {access_bytes} B, stride "
                               f"{stride_words}, {layout}): thread {thread} (lane {thread % LANES}) left "
                               f"{int(sink[thread]):#x}, its address says {int(expected[thread]):#x}")
        c0, c1, t0, t1 = np.asarray(out[1:], dtype=np.int64).reshape(warps, 4).T
        return float(c1.max() - c0.min()), float(t1.max() - t0.min())

    _, ns = run(CALIBRATION_TRIPS)
    trips = trips_for(ns * 1e-9 / CALIBRATION_TRIPS)

    def sample(repeat: int) -> list[Sample]:
        cycles, ns = run(trips)
        hz = cycles / ns * 1e9
        return [Sample("cycles_per_access", cycles / (trips * per_trip * warps), "cycles", repeat, hz,
                       "clock64", ctx.throttle_flag(hz))]

    # The calibration launch already ran these loads, and cycles are counted on the SM's own clock: a short
    # warm-up, as the other sweeps of hundreds of configs.
    budget = dataclasses.replace(ctx.budget, warmup_s=min(ctx.budget.warmup_s, STRIDE_WARMUP_S))
    return repeat_until_stable(sample, "cycles_per_access", budget)


def cupy_launcher(access_bytes: int, form: str):
    """``launch(elements, pitch, offset, xor_mask, trips, warps) -> (out, sink)`` for smem_banks.cu."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    bank_kernel = kernel("smem_banks.cu", f"smem_{form}_{access_bytes}")

    def launch(elements: int, pitch: int, offset: int, xor_mask: int, trips: int, warps: int):
        out = cupy.zeros(1 + 4 * warps, dtype=cupy.uint64)
        sink = cupy.zeros(LANES * warps, dtype=cupy.uint32)
        bank_kernel((1,), (LANES * warps,), (np.int32(elements), np.int32(pitch), np.int32(offset),
                                             np.int32(xor_mask), np.uint32(trips), out, sink),
                    shared_mem=elements * access_bytes)
        return out.get(), sink.get()

    return launch


AXES = {"access_bytes": "bytes per lane per load: 4 (LDS), 8 (LDS.64), 16 (LDS.128)",
        "stride_words": "elements between consecutive lanes' addresses (0: all lanes read one element); "
                        "quick: 0..8, 16, 32, 33 and 64; full adds every stride up to 16",
        "offset_words": "elements added to every lane's index (full: 0 and 1; conflicts must not move)",
        "form": "latency (dependent loads) or throughput (independent loads)"}


@probe("smem.banks",
       sweeps={"quick": lambda d: {"access_bytes": list(ACCESS_BYTES), "stride_words": stride_sweep(d, "quick"),
                                   "offset_words": [0], "form": list(FORMS)},
               "full": lambda d: {"access_bytes": list(ACCESS_BYTES), "stride_words": stride_sweep(d, "full"),
                                  "offset_words": [0, 1], "form": list(FORMS)}},
       axes=AXES, quantities=("smem.banks", "smem.bank_width_bytes", "smem.conflict_cycles_per_way",
                                 "smem.conflict_cycles_per_way_throughput"),
       kernels=("smem_banks.cu",))
def smem_banks(ctx, access_bytes: int, stride_words: int, offset_words: int, form: str) -> list[Sample]:
    """Cycles per warp-wide shared-memory load when lane l reads element l*stride + offset."""
    return measure_banks(ctx, access_bytes, stride_words, "plain", offset_words, form,
                         cupy_launcher(access_bytes, form))


@probe("smem.banks_fix",
       sweeps={"quick": lambda d: {"access_bytes": list(ACCESS_BYTES), "stride_words": [LANES],
                                   "layout": list(LAYOUTS), "form": list(FORMS)},
               "full": lambda d: {"access_bytes": list(ACCESS_BYTES), "stride_words": [LANES, 2 * LANES],
                                  "layout": list(LAYOUTS), "form": list(FORMS)}},
       axes={"access_bytes": AXES["access_bytes"],
             "stride_words": "row length of the tile whose column a warp reads: 32 (full adds 64)",
             "layout": "plain, pad1 (row pitch + 1 element) or xor (column XOR row)", "form": AXES["form"]},
       kernels=("smem_banks.cu",))
def smem_banks_fix(ctx, access_bytes: int, stride_words: int, layout: str, form: str) -> list[Sample]:
    """Cycles per warp-wide load of a tile's column, plain, padded by one element, and XOR-swizzled."""
    return measure_banks(ctx, access_bytes, stride_words, layout, 0, form, cupy_launcher(access_bytes, form))
