"""Energy per operation from NVML's total energy counter: energy.per_operation's windows.

The counter (millijoules since the driver loaded) does not move at every read: the driver updates it at its
own period.  Each window records the readings on either side of every change, so an update is placed at the
first reading that shows it (``edges``), to within the poll gap before it.  A window's power is the counter's
rise between two updates over the time between them, taken from the update SETTLE_PERIODS update periods past
the window's start (the update straddling the start holds energy from before it, and the driver may report an
update late by up to a period) to the last update before the kernel ended.  Over that span:

    board energy per unit = counter power / the kernel's rate          (``*_board_pj_per_*``)
    net energy per unit   = (counter power - idle power) / the rate    (``*_net_pj_per_*``)

the rate that of the launches ending inside the span (work / their event-timed seconds), the idle power the
same counter's over the ``idle`` window (no kernel, the GPU rested first).  Net is what the op adds to a
board at rest; it keeps what an op needs besides itself (issuing instructions, the raised clock, the path
from that level to the SMs' registers), so a byte from HBM is not a DRAM device's energy per byte alone.
Intervals: a bootstrap over the counter's update intervals (and over the launches, and the idle window's
updates), widened by the placement of the span's two ends (the poll gaps) and the counter's 1 mJ step.  A
window whose counter moves fewer than MIN_INTERVALS times in the span gives no figure; one with an invalid
rate has no usable launches and gives none either.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import select

PROBE = "energy.per_operation"
SW_POWER_CAP, HW_POWER_BRAKE = 0x4, 0x80
PJ = 1e12
#: op -> (id part, per what, what the unit of work is).
OPS = {"fp32": ("fp32", "FLOP", "FP32 FFMA (vector)"), "bf16": ("bf16", "FLOP", "BF16 tensor-core matmul"),
       "fp8": ("fp8", "FLOP", "FP8 (e4m3) tensor-core matmul"), "hbm": ("hbm", "byte", "16-byte reads from HBM"),
       "l2": ("l2", "byte", "16-byte reads from the L2"), "smem": ("smem", "byte", "16-byte shared-memory reads")}
MIN_INTERVALS, SETTLE_PERIODS, RESAMPLES = 4, 2, 2000
#: The counter's power and the mean of NVML's power readings over the same span differing by more than this
#: share is said in the note (the two are different sensors' paths; a large gap means one of them is off).
AGREE = 0.25


def edges(t, mj) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(time, value, gap)`` of each update: the first reading of each new value, and the time since the
    reading before it (where the update happened, at the latest)."""
    t, mj = np.asarray(t, dtype=float), np.asarray(mj, dtype=float)
    order = np.argsort(t, kind="stable")
    t, mj = t[order], mj[order]
    new = np.flatnonzero(mj[1:] != mj[:-1]) + 1
    return t[new], mj[new], t[new] - t[new - 1]


def counter_power(t, mj, start: float, end: float) -> dict | None:
    """Power (W) from the counter's updates in (start, end]: from the first update SETTLE_PERIODS median
    update periods past ``start`` to the last; None with fewer than MIN_INTERVALS update intervals there."""
    when, value, gap = edges(t, mj)
    inside = (when > start) & (when <= end)
    if inside.sum() < 2:
        return None
    period = float(np.median(np.diff(when[inside])))
    use = inside & (when >= start + SETTLE_PERIODS * period)
    when, value, gap = when[use], value[use], gap[use]
    if when.size < MIN_INTERVALS + 1:
        return None
    de, dt = np.diff(value) * 1e-3, np.diff(when)
    return {"power_w": float(de.sum() / dt.sum()), "de": de, "dt": dt, "span": (float(when[0]), float(when[-1])),
            "period_s": period, "ends_gap_s": float(gap[0] + gap[-1]), "intervals": int(de.size)}


def _bootstrap(fit: dict, durations: np.ndarray, work: float, idle: dict | None, seed: int = 0):
    """Resampled (board, net) J per unit: the update intervals, the launches and the idle intervals."""
    rng = np.random.default_rng(seed)

    def power(f):
        pick = rng.integers(0, f["de"].size, (RESAMPLES, f["de"].size))
        return f["de"][pick].sum(1) / f["dt"][pick].sum(1)

    rate = work * durations.size / durations[rng.integers(0, durations.size, (RESAMPLES, durations.size))].sum(1)
    busy = power(fit)
    return busy / rate, (busy - power(idle)) / rate if idle else None


def slack(fit: dict) -> float:
    """Relative error of a window's power the bootstrap cannot see: where the span's ends lie within their poll
    gaps, and the counter's 1 mJ step at either end."""
    span = fit["span"][1] - fit["span"][0]
    return fit["ends_gap_s"] / span + 2e-3 / (fit["power_w"] * span)


def _widen(low: float, high: float, by: float) -> tuple[float, float]:
    return low - by, high + by


def _series(frame: pd.DataFrame, metric: str) -> np.ndarray:
    return frame[frame["metric"] == metric].sort_values("repeat")["value"].to_numpy(dtype=float)


def _window(measurements: pd.DataFrame, op: str) -> pd.DataFrame:
    return measurements[(measurements["probe"] == PROBE) & (measurements["op"] == op)]


def _evidence(frame: pd.DataFrame, span: tuple) -> dict:
    """NVML's power, SM clock and clock-event-reason readings inside ``span``."""
    t = _series(frame, "trace_t_s")
    inside = (t > span[0]) & (t <= span[1])
    power = _series(frame, "trace_power_w")[inside]
    hz = _series(frame, "trace_sm_clock_hz")[inside]
    reasons = _series(frame, "trace_clock_event_reasons")[inside].astype(np.int64)
    capped = float(np.mean((reasons & (SW_POWER_CAP | HW_POWER_BRAKE)) != 0)) if reasons.size else float("nan")
    return {"readings": int(power.size), "power_w": float(power.mean()) if power.size else float("nan"),
            "power_max_w": float(power.max()) if power.size else float("nan"),
            "nvml_hz": float(np.median(hz)) if hz.size else float("nan"), "capped": capped}


def _window_fit(frame: pd.DataFrame, kernel_end: float = np.inf) -> dict | None:
    """The counter's power over the window, to its end or the kernel's (``kernel_end``), the earlier."""
    t, mj = _series(frame, "energy_t_s"), _series(frame, "energy_mj")
    end = _series(frame, "host_window_s")
    if not t.size or not end.size:
        return None
    return counter_power(t, mj, 0.0, min(float(end[0]), kernel_end))


def _note(op_fit: dict, frame: pd.DataFrame, idle: dict | None, device: dict, rate: float, unit: str) -> str:
    ev = _evidence(frame, op_fit["span"])
    before, after = _series(frame, "energy_before_mj"), _series(frame, "energy_after_mj")
    host = _series(frame, "host_window_s")
    hz = frame.loc[frame["metric"] == "rate", "sm_clock_hz"]
    parts = [(f"counter power {op_fit['power_w']:.1f} W over {op_fit['span'][0]:.2f}..{op_fit['span'][1]:.2f} s "
              f"of the window ({op_fit['intervals']} counter updates, one per {op_fit['period_s'] * 1e3:.0f} ms; "
              f"1 mJ steps)"),
             f"rate {rate:.4g} {unit}/s",
             (f"counter read right before and after the window: {(after[0] - before[0]) * 1e-3:.1f} J over "
              f"{host[0]:.2f} s ({(after[0] - before[0]) * 1e-3 / host[0]:.1f} W, idle edges included)")]
    if ev["readings"]:
        parts.append(f"NVML power readings {ev['power_w']:.1f} W mean, {ev['power_max_w']:.1f} W max "
                     f"({ev['readings']} readings)")
        if abs(ev["power_w"] / op_fit["power_w"] - 1) > AGREE:
            parts.append("the counter and the power readings disagree by more than a quarter")
        parts.append(f"NVML SM clock {ev['nvml_hz'] / 1e9:.3f} GHz")
    if len(hz):
        parts.append(f"in-kernel SM clock {float(hz.iloc[0]) / 1e9:.3f} GHz")
    if device.get("power_limit_w"):
        parts.append(f"power limit {device['power_limit_w']:.0f} W")
    if ev["readings"]:
        parts.append(f"power cap bound the kernel: SW power cap or HW power brake in {ev['capped']:.0%} of readings"
                     if ev["capped"] else "no power-cap reason set")
    parts.append(f"idle power {idle['power_w']:.1f} W (counter, idle window)" if idle else
                 "no idle window: no net figure")
    return "; ".join(parts)


def energy_op_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """``energy.idle_power_w``, and per op its board and net energy per FLOP or byte."""
    if "op" not in measurements or not (measurements["probe"] == PROBE).any():
        return []
    rows = []
    idle = _window_fit(_window(measurements, "idle"))
    if idle:
        rng = np.random.default_rng(1)
        pick = rng.integers(0, idle["de"].size, (RESAMPLES, idle["de"].size))
        boot = idle["de"][pick].sum(1) / idle["dt"][pick].sum(1)
        low, high = _widen(*np.percentile(boot, [2.5, 97.5]), idle["power_w"] * slack(idle))
        ev = _evidence(_window(measurements, "idle"), idle["span"])
        rows.append(derived_row(
            "energy.idle_power_w", idle["power_w"], low, high,
            "NVML energy counter's rise over its updates in a window with no kernel (GPU rested first)", PROBE,
            f"{idle['intervals']} counter updates, one per {idle['period_s'] * 1e3:.0f} ms, over "
            f"{idle['span'][0]:.2f}..{idle['span'][1]:.2f} s; NVML power readings {ev['power_w']:.1f} W mean, "
            f"SM clock {ev['nvml_hz'] / 1e9:.3f} GHz"))
    for op, (name, per, what) in OPS.items():
        frame = _window(measurements, op)
        ends = select(measurements, PROBE, "launch_end_s", op=op)
        work = select(measurements, PROBE, "work_per_launch", op=op)
        if ends.empty or work.empty:
            continue
        ends = np.sort(ends["value"].to_numpy(dtype=float))
        fit = _window_fit(frame, float(ends[-1]))
        if fit is None:
            continue
        starts = np.concatenate([[0.0], ends[:-1]])
        within = (starts >= fit["span"][0]) & (ends <= fit["span"][1])
        if within.sum() < 2:
            continue
        durations, per_launch = ends[within] - starts[within], float(work["value"].iloc[0])
        rate = per_launch * durations.size / durations.sum()
        board, net = fit["power_w"] / rate, (fit["power_w"] - idle["power_w"]) / rate if idle else None
        boot_board, boot_net = _bootstrap(fit, durations, per_launch, idle)
        unit = "FLOP" if per == "FLOP" else "B"
        note = _note(fit, frame, idle, device, rate, unit)
        method = (f"{what} held over a second: NVML energy counter's rise over its updates / the work done meanwhile"
                  f" (bootstrap 95% CI over the counter's updates and the launches)")
        suffix = "flop" if per == "FLOP" else "byte"
        by = board * slack(fit)
        rows.append(derived_row(f"energy.{name}.board_pj_per_{suffix}", board * PJ,
                                *(x * PJ for x in _widen(*np.percentile(boot_board, [2.5, 97.5]), by)),
                                method, PROBE, note))
        if net is not None and net > 0:
            by += idle["power_w"] * slack(idle) / rate
            rows.append(derived_row(f"energy.{name}.net_pj_per_{suffix}", net * PJ,
                                    *(x * PJ for x in _widen(*np.percentile(boot_net, [2.5, 97.5]), by)),
                                    method.replace("rise", "rise less the idle power"), PROBE, note))
        elif net is not None:
            rows[-1]["note"] += "; no net figure: the counter's power here is not above the idle power"
    return rows


FAMILY = Family(order=77, probe_modules=("energy",), rows=energy_op_rows, quantities={
    "energy.idle_power_w": ("W", "board power at rest, from NVML's energy counter over a window with no kernel"),
    **{f"energy.{name}.{kind}_pj_per_{'flop' if per == 'FLOP' else 'byte'}":
       (f"pJ/{'FLOP' if per == 'FLOP' else 'B'}",
        f"{'board' if kind == 'board' else 'net of idle'} energy per {'FLOP' if per == 'FLOP' else 'byte'} of "
        f"{what}, from NVML's energy counter over a kernel held for over a second"
        + ("" if kind == "board" else " (counter power less the idle window's, over the rate)"))
       for name, per, what in OPS.values() for kind in ("board", "net")}})
