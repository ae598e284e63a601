"""How probes time things.

* ``repeat_until_stable`` -- warm up by time, then repeat a sample until the primary metric's relative IQR
  is below a target or the config's time budget is spent (between ``min_repeats`` and ``max_repeats``).
  Every sample is kept; the median is the headline.
* ``EventTimer`` -- CUDA-event timing of a launch, batched so one sample lasts at least ``min_sample_s``
  (event resolution is ~0.5 us; a short kernel timed alone would measure the timer).
* ``sm_clock`` -- the clock guard: cycles / ns from a kernel that spins on ``%globaltimer``.  Probes timed
  in-kernel report their own cycles and ns per sample, so each sample carries the clock it ran at;
  event-timed probes read the clock right after each sample.  Cycles and ns are converted with these
  measured clocks, never a datasheet figure.
* ``launch_seconds`` -- CUDA-event seconds of one launch: ``warmup`` untimed launches (queued right before
  the timed ones, or waited for with ``wait_after_warmup``), then the fastest of ``repeats`` launches timed
  one at a time, on ``stream`` (default: the current stream).
* ``calibrate`` -- the multiple of a unit (trips, passes, reps) for which one launch lasts about a target,
  grown from short trials (``max_count``: a clamp for kernels whose count is a 32-bit int).
* ``Sink`` -- a 32-bit sum kernels add to, checked against launches x the sum one launch must add, or
  against the sums the host added for the launches so far.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

#: A sample whose SM clock is below this fraction of the device's maximum is flagged ``throttled``.
THROTTLE_FRACTION = 0.85


@dataclass
class Sample:
    metric: str
    value: float
    unit: str
    repeat: int
    sm_clock_hz: float | None
    timer: str
    flag: str = ""
    #: When the sample was made (time.monotonic): the runner joins it to the NVML readings taken since the one
    #: before (probes/kit/telemetry.py).
    created: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Budget:
    """How long to work on one config."""

    warmup_s: float = 0.02
    min_repeats: int = 5
    max_repeats: int = 21
    time_s: float = 0.25
    rel_iqr: float = 0.005
    min_sample_s: float = 5e-4

    @classmethod
    def for_profile(cls, profile: str) -> "Budget":
        if profile == "quick":
            return cls()
        return cls(min_repeats=7, max_repeats=31, time_s=0.5)


def rel_iqr(values) -> float:
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return math.inf
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return (q3 - q1) / abs(med) if med else math.inf


def repeat_until_stable(sample: Callable[[int], list[Sample]], primary: str, budget: Budget,
                        clock: Callable[[], float] = time.perf_counter) -> list[Sample]:
    """Run ``sample(repeat)`` after a timed warm-up until ``primary`` is stable or the budget is spent.

    ``sample(-1)`` is a warm-up call whose samples are dropped.
    """
    start = clock()
    sample(-1)
    while clock() - start < budget.warmup_s:
        sample(-1)
    samples: list[Sample] = []
    start = clock()
    for repeat in range(budget.max_repeats):
        samples += sample(repeat)
        if repeat + 1 < budget.min_repeats:
            continue
        values = [s.value for s in samples if s.metric == primary and not s.flag]
        if rel_iqr(values) < budget.rel_iqr or clock() - start > budget.time_s:
            break
    return samples


@dataclass
class Context:
    """What a probe gets: the device's properties, the budget and the seed of this run."""

    device: dict
    budget: Budget
    seed: int = 0
    _clock_kernel: object = field(default=None, repr=False)

    def throttle_flag(self, sm_clock_hz: float | None, power_limited: bool = False) -> str:
        """``throttled`` below THROTTLE_FRACTION of the device's maximum clock.  Dense tensor-core work runs at
        the clock the power limit allows (well below the maximum on a Hopper at full tensor load): that clock
        is part of such a probe's answer, recorded with every sample, so those probes pass
        ``power_limited=True`` and are not flagged for it."""
        top = self.device.get("sm_clock_max_hz")
        if sm_clock_hz is None or not top or power_limited:
            return ""
        return "throttled" if sm_clock_hz < THROTTLE_FRACTION * top else ""

    def rng(self, *salt: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *salt])

    def sm_clock(self, blocks: int = 1, spin_s: float = 2e-4) -> float:
        """Median effective SM clock (Hz) over ``blocks`` SMs spinning for ``spin_s``."""
        import cupy

        from gpuatlas.probes.kit.cuda import kernel

        if self._clock_kernel is None:
            self._clock_kernel = kernel("clock.cu", "clock_witness")
        out = cupy.zeros(2 * blocks, dtype=cupy.uint64)
        self._clock_kernel((blocks,), (32,), (np.int64(spin_s * 1e9), out))
        pairs = out.get().reshape(-1, 2).astype(float)
        return float(np.median(pairs[:, 0] / pairs[:, 1] * 1e9))


class EventTimer:
    """Times ``launch()`` with CUDA events, ``batch`` launches per sample so a sample lasts long enough."""

    def __init__(self, launch: Callable[[], None], min_sample_s: float, stream=None):
        import cupy

        self.launch = launch
        self.stream = stream or cupy.cuda.get_current_stream()
        self.start, self.stop = cupy.cuda.Event(), cupy.cuda.Event()
        self.batch = 1
        first = self.seconds_per_launch()
        self.batch = max(1, math.ceil(min_sample_s / max(first, 1e-9)))

    def seconds_per_launch(self) -> float:
        import cupy

        self.start.record(self.stream)
        for _ in range(self.batch):
            self.launch()
        self.stop.record(self.stream)
        self.stop.synchronize()
        return cupy.cuda.get_elapsed_time(self.start, self.stop) * 1e-3 / self.batch


def launch_seconds(launch: Callable[[], None], repeats: int = 1, *, warmup: int = 1,
                   wait_after_warmup: bool = False, stream=None) -> float:
    """Seconds of one ``launch()``: the fastest of ``repeats`` launches timed by CUDA events after ``warmup``."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(warmup):
        launch()
    if wait_after_warmup:
        stop.record(stream)
        stop.synchronize()
    times = []
    for _ in range(repeats):
        start.record(stream)
        launch()
        stop.record(stream)
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    return min(times)


def calibrate(run: Callable[[int], Callable[[], None]], unit: int, target_s: float, *,
              max_count: int | None = None,
              time_launch: Callable[[Callable[[], None]], float] | None = None) -> tuple[int, float]:
    """(count, seconds): a multiple of ``unit`` for which a launch of ``run(count)`` lasts about ``target_s``.

    ``seconds`` is the last trial's, timed by ``time_launch`` (default ``launch_seconds``: one warm-up launch,
    one timed).  Short trials grow first (x2 to x64 a step), since a launch of a few microseconds measures
    the launch, not the kernel; the first trial of at least ``target_s / 4`` is scaled to ``target_s``.
    Trials stop at 2**40 unclamped, or with ``max_count`` at it, which then also caps every count."""
    time_launch = time_launch or launch_seconds
    limit = 1 << 40 if max_count is None else max_count
    count = unit
    while True:
        seconds = time_launch(run(count))
        if seconds >= target_s / 4 or count >= limit:
            count = max(unit, round(count * target_s / seconds / unit) * unit)
            return (count if max_count is None else min(max_count, count)), seconds
        count *= min(64, max(2, math.ceil(target_s / 2 / max(seconds, 1e-9))))
        if max_count is not None:
            count = min(max_count, count)


class Sink:
    """A 32-bit sum a kernel adds to; checked against launches x the sum one launch must add (``check``), or
    against the sums ``add``-ed for the launches so far (``check_added``).  With ``errors`` the kernels also
    count failed waits in a second word, which must stay zero."""

    def __init__(self, what: str, errors: bool = False):
        import cupy

        self.what = what
        self.array = cupy.zeros(1, dtype=cupy.uint32)
        self.errors = cupy.zeros(1, dtype=cupy.uint32) if errors else None
        self.launches = 0
        self.want = 0

    def reset(self) -> None:
        self.array.data.memset_async(0, 4)
        self.launches = 0
        self.want = 0

    def add(self, value: int) -> None:
        self.want = (self.want + value) & 0xFFFFFFFF

    def check(self, per_launch: int) -> None:
        got, want = int(self.array.get()[0]), (self.launches * per_launch) % 2**32
        if got != want:
            raise RuntimeError(f"{self.what}: checksum mismatch after {self.launches} launches: the kernels "
                               f"summed {got:#010x}, the buffer says {want:#010x}")

    def check_added(self) -> None:
        got = int(self.array.get()[0])
        errors = int(self.errors.get()[0]) if self.errors is not None else 0
        if errors:
            raise RuntimeError(f"{self.what}: {errors} mbarrier waits timed out")
        if got != self.want:
            raise RuntimeError(f"{self.what}: checksum mismatch: the kernels summed {got:#010x}, the buffer "
                               f"says {self.want:#010x}")
