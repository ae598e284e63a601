"""NVML telemetry beside every sample: power, SM clock, clock-event reasons and temperature, polled every
POLL_S by a background thread for the device being measured.

The driver lowers the SM clock when the board reaches its power limit (SW power cap) or a temperature limit,
and says so in the clock-event reasons bitmask.  Each sample is joined to the readings taken while it was
measured (``Recorder.windows``), so a power-capped or thermally slowed sample is flagged from what NVML
reported, not inferred from its clock.  Where NVML does not answer (no NVIDIA driver, a CPU machine, the tests) nothing is
recorded and every telemetry column stays empty.
"""
from __future__ import annotations

import bisect
import math
import threading
import time

import numpy as np

from gpuatlas.analysis.results import TELEMETRY_EMPTY as EMPTY
from gpuatlas.probes.kit.harness import Sample

POLL_S = 0.01
#: Clock-event reason bits (nvml.h's nvmlClocksEventReason*).
SW_POWER_CAP, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x20, 0x40, 0x80
#: A window with no reading of its own takes the last reading before its end, if that is at most this old.
STALE_S = 0.1
#: Readings kept (the oldest half is dropped past it): hours at POLL_S, far longer than any config.
MAX_READINGS = 1 << 20


def _time(row: tuple) -> float:
    return row[0]


def reason_flags(mask: int) -> str:
    """``power_capped`` (SW power cap or HW power brake), ``thermal`` (SW or HW thermal slowdown), joined by +."""
    mask = int(mask)
    flags = []
    if mask & (SW_POWER_CAP | HW_POWER_BRAKE):
        flags.append("power_capped")
    if mask & (SW_THERMAL | HW_THERMAL):
        flags.append("thermal")
    return "+".join(flags)


class Recorder:
    """Readings ``(t, power_w, sm_clock_hz, reasons, temperature_c)``, t on time.monotonic, taken by a thread
    calling ``read()`` every ``poll_s`` (``poll=False``: no thread, the caller fills ``rows``)."""

    def __init__(self, read=None, poll_s: float = POLL_S, poll: bool = True):
        self.read = read
        self.poll_s = poll_s
        self.rows: list[tuple] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.lowest_w = math.nan
        self.thread = None
        if read is not None and poll:
            self.thread = threading.Thread(target=self._poll, name="gpuatlas-telemetry", daemon=True)
            self.thread.start()

    @property
    def active(self) -> bool:
        return self.read is not None

    def _poll(self) -> None:
        while not self.stopped.is_set():
            try:
                row = (time.monotonic(), *self.read())
            except Exception:  # a failed read is a missing reading, not a failed probe
                row = None
            if row is not None:
                with self.lock:
                    self.rows.append(row)
                    self.lowest_w = min(self.lowest_w, row[1]) if self.lowest_w == self.lowest_w else row[1]
                    if len(self.rows) > MAX_READINGS:
                        del self.rows[:MAX_READINGS // 2]
            self.stopped.wait(self.poll_s)

    def readings(self, t0: float = -math.inf, t1: float = math.inf) -> np.ndarray:
        """The readings with t0 < t <= t1, as an (n, 5) float array (rows are in time order: only those in the
        window are copied, not the whole run's)."""
        with self.lock:
            lo = bisect.bisect_right(self.rows, t0, key=_time)
            rows = self.rows[lo:bisect.bisect_right(self.rows, t1, lo=lo, key=_time)]
        return np.array(rows, dtype=float).reshape(-1, 5)

    def windows(self, windows: list[tuple[float, float]]) -> list[dict]:
        """Per window ``(t0, t1]``: mean and max power, median SM clock, OR of the reason masks and max
        temperature of its readings; a window with none takes the last reading before its end (at most
        STALE_S old), else EMPTY."""
        if not windows or not self.active:
            return [{k: v for k, v in EMPTY.items() if k != "elapsed_s"} for _ in windows]
        data = self.readings(min(t0 for t0, _ in windows) - STALE_S, max(t1 for _, t1 in windows))
        t = data[:, 0]
        out = []
        for t0, t1 in windows:
            lo, hi = np.searchsorted(t, t0, side="right"), np.searchsorted(t, t1, side="right")
            if lo == hi and hi and t[hi - 1] >= t1 - STALE_S:
                lo = hi - 1
            part = data[lo:hi]
            if not len(part):
                out.append({k: v for k, v in EMPTY.items() if k != "elapsed_s"})
                continue
            mask = int(np.bitwise_or.reduce(part[:, 3].astype(np.int64)))
            out.append({"power_w": float(np.mean(part[:, 1])), "power_max_w": float(np.max(part[:, 1])),
                        "nvml_sm_clock_hz": float(np.median(part[:, 2])), "clock_event_reasons": mask,
                        "temperature_c": float(np.max(part[:, 4])), "telemetry": reason_flags(mask)})
        return out

    def idle_power_w(self) -> float:
        """The lowest power read so far (the board at rest, once the poller has seen it idle); NaN if none."""
        return self.lowest_w

    def rest(self, max_s: float, min_s: float = 0.0, margin: float = 1.25) -> float:
        """Wait until the power is back within ``margin`` x the idle reading, at least ``min_s`` and at most
        ``max_s`` (without NVML: ``max_s``); returns the seconds waited."""
        start = time.monotonic()
        if not self.active:
            time.sleep(max_s)
            return max_s
        idle = self.idle_power_w()
        while True:
            waited = time.monotonic() - start
            latest = self.readings(start + min_s, math.inf)
            if waited >= max_s or (waited >= min_s and len(latest) and latest[-1, 1] <= margin * idle):
                return waited
            time.sleep(self.poll_s / 2)


def _nvml_reader(uuid: str | None):
    """A function returning one reading ``(power_w, sm_clock_hz, reasons, temperature_c)``, or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception:  # no UUID, or one NVML does not know: only a lone GPU is surely the one measured
        try:
            if pynvml.nvmlDeviceGetCount() != 1:
                return None
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            return None
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    instant = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)

    def instant_power_w() -> float:
        value = pynvml.nvmlDeviceGetFieldValues(handle, [instant])[0]
        if value.nvmlReturn != pynvml.NVML_SUCCESS:
            raise RuntimeError("no instantaneous power field")
        return float(value.value.uiVal) / 1000

    def average_power_w() -> float:
        return pynvml.nvmlDeviceGetPowerUsage(handle) / 1000

    power = average_power_w
    if instant is not None:
        try:
            instant_power_w()
            power = instant_power_w
        except Exception:
            pass
    try:
        power()
    except Exception:
        return None

    def read() -> tuple:
        return (power(), pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) * 1e6, int(reasons(handle)),
                float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)))

    return read


def energy_reader(uuid: str | None):
    """A function returning NVML's total energy counter (nvmlDeviceGetTotalEnergyConsumption: millijoules since
    the driver loaded, an integer the driver updates at its own period), or None where NVML, the device or the
    counter does not answer."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # as _nvml_reader: only a lone GPU is surely the one measured
            if pynvml.nvmlDeviceGetCount() != 1:
                return None
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)

        def read() -> int:
            return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))

        read()
        return read
    except Exception:
        return None


_RECORDER: Recorder | None = None
_RECORDER_LOCK = threading.Lock()


def recorder(uuid: str | None = None) -> Recorder:
    """The process's recorder, started on first use (an inactive one where NVML does not answer)."""
    global _RECORDER
    with _RECORDER_LOCK:
        if _RECORDER is None:
            _RECORDER = Recorder(_nvml_reader(uuid))
        return _RECORDER


def trace_samples(recorder: Recorder, t0: float, t1: float) -> list:
    """The readings between ``t0`` and ``t1`` (time.monotonic) as ``trace_*`` samples, one index a reading:
    ``trace_t_s`` since ``t0``, power, SM clock, clock-event reasons and temperature."""
    samples = []
    for index, (t, power, hz, reasons, temperature) in enumerate(recorder.readings(t0, t1)):
        samples += [Sample("trace_t_s", t - t0, "s", index, None, "nvml"),
                    Sample("trace_power_w", power, "W", index, None, "nvml"),
                    Sample("trace_sm_clock_hz", hz, "Hz", index, None, "nvml"),
                    Sample("trace_clock_event_reasons", reasons, "1", index, None, "nvml"),
                    Sample("trace_temperature_c", temperature, "C", index, None, "nvml")]
    return samples


def reset() -> None:
    """Stop and forget the process's recorder (tests swap NVML in and out)."""
    global _RECORDER
    with _RECORDER_LOCK:
        if _RECORDER is not None:
            _RECORDER.stopped.set()
        _RECORDER = None
