"""Shared-memory atomic add (CuPy RawModule, smem_atomics.cu): ``exec.smem_atomics``.

* latency -- one thread's dependent chain of atom.shared.add at one word (each add's operand the previous
  return; the host replays the recurrence exactly): clock64 cycles of 2T trips less T trips, per atomic.
* same / warp / distinct -- one block of the largest block's threads (up to ATOMS_WORDS) on one SM, every
  thread issuing red.shared.add of 1 (ATOMS_THR_UNROLL a trip) to one word for the block, one per warp or its
  own: adds per clock of that SM, timed in-kernel (clock64 and %globaltimer of the block's loop, between
  barriers).  Every word is checked against the adds it received.

int32 is one native instruction (ATOMS.ADD); fp32 is a compare-and-swap loop on sm_90 (LDS, FADD,
ATOMS.CAST.SPIN, retry), so its figures are that loop's; fp64 (ATOMS.CAST.SPIN.64, also a loop) is left out.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.chains import (add_chain, atomic_probe, atomic_quantities, chain_latency_samples,
                                        contended_words, kernel_file, ones_added)
from gpuatlas.probes.kit.harness import Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import MAX_BYTES_PER_CLK_SM
from gpuatlas.probes.registry import probe

LANES = 32
#: smem_atomics.cu's constants.
ATOMS_UNROLL, ATOMS_WORDS, ATOMS_THR_UNROLL = 32, 1024, 8
ATOMS_TRIPS = 16
SMEM_ATOMIC_TYPES = {"i32": np.uint32, "f32": np.float32}
SMEM_ATOMIC_MODES = ("latency", "same", "warp", "distinct")
#: mode -> the kernel's addressing: one word for the block, one per warp, one per thread.
THR_MODE = {"same": 0, "warp": 1, "distinct": 2}
#: Target length of one throughput launch (long against %globaltimer's microsecond updates), and its cap.
LAUNCH_S, MAX_REPS = 2e-3, 2**31 - 1


def chain_reference(dtype: str, steps: int) -> tuple:
    """(x, word) after ``steps`` of x <- atom.add(word, x) from x = 1, word = 0, in ``dtype``'s arithmetic."""
    return add_chain(SMEM_ATOMIC_TYPES[dtype], steps)


def expected_words(dtype: str, mode: str, threads: int, adds_per_thread: int) -> np.ndarray:
    """The ATOMS_WORDS words after ``adds_per_thread`` adds of 1 from each of ``threads`` threads: exact (integers wrap
    mod 2^32; fp32 stops growing at 2^24, where adding 1 rounds back to even); words nobody adds to stay 0."""
    kind = SMEM_ATOMIC_TYPES[dtype]
    used = contended_words(mode, threads, LANES)
    words = np.zeros(ATOMS_WORDS, dtype=kind)
    words[:used] = ones_added(kind, threads // used * adds_per_thread)
    return words


def block_threads(device: dict) -> int:
    """The largest block the device allows, at most ATOMS_WORDS threads, whole warps."""
    return min(device["max_threads_per_block"], ATOMS_WORDS) // LANES * LANES


_kernel = kernel_file("smem_atomics.cu")


def _sweep(device):
    return {"dtype": list(SMEM_ATOMIC_TYPES), "mode": list(SMEM_ATOMIC_MODES)}


@probe("exec.smem_atomics", sweeps={"quick": _sweep, "full": _sweep},
       axes={"dtype": "i32 (ATOMS.ADD), f32 (a compare-and-swap loop on sm_90)",
             "mode": "latency (one thread's dependent chain) or throughput of one full block with every thread "
                     "on one word (same), one per warp (warp) or its own (distinct)"},
       quantities=atomic_quantities("atomic.shared.add", SMEM_ATOMIC_TYPES,
                                    ("latency_cycles", "ops_per_clk_sm_same", "ops_per_clk_sm_warp",
                                     "ops_per_clk_sm_distinct")),
       kernels=("smem_atomics.cu",))
def exec_smem_atomics(ctx, dtype: str, mode: str) -> list[Sample]:
    """Shared-memory atomic add: dependent-chain latency, or one SM's adds per clock against contention."""
    return atomic_probe(ctx, SMEM_ATOMIC_TYPES, SMEM_ATOMIC_MODES, dtype, mode, "shared atomics", _latency, _throughput)


def _throughput(ctx, dtype: str, mode: str, kind) -> list[Sample]:
    """Adds per clock of one SM: one full block's threads issuing red.shared.add of 1 to the mode's words."""
    import cupy

    func = _kernel(f"atoms_thr_{dtype}")
    threads = block_threads(ctx.device)
    out = cupy.zeros(ATOMS_WORDS, dtype=kind)
    clocks = cupy.zeros(2, dtype=cupy.uint64)

    def run(reps: int):
        return lambda: func((1,), (threads,), (kind(1), np.int32(THR_MODE[mode]), np.int32(reps), out, clocks))

    reps, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_REPS)
    want = expected_words(dtype, mode, threads, reps * ATOMS_THR_UNROLL)
    adds = threads * reps * ATOMS_THR_UNROLL

    def sample(repeat: int) -> list[Sample]:
        run(reps)()
        cycles, ns = (float(c) for c in clocks.get())
        got = out.get()
        if not np.array_equal(got, want):
            bad = np.flatnonzero(got != want)
            raise RuntimeError(f"atoms_thr_{dtype} ({mode}): {len(bad)} words differ from the adds they received, "
                               f"word {bad[0]} holds {got[bad[0]]}, expected {want[bad[0]]}")
        if cycles <= 0 or ns <= 0:
            raise RuntimeError(f"atoms_thr_{dtype} ({mode}): the block recorded {cycles} cycles in {ns} ns")
        hz = cycles / ns * 1e9
        per_clk = adds / cycles
        flag = "invalid" if per_clk * np.dtype(kind).itemsize > MAX_BYTES_PER_CLK_SM else ctx.throttle_flag(hz)
        return [Sample("ops_per_clk_sm", per_clk, "1/cycle", repeat, hz, "clock64", flag),
                Sample("ops_per_s_sm", adds / ns * 1e9, "1/s", repeat, hz, "globaltimer", flag)]

    return repeat_until_stable(sample, "ops_per_clk_sm", ctx.budget)


def _latency(ctx, dtype: str, kind) -> list[Sample]:
    import cupy

    func = _kernel(f"atoms_lat_{dtype}")
    out = cupy.zeros(2, dtype=kind)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(trips: int) -> float:
        func((1,), (1,), (kind(1), np.int32(trips), out, cycles))
        want = chain_reference(dtype, trips * ATOMS_UNROLL)
        got = tuple(out.get())
        if not all(np.array_equal(g, w) for g, w in zip(got, want)):
            raise RuntimeError(f"atoms_lat_{dtype}: returned and stored {got}, the recurrence gives {want}")
        return float(cycles.get()[0])

    return chain_latency_samples(ctx, chain, ATOMS_TRIPS, ATOMS_UNROLL)
