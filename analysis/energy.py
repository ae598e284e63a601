"""Energy per tensor-core FLOP: board power over the FLOP rate while wgmma launches run back to back.

compute.wgmma's sustained run launches one dtype's kernel back to back for over a second and records NVML's
power readings over the same time (``trace_*`` samples, ``trace_t_s`` since the first launch) beside the FLOP
rate of each stretch of launches (``sustained_throughput``, ``sustained_t_s`` its end).  Over the steady part
(the stretches ending past STEADY_FROM of the run, as ``tc.<dtype>.sustained_flops`` takes it), energy per FLOP
= mean power / FLOP rate, the rate the harmonic mean of the stretches' (equal FLOP each: total FLOP over total
time).  The power is the whole board's: a run records no idle reading, so none is subtracted.  A run of
at least MIN_RUN_S is needed (a quick profile's shorter run gives no figure).  NVML refreshes
its power reading more slowly than it is polled, so the readings come in runs of one value; the bootstrap
resamples those runs (and the stretches), not single readings.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.compute import STEADY_FROM, TC_NAMES, WGMMA_PROBE
from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import select

SW_POWER_CAP, HW_POWER_BRAKE = 0x4, 0x80
PJ = 1e12


def updates(power: np.ndarray) -> np.ndarray:
    """Index of the NVML update each reading belongs to (a new one wherever the value changes)."""
    power = np.asarray(power, dtype=float)
    return np.concatenate([[0], np.cumsum(power[1:] != power[:-1])]) if power.size else power.astype(int)


#: A run shorter than this, or a window with fewer distinct NVML power values, gives no figure.
MIN_RUN_S, MIN_UPDATES = 1.0, 5


def energy_per_flop(ends, rates, t, power, steady_from: float = STEADY_FROM, resamples: int = 1000,
                    seed: int = 0) -> dict | None:
    """Joules per FLOP over the steady part of a back-to-back run: stretches of launches ending at ``ends`` (s
    since the first launch) at ``rates`` (FLOP/s); NVML ``power`` (W) read at ``t``.  The window runs from the
    end of the last stretch before the steady part to the last stretch's end, less the readings of the value
    NVML held as the launches began (it predates them).  None for a run shorter than MIN_RUN_S or a window
    with fewer than MIN_UPDATES distinct NVML values."""
    ends, rates = np.asarray(ends, dtype=float), np.asarray(rates, dtype=float)
    t, power = np.asarray(t, dtype=float), np.asarray(power, dtype=float)
    order = np.argsort(t)
    t, power = t[order], power[order]
    steady = ends >= steady_from * ends.max()
    start = ends[~steady].max() if (~steady).any() else 0.0
    inside = (t > start) & (t <= ends.max()) & (updates(power) > 0)
    if ends.max() < MIN_RUN_S or not steady.any() or len(np.unique(updates(power)[inside])) < MIN_UPDATES:
        return None
    p, r = power[inside], rates[steady]
    runs = updates(p)
    value = p.mean() / (r.size / np.sum(1 / r))
    rng = np.random.default_rng(seed)
    n_runs = runs.max() + 1
    boot = []
    for _ in range(resamples):
        pick = rng.integers(0, n_runs, n_runs)
        counts = np.bincount(pick, minlength=n_runs)
        weight = counts[runs]
        mean_p = np.sum(p * weight) / np.sum(weight)
        rr = r[rng.integers(0, r.size, r.size)]
        boot.append(mean_p / (rr.size / np.sum(1 / rr)))
    low, high = np.percentile(boot, [2.5, 97.5])
    return {"j_per_flop": float(value), "ci": (float(low), float(high)), "power_w": float(p.mean()),
            "power_max_w": float(p.max()), "rate": float(r.size / np.sum(1 / r)), "readings": int(p.size),
            "updates": int(n_runs), "window_s": (float(start), float(ends.max())), "inside": inside,
            "steady": steady}


def _trace(frame: pd.DataFrame, metric: str) -> np.ndarray:
    return frame[frame["metric"] == metric].sort_values("repeat")["value"].to_numpy(dtype=float)


def _note(fit: dict, trace: pd.DataFrame, steady: pd.DataFrame, device: dict) -> str:
    t = _trace(trace, "trace_t_s")
    reasons = _trace(trace, "trace_clock_event_reasons").astype(np.int64)[fit["inside"]]
    nvml_hz = _trace(trace, "trace_sm_clock_hz")[fit["inside"]]
    capped = float(np.mean((reasons & (SW_POWER_CAP | HW_POWER_BRAKE)) != 0))
    limit = device.get("power_limit_w")
    first = _trace(trace, "trace_power_w")[0]
    spacing = (fit["window_s"][1] - fit["window_s"][0]) / fit["updates"]
    parts = [(f"board power {fit['power_w']:.0f} W mean, {fit['power_max_w']:.0f} W max over "
              f"{fit['window_s'][0]:.2f}..{fit['window_s'][1]:.2f} s of the run ({fit['readings']} readings, "
              f"{fit['updates']} distinct NVML values, one per {spacing * 1e3:.0f} ms)"),
             f"FLOP rate {fit['rate']:.4g} FLOP/s (harmonic mean of {int(fit['steady'].sum())} stretches)",
             (f"in-kernel clock {steady['sm_clock_hz'].median() / 1e9:.3f} GHz, NVML SM clock "
              f"{np.median(nvml_hz) / 1e9:.3f} GHz")]
    if limit:
        parts.append(f"power limit {limit:.0f} W")
    parts.append(f"power cap bound the kernel: SW power cap or HW power brake set in {capped:.0%} of readings"
                 if capped else "no power-cap reason set")
    parts.append(f"idle not subtracted (the run holds no idle reading; NVML's value as the launches began, "
                 f"{first:.0f} W at {t[0] * 1e3:.0f} ms, predates them)")
    return "; ".join(parts)


def energy_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """``energy.<dtype>.pj_per_flop`` of every wgmma dtype whose sustained run carries NVML readings."""
    rows = []
    for dtype, name in TC_NAMES.items():
        rates = select(measurements, WGMMA_PROBE, "sustained_throughput", dtype=dtype)
        if rates.empty:
            continue
        config = rates["config"].iloc[0]
        samples = measurements[(measurements["probe"] == WGMMA_PROBE) & (measurements["config"] == config)]
        trace = samples[samples["metric"].astype(str).str.startswith("trace_")]
        ends = select(measurements, WGMMA_PROBE, "sustained_t_s", dtype=dtype)
        if trace.empty or ends.empty:
            continue
        frame = rates.merge(ends[["config", "repeat", "value"]].rename(columns={"value": "t_s"}),
                            on=["config", "repeat"]).sort_values("t_s")
        fit = energy_per_flop(frame["t_s"], frame["value"], _trace(trace, "trace_t_s"),
                              _trace(trace, "trace_power_w"))
        if fit is None:
            continue
        steady = frame[fit["steady"]]
        rows.append(derived_row(
            f"energy.{name}.pj_per_flop", fit["j_per_flop"] * PJ, *(x * PJ for x in fit["ci"]),
            f"wgmma {dtype} launched back to back: mean NVML board power over the steady part of the run / its "
            f"FLOP rate (bootstrap 95% CI over NVML's power updates and the stretches of launches)", WGMMA_PROBE,
            _note(fit, trace, steady, device)))
    return rows


FAMILY = Family(order=75, rows=energy_rows, quantities={
    f"energy.{name}.pj_per_flop": ("pJ/FLOP", (f"board energy per dense {name} tensor-core FLOP (wgmma, launched "
                                               "back to back; board power, idle not subtracted)"))
    for name in TC_NAMES.values()})
