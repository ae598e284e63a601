"""The execution chapter's dependent chains of one warp or thread (CuPy RawModule, execution.cu): tensor
instruction latency, global atomics and block barriers.

* ``exec.mma_latency`` -- cycles per mma.sync (bf16, fp16, tf32, int8, fp64) in one warp's dependent
  accumulator chain; every accumulator element must come out exactly steps x K (operands all ones).
* ``exec.atomics`` -- global atom/red add on int32, fp32, fp64: one thread's dependent chain (each add's
  operand the previous return; the host replays the recurrence exactly), and the adds per second of a full
  grid on one address, one per warp or one per thread (every word checked against the adds it received).
* ``exec.sync`` -- cycles per __syncthreads of one block of 32 .. the largest block's threads (every thread's
  barriers counted).

Latencies are clock64 cycles of 2T trips less T trips over the steps between (the clock reads, the operand
loads and the final store cancel); a latency under one cycle is flagged ``invalid``.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.chains import (add_chain, atomic_probe, atomic_quantities, chain_latency,
                                        chain_latency_samples, config_budget, contended_words, kernel_file,
                                        ones_added, ones_chain)
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import EventTimer, Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import PLACEMENTS, kernel_clock_hz, random_lines
from gpuatlas.probes.registry import probe

LANES = 32
#: execution.cu's block size of the full-grid kernels.
THR_THREADS = 256
LAUNCH_S, SAMPLE_S, MAX_TRIPS = 1e-3, 1e-3, 2**31 - 1
#: Longest a config repeats for stability (the chapter is many short configs) and its warm-up.
RATE_TIME_S, WARMUP_S = 0.05, 0.005

_kernel = kernel_file("execution.cu")


# -- exec.mma_latency ---------------------------------------------------------------------------------------

#: dtype -> (the word every A and B register holds: 1 in every element, the shape's K, accumulator type).
MMA_ONES = {"bf16": (0x3F803F80, 16, np.float32), "fp16": (0x3C003C00, 16, np.float32),
            "tf32": (0x3F800000, 8, np.float32), "int8": (0x01010101, 32, np.int32), "fp64": (1.0, 4, np.float64)}
MMA_UNROLL, MMA_TRIPS = 32, 16


@probe("exec.mma_latency",
       sweeps={"quick": lambda d: {"dtype": list(MMA_ONES)}, "full": lambda d: {"dtype": list(MMA_ONES)}},
       axes={"dtype": "bf16, fp16 (m16n8k16), tf32 (m16n8k8), int8 (m16n8k32, s32 accumulate), fp64 (m8n8k4)"},
       quantities=tuple(f"tc.{d}.mma_sync_latency_cycles" for d in MMA_ONES), kernels=("execution.cu",),
       min_cc=(8, 0))
def exec_mma_latency(ctx, dtype: str) -> list[Sample]:
    """Cycles per mma.sync in one warp's dependent accumulator chain."""
    import cupy

    if dtype not in MMA_ONES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(MMA_ONES)}")
    word, k, acc = MMA_ONES[dtype]
    func = _kernel(f"mma_lat_{dtype}")
    operand = np.float64(word) if dtype == "fp64" else np.uint32(word)
    per_lane = 2 if dtype == "fp64" else 4
    out = cupy.zeros(LANES * per_lane, dtype=acc)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    chain = ones_chain(lambda trips: func((1,), (LANES,), (operand, operand, np.int32(trips), out, cycles)),
                       out, cycles, MMA_UNROLL, k, f"mma_lat_{dtype}")

    return chain_latency_samples(ctx, chain, MMA_TRIPS, MMA_UNROLL, budget=config_budget(ctx, RATE_TIME_S, WARMUP_S),
                                 power_limited=True)


# -- exec.atomics -------------------------------------------------------------------------------------------

ATOMIC_TYPES = {"i32": np.uint32, "f32": np.float32, "f64": np.float64}
ATOMIC_MODES = ("latency", "same", "warp", "distinct")
ATOM_UNROLL, ATOM_TRIPS = 32, 4
#: mode -> the red kernel's addressing: one address for the grid, one per warp, one per thread.
RED_MODE = {"same": 0, "warp": 1, "distinct": 2}
#: The latency chains' placements' salt (beside the run's seed and the dtype).
ATOMIC_SALT = 0xA70


def atomic_chain(dtype: str, steps: int) -> tuple:
    """(x, memory) after ``steps`` of x <- atom.add(p, x) from x = 1, p = 0, in ``dtype``'s arithmetic."""
    return add_chain(ATOMIC_TYPES[dtype], steps)


def red_expected(dtype: str, adds: int):
    """A word after ``adds`` red.add of 1 (``ones_added`` in ``dtype``'s type)."""
    return ones_added(ATOMIC_TYPES[dtype], adds)


@probe("exec.atomics",
       sweeps={"quick": lambda d: {"dtype": list(ATOMIC_TYPES), "mode": list(ATOMIC_MODES)},
               "full": lambda d: {"dtype": list(ATOMIC_TYPES), "mode": list(ATOMIC_MODES)}},
       axes={"dtype": "i32, f32, f64 (atom/red.global.add)",
             "mode": "latency (one thread's dependent chain) or throughput with every thread of a full grid "
                     "on one address (same), one per warp (warp) or its own (distinct)"},
       quantities=atomic_quantities("atomic.global.add", ATOMIC_TYPES,
                                    ("latency_near_cycles", "latency_far_cycles", "ops_per_s_same",
                                     "ops_per_s_warp", "ops_per_s_distinct")),
       kernels=("execution.cu",))
def exec_atomics(ctx, dtype: str, mode: str) -> list[Sample]:
    """Global atomic add: dependent-chain latency, or throughput against contention."""
    return atomic_probe(ctx, ATOMIC_TYPES, ATOMIC_MODES, dtype, mode, "atomics", _atomic_latency, _red_throughput)


def _red_throughput(ctx, dtype: str, mode: str, kind) -> list[Sample]:
    """Adds per second of every thread of a full grid issuing red.add of 1 to the mode's words."""
    import cupy

    func = _kernel(f"red_{dtype}")
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, THR_THREADS)
    threads = blocks * THR_THREADS
    words = contended_words(mode, threads, LANES)
    memory = cupy.zeros(words, dtype=kind)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)
    launches = [0]

    def run(reps: int):
        def launch():
            func((blocks,), (THR_THREADS,), (memory, kind(1), np.int32(RED_MODE[mode]), np.int32(reps), clocks))
            launches[0] += reps
        return launch

    reps, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    memory.fill(0)
    launches[0] = 0
    timer = EventTimer(run(reps), max(ctx.budget.min_sample_s, SAMPLE_S))

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch()
        hz = kernel_clock_hz(clocks.get())
        rate = threads * reps / seconds
        return [Sample("ops_per_s", rate, "1/s", repeat, hz, "cuda_event", ctx.throttle_flag(hz)),
                Sample("ops_per_clk", rate / hz, "1/cycle", repeat, hz, "cuda_event", ctx.throttle_flag(hz))]

    samples = repeat_until_stable(sample, "ops_per_s", config_budget(ctx, RATE_TIME_S, WARMUP_S))
    per_word = launches[0] * threads // words  # adds of 1 every word received
    got = memory.get()
    if not np.all(got == red_expected(dtype, per_word)):
        raise RuntimeError(f"red_{dtype} ({mode}): words hold {np.unique(got)[:4]}, expected "
                           f"{red_expected(dtype, per_word)} after {per_word} adds of 1 each")
    return samples


def _atomic_latency(ctx, dtype: str, kind) -> list[Sample]:
    """One thread's dependent atom.add chain at PLACEMENTS random lines, one sample each: the address's home
    L2 partition (near the SM or across the chip) sets the latency, so a sample records where it stood."""
    import cupy

    func = _kernel(f"atom_lat_{dtype}")
    offsets = random_lines(ctx, PLACEMENTS, ATOMIC_SALT, list(ATOMIC_TYPES).index(dtype))
    span = cupy.zeros(int(offsets.max()) // np.dtype(kind).itemsize + 1, dtype=kind)
    out = cupy.zeros(1, dtype=kind)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(memory, trips: int) -> float:
        memory.fill(0)
        func((1,), (1,), (memory, kind(1), np.int32(trips), out, cycles))
        want = atomic_chain(dtype, trips * ATOM_UNROLL)
        got = (out.get()[0], memory.get()[0])
        if not all(g == w for g, w in zip(got, want)):
            raise RuntimeError(f"atom_lat_{dtype}: returned and stored {got}, the recurrence gives {want}")
        return float(cycles.get()[0])

    samples = []
    for placement, offset in enumerate(offsets):
        memory = span[int(offset) // np.dtype(kind).itemsize:][:1]
        latency = chain_latency(ctx, lambda trips: chain(memory, trips), ATOM_TRIPS, ATOM_UNROLL, placement)
        samples += [latency, Sample("address_offset", float(offset), "B", placement, latency.sm_clock_hz, "config")]
    return samples


# -- exec.sync ----------------------------------------------------------------------------------------------

SYNC_UNROLL, SYNC_TRIPS = 16, 16


def sync_threads(device: dict) -> list[int]:
    """Block sizes from one warp to the largest block, doubling."""
    sizes, n = [], LANES
    while n <= device["max_threads_per_block"]:
        sizes.append(n)
        n *= 2
    return sizes


@probe("exec.sync", sweeps={"quick": lambda d: {"threads": sync_threads(d)},
                            "full": lambda d: {"threads": sync_threads(d)}},
       axes={"threads": "threads of the one block: 32, 64, ... up to the largest block"},
       quantities=("sync.syncthreads_cycles_one_warp", "sync.syncthreads_cycles"), kernels=("execution.cu",))
def exec_sync(ctx, threads: int) -> list[Sample]:
    """Cycles per __syncthreads (BAR.SYNC) of one block, against its size."""
    import cupy

    threads = int(threads)
    if threads not in sync_threads(ctx.device):
        raise ValueError(f"bad block size {threads}: choose one of {sync_threads(ctx.device)}")
    func = _kernel("sync_lat")
    passed = cupy.zeros(1, dtype=cupy.uint32)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(trips: int) -> float:
        func((1,), (threads,), (np.int32(trips), passed, cycles))
        if int(passed.get()[0]) != threads * trips * SYNC_UNROLL:
            raise RuntimeError(f"sync_lat: {int(passed.get()[0])} barrier passes counted, expected "
                               f"{threads * trips * SYNC_UNROLL}")
        return float(cycles.get()[0])

    return chain_latency_samples(ctx, chain, SYNC_TRIPS, SYNC_UNROLL, budget=config_budget(ctx, RATE_TIME_S, WARMUP_S))
