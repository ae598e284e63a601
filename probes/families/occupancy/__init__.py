"""Throughput against occupancy (lecture §7.4-7.5): HBM and L2 read bandwidth as the loads in
flight per SM are set by resident warps per SM and by ILP (occupancy.cu).

Little's law says a memory system that answers each load in L seconds delivers (loads in flight) x (bytes
per load) / L until it saturates.  Loads in flight per SM = resident warps x ILP, so the sweep crosses
``resident_warps_per_sm`` (1 .. max_threads_per_sm / 32) with ``ilp`` (1, 2, 4, 8 independent loads issued
per thread before any is used) at two load widths: ``load_bytes`` 4 (one 128-byte warp load, the load the
lecture's §7.4 block counts: 7,270 loads of 128 B) and 16 (512-byte warp loads, LDG.E.128, the width that
reaches HBM's peak with the fewest instructions).  ``level`` dram streams a footprint of at least
HBM_FOOTPRINT_L2 x L2 that every launch continues where the last stopped (no tile is read twice within it);
l2 re-reads at most L2_TOUCH_FRACTION x L2 (inside the near partition, as probes/families/bandwidth/__init__.py reasons).

Residency is exact: ``plan_residency`` picks blocks per SM and threads per block, and a dynamic
shared-memory spoiler so large that no more than those blocks fit on an SM; the grid is SMs x blocks per SM
(one wave, every SM holding exactly the intended warps, each warp looping over the footprint).  Before
measuring, the achieved residency is asked of both the occupancy calculator (analysis/occupancy.py, with the
kernel's real register count) and CUDA's occupancy API; both are recorded with every sample, and a config
where either disagrees with the intended residency is refused.  Each launch is event-timed, its sum checked
against the host's, and a bandwidth above the level's physical bound flagged ``invalid``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from gpuatlas.analysis.occupancy import allocation, occupancy
from gpuatlas.probes.kit.harness import calibrate
from gpuatlas.probes.kit.samplers import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, STRIDE_MAX_REPEATS, STRIDE_WARMUP_S,
                                          Filled, Sink, bandwidth_bound, bandwidth_samples, sum32)
from gpuatlas.probes.registry import probe

LANES = 32
LOAD_BYTES = (4, 16)
ILPS = (1, 2, 4, 8)
LEVELS = ("dram", "l2")
FULL_WARPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # about two per doubling
QUICK_WARPS = (1, 4, 16, 64)
QUICK_ILPS = (1, 4)
#: Registers per thread of each stream kernel, (load bytes, ILP) -> count, as ptxas builds it for each target
#: (tests/test_occupancy_probe.py and tests/test_new_gpu.py compile occupancy.cu and check them): the sweep
#: leaves out residencies a kernel's registers cannot hold.  On the GPU the probe uses the loaded kernel's own
#: count, and refuses a config it cannot hold.
REGISTERS = {
    (8, 0): {(4, 1): 18, (4, 2): 18, (4, 4): 18, (4, 8): 20, (16, 1): 18, (16, 2): 20, (16, 4): 28, (16, 8): 44},
    (8, 9): {(4, 1): 18, (4, 2): 17, (4, 4): 17, (4, 8): 20, (16, 1): 17, (16, 2): 20, (16, 4): 28, (16, 8): 44},
    (9, 0): {(4, 1): 18, (4, 2): 18, (4, 4): 19, (4, 8): 22, (16, 1): 18, (16, 2): 22, (16, 4): 29, (16, 8): 45},
    (10, 0): {(4, 1): 18, (4, 2): 18, (4, 4): 18, (4, 8): 18, (16, 1): 18, (16, 2): 21, (16, 4): 28, (16, 8): 44},
    (12, 0): {(4, 1): 18, (4, 2): 18, (4, 4): 18, (4, 8): 18, (16, 1): 18, (16, 2): 22, (16, 4): 30, (16, 8): 40},
}
#: A launch lasts about LAUNCH_S; a sample at least SAMPLE_S (short: the sweep has hundreds of configs).
LAUNCH_S, SAMPLE_S = 1e-3, 1e-3


def kernel_name(load_bytes: int, ilp: int) -> str:
    if load_bytes not in LOAD_BYTES or ilp not in ILPS:
        raise ValueError(f"no stream kernel for {load_bytes}-byte loads at ILP {ilp}")
    return f"stream_{load_bytes}b_ilp{ilp}"


# -- residency planning (pure: the CPU tests check it against the calculator on device dicts) ---------------

@dataclasses.dataclass(frozen=True)
class Residency:
    """How to launch so that each SM holds exactly ``resident_warps_per_sm`` warps."""

    resident_warps_per_sm: int
    blocks_per_sm: int
    threads_per_block: int
    dynamic_smem_bytes: int  # the spoiler: no more than blocks_per_sm blocks fit in an SM's shared memory


def kernel_registers(device: dict, load_bytes: int, ilp: int) -> int:
    """Registers per thread of a stream kernel built for this device: its compute capability's row of
    REGISTERS, else the nearest listed one below it (the build a newer minor version most resembles)."""
    cc = tuple(int(x) for x in str(device["compute_capability"]).split("."))
    return REGISTERS[max((k for k in REGISTERS if k <= cc), default=min(REGISTERS))][(load_bytes, ilp)]


def max_warps_per_sm(device: dict) -> int:
    return device["max_threads_per_sm"] // device.get("warp_size", LANES)


def spoiler_bytes(device: dict, blocks_per_sm: int, static_smem_bytes: int = 0) -> int:
    """Dynamic shared memory per block such that exactly ``blocks_per_sm`` blocks fit in an SM: each
    block's allocation (rounded up to the allocation unit, plus the per-block reserve) is the largest that
    still lets that many fit, and so more than 1/(blocks + 1) of the SM."""
    unit, reserved = allocation(device)[1:]
    share = device["smem_per_sm_bytes"] // blocks_per_sm // unit * unit
    optin = device.get("smem_per_block_optin_bytes", device["smem_per_sm_bytes"])
    return max(0, min(share - reserved - static_smem_bytes, optin - static_smem_bytes))


def plan_residency(device: dict, resident_warps_per_sm: int, registers_per_thread: int,
                   static_smem_bytes: int = 0) -> Residency:
    """The fewest blocks per SM that divide the warps into blocks the device allows, with the spoiler that
    caps residency at them; ValueError if no such launch holds exactly that many warps (the calculator's
    answer, with the kernel's registers, must be the plan)."""
    warp = device.get("warp_size", LANES)
    max_block_warps = device.get("max_threads_per_block", 1024) // warp
    if not 1 <= resident_warps_per_sm <= max_warps_per_sm(device):
        raise ValueError(f"{resident_warps_per_sm} warps per SM: this device holds 1..{max_warps_per_sm(device)}")
    for blocks in range(1, device["max_blocks_per_sm"] + 1):
        if resident_warps_per_sm % blocks or resident_warps_per_sm // blocks > max_block_warps:
            continue
        plan = Residency(resident_warps_per_sm, blocks, resident_warps_per_sm // blocks * warp,
                         spoiler_bytes(device, blocks, static_smem_bytes))
        calc = occupancy(device, registers_per_thread, plan.threads_per_block,
                         plan.dynamic_smem_bytes + static_smem_bytes)
        if calc.warps_per_sm != resident_warps_per_sm:
            raise ValueError(f"{resident_warps_per_sm} warps per SM as {blocks} blocks of "
                             f"{plan.threads_per_block} threads: the calculator allows {calc.blocks_per_sm} "
                             f"blocks ({calc.binding} bind) at {registers_per_thread} registers per thread")
        return plan
    raise ValueError(f"{resident_warps_per_sm} warps per SM cannot be split into at most "
                     f"{device['max_blocks_per_sm']} equal blocks of at most {max_block_warps} warps")


def feasible(device: dict, resident_warps_per_sm: int, registers_per_thread: int) -> bool:
    try:
        plan_residency(device, resident_warps_per_sm, registers_per_thread)
    except ValueError:
        return False
    return True


def sweep(warps, ilps, device: dict) -> list[dict]:
    """Configs of the profile this device can hold: warps above its maximum, or beyond what a kernel's
    registers allow, are left out."""
    return [{"resident_warps_per_sm": w, "ilp": i, "load_bytes": b, "level": level}
            for level in LEVELS for b in LOAD_BYTES for i in ilps for w in warps
            if w <= max_warps_per_sm(device) and feasible(device, w, kernel_registers(device, b, i))]


# -- footprint and checksum accounting (pure) ---------------------------------------------------------------

def tile_bytes(load_bytes: int, ilp: int) -> int:
    """One trip of one warp: ``ilp`` warp loads of 32 lanes x ``load_bytes``, contiguous."""
    return ilp * LANES * load_bytes


def footprint_tiles(device: dict, level: str, load_bytes: int, ilp: int) -> int:
    """dram: at least HBM_FOOTPRINT_L2 x L2 (streamed, never re-read within it); l2: at most
    L2_TOUCH_FRACTION x L2 (re-read, resident)."""
    tile = tile_bytes(load_bytes, ilp)
    if level == "dram":
        tiles = math.ceil(HBM_FOOTPRINT_L2 * device["l2_bytes"] / tile)
    elif level == "l2":
        tiles = max(1, int(L2_TOUCH_FRACTION * device["l2_bytes"]) // tile)
    else:
        raise ValueError(f"unknown level {level!r}: choose one of {', '.join(LEVELS)}")
    if tiles >= 2**31:
        raise ValueError("the kernels index tiles with 32-bit integers")
    return tiles


def tiles_read(first: int, tiles: int, warps: int, trips: int) -> tuple[int, list[tuple[int, int]]]:
    """What one launch reads: every tile ``q`` times, plus the ``(start, count)`` ranges of tiles read once
    more -- tiles first .. first + warps x trips - 1, modulo ``tiles`` (at most two ranges)."""
    q, r = divmod(warps * trips, tiles)
    head = min(r, tiles - first)
    ranges = [(first, head)] + ([(0, r - head)] if r > head else [])
    return q, [x for x in ranges if x[1]]


# -- the GPU side -------------------------------------------------------------------------------------------

class _CursorSink(Sink):
    """A sink whose launches each read a different range of tiles: checked against the sum of their sums."""

    def __init__(self, what: str):
        super().__init__(what)
        self.firsts: list[int] = []

    def reset(self) -> None:
        super().reset()
        self.firsts = []

    def check_sum(self, want: int) -> None:
        launches, self.launches = self.launches, 1
        try:
            self.check(want % 2**32)
        finally:
            self.launches = launches


def _api_blocks_per_sm(func, threads_per_block: int, dynamic_smem_bytes: int) -> int:
    import cupy

    return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        getattr(func, "kernel", func).ptr, threads_per_block, dynamic_smem_bytes))


def measure_throughput(ctx, resident_warps_per_sm: int, ilp: int, load_bytes: int, level: str) -> list:
    """Bandwidth (B/s) of the stream kernel with exactly ``resident_warps_per_sm`` warps on every SM."""
    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    func = kernel("occupancy.cu", kernel_name(load_bytes, ilp))
    registers, static_smem = int(func.num_regs), int(func.shared_size_bytes)
    plan = plan_residency(device, resident_warps_per_sm, registers, static_smem)
    func.max_dynamic_shared_size_bytes = plan.dynamic_smem_bytes
    func.preferred_shared_memory_carveout = 100  # all of the unified L1/shared array as shared memory
    warps_per_block = plan.threads_per_block // LANES
    api_warps = _api_blocks_per_sm(func, plan.threads_per_block, plan.dynamic_smem_bytes) * warps_per_block
    calc_warps = occupancy(device, registers, plan.threads_per_block,
                           plan.dynamic_smem_bytes + static_smem).warps_per_sm
    if api_warps != resident_warps_per_sm or calc_warps != resident_warps_per_sm:
        raise RuntimeError(f"{kernel_name(load_bytes, ilp)}: intended {resident_warps_per_sm} resident warps "
                           f"per SM, the occupancy API grants {api_warps}, the calculator {calc_warps}: "
                           "refusing to measure")

    blocks = device["sm_count"] * plan.blocks_per_sm
    warps = blocks * warps_per_block
    tiles = footprint_tiles(device, level, load_bytes, ilp)
    tile = tile_bytes(load_bytes, ilp)
    words = Filled.at_least(tiles * tile, device)
    total = sum32(words, 0, tiles * tile // 4)
    sink = _CursorSink(f"{kernel_name(load_bytes, ilp)} at {resident_warps_per_sm} warps/SM ({level})")
    cursor = {"first": 0}
    range_sums: dict[tuple[int, int], int] = {}

    def range_sum(start: int, count: int) -> int:
        if (start, count) not in range_sums:
            range_sums[(start, count)] = sum32(words, start * tile, count * tile // 4)
        return range_sums[(start, count)]

    def run(trips: int):
        def launch():
            func((blocks,), (plan.threads_per_block,),
                 (words, np.uint32(tiles), np.uint32(cursor["first"]), np.int64(trips), sink.array),
                 shared_mem=plan.dynamic_smem_bytes)
            sink.launches += 1
            sink.firsts.append(cursor["first"])
            cursor["first"] = (cursor["first"] + warps * trips) % tiles
        return launch

    def verify(trips: int) -> None:
        want = 0
        for first in sink.firsts:
            q, ranges = tiles_read(first, tiles, warps, trips)
            want += q * total + sum(range_sum(s, c) for s, c in ranges)
        sink.check_sum(want)

    trips, _ = calibrate(run, 1, LAUNCH_S)
    extra = (("resident_warps_per_sm_api", float(api_warps), "1"),
             ("resident_warps_per_sm_calc", float(calc_warps), "1"),
             ("registers_per_thread", float(registers), "1"),
             ("blocks_per_sm", float(plan.blocks_per_sm), "1"),
             ("dynamic_smem_bytes", float(plan.dynamic_smem_bytes), "B"),
             ("footprint_bytes", float(tiles * tile), "B"),
             ("bytes_in_flight_per_sm", float(resident_warps_per_sm * LANES * ilp * load_bytes), "B"))
    budget = dataclasses.replace(ctx.budget, warmup_s=min(ctx.budget.warmup_s, STRIDE_WARMUP_S),
                                 max_repeats=min(ctx.budget.max_repeats, STRIDE_MAX_REPEATS))
    return bandwidth_samples(ctx, run(trips), sink.reset, lambda: verify(trips), float(warps * trips * tile),
                             bound=bandwidth_bound(device, level), sample_s=SAMPLE_S, budget=budget, extra=extra)


AXES = {
    "resident_warps_per_sm": "warps resident on every SM (full: 1, 2, 3, 4, 6, 8, 12, .., 48, 64; quick: 1, 4, 16, "
                             "64), up to max_threads_per_sm / 32 and what the kernel's registers allow",
    "ilp": "independent loads each thread issues before using any (full: 1, 2, 4, 8; quick: 1, 4)",
    "load_bytes": "bytes per lane per load: 4 (a 128-byte warp load, the lecture's) or 16 (LDG.E.128)",
    "level": f"dram (a stream over >= {HBM_FOOTPRINT_L2}x L2, no tile re-read within it) or l2 (<= L2/4 re-read); both "
             "ld.global.cg",
}


@probe("occupancy.throughput",
       sweeps={"quick": lambda d: sweep(QUICK_WARPS, QUICK_ILPS, d), "full": lambda d: sweep(FULL_WARPS, ILPS, d)},
       axes=AXES,
       quantities=("littles.bytes_in_flight", "littles.loaded_latency_s", "littles.loaded_latency_cycles",
                   "littles.peak_bandwidth_bytes_per_s", "occupancy.warps_to_saturate_dram_ilp1",
                   "occupancy.warps_to_saturate_dram_ilp1_16b", "littles.l2_bytes_in_flight",
                   "littles.l2_loaded_latency_s", "occupancy.full_occupancy_dram_bandwidth_bytes_per_s",
                   "occupancy.full_occupancy_fraction_of_dram_read"),
       kernels=("occupancy.cu", "bandwidth.cu"))
def occupancy_throughput(ctx, resident_warps_per_sm: int, ilp: int, load_bytes: int, level: str) -> list:
    """Read bandwidth (B/s) of HBM or L2 with exactly ``resident_warps_per_sm`` warps per SM, each thread
    keeping ``ilp`` loads of ``load_bytes`` in flight: Little's law's concurrency, set by occupancy and ILP."""
    return measure_throughput(ctx, int(resident_warps_per_sm), int(ilp), int(load_bytes), level)
