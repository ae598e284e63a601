"""The probe kit: what every probe family measures with, so no family borrows another's private parts.

* Physical bounds -- ``MAX_BYTES_PER_CLK_SM``, ``dram_peak_bytes_per_s``, ``bandwidth_bound``, ``flag_for``:
  a sample above what the device's own properties allow is flagged ``invalid`` (kept, left out of fits).
* Sizing constants shared by families -- ``HBM_FOOTPRINT_L2`` (an HBM footprint is at least this many times
  the L2) and ``MEMORY_FRACTION`` (no buffer takes more of device memory).
* ``event_samples`` -- the one event-timed sampler: CUDA events time a batch of launches, a callback turns the
  seconds into samples; ``bandwidth_samples`` is it for bytes moved.
* ``clock_samples`` -- the one clock-sample builder: cycles and seconds per step of an in-kernel timed loop.
* ``steps_for`` -- timed steps per launch for a sample of a given length, a multiple of the kernel's unroll.
* Known words -- ``Filled`` (bandwidth.cu's fill_hash words) and ``Golden`` (i * GOLDEN + OFFSET, hopper.cu's
  known_word), process-wide buffers grown on demand, with the check kernels ``sum32`` and ``mismatches``.
* ``Sink`` (gpuatlas.probes.kit.harness) -- the one 32-bit sum kernels add to.
"""
from __future__ import annotations

import math

import numpy as np

from gpuatlas.probes.kit.harness import EventTimer, Sample, Sink, repeat_until_stable

__all__ = ["MAX_BYTES_PER_CLK_SM", "DRAM_SLACK", "HBM_FOOTPRINT_L2", "MEMORY_FRACTION", "L2_TOUCH_FRACTION",
           "STRIDE_MAX_REPEATS", "STRIDE_WARMUP_S", "CHECK_THREADS", "GOLDEN",
           "OFFSET", "MASK32", "dram_peak_bytes_per_s", "bandwidth_bound", "flag_for", "event_samples",
           "bandwidth_samples", "clock_samples", "steps_for", "Filled", "Golden", "fill_hash", "sum32",
           "mismatches", "Sink"]

#: Validity.  No SM moves more than 128 B/clk between its L1/shared array and registers on any NVIDIA GPU
#: so far; twice that is a generous but physical bound for shared memory and L1 per SM, and (times SMs and
#: clock) for what L2 can deliver to the SMs.  HBM: the interface's peak, memory clock x bus width x 2
#: (double data rate), with 10% slack for timer jitter.  Above a bound a sample is flagged ``invalid``.
MAX_BYTES_PER_CLK_SM = 256
DRAM_SLACK = 1.10
#: Every HBM footprint is at least this many times the L2.  The L2 is not LRU: re-read over a footprint F
#: larger than itself it keeps about L2/F of it (analysis/capacity.py's miss model), so a stream over 4x L2
#: still finds a quarter of its lines there.  Over 32x at most ~3% can hit.
HBM_FOOTPRINT_L2 = 32
#: An L2-resident footprint, counted in the largest candidate transfer block per element, is at most this
#: fraction of L2 -- inside the near partition seen by the chase (the L2 latency plateau ends near half the L2).
L2_TOUCH_FRACTION = 0.25
#: Sweeps of hundreds of configs cap their repeats (bandwidths are stable to well under 1%) and shorten
#: their warm-up (the calibration launches before it already warm caches and clocks).
STRIDE_MAX_REPEATS = 11
STRIDE_WARMUP_S = 5e-3
#: No buffer takes more than this fraction of device memory (the largest strides need spans of many GiB).
MEMORY_FRACTION = 0.25
#: Threads per block of bandwidth.cu's fill and check kernels (its __launch_bounds__).
CHECK_THREADS = 256
GOLDEN, OFFSET = 0x9E3779B1, 0x7F4A7C15  # hopper.cu's known_word(i) = i * GOLDEN + OFFSET (mod 2^32)
MASK32 = 0xFFFFFFFF


# -- bounds -------------------------------------------------------------------------------------------------

def dram_peak_bytes_per_s(device: dict) -> float | None:
    """The HBM interface's peak from the device's properties: memory clock x bus bits / 8 x 2 (DDR)."""
    clock, bits = device.get("memory_clock_hz"), device.get("memory_bus_bits")
    if not clock or not bits:
        return None
    return float(clock) * bits / 8 * 2


def bandwidth_bound(device: dict, level: str) -> float | None:
    """Largest physical bandwidth (B/s) of ``level`` (dram, l2); None where the properties cannot say."""
    if level == "dram":
        peak = dram_peak_bytes_per_s(device)
        return peak * DRAM_SLACK if peak else None
    if level == "l2":
        if not device.get("sm_clock_max_hz"):
            return None
        return device["sm_count"] * device["sm_clock_max_hz"] * MAX_BYTES_PER_CLK_SM
    raise ValueError(f"no bandwidth bound for level {level!r}")


def flag_for(ctx, value: float, bound: float | None, sm_clock_hz: float | None) -> str:
    """``invalid`` above the physical bound, else the clock guard's verdict."""
    if bound is not None and value > bound:
        return "invalid"
    return ctx.throttle_flag(sm_clock_hz)


# -- samplers -----------------------------------------------------------------------------------------------

def event_samples(ctx, launch, after, primary: str, *, sample_s: float, before=None, budget=None) -> list[Sample]:
    """Event-time ``launch`` until ``primary`` is stable: each sample runs ``before()`` (untimed), times a
    batch of launches lasting at least ``sample_s`` and returns ``after(seconds_per_launch, repeat)``."""
    timer = EventTimer(launch, max(ctx.budget.min_sample_s, sample_s))

    def sample(repeat: int) -> list[Sample]:
        if before is not None:
            before()
        return after(timer.seconds_per_launch(), repeat)

    return repeat_until_stable(sample, primary, budget or ctx.budget)


def bandwidth_samples(ctx, launch, reset, verify, bytes_per_launch: float, *, sample_s: float,
                      bound: float | None = None, per_clk_bound: float | None = None, per_clk_too: bool = False,
                      budget=None, extra: tuple = ()) -> list[Sample]:
    """Event-time ``launch`` until stable: ``bandwidth`` (B/s) per sample, flagged above ``bound`` (B/s).
    With ``per_clk_bound`` also ``bytes_per_clk_sm`` (B/s / SMs / the SM clock read right after the sample),
    the primary metric then and flagged above that bound; with ``per_clk_too`` it follows the bandwidth,
    flagged as it is.  ``reset()`` runs before each sample and ``verify()`` after it (both untimed)."""
    sms = ctx.device["sm_count"]

    def after(seconds: float, repeat: int) -> list[Sample]:
        verify()
        hz = ctx.sm_clock()
        bandwidth = bytes_per_launch / seconds
        out = []
        if per_clk_bound is None:
            flag = flag_for(ctx, bandwidth, bound, hz)
        else:
            per_clk = bandwidth / sms / hz
            flag = flag_for(ctx, per_clk, per_clk_bound, hz)
            out.append(Sample("bytes_per_clk_sm", per_clk, "B/cycle", repeat, hz, "cuda_event", flag))
        out.append(Sample("bandwidth", bandwidth, "B/s", repeat, hz, "cuda_event", flag))
        if per_clk_too:
            out.append(Sample("bytes_per_clk_sm", bandwidth / sms / hz, "B/cycle", repeat, hz, "cuda_event", flag))
        out += [Sample(metric, value, unit, repeat, hz, "config", flag) for metric, value, unit in extra]
        return out

    primary = "bandwidth" if per_clk_bound is None else "bytes_per_clk_sm"
    return event_samples(ctx, launch, after, primary, sample_s=sample_s, before=reset, budget=budget)


def clock_samples(ctx, cycles: float, steps: int, repeat: int, timer: str, *, ns: float | None = None,
                  hz: float | None = None) -> list[Sample]:
    """``latency`` (cycles per step) and ``latency_time`` (seconds per step) of one in-kernel timed loop.
    With ``ns`` (the loop's %globaltimer nanoseconds) the clock is cycles / ns and the time is ns per step;
    otherwise the time is the cycles at the clock ``hz`` the kernel measured."""
    if ns is not None:
        hz = cycles / ns * 1e9
    flag = ctx.throttle_flag(hz)
    time = (ns * 1e-9 / steps, "globaltimer") if ns is not None else (cycles / steps / hz, timer)
    return [Sample("latency", cycles / steps, "cycles", repeat, hz, timer, flag),
            Sample("latency_time", time[0], "s", repeat, hz, time[1], flag)]


def steps_for(seconds_per_step: float, unit: int, *, sample_s: float = 1e-3, low: int = 1024,
              high: int = 1 << 21) -> int:
    """Timed steps per launch for a sample of about ``sample_s``, within [low, high], a multiple of ``unit``
    (the kernel's unroll)."""
    steps = sample_s / max(seconds_per_step, 1e-12)
    steps = min(high, max(low, steps))
    return int(math.ceil(steps / unit) * unit)


# -- known words --------------------------------------------------------------------------------------------

def _check_kernel(name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("bandwidth.cu", name)


class Filled:
    """One process-wide buffer of hashed 32-bit words (bandwidth.cu's fill_hash), grown on demand.

    Word i always holds hash(i), so any prefix is the same whatever the allocation, and checksums are
    computed from the buffer itself.  It grows by at least half each time (sweeps' spans grow), up to
    MEMORY_FRACTION of device memory."""

    words = None

    @classmethod
    def at_least(cls, nbytes: int, device: dict):
        import cupy

        need = -(-nbytes // 4)
        if cls.words is None or cls.words.size < need:
            cap = int(device["total_memory_bytes"] * MEMORY_FRACTION) // 4
            size = max(need, min(cap, 3 * (cls.words.size if cls.words is not None else 0) // 2))
            size = -(-size // (1 << 20)) << 20  # whole MiWords
            cls.words = None
            cupy.get_default_memory_pool().free_all_blocks()
            cls.words = cupy.empty(size, dtype=cupy.uint32)
            fill_hash(cls.words)
        return cls.words


class Golden:
    """One process-wide device buffer of known words, grown on demand (word i = i * GOLDEN + OFFSET), whose
    sums the host knows in closed form."""

    words = None

    @classmethod
    def at_least(cls, nbytes: int):
        import cupy

        need = -(-nbytes // 4)
        if cls.words is None or cls.words.size < need:
            cls.words = None
            cupy.get_default_memory_pool().free_all_blocks()
            i = cupy.arange(need, dtype=cupy.uint32)
            cls.words = i * cupy.uint32(GOLDEN) + cupy.uint32(OFFSET)
            del i
        return cls.words


def fill_hash(words, seed: int = 0x5EED) -> None:
    """Word i of ``words`` (uint32) := hash(i, seed) (bandwidth.cu's fill_hash)."""
    _check_kernel("fill_hash")((4096,), (CHECK_THREADS,), (words, np.int64(words.size), np.uint32(seed)))


def _reduce(name: str, args: tuple) -> int:
    """Run one of bandwidth.cu's check kernels (which add into a 32-bit counter) and return the counter."""
    import cupy

    out = cupy.zeros(1, dtype=cupy.uint32)
    _check_kernel(name)((1024,), (CHECK_THREADS,), (*args, out))
    return int(out.get()[0])


def sum32(words, offset_bytes: int = 0, count: int | None = None, pitch_bytes: int = 4,
          element_bytes: int = 4) -> int:
    """32-bit wrapping sum of every word of ``count`` elements at ``offset_bytes + i * pitch_bytes`` of the
    uint32 array ``words`` (default: all of it, word by word), as the kernels fold them."""
    count = words.size * 4 // pitch_bytes if count is None else count
    if count <= 0:
        return 0
    if offset_bytes + (count - 1) * pitch_bytes + element_bytes > words.size * 4:
        raise ValueError("elements beyond the buffer")
    return _reduce("sum_elements", (np.uint64(words.data.ptr + offset_bytes), np.int64(count),
                                    np.int64(pitch_bytes), np.int32(element_bytes)))


def mismatches(a, b, add: int) -> int:
    """Words of ``a`` that differ from ``b + add`` (``b`` None: from ``add``)."""
    return _reduce("count_mismatches", (a, b if b is not None else np.uint64(0), np.uint32(add),
                                        np.int64(a.size)))


def kernel_clock_hz(clocks: np.ndarray) -> float:
    """Median over blocks of clock64 cycles per %globaltimer second, from ``(cycles, ns)`` pairs."""
    pairs = clocks.reshape(-1, 2).astype(float)
    pairs = pairs[pairs[:, 1] > 0]
    if not len(pairs):
        raise RuntimeError("no block recorded a nonzero %globaltimer interval: the launch was too short")
    return float(np.median(pairs[:, 0] / pairs[:, 1] * 1e9))


#: Addresses a one-thread latency chain is timed at, one per sample.  Which L2 partition homes an address
#: (the SM's near one, or one across the chip) sets the latency of an atomic or of a fence waiting for a
#: store, so one address measures one placement, not the GPU.
PLACEMENTS = 48


def random_lines(ctx, count: int, *salt: int) -> np.ndarray:
    """``count`` distinct random 128-byte line offsets (bytes) inside a span of the L2's size: addresses
    spread over the L2's partitions and slices, drawn from the run's seed."""
    lines = max(count, int(ctx.device["l2_bytes"]) // 128)
    return ctx.rng(*salt).choice(lines, size=count, replace=False).astype(np.int64) * 128
