"""Misses in flight per SM (mshr.cu): one block on one chosen SM keeps n distinct lines in flight, every one an
L1 miss, and counts lines per cycle.  By Little's law lines per cycle = n / latency while the misses are
served in parallel; once a per-SM limit binds they stay flat and the latency grows as n / plateau.  The knee
n* = plateau x unloaded latency is the number of misses the SM keeps in flight: the L1's miss registers
(MSHRs) for plain loads, whatever bounds L2-only requests for ld.global.cg.

n = warps x loads per thread x lines per warp load, swept over warps 1..32 (one block; an axis) and 1, 2, 4
or 8 independent loads per thread (within a config; several splits per n: a per-warp limit would part them).
What a line costs is an axis: ``sectors_per_line`` 1 (each lane its own line, one 32-byte sector of it) or 4
(8 lanes share a line, every sector read).  Two sources with different latencies: ``l2`` (a footprint of
L2_TOUCH_FRACTION x L2, resident, read once per launch) and ``dram`` (a stream over HBM_FOOTPRINT_L2 x L2,
the L2 flushed first).  A count keeps its knee n* across the sources, its plateau falling as 1 / latency; a
rate (a port's bytes, a per-line processing rate) keeps its plateau instead; analysis/mshr.py tells them
apart, and from the sector counts whether the registers hold lines or sectors.

Placement is sampled: each (warps, loads) point runs on a few SMs spread over the SM ids (the launch is a
grid of 2 x SMs blocks; only a block on the target SM measures).  Every launch's loaded words are summed and
checked against the host's sum; lines per cycle above the SM's physical byte bound are flagged invalid.
"""
from __future__ import annotations

import math

import numpy as np

from gpuatlas.probes.kit.harness import Sample, Sink
from gpuatlas.probes.kit.samplers import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, MAX_BYTES_PER_CLK_SM, Filled, sum32)
from gpuatlas.probes.registry import probe

LANES, LINE, SECTOR = 32, 128, 32
LOADS_PER_THREAD = (1, 2, 4, 8)  # the kernels' template instances
FULL_WARPS, QUICK_WARPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32), (1, 4, 16, 32)
#: SMs each point runs on (spread over the SM ids), and launches per point and SM.
PLACEMENTS, REPEATS = 4, 3
#: Lines one launch reads in its timed passes (at least MIN_PASSES passes), after WARM_PASSES untimed ones.
LINES_PER_LAUNCH, MIN_PASSES, WARM_PASSES = 16384, 4, 1
#: Launches retried when no block of the grid landed on the target SM; seconds of one SM spinning before a
#: config (the clock up from idle: the config's clock is checked against the throttle bound).
RETRIES, WARMUP_S = 8, 5e-3


def configs(device: dict, quick: bool = False) -> list[dict]:
    """Plain and L2-only loads, one sector per line, from both sources; full also four sectors per line from
    the L2 (the byte-bandwidth control).  Warps up to one block's (quick: four of them)."""
    kinds = [(load, source, 1) for load in ("plain", "cg") for source in ("l2", "dram")
             if not (quick and load == "cg" and source == "dram")]
    if not quick:
        kinds += [(load, "l2", 4) for load in ("plain", "cg")]
    top = device.get("max_threads_per_block", 1024) // LANES
    return [{"load": load, "source": source, "sectors_per_line": s, "warps": w} for load, source, s in kinds
            for w in (QUICK_WARPS if quick else FULL_WARPS) if w <= top]


def lines_per_warp_load(sectors_per_line: int) -> int:
    """1 sector: each lane its own line (32); 4: 8 lanes x 16 bytes fill a line (4 lines)."""
    if sectors_per_line not in (1, 4):
        raise ValueError(f"sectors_per_line={sectors_per_line}: 1 or 4")
    return LANES if sectors_per_line == 1 else LANES // 8


def footprint_lines(device: dict, source: str) -> int:
    """l2: L2_TOUCH_FRACTION x L2 (far past any L1, resident in the L2); dram: HBM_FOOTPRINT_L2 x L2."""
    if source == "l2":
        lines = int(L2_TOUCH_FRACTION * device["l2_bytes"]) // LINE
    elif source == "dram":
        lines = HBM_FOOTPRINT_L2 * device["l2_bytes"] // LINE
    else:
        raise ValueError(f"unknown source {source!r}: l2 or dram")
    if lines >= 2**31:
        raise ValueError("the kernels index lines with 32-bit integers")
    return lines


def passes_for(lines_in_flight: int, footprint: int) -> int:
    """Timed passes of one launch: about LINES_PER_LAUNCH lines, at least MIN_PASSES, and every line of the
    launch (warm-up included) distinct within the footprint."""
    passes = max(MIN_PASSES, math.ceil(LINES_PER_LAUNCH / lines_in_flight))
    if (passes + WARM_PASSES) * lines_in_flight > footprint:
        raise ValueError(f"{lines_in_flight} lines in flight x {passes + WARM_PASSES} passes exceed the "
                         f"footprint of {footprint} lines")
    return passes


def spread(present: list[int], count: int, offset: int) -> list[int]:
    """``count`` SM ids evenly spaced over the sorted ids present, starting at ``offset``."""
    k = min(count, len(present))
    return [present[(offset + i * len(present) // k) % len(present)] for i in range(k)]


def lines_read(first: int, count: int, footprint: int) -> list[tuple[int, int]]:
    """The (start, count) line ranges a launch reads: ``count`` lines from ``first``, mod ``footprint``."""
    head = min(count, footprint - first)
    return [(first, head)] + ([(0, count - head)] if count > head else [])


def _sm_ids(device: dict) -> list[int]:
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    blocks = 4 * device["sm_count"]
    ids = cupy.zeros(blocks, dtype=cupy.uint32)
    kernel("mshr.cu", "mshr_sm_ids")((blocks,), (LANES,), (ids,))
    return sorted(set(int(i) for i in ids.get()))


def measure(ctx, load: str, source: str, sectors_per_line: int, warps: int) -> list[Sample]:
    import cupy

    from gpuatlas.probes.kit.chain import flush_l2
    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    per_warp = lines_per_warp_load(sectors_per_line)
    footprint = footprint_lines(device, source)
    words = Filled.at_least(footprint * LINE, device)
    present = _sm_ids(device)
    targets = spread(present, PLACEMENTS, int(ctx.rng(285, warps).integers(len(present))))
    bytes_per_line = SECTOR * sectors_per_line
    sink = Sink(f"geometry.mshr {load} {source} s{sectors_per_line}")
    claim = cupy.zeros(1, dtype=cupy.uint32)
    out = cupy.zeros(3, dtype=cupy.uint64)
    state = {"first": int(ctx.rng(286, warps).integers(footprint)), "ticket": 0}

    def range_sum(start: int, count: int) -> int:
        if sectors_per_line == 1:  # word 0 of each line
            return sum32(words, start * LINE, count, pitch_bytes=LINE)
        return sum32(words, start * LINE, count * LINE // 4)

    def launch(func, n: int, passes: int, target: int) -> tuple[int, int]:
        """One launch on SM ``target``: (cycles, ns) of its timed passes; retried where no block landed there."""
        for _ in range(RETRIES):
            out.fill(np.uint64(2**64 - 1))
            func((2 * device["sm_count"],), (warps * LANES,),
                 (words, np.uint32(footprint), np.uint32(state["first"]), np.int32(WARM_PASSES),
                  np.int32(passes), np.uint32(target), np.uint32(state["ticket"]), claim, sink.array, out))
            cycles, ns, sm = (int(x) for x in out.get())
            if sm == target:
                break
        else:
            raise RuntimeError(f"no block of {RETRIES} launches ran on SM {target}")
        if int(claim.get()[0]) != state["ticket"] + 1:
            raise RuntimeError(f"SM {target}: the launch's claim did not advance once (two blocks measured?)")
        state["ticket"] += 1
        count = (WARM_PASSES + passes) * n
        for start, c in lines_read(state["first"], count, footprint):
            sink.add(range_sum(start, c))
        state["first"] = (state["first"] + count) % footprint
        return cycles, ns

    ctx.sm_clock(spin_s=WARMUP_S)
    if source == "dram":
        flush_l2(device)
    else:
        range_sum(0, footprint)  # read the footprint once: L2-resident from here on
    sink.reset()
    rows, repeat = [], 0
    for loads in LOADS_PER_THREAD:
        func = kernel("mshr.cu", f"mshr_{load}_s{sectors_per_line}_l{loads}")
        n = warps * loads * per_warp
        passes = passes_for(n, footprint)
        launch(func, n, passes, targets[0])  # untimed: the kernel's first launch
        for _ in range(REPEATS):
            for target in targets:
                cycles, ns = launch(func, n, passes, target)
                rows.append((warps, loads, n, passes, target, cycles, ns, repeat))
                repeat += 1
        sink.check_added()
    return _samples(ctx, rows, bytes_per_line, footprint)


def _samples(ctx, rows: list[tuple], bytes_per_line: int, footprint: int) -> list[Sample]:
    """Per launch: lines per cycle, cycles per pass and the point's coordinates (matched by ``repeat``).  The
    clock is the config's (every launch's cycles over every launch's ns: one launch is too short for the
    globaltimer); above MAX_BYTES_PER_CLK_SM bytes per cycle a launch is flagged invalid."""
    cycles_all = sum(r[5] for r in rows)
    ns_all = sum(r[6] for r in rows)
    hz = cycles_all / ns_all * 1e9 if ns_all else None
    clock_flag = ctx.throttle_flag(hz)
    samples = []
    for warps, loads, n, passes, sm, cycles, ns, repeat in rows:
        rate = n * passes / cycles if cycles else math.inf
        flag = clock_flag or ("invalid" if rate * bytes_per_line > MAX_BYTES_PER_CLK_SM else "")
        samples += [Sample("lines_per_clk", rate, "lines/cycle", repeat, hz, "clock64", flag),
                    Sample("pass_cycles", cycles / passes, "cycles", repeat, hz, "clock64", flag)]
        samples += [Sample(metric, float(value), "1", repeat, hz, "config", flag)
                    for metric, value in (("lines_in_flight", n), ("warps", warps), ("loads_per_thread", loads),
                                          ("smid", sm))]
    return samples + [Sample("bytes_per_line", float(bytes_per_line), "B", 0, hz, "config"),
                      Sample("footprint_bytes", float(footprint * LINE), "B", 0, hz, "config")]


AXES = {"load": "plain (ld.global, through the L1: its miss registers) or cg (ld.global.cg, L2 only)",
        "source": "l2 (L2_TOUCH_FRACTION x L2, resident) or dram (a stream over HBM_FOOTPRINT_L2 x L2)",
        "sectors_per_line": "1 (each lane its own line, 32 B of it) or 4 (8 lanes fill a line; full only, l2)",
        "warps": "warps of the one measuring block (full: 1, 2, 3, 4, 6, 8, 12, 16, 24, 32; quick: 1, 4, 16, 32), "
                 "each thread issuing 1, 2, 4 and 8 loads per pass in turn"}


@probe("geometry.mshr", sweeps={"quick": lambda d: configs(d, quick=True), "full": configs}, axes=AXES,
       quantities=("l1.mshr_per_sm", "l1.miss_lines_per_clk_sm", "l2.requests_in_flight_per_sm"),
       kernels=("mshr.cu",))
def geometry_mshr(ctx, load: str, source: str, sectors_per_line: int, warps: int) -> list[Sample]:
    """Lines per cycle and cycles per pass of one block of ``warps`` warps on one SM keeping warps x loads x
    lines-per-warp-load distinct L1 misses in flight, for each number of loads per thread, on a few SMs."""
    if load not in ("plain", "cg"):
        raise ValueError(f"unknown load {load!r}: plain or cg")
    if not 1 <= int(warps) <= ctx.device.get("max_threads_per_block", 1024) // LANES:
        raise ValueError(f"warps={warps}: one block holds 1..{ctx.device.get('max_threads_per_block', 1024) // LANES}")
    return measure(ctx, load, source, int(sectors_per_line), int(warps))
