"""Dependent-chain latency: what every probe that times a chain of dependent operations shares.

A latency kernel (common.cuh's ``timed_chain``) runs ``trips`` trips of ``per_trip`` dependent steps between
two clock64 reads and reports the cycles.  The host runs T and 2T trips and takes the difference over the T
trips' steps: the clock reads, the loop's set-up, the operand loads and the final store are in both and
cancel, leaving the steps' own latency.  A step under one cycle is impossible for a dependent chain and is
flagged ``invalid``.

* ``chain_latency`` -- one sample: ``chain(T)`` then ``chain(2T)`` (each launches, checks, returns cycles),
  then the clock.
* ``chain_latency_samples`` -- those samples repeated until stable.
* ``ones_chain`` -- ``chain(trips)`` of an accumulator chain of all-ones operands, every element checked;
  ``add_chain`` -- the exact result of a dependent atomic-add chain (the host's replay).
* ``atomic_quantities``, ``atomic_probe``, ``contended_words``, ``ones_added`` -- an atomics probe's quantity
  ids, its config checked and sent to its latency or throughput measurement, the words its contention mode
  adds to, and the exact word after adds of 1.
* ``config_budget`` -- the profile's repeats within a shorter time per config (chapters of many short configs).
* ``kernel_file`` -- a family's ``_kernel(name)``: a kernel of one file (and target).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from gpuatlas.probes.kit.harness import Sample, repeat_until_stable

__all__ = ["chain_latency", "chain_latency_samples", "ones_chain", "add_chain", "atomic_quantities", "atomic_probe",
           "contended_words", "ones_added", "config_budget", "kernel_file"]


def chain_latency(ctx, chain: Callable[[int], float], trips: int, per_trip: int, repeat: int, *,
                  hz: float | None = None, power_limited: bool = False) -> Sample:
    """``latency`` (clock64 cycles per step) of ``chain(2 trips) - chain(trips)`` over ``trips x per_trip``
    steps; ``hz``: the clock the sample records (default: the SM clock read right after the two chains)."""
    short, long = chain(trips), chain(2 * trips)
    per_step = (long - short) / (trips * per_trip)
    hz = ctx.sm_clock() if hz is None else hz
    flag = "invalid" if per_step < 1 else ctx.throttle_flag(hz, power_limited=power_limited)
    return Sample("latency", per_step, "cycles", repeat, hz, "clock64", flag)


def chain_latency_samples(ctx, chain: Callable[[int], float], trips: int, per_trip: int, *, budget=None,
                          power_limited: bool = False) -> list[Sample]:
    """``chain_latency`` repeated until stable within ``budget`` (default: the profile's)."""
    return repeat_until_stable(
        lambda repeat: [chain_latency(ctx, chain, trips, per_trip, repeat, power_limited=power_limited)],
        "latency", budget or ctx.budget)


def ones_chain(launch: Callable[[int], None], out, cycles, per_trip: int, k: int, what: str):
    """``chain(trips)`` for an accumulator chain whose operands are all ones: ``launch(trips)`` runs the kernel,
    after which every element of ``out`` must be exactly steps x K (K products of 1 x 1 a step); returns the
    kernel's cycles (``cycles[0]``)."""

    def chain(trips: int) -> float:
        launch(trips)
        want = trips * per_trip * k
        got = out.get()
        if not np.all(got == want):
            raise RuntimeError(f"{what}: accumulators {np.unique(got)[:4]} after {trips * per_trip} steps, "
                               f"expected {want} in every element")
        return float(cycles.get()[0])

    return chain


def add_chain(kind, steps: int) -> tuple:
    """(x, word) after ``steps`` of x <- atom.add(word, x) from x = 1, word = 0: each step returns the old
    word and adds the previous return (a Fibonacci recurrence), in ``kind``'s own arithmetic (numpy type)."""
    x, word = kind(1), kind(0)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(steps):
            x, word = word, kind(word + x)
    return x, word


def atomic_quantities(prefix: str, types, metrics: tuple) -> tuple:
    """The quantity ids of an atomics probe: ``{prefix}_{dtype}_{metric}`` for every dtype and metric."""
    return tuple(f"{prefix}_{t}_{m}" for t in types for m in metrics)


def atomic_probe(ctx, types: dict, modes: tuple, dtype: str, mode: str, what: str, latency: Callable,
                 throughput: Callable) -> list[Sample]:
    """An atomics probe's config measured: ``latency(ctx, dtype, kind)`` for the dependent chain (mode
    ``latency``), else ``throughput(ctx, dtype, mode, kind)`` for a contention mode; ``kind`` is dtype's numpy
    type in ``types`` (name -> type).  A config outside ``types`` and ``modes`` is a ValueError naming ``what``."""
    if dtype not in types or mode not in modes:
        raise ValueError(f"bad {what} config {dtype!r}, {mode!r}: dtypes {tuple(types)}, modes {modes}")
    kind = types[dtype]
    return latency(ctx, dtype, kind) if mode == "latency" else throughput(ctx, dtype, mode, kind)


def contended_words(mode: str, threads: int, lanes: int = 32) -> int:
    """Words ``threads`` threads add to: one for all (same), one per warp (warp) or one each (distinct)."""
    return {"same": 1, "warp": threads // lanes, "distinct": threads}[mode]


def ones_added(kind, adds: int):
    """A word of numpy type ``kind`` after ``adds`` adds of 1 from 0, exact: uint32 wraps mod 2^32; float32 stops
    growing at 2^24, where adding 1 rounds back to even; float64 is exact to 2^53."""
    if kind is np.uint32:
        return kind(adds % 2**32)
    return kind(min(adds, 2**24) if kind is np.float32 else adds)


def config_budget(ctx, time_s: float, warmup_s: float):
    """The profile's repeats, within at most ``time_s`` per config and ``warmup_s`` of warm-up."""
    return dataclasses.replace(ctx.budget, time_s=min(ctx.budget.time_s, time_s),
                               warmup_s=min(ctx.budget.warmup_s, warmup_s))


def kernel_file(filename: str, arch: str | None = None) -> Callable:
    """``get(name)``: the kernel ``name`` of ``filename`` (built for ``arch``), compiled on first use."""

    def get(name: str):
        from gpuatlas.probes.kit.cuda import kernel

        return kernel(filename, name, arch=arch) if arch else kernel(filename, name)

    return get
